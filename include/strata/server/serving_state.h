// ServingState: what every transport of one server shares: whether the model is loading,
// serving or draining, the seed source for requests that bring none, the translation of a
// GenerationInput into an engine request, and the count of generation calls in flight (the
// drain waits for it to reach zero, whichever transport the calls came on).
//
// Lifecycle: loading (every call UNAVAILABLE "loading") -> Activate(model) -> serving ->
// BeginDrain() -> draining (new calls UNAVAILABLE, those in flight go on).
//
// Thread rules: every method may be called from any thread; the ServingModel passed to
// Activate and the metrics must outlive the state.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>

#include "strata/common/background_pool.h"
#include "strata/common/status.h"
#include "strata/engine/request_submitter.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/api_keys.h"
#include "strata/server/generation_input.h"
#include "strata/server/request_translator.h"
#include "strata/server/serving_model.h"
#include "strata/trace/span.h"

namespace strata::server {

// What a generation call needs from the server; all pointers outlive the calls.
struct CallEnv {
  engine::RequestSubmitter* engine = nullptr;  // the Engine, or whatever wraps it
  metrics::ServerMetrics* metrics = nullptr;
  std::atomic<int64_t>* in_flight = nullptr;  // calls accepted and not yet done
  std::shared_ptr<ApiKeyLease> key;           // the caller's API key, when keys are on
  trace::SpanSink* spans = nullptr;           // where calls' traces go (null: nowhere)
};

class ServingState {
 public:
  // `log_prompts`: prompt text in the debug log line of each translated request. `spans`:
  // where the traces of generation calls go (null: nowhere); must outlive the state.
  ServingState(metrics::ServerMetrics* metrics, bool log_prompts, trace::SpanSink* spans = nullptr);

  // Loading -> serving. Call once.
  void Activate(ServingModel* model);
  // Serving -> draining: new calls get UNAVAILABLE.
  void BeginDrain();

  // The model when serving; otherwise the UNAVAILABLE status to answer with.
  StatusOr<ServingModel*> Serving() const;
  bool draining() const { return draining_.load(); }

  // Validates `input` into an engine request, drawing a seed where none is given.
  StatusOr<TranslatedRequest> Translate(const ServingModel& model, const GenerationInput& input);

  // Translate, with the result passed to `done`: at once on this thread for a small input, on a
  // background worker at low CPU priority for one of kBackgroundInputBytes of text or more, so
  // that encoding a large prompt never holds a transport's thread nor takes CPU the engine
  // wants. RESOURCE_EXHAUSTED (passed at once) when too many large inputs wait already.
  static constexpr size_t kBackgroundInputBytes = 16 << 10;
  void TranslateThen(const ServingModel& model, GenerationInput input,
                     std::function<void(StatusOr<TranslatedRequest>)> done);
  // TranslateThen, waiting for the result: for transports whose threads may block.
  StatusOr<TranslatedRequest> TranslateWaiting(const ServingModel& model, GenerationInput input);

  // The environment of a call on `model` by the holder of `key` (null: keys are off), counted in
  // in_flight() once it is accepted.
  CallEnv EnvFor(ServingModel& model, std::shared_ptr<ApiKeyLease> key = nullptr);
  int64_t in_flight() const { return in_flight_.load(); }
  metrics::ServerMetrics* metrics() const { return metrics_; }
  trace::SpanSink* spans() const { return spans_; }

 private:
  metrics::ServerMetrics* metrics_;
  bool log_prompts_;
  trace::SpanSink* spans_;
  std::atomic<ServingModel*> model_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;
  BackgroundPool encoders_;  // last: its workers stop before the rest goes
};

}  // namespace strata::server
