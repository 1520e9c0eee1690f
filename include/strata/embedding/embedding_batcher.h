// EmbeddingBatcher: a TextEmbedder that gathers the texts of concurrent Embed calls into shared
// SentenceEncoder passes, so that 16 callers of one text each cost about one forward pass of 16
// texts instead of 16 passes of one (the encoder runs one pass at a time anyway).
//
// How a call goes:
//   1. On the caller's thread: every text is tokenized (the same WordPiece the encoder runs,
//      cut to max_tokens()) to check it is UTF-8 and to count its tokens. A bad text fails its
//      own call with INVALID_ARGUMENT ("texts[3]: text is not valid UTF-8 (byte 5)") before
//      anything is queued, so it can never fail another caller's texts in a shared pass.
//   2. The call's texts join the queue, unless that would hold more than max_queued_texts
//      texts not yet taken into a pass: then RESOURCE_EXHAUSTED at once, nothing queued.
//   3. The worker thread starts a pass when max_batch_texts texts are queued, or when the
//      oldest queued call has waited max_wait (it also waits for nothing while a pass runs:
//      calls that arrive meanwhile simply make the next pass bigger). A pass takes up to
//      max_batch_texts texts round-robin over the queued calls, one text per call in turn, in
//      arrival order: a call of one text is never stuck behind a call of 2048; a call with more
//      texts than a pass takes is split over several passes.
//   4. The call returns once its last text is encoded: one vector per text, in order, and the
//      tokens counted in step 1 ([CLS] and [SEP] included).
// A text's embedding does not depend on the texts it shares a pass with beyond fp32 rounding
// (see SentenceEncoder::Encode).
//
// Ownership: the batcher owns its SentenceEncoder (encoder() lends it, e.g. for its tokenizer;
// calling its Encode directly bypasses the batching but is safe, the encoder serializes).
//
// Shutdown (Shutdown() or the destructor): new calls get UNAVAILABLE; the pass running goes on
// and its callers get their vectors; calls still queued get UNAVAILABLE; the worker is joined.
// The destructor must not run while a thread may still enter Embed (callers that are waiting
// inside Embed are fine: they are woken first).
//
// Thread rules: Embed, Shutdown, queued_texts and the accessors may be called from any thread.
// on_pass is called on the worker thread after each pass, before the pass's callers are woken
// (so a call's pass is counted by the time the call returns), outside the batcher's lock; it
// must not call Embed and should return quickly (the pass's callers wait for it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "strata/common/status.h"
#include "strata/embedding/sentence_encoder.h"
#include "strata/embedding/text_embedder.h"

namespace strata::embedding {

// One encoder pass, for metrics.
struct EmbeddingPass {
  int64_t texts = 0;   // texts encoded in the pass
  int64_t tokens = 0;  // their tokens, [CLS] and [SEP] included
  int64_t calls = 0;   // Embed calls that had texts in the pass
  double seconds = 0;  // the SentenceEncoder::Encode call's wall time
};

struct EmbeddingBatcherOptions {
  // Texts per encoder pass at most (>= 1).
  int max_batch_texts = 64;
  // How long the oldest queued call waits for more texts before a pass starts anyway; 0: a
  // pass starts as soon as the worker is free.
  std::chrono::microseconds max_wait{2000};
  // Texts queued and not yet taken into a pass at most, over all calls (>= 1); a call that
  // would go past it gets RESOURCE_EXHAUSTED.
  int64_t max_queued_texts = 8192;
  // After each pass, on the worker thread, before the pass's callers return (may be empty).
  std::function<void(const EmbeddingPass&)> on_pass;
};

class EmbeddingBatcher final : public TextEmbedder {
 public:
  // Loads the model folder `dir` (SentenceEncoder::Load's errors) and starts the worker; the
  // model's name is the folder's base name ("all-minilm-l6-v2"). INVALID_ARGUMENT for options
  // out of range.
  static StatusOr<std::unique_ptr<EmbeddingBatcher>> Load(
      const std::string& dir, const SentenceEncoderOptions& encoder_options,
      EmbeddingBatcherOptions options);
  // Takes `encoder` (not null) and starts the worker. INVALID_ARGUMENT for options out of range.
  static StatusOr<std::unique_ptr<EmbeddingBatcher>> Create(
      std::unique_ptr<SentenceEncoder> encoder, std::string model_name,
      EmbeddingBatcherOptions options);

  ~EmbeddingBatcher() override;
  EmbeddingBatcher(const EmbeddingBatcher&) = delete;
  EmbeddingBatcher& operator=(const EmbeddingBatcher&) = delete;

  // Blocks until the texts are encoded (see the top of the file). INVALID_ARGUMENT naming the
  // first text that is not UTF-8, RESOURCE_EXHAUSTED when the queue cannot take the texts,
  // UNAVAILABLE once shutdown began. An empty span gives an empty result at once.
  StatusOr<Embeddings> Embed(std::span<const std::string> texts) override;

  int dimension() const override { return encoder_->dimension(); }
  int max_tokens() const override { return encoder_->max_tokens(); }
  std::string_view model_name() const override { return model_name_; }

  // Stops taking calls, fails the queued ones with UNAVAILABLE, finishes the running pass and
  // joins the worker. Idempotent; the destructor calls it.
  void Shutdown();

  // Texts queued and not yet taken into a pass.
  int64_t queued_texts() const;
  const SentenceEncoder& encoder() const { return *encoder_; }
  const EmbeddingBatcherOptions& options() const { return options_; }

 private:
  // One Embed call while it waits. Lives on the caller's stack; the worker touches it only
  // until it sets `finished` (under mutex_), and the caller leaves only after that.
  struct Call {
    std::span<const std::string> texts;
    std::vector<std::vector<float>> vectors;  // filled by the worker
    std::vector<int64_t> tokens;              // per text, counted by the caller
    size_t next = 0;                          // first text not yet taken into a pass
    size_t done = 0;                          // texts encoded
    std::chrono::steady_clock::time_point arrived;
    Status status;
    bool in_pass = false;  // listed in the pass being formed
    bool finished = false;
  };
  // A pass's texts as (call, text index), and its calls, each once.
  struct Pass {
    std::vector<std::pair<Call*, size_t>> slots;
    std::vector<Call*> calls;
  };

  EmbeddingBatcher(std::unique_ptr<SentenceEncoder> encoder, std::string model_name,
                   EmbeddingBatcherOptions options);
  void Run();
  // Takes the next pass's texts off the queue, round-robin over the calls; needs mutex_.
  Pass TakePassLocked();

  std::unique_ptr<SentenceEncoder> encoder_;
  std::string model_name_;
  EmbeddingBatcherOptions options_;

  mutable std::mutex mutex_;         // guards everything below
  std::condition_variable work_cv_;  // the worker waits for calls or shutdown
  std::condition_variable done_cv_;  // callers wait for `finished`
  std::condition_variable idle_cv_;  // the destructor waits for waiting_calls_ == 0
  int64_t waiting_calls_ = 0;        // callers inside done_cv_.wait (or about to leave it)
  std::deque<Call*> queue_;          // calls with texts not yet taken, in arrival order
  int64_t queued_texts_ = 0;         // their texts not yet taken
  bool stopping_ = false;
  std::mutex shutdown_mutex_;  // serializes Shutdown's join
  std::thread worker_;         // last: it starts with everything above initialized
};

}  // namespace strata::embedding
