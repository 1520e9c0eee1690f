#include "bench/load/openai_stream.h"

#include "bench/load/json_value.h"

namespace strata::bench {

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Struct* AsObject(const Value* v) {
  return v != nullptr && v->kind_case() == Value::kStructValue ? &v->struct_value() : nullptr;
}

std::string_view AsString(const Value* v) {
  return v != nullptr && v->kind_case() == Value::kStringValue ? std::string_view(v->string_value())
                                                               : std::string_view();
}

std::optional<int64_t> IntField(const Struct* object, std::string_view key) {
  if (object == nullptr) return std::nullopt;
  const Value* v = FindField(*object, key);
  return v == nullptr ? std::nullopt : AsInt(*v);
}

}  // namespace

Status OpenAiStream::OnEvent(std::string_view data, TokenTimeline::Clock::time_point t) {
  if (data == "[DONE]") {
    done_ = true;
    return OkStatus();
  }
  StatusOr<Struct> parsed = ParseJsonObject(data);
  if (!parsed.ok()) return DataLossError("SSE event: " + parsed.status().message());
  const Struct& event = *parsed;
  if (const Value* error = FindField(event, "error")) {
    const Struct* e = AsObject(error);
    std::string_view message = e != nullptr ? AsString(FindField(*e, "message")) : AsString(error);
    return InternalError("server error event: " + std::string(message));
  }
  int64_t tokens = 0;
  const Value* token_list = FindField(event, "tokens");
  if (token_list != nullptr && token_list->kind_case() == Value::kListValue) {
    tokens = token_list->list_value().values_size();
  } else if (const Value* choices = FindField(event, "choices");
             choices != nullptr && choices->kind_case() == Value::kListValue &&
             choices->list_value().values_size() > 0) {
    const Struct* choice = AsObject(&choices->list_value().values(0));
    if (choice != nullptr) {
      std::string_view text = AsString(FindField(*choice, "text"));
      if (const Struct* delta = AsObject(FindField(*choice, "delta"))) {
        text = AsString(FindField(*delta, "content"));
      }
      if (!text.empty()) tokens = 1;
      const std::string_view finish = AsString(FindField(*choice, "finish_reason"));
      if (!finish.empty()) finish_reason_ = std::string(finish);
    }
  } else if (const Value* content = FindField(event, "content")) {
    if (!AsString(content).empty()) tokens = 1;  // llama.cpp's native /completion
  }
  timeline_->AddTokens(tokens, t);
  const Struct* usage = AsObject(FindField(event, "usage"));
  const Struct* timings = AsObject(FindField(event, "timings"));
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
