// BackgroundPool: a few worker threads that run queued jobs at a low CPU priority.
//
// For work that must not take CPU from latency-critical threads (the engine, the transports'
// threads) when they want it, such as encoding a large prompt: each worker raises its own nice
// value once at start (Linux schedules a thread with nice 10 about a tenth as often as one with
// nice 0 when both are runnable), and the queue is bounded, so a flood of jobs is refused
// rather than held in memory.
//
// Thread rules: Post may be called from any thread. The destructor refuses new jobs, runs those
// already queued, and joins the workers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/common/status.h"

namespace strata {

struct BackgroundPoolOptions {
  size_t threads = 2;
  size_t max_queued = 64;  // jobs waiting for a worker, at most
  int nice = 10;           // added to each worker's nice value (0: unchanged)
};

class BackgroundPool {
 public:
  explicit BackgroundPool(const BackgroundPoolOptions& options);
  ~BackgroundPool();
  BackgroundPool(const BackgroundPool&) = delete;
  BackgroundPool& operator=(const BackgroundPool&) = delete;

  // Queues `job` for a worker. RESOURCE_EXHAUSTED when max_queued jobs wait already;
  // UNAVAILABLE once the pool is shutting down. A refused job is not run.
  Status Post(std::function<void()> job);

  size_t queued() const;

 private:
  void Work();

  const BackgroundPoolOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace strata
