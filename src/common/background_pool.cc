#include "strata/common/background_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "strata/common/check.h"

namespace strata {

BackgroundPool::BackgroundPool(const BackgroundPoolOptions& options) : options_(options) {
  STRATA_CHECK(options.threads >= 1);
  for (size_t i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { Work(); });
}

BackgroundPool::~BackgroundPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

Status BackgroundPool::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return UnavailableError("the server is shutting down");
    if (jobs_.size() >= options_.max_queued) {
      return ResourceExhaustedError(std::to_string(jobs_.size()) +
                                    " jobs are already waiting; retry later");
    }
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return OkStatus();
}

size_t BackgroundPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_.size();
}

void BackgroundPool::Work() {
  if (options_.nice != 0) {
    // Per thread on Linux; a failure (a sandbox forbidding it) leaves the default priority.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), options_.nice);
  }
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace strata
