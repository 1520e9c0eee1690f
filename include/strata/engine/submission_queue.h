// SubmissionQueue: the bounded backlog between the frontends and the engine thread.
//
// Frontend threads Push requests; the engine thread takes them, highest priority first and
// first-come-first-served within a priority, when its scheduler has room for more waiting
// sequences. Admission counts what the scheduler can take at its next step as well as the
// backlog: the queue holds `capacity` requests plus the scheduler's free batch slots (the
// engine reports them after every step, SetSchedulerRoom), so a burst that arrives between two
// steps is not refused while batch slots stay empty. Sequences the engine has taken beyond its
// free slots wait in the scheduler and count against `capacity` as if still queued, so what
// waits in all stays within `capacity` beyond the batch. A full queue refuses at once
// (RESOURCE_EXHAUSTED: the client may retry elsewhere) rather than letting latency grow
// without bound.
//
// Thread rules: every method is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "strata/common/status.h"
#include "strata/engine/request.h"
#include "strata/engine/request_stream.h"

namespace strata::engine {

struct Submission {
  RequestId id = 0;
  Request request;
  std::shared_ptr<RequestStream> stream;
  std::chrono::steady_clock::time_point submitted;
};

class SubmissionQueue {
 public:
  // capacity >= 1: requests the queue holds at most.
  explicit SubmissionQueue(size_t capacity);

  // RESOURCE_EXHAUSTED when `capacity` + the scheduler's room requests are queued, UNAVAILABLE
  // after Close().
  Status Push(Submission submission);

  // The batch slots the scheduler has free for new sequences now: its batch size less its
  // running and waiting sequences, negative when more wait than the free slots take.
  void SetSchedulerRoom(int64_t room);

  // Moves up to `max` requests, highest priority first (FIFO within a priority), to the back
  // of *out; they take as many of the scheduler's free slots (beyond them, of the capacity,
  // until the engine reports its room again). Returns how many.
  size_t Pop(size_t max, std::vector<Submission>* out);

  // Moves the queued request `id` to *out (to be finished as cancelled) and returns true;
  // false when it is not queued (already taken, or never submitted).
  bool Remove(RequestId id, Submission* out);

  // Blocks until a request is queued, Wake() is called, or `timeout` passes. Returns whether
  // a request is queued.
  bool WaitForWork(std::chrono::steady_clock::duration timeout);

  // Ends a WaitForWork early (the engine has other work: a cancel, a stop).
  void Wake();

  // Refuses every later Push; queued requests stay for Pop/Remove.
  void Close();

  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    int32_t priority;
    uint64_t order;  // arrival order
    mutable Submission submission;
    bool operator<(const Entry& other) const {
      if (priority != other.priority) return priority > other.priority;
      return order < other.order;
    }
  };

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::set<Entry> entries_;  // in pop order
  int64_t scheduler_room_ = 0;
  uint64_t next_order_ = 0;
  bool closed_ = false;
  bool woken_ = false;
};

}  // namespace strata::engine
