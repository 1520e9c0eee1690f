// OpenAI-shaped answers built from the engine's stream chunks: the completion and chat
// completion bodies, the server-sent events of a streamed one (text deltas, the finish event,
// the usage event of stream_options.include_usage, "data: [DONE]"), and the model list.
// Log-probabilities come in each endpoint's own shape: completions' tokens / token_logprobs /
// top_logprobs / text_offset, chat's content list with bytes.
//
// Thread rules: one Responder per call, used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "strata/engine/request_stream.h"
#include "strata/server/http/openai_request.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::server::http {

struct ResponseContext {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool include_usage = false;
  // Chat with tools in play (tool_calls.h): the answer is the model's reply object turned into
  // tool calls or content; streamed, an answer in words comes as content deltas as it arrives
  // and tool calls whole at the end (one delta per call).
  bool tools = false;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // token strings for log-probabilities
};

class Responder {
 public:
  explicit Responder(ResponseContext context);

  // Non-streaming: adds a chunk's text and log-probabilities to the answer.
  void Add(const engine::StreamChunk& chunk);
  // The whole answer, after the last chunk (which Add has seen) with finish reason stop or
  // length.
  std::string Body(const engine::StreamChunk& last) const;

  // Streaming: the events a chunk makes ("data: {...}\n\n" each): the role event first (chat),
  // a delta when the chunk carries text or tokens, and on the last chunk the finish event, the
  // usage event when asked for, and "data: [DONE]".
  std::string Events(const engine::StreamChunk& chunk);
  // The events that end a stream the serving core failed: an error event and "data: [DONE]".
  static std::string ErrorEvents(const ApiError& error);

 private:
  // Streaming with tools: content deltas of a reply in words as it arrives, or the tool-call
  // deltas on the last chunk, and the finish event, through `choice_event`.
  std::string ToolEvents(const engine::StreamChunk& chunk,
                         const std::function<void(nlohmann::json, bool)>& choice_event);
  // The usage event (when asked for) and "data: [DONE]".
  std::string StreamEnd(const engine::StreamChunk& last) const;

  ResponseContext ctx_;
  std::string text_;
  std::vector<sampling::SampleLogprobs> logprobs_;
  std::vector<int32_t> token_ids_;
  int64_t text_offset_ = 0;  // completions' text_offset of the next token (streaming)
  size_t response_raw_ = 0;  // tools: bytes of a {"response": "..."} string already streamed
  bool sent_role_ = false;
};

// GET /v1/models: the one model this server serves.
std::string ModelsBody(const std::string& model_id, int64_t created, int64_t context_length);
std::string ModelBody(const std::string& model_id, int64_t created, int64_t context_length);

}  // namespace strata::server::http
