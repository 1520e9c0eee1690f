// BatchRunner: runs the lines of batch jobs (jobs::JobStore) through the serving core in the
// capacity interactive traffic leaves idle.
//
// A dispatcher thread starts pending lines (oldest job first, in line order) on its workers
// while the engine has room: no interactive request waits (in the scheduler or its queue), the
// batch slots in use leave `reserve_slots` free, and at most `max_sequences` lines run at
// once. Lines run as background work at the lowest priority (batch_line.h), so a burst of
// interactive requests is admitted first and preempts them, and running lines lengthen the
// engine's steps by at most --batch-max-slowdown while interactive requests are held. Each line's
// result is written to the store as it ends (exactly once: the store refuses a second result); a
// job whose lines all have results is completed (its output and error files written). A job being
// cancelled stops its running lines and is closed with the results it has; overdue jobs expire;
// finished jobs are deleted after `retention`.
//
// Durability: a line with no result in the store runs again after a restart; Stop cancels the
// running lines without recording them, so a drain or a crash loses nothing and records
// nothing twice.
//
// Thread rules: Start, Stop, Wake and Cancel from any thread; `store`, the serving state and
// the metrics outlive the runner.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "strata/common/background_pool.h"
#include "strata/jobs/job_store.h"
#include "strata/server/http/batch_line.h"

namespace strata::server::http {

struct BatchRunnerOptions {
  size_t max_sequences = 8;  // batch lines running at once, at most
  size_t engine_slots = 64;  // the engine's batch size (--max-batch-size)
  size_t reserve_slots = 8;  // engine slots batch lines leave to interactive requests
  std::chrono::seconds retention{7 * 24 * 3600};  // finished jobs are kept this long
  std::chrono::milliseconds poll{100};            // how often room is looked for
};

class BatchRunner {
 public:
  BatchRunner(jobs::JobStore* store, BatchLineEnv env, BatchRunnerOptions options);
  ~BatchRunner();  // Stop()

  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  void Start();
  // Cancels the running lines (they stay pending in the store) and joins the threads.
  void Stop();
  // A job was created: look for lines now.
  void Wake();
  // Cancels job `id` (store: cancelling); the runner stops its lines and closes it.
  StatusOr<jobs::BatchRecord> Cancel(const std::string& id);

  // Lines running now (for tests and metrics).
  size_t running() const;
  // How lines are checked and run.
  const BatchLineEnv& env() const { return env_; }

 private:
  void Loop();
  // How many more lines may start now.
  size_t Room() const;
  // Runs one line on a worker and records its result.
  void RunOne(jobs::PendingLine line);
  // Completes or closes the jobs that can be; expires and deletes old ones.
  void Housekeep(bool full);
  static int64_t Now();

  jobs::JobStore* const store_;
  const BatchLineEnv env_;
  const BatchRunnerOptions options_;

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::set<std::pair<std::string, int64_t>> running_;  // (job id, line index)
  std::set<std::string> cancelling_;                   // jobs whose lines must stop
  bool stopping_ = false;
  bool woken_ = false;

  std::atomic<bool> stop_lines_{false};
  std::atomic<bool> backoff_{false};  // a line could not run now: the dispatcher waits a bit
  std::unique_ptr<BackgroundPool> workers_;
  std::thread dispatcher_;
};

}  // namespace strata::server::http
