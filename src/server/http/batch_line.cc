#include "strata/server/http/batch_line.h"

#include <chrono>
#include <memory>
#include <utility>

#include "strata/server/http/batch_input.h"
#include "strata/server/http/openai_embeddings.h"
#include "strata/server/http/openai_request.h"
#include "strata/server/http/openai_response.h"

namespace strata::server::http {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(100);

std::optional<Endpoint> GenerationEndpoint(std::string_view endpoint) {
  if (endpoint == "/v1/completions") return Endpoint::kCompletions;
  if (endpoint == "/v1/chat/completions") return Endpoint::kChatCompletions;
  return std::nullopt;
}

// The line's result for an error answer of the endpoint.
jobs::LineResult ErrorResult(const jobs::BatchLine& line, const ApiError& error) {
  return {line.index, false,
          BatchResultLine(line.custom_id, error.http_status, "", ErrorBody(error), "", "")};
}

// A status that means "not now" rather than "this line is wrong": the line waits.
bool Transient(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kResourceExhausted || status.code() == StatusCode::kCancelled;
}

bool KnownModel(const BatchLineEnv& env, const std::string& name) {
  if (name == env.model_id) return true;
  const StatusOr<ServingModel*> serving = env.state->Serving();
  return serving.ok() && name == (*serving)->info.name();
}

std::optional<jobs::LineResult> RunGeneration(const BatchLineEnv& env, Endpoint endpoint,
                                              const jobs::BatchLine& line,
                                              const std::function<bool()>& stop) {
  const bool chat = endpoint == Endpoint::kChatCompletions;
  OpenAiRequest parsed;
  ApiError bad;
  if (!ParseOpenAiRequest(endpoint, line.body, chat ? 0 : env.completions_max_tokens, &parsed,
                          &bad)) {
    return ErrorResult(line, bad);
  }
  StatusOr<ServingModel*> serving = env.state->Serving();
  if (!serving.ok()) return std::nullopt;
  ServingModel& model = **serving;
  StatusOr<TranslatedRequest> translated = env.state->TranslateWaiting(model, parsed.input);
  if (!translated.ok()) {
    if (Transient(translated.status())) return std::nullopt;
    return ErrorResult(line, ApiErrorFromStatus(translated.status(), endpoint));
  }
  translated->request.priority = env.priority;
  translated->request.background = true;
  const CallEnv call = env.state->EnvFor(model);
  StatusOr<std::shared_ptr<engine::RequestStream>> submitted =
      call.engine->Submit(std::move(translated->request));
  if (!submitted.ok()) {
    if (Transient(submitted.status())) return std::nullopt;
    return ErrorResult(line, ApiErrorFromStatus(submitted.status(), endpoint));
  }
  engine::RequestStream& stream = **submitted;

  ResponseContext ctx;
  ctx.endpoint = endpoint;
  ctx.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(stream.id());
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.model = env.model_id;
  ctx.logprobs = parsed.logprobs;
  ctx.top_logprobs = parsed.top_logprobs;
  ctx.tools = parsed.tools.active();
  ctx.tokenizer = model.tokenizer.get();
  Responder responder(ctx);
  bool cancelled = false;
  engine::StreamChunk chunk;
  while (true) {
    if (!cancelled && stop()) {
      call.engine->Cancel(stream.id());  // its last chunk comes at the next engine step
      cancelled = true;
    }
    if (!stream.Next(&chunk, kPollInterval)) {
      if (stream.timed_out()) continue;
      return std::nullopt;  // not reached: a stream ends with its last chunk
    }
    if (!chunk.from_cache && !chunk.token_ids.empty()) {
      call.metrics->CountGeneratedTokens(static_cast<int64_t>(chunk.token_ids.size()));
    }
    responder.Add(chunk);
    if (!chunk.finish_reason) continue;
    switch (*chunk.finish_reason) {
      case sampling::FinishReason::kCancelled:
        return std::nullopt;  // the runner stops or the batch was cancelled: not run
      case sampling::FinishReason::kError: {
        const Status error =
            chunk.error.ok() ? InternalError("the engine failed the request") : chunk.error;
        return ErrorResult(line, ApiErrorFromStatus(error, endpoint));
      }
      default:
        return jobs::LineResult{
            line.index, true,
            BatchResultLine(line.custom_id, 200, ctx.id, responder.Body(chunk), "", "")};
    }
  }
}

}  // namespace

Status CheckBatchBody(const BatchLineEnv& env, std::string_view endpoint, std::string_view body) {
  ApiError bad;
  if (const std::optional<Endpoint> generation = GenerationEndpoint(endpoint)) {
    OpenAiRequest parsed;
    if (!ParseOpenAiRequest(*generation, body, 0, &parsed, &bad)) {
      return InvalidArgumentError(bad.message);
    }
    if (parsed.stream) return InvalidArgumentError("stream must be false in a batch");
    if (!KnownModel(env, parsed.model)) {
      return InvalidArgumentError("the model '" + parsed.model + "' is not served here; use '" +
                                  env.model_id + "'");
    }
    return OkStatus();
  }
  EmbeddingsRequest parsed;
  if (!ParseEmbeddingsRequest(body, &parsed, &bad)) return InvalidArgumentError(bad.message);
  return OkStatus();
}

std::optional<jobs::LineResult> RunBatchLine(const BatchLineEnv& env, std::string_view endpoint,
                                             const jobs::BatchLine& line,
                                             const std::function<bool()>& stop) {
  if (const std::optional<Endpoint> generation = GenerationEndpoint(endpoint)) {
    return RunGeneration(env, *generation, line, stop);
  }
  const EmbeddingsReply reply = AnswerEmbeddings(
      line.body, env.embeddings, env.state->Serving().status(), env.state->metrics());
  if (reply.http_status == 503 || reply.http_status == 429) return std::nullopt;
  return jobs::LineResult{
      line.index, reply.http_status == 200,
      BatchResultLine(line.custom_id, reply.http_status, "emb-batch-" + std::to_string(line.index),
                      reply.body, "", "")};
}

}  // namespace strata::server::http
