#include "strata/embedding/embedding_batcher.h"

#include <utility>

namespace strata::embedding {
namespace {

using Clock = std::chrono::steady_clock;

// "models/all-minilm-l6-v2/" -> "all-minilm-l6-v2".
std::string BaseName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

Status CheckOptions(const EmbeddingBatcherOptions& options) {
  if (options.max_batch_texts < 1) {
    return InvalidArgumentError("max_batch_texts must be at least 1, got " +
                                std::to_string(options.max_batch_texts));
  }
  if (options.max_wait.count() < 0) {
    return InvalidArgumentError("max_wait must not be negative, got " +
                                std::to_string(options.max_wait.count()) + " us");
  }
  if (options.max_queued_texts < 1) {
    return InvalidArgumentError("max_queued_texts must be at least 1, got " +
                                std::to_string(options.max_queued_texts));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<EmbeddingBatcher>> EmbeddingBatcher::Load(
    const std::string& dir, const SentenceEncoderOptions& encoder_options,
    EmbeddingBatcherOptions options) {
  STRATA_RETURN_IF_ERROR(CheckOptions(options));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SentenceEncoder> encoder,
                          SentenceEncoder::Load(dir, encoder_options));
  return Create(std::move(encoder), BaseName(dir), std::move(options));
}

StatusOr<std::unique_ptr<EmbeddingBatcher>> EmbeddingBatcher::Create(
    std::unique_ptr<SentenceEncoder> encoder, std::string model_name,
    EmbeddingBatcherOptions options) {
  if (encoder == nullptr) return InvalidArgumentError("the encoder must not be null");
  STRATA_RETURN_IF_ERROR(CheckOptions(options));
  return std::unique_ptr<EmbeddingBatcher>(
      new EmbeddingBatcher(std::move(encoder), std::move(model_name), std::move(options)));
}

EmbeddingBatcher::EmbeddingBatcher(std::unique_ptr<SentenceEncoder> encoder, std::string model_name,
                                   EmbeddingBatcherOptions options)
    : encoder_(std::move(encoder)),
      model_name_(std::move(model_name)),
      options_(std::move(options)),
      worker_([this] { Run(); }) {}

EmbeddingBatcher::~EmbeddingBatcher() {
  Shutdown();
  // Woken callers still need the mutex to leave Embed: the members must outlive that.
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return waiting_calls_ == 0; });
}

void EmbeddingBatcher::Shutdown() {
  std::lock_guard<std::mutex> serialize(shutdown_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int64_t EmbeddingBatcher::queued_texts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_texts_;
}

StatusOr<Embeddings> EmbeddingBatcher::Embed(std::span<const std::string> texts) {
  Embeddings result;
  if (texts.empty()) return result;
  // Validated and counted here, on the caller's thread: a bad text fails this call alone.
  Call call;
  call.texts = texts;
  call.tokens.resize(texts.size());
  int64_t total_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    StatusOr<std::vector<int32_t>> ids =
        encoder_->tokenizer().Encode(texts[i], encoder_->max_tokens());
    if (!ids.ok()) return ids.status().WithContext("texts[" + std::to_string(i) + "]");
    call.tokens[i] = static_cast<int64_t>(ids->size());
    total_tokens += call.tokens[i];
  }
  call.vectors.resize(texts.size());
  const auto n = static_cast<int64_t>(texts.size());
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return UnavailableError("the embedding model is shutting down");
    if (n > options_.max_queued_texts) {
      return ResourceExhaustedError(std::to_string(n) + " texts are more than the embedding " +
                                    "queue holds (" + std::to_string(options_.max_queued_texts) +
                                    "); send fewer texts per call");
    }
    if (queued_texts_ + n > options_.max_queued_texts) {
      return ResourceExhaustedError("the embedding queue is full (" +
                                    std::to_string(queued_texts_) + " texts waiting, at most " +
                                    std::to_string(options_.max_queued_texts) + "); retry shortly");
    }
    call.arrived = Clock::now();
    queue_.push_back(&call);
    queued_texts_ += n;
    work_cv_.notify_one();
    ++waiting_calls_;
    done_cv_.wait(lock, [&call] { return call.finished; });
    if (--waiting_calls_ == 0) idle_cv_.notify_all();
  }
  if (!call.status.ok()) return call.status;
  result.vectors = std::move(call.vectors);
  result.tokens = total_tokens;
  result.token_counts.assign(call.tokens.begin(), call.tokens.end());
  return result;
}

EmbeddingBatcher::Pass EmbeddingBatcher::TakePassLocked() {
  Pass pass;
  const auto limit = static_cast<size_t>(options_.max_batch_texts);
  // Round-robin: one text from each queued call in arrival order, again and again, so small
  // calls finish in the next pass even behind a large one.
  while (pass.slots.size() < limit && !queue_.empty()) {
    for (auto it = queue_.begin(); it != queue_.end() && pass.slots.size() < limit;) {
      Call* call = *it;
      if (!call->in_pass) {
        call->in_pass = true;
        pass.calls.push_back(call);
      }
      pass.slots.emplace_back(call, call->next++);
      --queued_texts_;
      it = call->next == call->texts.size() ? queue_.erase(it) : it + 1;
    }
  }
  return pass;
}

void EmbeddingBatcher::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    // Gather more texts until the pass is full or the oldest call has waited long enough.
    if (queued_texts_ < options_.max_batch_texts && options_.max_wait.count() > 0) {
      const Clock::time_point deadline = queue_.front()->arrived + options_.max_wait;
      work_cv_.wait_until(lock, deadline, [this] {
        return stopping_ || queued_texts_ >= options_.max_batch_texts;
      });
      if (stopping_) break;
    }
    Pass pass = TakePassLocked();
    lock.unlock();

    // The calls' texts and vectors are read and written without the lock: their callers wait
    // until `finished`, and only this thread touches a call's vectors.
    std::vector<std::string> texts;
    texts.reserve(pass.slots.size());
    EmbeddingPass stats;
    for (const auto& [call, i] : pass.slots) {
      texts.push_back(call->texts[i]);
      stats.tokens += call->tokens[i];
    }
    const Clock::time_point start = Clock::now();
    StatusOr<std::vector<std::vector<float>>> vectors = encoder_->Encode(texts);
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stats.texts = static_cast<int64_t>(texts.size());
    stats.calls = static_cast<int64_t>(pass.calls.size());
    if (vectors.ok()) {
      for (size_t k = 0; k < pass.slots.size(); ++k) {
        pass.slots[k].first->vectors[pass.slots[k].second] = std::move((*vectors)[k]);
      }
    }
    // Before the callers are woken: a caller's pass is counted by the time it returns.
    if (options_.on_pass) options_.on_pass(stats);

    lock.lock();
    for (const auto& [call, i] : pass.slots) ++call->done;
    for (Call* call : pass.calls) {
      call->in_pass = false;
      if (!vectors.ok()) {
        // Not expected (the texts were validated): the whole pass fails, and so do the rest of
        // its calls' texts.
        call->status = vectors.status();
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
          if (*it != call) continue;
          queued_texts_ -= static_cast<int64_t>(call->texts.size() - call->next);
          queue_.erase(it);
          break;
        }
        call->finished = true;
      } else if (call->done == call->texts.size()) {
        call->finished = true;
      }
    }
    done_cv_.notify_all();
  }
  // Shutting down: the calls still queued (partly encoded ones included) are refused.
  for (Call* call : queue_) {
    call->status = UnavailableError("the embedding model is shutting down");
    call->finished = true;
  }
  queue_.clear();
  queued_texts_ = 0;
  done_cv_.notify_all();
}

}  // namespace strata::embedding
