// ThreadPool: a fixed set of worker threads for the CPU backend's data-parallel loops.
//
// A decode step runs a few hundred parallel regions per token, so a region must start and end
// in about a microsecond: idle workers poll an atomic word for a short while (`spin`) before
// parking on a futex (std::atomic::wait), so they react at once inside a step and cost nothing
// between requests. The calling thread takes part in every region.
//
// Work is split into chunks that threads claim dynamically, so a worker the OS has descheduled
// (machines here are often oversubscribed) delays a region by at most the chunk it holds; one
// that has not woken up yet delays nothing.
//
// Thread rules:
// - ParallelFor may be called by one thread at a time (it is a programmer error, checked, to
//   enter it concurrently from two threads). Calls made from inside a region's `fn` (nested
//   calls, on any thread of the pool) run serially on that thread.
// - `fn` must not throw.
// - The destructor joins the workers; it must not run concurrently with ParallelFor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace strata::backend::cpu {

class ThreadPool {
 public:
  struct Options {
    // Threads that run work, the calling thread included; 0 means
    // std::thread::hardware_concurrency() (at least 1). 1 means no worker threads at all.
    int num_threads = 0;
    // How long an idle worker polls for the next region before parking.
    std::chrono::microseconds spin{200};
  };

  // `num_threads` as in Options.
  explicit ThreadPool(int num_threads = 0);
  explicit ThreadPool(const Options& options);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run a region, the caller included (>= 1).
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  int size() const { return num_threads(); }  // the same; for callers that use the container name

  // Calls fn(begin, end) on disjoint ranges that together cover [0, n), spread over the pool's
  // threads, and returns when all calls have returned (their writes are then visible to the
  // caller). Each range starts at a multiple of `grain` and holds a multiple of `grain` indices,
  // except the last range, which ends at n. n <= 0 calls nothing. `fn` is any callable
  // `void(int64_t begin, int64_t end)`; it is called concurrently from several threads.
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
    static_assert(std::is_invocable_v<const Fn&, int64_t, int64_t>);
    Run(n, grain, &Trampoline<Fn>, &fn);
  }
  template <typename Fn>
  void ParallelFor(int64_t n, const Fn& fn) {
    ParallelFor(n, 1, fn);
  }

 private:
  using ChunkFn = void (*)(const void* ctx, int64_t begin, int64_t end);

  template <typename Fn>
  static void Trampoline(const void* ctx, int64_t begin, int64_t end) {
    (*static_cast<const Fn*>(ctx))(begin, end);
  }

  void Run(int64_t n, int64_t grain, ChunkFn fn, const void* ctx);
  // Runs every region newer than generation `seen`, until stop.
  void WorkerLoop(uint32_t seen);
  // Claims and runs chunks of the open region until none is left.
  void RunChunks();
  // Waits for a region newer than `seen` (or stop); returns false on stop.
  bool WaitForRegion(uint32_t seen);

  const std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;

  // The region being run; written by the caller only while no worker is registered (active_).
  ChunkFn fn_ = nullptr;
  const void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  int64_t num_chunks_ = 0;

  // The hot atomics sit on their own cache lines: a worker claiming a chunk should not steal
  // the line the caller polls for completion, nor the one idle workers poll for a new region.
  static constexpr size_t kCacheLine = 64;
  // Bits 0-30: generation of the latest region; bit 31: the region is open (chunks may remain).
  alignas(kCacheLine) std::atomic<uint32_t> region_{0};
  std::atomic<bool> stop_{false};
  alignas(kCacheLine) std::atomic<int64_t> next_chunk_{0};
  alignas(kCacheLine) std::atomic<int64_t> done_chunks_{0};
  // Workers between checking in to a region and leaving it.
  alignas(kCacheLine) std::atomic<int> active_{0};
  // Futex word for parked workers; bumped on every region and on stop.
  alignas(kCacheLine) std::atomic<uint32_t> wake_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> busy_{false};
};

}  // namespace strata::backend::cpu
