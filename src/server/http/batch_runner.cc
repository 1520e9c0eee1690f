#include "strata/server/http/batch_runner.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "strata/common/logging.h"

namespace strata::server::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStatsEvery = std::chrono::seconds(1);
constexpr auto kSweepEvery = std::chrono::seconds(10);
constexpr auto kBackoff = std::chrono::seconds(1);  // after a line that could not run
constexpr jobs::BatchState kStates[] = {
    jobs::BatchState::kValidating, jobs::BatchState::kFailed,    jobs::BatchState::kInProgress,
    jobs::BatchState::kFinalizing, jobs::BatchState::kCompleted, jobs::BatchState::kExpired,
    jobs::BatchState::kCancelling, jobs::BatchState::kCancelled};

}  // namespace

BatchRunner::BatchRunner(jobs::JobStore* store, BatchLineEnv env, BatchRunnerOptions options)
    : store_(store), env_(std::move(env)), options_(options) {}

BatchRunner::~BatchRunner() { Stop(); }

int64_t BatchRunner::Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void BatchRunner::Start() {
  BackgroundPoolOptions pool;
  pool.threads = options_.max_sequences;
  pool.max_queued = options_.max_sequences;
  pool.nice = 0;  // the workers wait on the engine; the engine does the work
  workers_ = std::make_unique<BackgroundPool>(pool);
  // Jobs an earlier run left being cancelled.
  for (std::string& id : store_->BatchIdsInState(jobs::BatchState::kCancelling)) {
    cancelling_.insert(std::move(id));
  }
  dispatcher_ = std::thread([this] { Loop(); });
}

void BatchRunner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_lines_.store(true);
  wake_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  workers_.reset();  // queued lines return at once; running ones are cancelled
}

void BatchRunner::Wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

StatusOr<jobs::BatchRecord> BatchRunner::Cancel(const std::string& id) {
  StatusOr<jobs::BatchRecord> batch = store_->Cancel(id, Now());
  if (batch.ok() && batch->state == jobs::BatchState::kCancelling) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelling_.insert(id);
    }
    Wake();
  }
  return batch;
}

size_t BatchRunner::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_.size();
}

size_t BatchRunner::Room() const {
  const StatusOr<ServingModel*> serving = env_.state->Serving();
  if (!serving.ok()) return 0;
  const engine::EngineStats s = (*serving)->engine->Stats();
  // Interactive requests waiting: they go first.
  if (s.waiting + s.queued > 0) return 0;
  const int64_t free = static_cast<int64_t>(options_.engine_slots) - s.running -
                       static_cast<int64_t>(options_.reserve_slots);
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t lines =
      static_cast<int64_t>(options_.max_sequences) - static_cast<int64_t>(running_.size());
  return static_cast<size_t>(std::max<int64_t>(0, std::min(free, lines)));
}

void BatchRunner::Loop() {
  Clock::time_point last_stats{};
  Clock::time_point last_sweep{};
  Clock::time_point backoff_until{};
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, options_.poll, [this] { return stopping_ || woken_; });
      if (stopping_) return;
      woken_ = false;
    }
    const Clock::time_point now = Clock::now();
    const bool sweep = now - last_sweep >= kSweepEvery;
    if (sweep) last_sweep = now;
    Housekeep(sweep);
    if (now - last_stats >= kStatsEvery) {
      last_stats = now;
      const std::map<jobs::BatchState, int64_t> counts = store_->CountByState();
      for (const jobs::BatchState state : kStates) {
        const auto it = counts.find(state);
        env_.state->metrics()->SetBatchJobs(jobs::BatchStateName(state),
                                            it == counts.end() ? 0 : it->second);
      }
    }
    if (now < backoff_until) continue;
    const size_t room = Room();
    if (room == 0) continue;
    std::set<std::pair<std::string, int64_t>> skip;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      skip = running_;
    }
    for (jobs::PendingLine& line : store_->PendingLines(room, skip)) {
      const std::pair<std::string, int64_t> key(line.batch_id, line.line.index);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (cancelling_.count(line.batch_id) > 0) continue;
        running_.insert(key);
      }
      const Status posted =
          workers_->Post([this, line = std::move(line)]() mutable { RunOne(std::move(line)); });
      if (!posted.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(key);
        break;
      }
    }
    if (backoff_.exchange(false)) backoff_until = Clock::now() + kBackoff;
  }
}

void BatchRunner::RunOne(jobs::PendingLine line) {
  const std::string batch_id = line.batch_id;
  const std::pair<std::string, int64_t> key(batch_id, line.line.index);
  std::optional<jobs::LineResult> result;
  if (!stop_lines_.load()) {
    result = RunBatchLine(env_, line.endpoint, line.line, [this, &batch_id] {
      if (stop_lines_.load()) return true;
      std::lock_guard<std::mutex> lock(mutex_);
      return cancelling_.count(batch_id) > 0;
    });
  }
  if (result.has_value()) {
    const StatusOr<bool> recorded = store_->RecordResult(batch_id, *result);
    if (!recorded.ok()) {
      Log(LogLevel::kWarn, "cannot record a batch line's result",
          {{"batch", batch_id}, {"error", recorded.status().message()}});
    } else if (*recorded) {
      env_.state->metrics()->CountBatchLines(result->ok ? "completed" : "failed");
      const StatusOr<jobs::BatchRecord> batch = store_->GetBatch(batch_id);
      if (batch.ok() && batch->state == jobs::BatchState::kInProgress &&
          batch->counts.completed + batch->counts.failed >= batch->counts.total) {
        const StatusOr<jobs::BatchRecord> done = store_->Complete(batch_id, Now());
        if (done.ok()) {
          LogInfo("batch completed", {{"batch", batch_id},
                                      {"completed", std::to_string(done->counts.completed)},
                                      {"failed", std::to_string(done->counts.failed)}});
        }
      }
    }
  } else if (!stop_lines_.load()) {
    backoff_.store(true);  // it could not run now (loading, draining, queue full): wait a bit
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(key);
  }
  Wake();
}

void BatchRunner::Housekeep(bool sweep) {
  // Cancelled jobs whose lines have stopped: closed with what they have.
  std::vector<std::string> closable;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& id : cancelling_) {
      const auto first = running_.lower_bound({id, std::numeric_limits<int64_t>::min()});
      if (first == running_.end() || first->first != id) closable.push_back(id);
    }
  }
  for (const std::string& id : closable) {
    const StatusOr<jobs::BatchRecord> closed = store_->FinishCancel(id, Now());
    if (!closed.ok()) {
      Log(LogLevel::kWarn, "cannot close a cancelled batch",
          {{"batch", id}, {"error", closed.status().message()}});
    }
    std::lock_guard<std::mutex> lock(mutex_);
    cancelling_.erase(id);
  }
  if (!sweep) return;
  const int64_t now = Now();
  // Jobs whose lines all have results but were not completed (a crash in between).
  for (const std::string& id : store_->CompletableBatches()) (void)store_->Complete(id, now);
  if (StatusOr<int64_t> expired = store_->ExpireOverdue(now); expired.ok() && *expired > 0) {
    LogInfo("batches expired", {{"count", std::to_string(*expired)}});
  }
  (void)store_->DeleteFinishedBefore(now - options_.retention.count());
}

}  // namespace strata::server::http
