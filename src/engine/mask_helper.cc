#include "mask_helper.h"

#include <algorithm>

namespace strata::engine {

struct MaskHelper::Job {
  std::shared_ptr<TokenConstraint> constraint;
  std::vector<uint32_t> mask;
  bool dropped = false;  // guarded by MaskHelper::mutex_
};

MaskHelper::MaskHelper(int threads, int nice, std::function<void()> on_ready)
    : on_ready_(std::move(on_ready)) {
  if (threads > 0) {
    BackgroundPoolOptions options;
    options.threads = static_cast<size_t>(threads);
    options.max_queued = 256;
    options.nice = nice;
    pool_ = std::make_unique<BackgroundPool>(options);
  }
}

MaskHelper::~MaskHelper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, job] : jobs_) job->dropped = true;
  }
  pool_.reset();
}

bool MaskHelper::Start(RequestId id, std::shared_ptr<TokenConstraint> constraint, size_t words) {
  if (pool_ == nullptr || constraint == nullptr) return false;
  auto job = std::make_shared<Job>();
  job->constraint = std::move(constraint);
  job->mask.assign(words, 0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.count(id) > 0) return false;  // one at a time per request
    jobs_[id] = job;
  }
  const Status posted = pool_->Post([this, id, job] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (job->dropped) return;
    }
    job->constraint->FillAllowed(job->mask);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++computed_;
      if (job->dropped) return;
      ready_.emplace_back(id, std::move(job->mask));
      jobs_.erase(id);
    }
    if (on_ready_) on_ready_();
  });
  if (!posted.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(id);
    return false;
  }
  return true;
}

void MaskHelper::TakeReady(std::vector<std::pair<RequestId, std::vector<uint32_t>>>* ready) {
  ready->clear();
  std::lock_guard<std::mutex> lock(mutex_);
  ready->swap(ready_);
}

void MaskHelper::Drop(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    it->second->dropped = true;
    jobs_.erase(it);
  }
  ready_.erase(std::remove_if(ready_.begin(), ready_.end(),
                              [id](const auto& entry) { return entry.first == id; }),
               ready_.end());
}

int64_t MaskHelper::computed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return computed_;
}

}  // namespace strata::engine
