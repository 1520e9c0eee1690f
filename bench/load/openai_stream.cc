#include "bench/load/openai_stream.h"

#include "bench/load/json_fields.h"

namespace strata::bench {

namespace {

using nlohmann::json;

std::optional<int64_t> IntField(const json* object, std::string_view key) {
  const json* v = object == nullptr ? nullptr : FindField(*object, key);
  return v == nullptr ? std::nullopt : AsInt(*v);
}

}  // namespace

Status OpenAiStream::OnEvent(std::string_view data, TokenTimeline::Clock::time_point t) {
  if (data == "[DONE]") {
    done_ = true;
    return OkStatus();
  }
  StatusOr<json> parsed = ParseJsonObject(data);
  if (!parsed.ok()) return DataLossError("SSE event: " + parsed.status().message());
  const json& event = *parsed;
  if (const json* error = FindField(event, "error")) {
    const std::string_view message =
        error->is_object() ? AsString(FindField(*error, "message")) : AsString(error);
    return InternalError("server error event: " + std::string(message));
  }
  int64_t tokens = 0;
  const json* token_list = FindField(event, "tokens");
  const json* choices = FindField(event, "choices");
  if (token_list != nullptr && token_list->is_array()) {
    tokens = static_cast<int64_t>(token_list->size());
  } else if (choices != nullptr && choices->is_array() && !choices->empty()) {
    const json& choice = choices->front();
    std::string_view text = AsString(FindField(choice, "text"));
    if (const json* delta = FindField(choice, "delta"); delta != nullptr && delta->is_object()) {
      text = AsString(FindField(*delta, "content"));
    }
    if (!text.empty()) tokens = 1;
    const std::string_view finish = AsString(FindField(choice, "finish_reason"));
    if (!finish.empty()) finish_reason_ = std::string(finish);
  } else if (!AsString(FindField(event, "content")).empty()) {
    tokens = 1;  // llama.cpp's native /completion
  }
  timeline_->AddTokens(tokens, t);
  const json* usage = FindField(event, "usage");
  const json* timings = FindField(event, "timings");
  if (auto n = IntField(usage, "completion_tokens")) {
    completion_tokens_ = n;
  } else if (auto m = IntField(timings, "predicted_n")) {
    completion_tokens_ = m;
  }
  if (auto n = IntField(usage, "prompt_tokens")) {
    prompt_tokens_ = n;
  } else if (auto m = IntField(timings, "prompt_n")) {
    prompt_tokens_ = m;
  }
  return OkStatus();
}

}  // namespace strata::bench
