#include "strata/server/serving_state.h"

#include <future>
#include <memory>
#include <utility>

#include "strata/common/logging.h"

namespace strata::server {

namespace {

// Large-prompt encoders: two workers at nice 10, and a bounded backlog (each job holds its input,
// up to the transport's message limit).
constexpr BackgroundPoolOptions kEncoderOptions{/*threads=*/2, /*max_queued=*/64, /*nice=*/10};

size_t TextBytes(const GenerationInput& input) {
  size_t bytes = input.text.size();
  for (const ChatTurn& turn : input.chat) bytes += turn.content.size();
  return bytes;
}

}  // namespace

ServingState::ServingState(metrics::ServerMetrics* metrics, bool log_prompts,
                           trace::SpanSink* spans)
    : metrics_(metrics),
      log_prompts_(log_prompts),
      spans_(spans),
      seed_source_(std::random_device{}()),
      encoders_(kEncoderOptions) {}

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

void ServingState::TranslateThen(const ServingModel& model, GenerationInput input,
                                 std::function<void(StatusOr<TranslatedRequest>)> done) {
  if (TextBytes(input) < kBackgroundInputBytes) {
    done(Translate(model, input));
    return;
  }
  auto job = std::make_shared<
      std::pair<GenerationInput, std::function<void(StatusOr<TranslatedRequest>)>>>(
      std::move(input), std::move(done));
  const Status posted =
      encoders_.Post([this, &model, job] { job->second(Translate(model, job->first)); });
  if (!posted.ok()) {
    job->second(posted.code() == StatusCode::kResourceExhausted
                    ? ResourceExhaustedError("too many large prompts are waiting to be encoded (" +
                                             posted.message() + ")")
                    : posted);
  }
}

StatusOr<TranslatedRequest> ServingState::TranslateWaiting(const ServingModel& model,
                                                           GenerationInput input) {
  // Shared: the worker may still be inside set_value when get() returns here.
  auto result = std::make_shared<std::promise<StatusOr<TranslatedRequest>>>();
  std::future<StatusOr<TranslatedRequest>> future = result->get_future();
  TranslateThen(model, std::move(input), [result](StatusOr<TranslatedRequest> translated) {
    result->set_value(std::move(translated));
  });
  return future.get();
}

CallEnv ServingState::EnvFor(ServingModel& model, std::shared_ptr<ApiKeyLease> key) {
  engine::RequestSubmitter* submitter =
      model.submitter != nullptr ? model.submitter : model.engine.get();
  return CallEnv{submitter, metrics_, &in_flight_, std::move(key), spans_};
}

}  // namespace strata::server
