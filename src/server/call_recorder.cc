#include "strata/server/call_recorder.h"

#include <utility>

#include "strata/common/logging.h"
#include "strata/sampling/finish_reason.h"

namespace strata::server {

CallRecorder::CallRecorder(metrics::ServerMetrics* metrics, std::string request_id,
                           std::shared_ptr<ApiKeyLease> key, CallTrace* trace)
    : metrics_(metrics), request_id_(std::move(request_id)), key_(std::move(key)), trace_(trace) {}

void CallRecorder::OnChunk(const engine::StreamChunk& chunk) {
  if (trace_ != nullptr) trace_->Delivering();
  // Tokens a cache answered with were generated once, for another request: not counted again.
  if (chunk.token_ids.empty() || chunk.from_cache) return;
  const auto n = static_cast<int64_t>(chunk.token_ids.size());
  metrics_->CountGeneratedTokens(n);
  if (last_token_time_ != std::chrono::steady_clock::time_point()) {
    // Chunks carry one token each today; a chunk of several (speculation) spreads the gap.
    const double gap = std::chrono::duration<double>(chunk.time - last_token_time_).count();
    for (int64_t i = 0; i < n; ++i) metrics_->ObserveInterTokenLatency(gap / n);
  }
  last_token_time_ = chunk.time;
}

Status CallRecorder::OnLast(const engine::StreamChunk& last, Cancel cancel) {
  const sampling::FinishReason reason = *last.finish_reason;
  metrics::RequestRecord record;
  record.finish_reason = std::string(sampling::FinishReasonName(reason));
  record.prompt_tokens = last.usage.prompt_tokens;
  record.completion_tokens = last.usage.completion_tokens;
  record.cached_prompt_tokens = last.usage.cached_prompt_tokens;
  // A stage the request never reached reports 0 (see RequestTiming): not observed.
  const bool scheduled = last.usage.completion_tokens > 0 || last.timing.queue_seconds > 0;
  record.queue_seconds = scheduled ? last.timing.queue_seconds : -1;
  record.time_to_first_token_seconds =
      last.usage.completion_tokens > 0 ? last.timing.time_to_first_token_seconds : -1;
  record.e2e_seconds = last.timing.total_seconds;
  metrics_->ObserveRequest(record);
  if (key_ != nullptr) key_->End(record.prompt_tokens, record.completion_tokens);

  Status status;
  if (reason == sampling::FinishReason::kCancelled) {
    switch (cancel) {
      case Cancel::kClient:
        status = Status(StatusCode::kCancelled, "the request was cancelled");
        break;
      case Cancel::kDeadline:
        status = Status(StatusCode::kDeadlineExceeded,
                        "the deadline expired before the request finished");
        break;
      case Cancel::kNone:
        status = UnavailableError("the server shut down before the request finished");
        break;
    }
  } else if (reason == sampling::FinishReason::kError) {
    status = last.error.ok() ? InternalError("the engine failed the request") : last.error;
  }
  if (!status.ok()) metrics_->CountError(StatusCodeName(status.code()));
  if (trace_ != nullptr) {
    trace_->SetAttribute("strata.request_id", request_id_);
    trace_->End(last, status);
  }
  Log(status.ok() || cancel != Cancel::kNone ? LogLevel::kInfo : LogLevel::kWarn,
      "request finished",
      {{"request_id", request_id_},
       {"finish_reason", record.finish_reason},
       {"prompt_tokens", std::to_string(record.prompt_tokens)},
       {"cached_prompt_tokens", std::to_string(record.cached_prompt_tokens)},
       {"completion_tokens", std::to_string(record.completion_tokens)},
       {"ttft_ms", std::to_string(last.timing.time_to_first_token_seconds * 1000)},
       {"total_ms", std::to_string(last.timing.total_seconds * 1000)},
       {"status", status.ok() ? "OK" : status.message()},
       {"trace_id", trace_ != nullptr ? trace_->trace_id() : ""}});
  return status;
}

}  // namespace strata::server
