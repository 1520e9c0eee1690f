#include "strata/server/connection_gate.h"

#include <utility>

namespace strata::server {

ConnectionGate::ConnectionGate(int64_t limit, Hooks hooks)
    : limit_(limit), hooks_(std::move(hooks)) {}

void ConnectionGate::Acquire(const std::function<void()>& poll,
                             std::chrono::milliseconds poll_interval) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (FullLocked()) {
    ++times_full_;
    if (hooks_.on_full) hooks_.on_full();
  }
  while (FullLocked()) {
    if (poll) {
      lock.unlock();
      poll();  // may Release
      lock.lock();
      if (!FullLocked()) break;
      released_.wait_for(lock, poll_interval);
    } else {
      released_.wait(lock);
    }
  }
  ++open_;
  if (hooks_.on_change) hooks_.on_change(open_);
}

void ConnectionGate::Release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_ > 0) --open_;
    if (hooks_.on_change) hooks_.on_change(open_);
  }
  released_.notify_one();
}

void ConnectionGate::Shut() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_ = true;
  }
  released_.notify_all();
}

int64_t ConnectionGate::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

int64_t ConnectionGate::times_full() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_full_;
}

}  // namespace strata::server
