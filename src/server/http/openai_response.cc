#include "strata/server/http/openai_response.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace strata::server::http {
namespace {

using nlohmann::json;

// Invalid UTF-8 (a byte token's piece) becomes U+FFFD rather than an exception.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SseEvent(const json& payload) { return "data: " + Dump(payload) + "\n\n"; }

const char* FinishName(sampling::FinishReason reason) {
  switch (reason) {
    case sampling::FinishReason::kStop:
      return "stop";
    case sampling::FinishReason::kLength:
      return "length";
    case sampling::FinishReason::kCancelled:
      return "abort";
    case sampling::FinishReason::kError:
      return "error";
  }
  return "stop";
}

json Usage(const engine::RequestUsage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

std::string Piece(const tokenizer::Tokenizer* t, int32_t id) {
  return t == nullptr ? std::string() : t->TokenToPiece(id, /*render_special=*/true);
}

json Bytes(const std::string& piece) {
  json bytes = json::array();
  for (const char c : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

// Chat's logprobs.content entries.
json ChatLogprobs(const ResponseContext& ctx, const std::vector<sampling::SampleLogprobs>& lps) {
  json content = json::array();
  for (const sampling::SampleLogprobs& lp : lps) {
    const std::string piece = Piece(ctx.tokenizer, lp.chosen.token);
    json top = json::array();
    for (size_t k = 0; k < lp.top.size() && k < static_cast<size_t>(ctx.top_logprobs); ++k) {
      const std::string p = Piece(ctx.tokenizer, lp.top[k].token);
      top.push_back({{"token", p}, {"logprob", lp.top[k].logprob}, {"bytes", Bytes(p)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", lp.chosen.logprob},
                       {"bytes", Bytes(piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

// Completions' logprobs object; `offset` is the text offset of the first token (advanced).
json CompletionLogprobs(const ResponseContext& ctx,
                        const std::vector<sampling::SampleLogprobs>& lps, int64_t* offset) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  json text_offset = json::array();
  for (const sampling::SampleLogprobs& lp : lps) {
    const std::string piece = Piece(ctx.tokenizer, lp.chosen.token);
    tokens.push_back(piece);
    token_logprobs.push_back(lp.chosen.logprob);
    json top = json::object();
    for (size_t k = 0; k < lp.top.size() && k < static_cast<size_t>(ctx.top_logprobs); ++k) {
      top[Piece(ctx.tokenizer, lp.top[k].token)] = lp.top[k].logprob;
    }
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(*offset);
    *offset += static_cast<int64_t>(piece.size());
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(text_offset)}};
}

json Envelope(const ResponseContext& ctx, bool chunk) {
  const bool chat = ctx.endpoint == Endpoint::kChatCompletions;
  return json{
      {"id", ctx.id},
      {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
      {"created", ctx.created},
      {"model", ctx.model}};
}

// OpenAI's tool_calls array; streamed deltas also carry each call's index.
json ToolCallsJson(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments_json}}}};
    if (with_index) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

Responder::Responder(ResponseContext context) : ctx_(std::move(context)) {}

void Responder::Add(const engine::StreamChunk& chunk) {
  text_ += chunk.text;
  token_ids_.insert(token_ids_.end(), chunk.token_ids.begin(), chunk.token_ids.end());
  if (ctx_.logprobs)
    logprobs_.insert(logprobs_.end(), chunk.logprobs.begin(), chunk.logprobs.end());
}

std::string Responder::Body(const engine::StreamChunk& last) const {
  json body = Envelope(ctx_, /*chunk=*/false);
  const char* finish = FinishName(last.finish_reason.value_or(sampling::FinishReason::kStop));
  json choice;
  if (ctx_.endpoint == Endpoint::kChatCompletions && ctx_.tools) {
    const ToolReply reply = ParseToolReply(text_);
    json message = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.calls.empty()) {
      message["content"] = nullptr;
      message["tool_calls"] = ToolCallsJson(reply.calls, /*with_index=*/false);
      finish = "tool_calls";
    }
    choice = {{"index", 0},
              {"message", std::move(message)},
              {"logprobs", nullptr},
              {"finish_reason", finish}};
  } else if (ctx_.endpoint == Endpoint::kChatCompletions) {
    choice = {{"index", 0},
              {"message", {{"role", "assistant"}, {"content", text_}}},
              {"logprobs", ctx_.logprobs ? ChatLogprobs(ctx_, logprobs_) : json(nullptr)},
              {"finish_reason", finish}};
  } else {
    int64_t offset = 0;
    choice = {
        {"index", 0},
        {"text", text_},
        {"logprobs", ctx_.logprobs ? CompletionLogprobs(ctx_, logprobs_, &offset) : json(nullptr)},
        {"finish_reason", finish}};
  }
  body["choices"] = json::array({std::move(choice)});
  body["usage"] = Usage(last.usage);
  if (last.from_cache) body["cached"] = true;  // answered by the response cache
  return Dump(body);
}

std::string Responder::Events(const engine::StreamChunk& chunk) {
  const bool chat = ctx_.endpoint == Endpoint::kChatCompletions;
  std::string out;
  auto choice_event = [&](json choice, bool cached = false) {
    json e = Envelope(ctx_, /*chunk=*/true);
    e["choices"] = json::array({std::move(choice)});
    if (ctx_.include_usage) e["usage"] = nullptr;  // OpenAI: null on every chunk but the last
    if (cached) e["cached"] = true;                // answered by the response cache
    out += SseEvent(e);
  };
  if (chat && !sent_role_) {
    sent_role_ = true;
    choice_event({{"index", 0},
                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  }
  if (chat && ctx_.tools) return out + ToolEvents(chunk, choice_event);
  const bool has_logprobs = ctx_.logprobs && !chunk.logprobs.empty();
  if (!chunk.text.empty() || has_logprobs) {
    if (chat) {
      choice_event({{"index", 0},
                    {"delta", {{"content", chunk.text}}},
                    {"logprobs", has_logprobs ? ChatLogprobs(ctx_, chunk.logprobs) : json(nullptr)},
                    {"finish_reason", nullptr}});
    } else {
      choice_event(
          {{"index", 0},
           {"text", chunk.text},
           {"logprobs",
            has_logprobs ? CompletionLogprobs(ctx_, chunk.logprobs, &text_offset_) : json(nullptr)},
           {"finish_reason", nullptr}});
    }
  }
  if (!chunk.finish_reason) return out;
  const char* finish = FinishName(*chunk.finish_reason);
  if (chat) {
    choice_event(
        {{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}},
        chunk.from_cache);
  } else {
    choice_event({{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish}},
                 chunk.from_cache);
  }
  return out + StreamEnd(chunk);
}

std::string Responder::StreamEnd(const engine::StreamChunk& last) const {
  std::string out;
  if (ctx_.include_usage) {
    json e = Envelope(ctx_, /*chunk=*/true);
    e["choices"] = json::array();
    e["usage"] = Usage(last.usage);
    out += SseEvent(e);
  }
  out += "data: [DONE]\n\n";
  return out;
}

std::string Responder::ToolEvents(const engine::StreamChunk& chunk,
                                  const std::function<void(json, bool)>& choice_event) {
  // A reply in words ({"response": "..."}) streams as content deltas as its string arrives;
  // tool calls are only known whole, so they are held until the last chunk.
  text_ += chunk.text;
  const std::string_view prefix = kToolResponsePrefix;
  if (text_.size() >= prefix.size() && text_.compare(0, prefix.size(), prefix) == 0) {
    std::string decoded;
    bool ended = false;
    response_raw_ += DecodeJsonStringPrefix(
        std::string_view(text_).substr(prefix.size() + response_raw_), &decoded, &ended);
    if (!decoded.empty()) {
      choice_event({{"index", 0},
                    {"delta", {{"content", decoded}}},
                    {"logprobs", nullptr},
                    {"finish_reason", nullptr}},
                   false);
    }
    if (!chunk.finish_reason) return "";
    choice_event({{"index", 0},
                  {"delta", json::object()},
                  {"logprobs", nullptr},
                  {"finish_reason", FinishName(*chunk.finish_reason)}},
                 chunk.from_cache);
    return StreamEnd(chunk);
  }
  if (!chunk.finish_reason) return "";
  std::string finish = FinishName(*chunk.finish_reason);
  const ToolReply reply = ParseToolReply(text_);
  if (!reply.calls.empty()) {
    json calls = ToolCallsJson(reply.calls, /*with_index=*/true);
    for (json& call : calls) {
      choice_event({{"index", 0},
                    {"delta", {{"tool_calls", json::array({std::move(call)})}}},
                    {"logprobs", nullptr},
                    {"finish_reason", nullptr}},
                   false);
    }
    finish = "tool_calls";
  } else if (!reply.content.empty()) {
    choice_event({{"index", 0},
                  {"delta", {{"content", reply.content}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}},
                 false);
  }
  choice_event(
      {{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}},
      chunk.from_cache);
  return StreamEnd(chunk);
}

std::string Responder::ErrorEvents(const ApiError& error) {
  return "data: " + ErrorBody(error) + "\n\ndata: [DONE]\n\n";
}

namespace {

json Model(const std::string& model_id, int64_t created, int64_t context_length) {
  return json{{"id", model_id},
              {"object", "model"},
              {"created", created},
              {"owned_by", "strata"},
              {"max_model_len", context_length}};
}

}  // namespace

std::string ModelBody(const std::string& model_id, int64_t created, int64_t context_length) {
  return Dump(Model(model_id, created, context_length));
}

std::string ModelsBody(const std::string& model_id, int64_t created, int64_t context_length) {
  return Dump(
      json{{"object", "list"}, {"data", json::array({Model(model_id, created, context_length)})}});
}

}  // namespace strata::server::http
