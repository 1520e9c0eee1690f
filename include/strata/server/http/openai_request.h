// The OpenAI-compatible request bodies (/v1/completions, /v1/chat/completions) read into the
// serving core's GenerationInput, and the serving core's Status turned into OpenAI's error
// shape. JSON comes from nlohmann-json; only the reading of fields lives here.
//
// What is accepted (docs/http-api.md has the full table): model, prompt (a string, one string
// in a list, or a list of token ids), messages (roles system/developer/user/assistant; content a
// string or a list of text parts), max_tokens / max_completion_tokens, temperature, top_p,
// frequency_penalty, presence_penalty, stop (string or list), seed, logprobs / top_logprobs,
// n (1 only), best_of (1 only), stream, stream_options.include_usage, user; and vLLM-style
// extras: top_k, min_p, repetition_penalty, ignore_eos, priority, stop_token_ids,
// add_generation_prompt, request_id. Unknown fields are ignored, as OpenAI clients send many;
// fields that would change the answer in ways Strata does not implement (echo, suffix,
// logit_bias, tools, a non-text response_format, n > 1) are refused with 400 naming them.
//
// Range checks are not made here: the RequestTranslator makes them once for every transport,
// and ApiErrorFromStatus renames its field names to OpenAI's ("sampling.top_p" -> "top_p").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/common/status.h"
#include "strata/server/generation_input.h"
#include "strata/server/http/tool_calls.h"

namespace strata::server::http {

enum class Endpoint { kCompletions, kChatCompletions };

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;            // "" is sent as null
  std::string code;             // "" is sent as null
  int retry_after_seconds = 1;  // 429: the Retry-After header
};

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  GenerationInput input;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report log-probabilities
  int32_t top_logprobs = 0;    // alternatives per token in the report
  std::string user;
  // Chat: tools, tool_choice, parallel_tool_calls (tool_calls.h). When active, the reply schema
  // is the input's output format and the answer is turned back into tool calls.
  ToolRequest tools;
};

// Reads `body`; false with *error set (400, naming the field as `param`) when the body is not
// a JSON object or a field has the wrong type or an unsupported value. `default_max_tokens`
// applies when the body gives neither max_tokens nor max_completion_tokens (0: leave it to the
// server's default).
bool ParseOpenAiRequest(Endpoint endpoint, std::string_view body, int32_t default_max_tokens,
                        OpenAiRequest* out, ApiError* error);

// The OpenAI error for a Status from the serving core: INVALID_ARGUMENT and
// FAILED_PRECONDITION 400 (param: the field the message starts with, renamed to OpenAI's),
// NOT_FOUND 404, RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, CANCELLED 499, others 500.
ApiError ApiErrorFromStatus(const Status& status, Endpoint endpoint);

// {"error": {...}} as JSON text.
std::string ErrorBody(const ApiError& error);

}  // namespace strata::server::http
