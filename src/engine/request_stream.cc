#include "strata/engine/request_stream.h"

#include <utility>

#include "strata/common/check.h"

namespace strata::engine {

void RequestStream::Push(StreamChunk chunk) {
  std::shared_ptr<std::function<void()>> listener;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    STRATA_CHECK(!finished_);
    finished_ = chunk.finish_reason.has_value();
    chunks_.push_back(std::move(chunk));
    listener = listener_;
  }
  ready_.notify_all();
  if (listener != nullptr && *listener) (*listener)();
}

void RequestStream::SetListener(std::function<void()> listener) {
  auto shared = std::make_shared<std::function<void()>>(std::move(listener));
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    listener_ = shared;
    pending = !chunks_.empty();
  }
  if (pending && *shared) (*shared)();
}

bool RequestStream::Next(StreamChunk* out, std::chrono::steady_clock::duration timeout) {
  STRATA_CHECK(out != nullptr);
  std::unique_lock<std::mutex> lock(mutex_);
  timed_out_ = false;
  if (drained_) return false;
  if (!ready_.wait_for(lock, timeout, [this] { return !chunks_.empty(); })) {
    timed_out_ = true;
    return false;
  }
  *out = std::move(chunks_.front());
  chunks_.pop_front();
  if (out->finish_reason.has_value()) drained_ = true;
  return true;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

bool RequestStream::timed_out() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timed_out_;
}

}  // namespace strata::engine
