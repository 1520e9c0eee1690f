#include "strata/backend/cpu/thread_pool.h"

#include <algorithm>

#include "strata/common/check.h"

namespace strata::backend::cpu {
namespace {

constexpr uint32_t kOpen = 1u << 31;
constexpr uint32_t kGenerationMask = kOpen - 1;
// Chunks per thread: more balance the load when a thread is descheduled, fewer cost fewer
// claims (one atomic add each).
constexpr int64_t kChunksPerThread = 4;

// True on a thread that is running a region's chunks: a ParallelFor from there runs inline.
thread_local bool t_in_region = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

using Clock = std::chrono::steady_clock;

}  // namespace

ThreadPool::ThreadPool(int num_threads) : ThreadPool(Options{.num_threads = num_threads}) {}

ThreadPool::ThreadPool(const Options& options) : spin_(options.spin) {
  int n = options.num_threads;
  if (n <= 0) n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  workers_.reserve(n - 1);
  // No region has been opened yet: a worker that starts after the first one opened joins it.
  const uint32_t none_yet = region_.load(std::memory_order_relaxed) & kGenerationMask;
  for (int i = 0; i + 1 < n; ++i) {
    workers_.emplace_back([this, none_yet] { WorkerLoop(none_yet); });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Run(int64_t n, int64_t grain, ChunkFn fn, const void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t target_chunks = num_threads() * kChunksPerThread;
  const int64_t chunk = (units + target_chunks - 1) / target_chunks * grain;
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  if (workers_.empty() || t_in_region || num_chunks == 1) {
    fn(ctx, 0, n);
    return;
  }
  STRATA_CHECK(!busy_.exchange(true, std::memory_order_acquire));

  // Workers that checked in to the previous region may still be leaving it (they found no
  // chunk left); the region's fields are theirs to read until they have. Yield after a while:
  // one may have been descheduled in that window and be waiting for this core.
  for (int iter = 1; active_.load(std::memory_order_acquire) != 0; ++iter) {
    if (iter % 1024 == 0) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  chunk_ = chunk;
  num_chunks_ = num_chunks;
  next_chunk_.store(0, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  const uint32_t generation =
      ((region_.load(std::memory_order_relaxed) & kGenerationMask) + 1) & kGenerationMask;
  // Publishes the fields above (release) and orders against a worker's check-in (seq_cst).
  region_.store(generation | kOpen, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_.notify_all();

  t_in_region = true;
  RunChunks();
  t_in_region = false;

  // Chunks other threads claimed may still run; spin, then yield to them (they may be waiting
  // for this core).
  const Clock::time_point start = Clock::now();
  for (int iter = 1; done_chunks_.load(std::memory_order_acquire) != num_chunks; ++iter) {
    if ((iter & 63) == 0 && Clock::now() - start > spin_) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
  region_.store(generation, std::memory_order_seq_cst);  // closed
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::RunChunks() {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) return;
    const int64_t begin = c * chunk_;
    fn_(ctx_, begin, std::min(n_, begin + chunk_));
    done_chunks_.fetch_add(1, std::memory_order_release);
  }
}

bool ThreadPool::WaitForRegion(uint32_t seen) {
  auto is_new = [seen](uint32_t r) { return (r & kOpen) != 0 && (r & kGenerationMask) != seen; };
  const Clock::time_point deadline = Clock::now() + spin_;
  for (int iter = 1;; ++iter) {
    if (stop_.load(std::memory_order_relaxed)) return false;
    if (is_new(region_.load(std::memory_order_acquire))) return true;
    if ((iter & 63) == 0 && Clock::now() > deadline) break;
    CpuRelax();
  }
  // Park. The caller bumps wake_ after opening a region and notifies when it sees a sleeper;
  // with sleepers_ raised before region_ is re-read (both seq_cst), either this thread sees the
  // region or the caller sees the sleeper, and a bump between the two loads makes wait() return.
  for (;;) {
    const uint32_t w = wake_.load(std::memory_order_seq_cst);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool stop = stop_.load(std::memory_order_seq_cst);
    const bool ready = is_new(region_.load(std::memory_order_seq_cst));
    if (!stop && !ready) wake_.wait(w, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    if (stop) return false;
    if (ready) return true;
  }
}

void ThreadPool::WorkerLoop(uint32_t seen) {
  t_in_region = true;  // workers only ever run chunks; nested calls from there run inline
  while (WaitForRegion(seen)) {
    // Check in before looking at the region's fields; the caller rewrites them only once
    // active_ is zero, and closes a region (seq_cst) before it next reads active_, so a worker
    // that sees the region open here reads that region's fields.
    active_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t r = region_.load(std::memory_order_seq_cst);
    if ((r & kOpen) != 0 && (r & kGenerationMask) != seen) {
      seen = r & kGenerationMask;
      RunChunks();
    }
    active_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace strata::backend::cpu
