#include "strata/server/serving_state.h"

#include "strata/common/logging.h"

namespace strata::server {

ServingState::ServingState(metrics::ServerMetrics* metrics, bool log_prompts)
    : metrics_(metrics), log_prompts_(log_prompts), seed_source_(std::random_device{}()) {}

void ServingState::Activate(ServingModel* model) { model_.store(model); }

void ServingState::BeginDrain() { draining_.store(true); }

StatusOr<ServingModel*> ServingState::Serving() const {
  if (draining_.load()) return UnavailableError("the server is shutting down");
  ServingModel* model = model_.load();
  if (model == nullptr) return UnavailableError("the model is still loading; retry shortly");
  return model;
}

StatusOr<TranslatedRequest> ServingState::Translate(const ServingModel& model,
                                                    const GenerationInput& input) {
  uint64_t drawn_seed = 0;
  {
    std::lock_guard<std::mutex> lock(seed_mutex_);
    drawn_seed = seed_source_();
  }
  StatusOr<TranslatedRequest> translated = model.translator->Translate(input, drawn_seed);
  if (translated.ok() && log_prompts_) {
    Log(LogLevel::kDebug, "request received",
        {{"request_id", translated->request_id},
         {"prompt", model.tokenizer->Decode(translated->request.prompt, /*render_special=*/true)}});
  }
  return translated;
}

CallEnv ServingState::EnvFor(ServingModel& model) {
  engine::RequestSubmitter* submitter =
      model.submitter != nullptr ? model.submitter : model.engine.get();
  return CallEnv{submitter, metrics_, &in_flight_};
}

}  // namespace strata::server
