// Heap settings for a long-running server on glibc's allocator.
//
// glibc serves a block of at least the mmap threshold (128 KiB at first) with its own mmap and
// unmaps it on free, but each time such a block is freed it raises the threshold to that
// block's size (up to 32 MiB). After the first multi-megabyte request message, blocks of that
// size come from the arenas instead, and each arena keeps the freed memory: measured in the
// soak suite (docs/reliability.md), 10 minutes of traffic left ~45 MiB free in the arenas with
// the dynamic threshold against ~11 MiB with a fixed 1 MiB one, and the resident size grew
// half as much. Setting the threshold fixes it (glibc then stops adjusting it).
#pragma once

#include <cstddef>
#include <string>

namespace strata {

inline constexpr size_t kServerMmapThresholdBytes = size_t{1} << 20;

// Fixes glibc's mmap threshold at `bytes` unless the operator set MALLOC_MMAP_THRESHOLD_ (or
// the process does not use glibc). Returns what was done, for the start-up log: "1048576",
// "from MALLOC_MMAP_THRESHOLD_" or "unsupported". Call before the server starts its threads.
std::string FixMmapThreshold(size_t bytes = kServerMmapThresholdBytes);

}  // namespace strata
