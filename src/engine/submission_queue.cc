#include "strata/engine/submission_queue.h"

#include <algorithm>
#include <utility>

#include "strata/common/check.h"

namespace strata::engine {

SubmissionQueue::SubmissionQueue(size_t capacity) : capacity_(capacity) {
  STRATA_CHECK(capacity >= 1);
}

Status SubmissionQueue::Push(Submission submission) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return UnavailableError("the engine is shutting down");
    if (static_cast<int64_t>(entries_.size()) >=
        static_cast<int64_t>(capacity_) + scheduler_room_) {
      return ResourceExhaustedError("the request queue is full (" +
                                    std::to_string(entries_.size()) +
                                    " requests waiting, every batch slot taken); retry later");
    }
    const int32_t priority = submission.request.priority;
    entries_.insert(Entry{priority, next_order_++, std::move(submission)});
  }
  cv_.notify_all();
  return OkStatus();
}

void SubmissionQueue::SetSchedulerRoom(int64_t room) {
  std::lock_guard<std::mutex> lock(mutex_);
  scheduler_room_ = room;
}

size_t SubmissionQueue::Pop(size_t max, std::vector<Submission>* out) {
  STRATA_CHECK(out != nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  while (n < max && !entries_.empty()) {
    auto it = entries_.begin();
    out->push_back(std::move(it->submission));
    entries_.erase(it);
    ++n;
  }
  // What was taken fills the scheduler's slots, and beyond them counts against the capacity,
  // until the engine reports its room again.
  scheduler_room_ -= static_cast<int64_t>(n);
  return n;
}

bool SubmissionQueue::Remove(RequestId id, Submission* out) {
  STRATA_CHECK(out != nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->submission.id == id) {
      *out = std::move(it->submission);
      entries_.erase(it);
      return true;
    }
  }
  return false;
}

bool SubmissionQueue::WaitForWork(std::chrono::steady_clock::duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [this] { return !entries_.empty() || woken_; });
  woken_ = false;
  return !entries_.empty();
}

void SubmissionQueue::Wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void SubmissionQueue::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

size_t SubmissionQueue::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace strata::engine
