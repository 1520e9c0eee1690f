// OpenAiStream: reads the SSE events of an OpenAI-style streaming completion (/v1/completions or
// /v1/chat/completions, as llama.cpp's llama-server and vLLM send them) into a TokenTimeline.
//
// Token counting: an event's tokens are the length of its "tokens" array when it has one
// (llama.cpp's native field), otherwise 1 when choices[0].text (or choices[0].delta.content) is
// non-empty, else 0. llama-server sends one event per token, except that it holds back a token
// ending inside a UTF-8 character and sends it with the next one (then that gap covers two
// tokens). The server's own counts, from "usage" (completion_tokens, prompt_tokens) or
// llama.cpp's "timings" (predicted_n, prompt_n) in the last event, are kept when present and
// take precedence for the token totals.
//
// Thread rules: not thread-safe; one request's thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bench/load/token_timeline.h"
#include "strata/common/status.h"

namespace strata::bench {

class OpenAiStream {
 public:
  explicit OpenAiStream(TokenTimeline* timeline) : timeline_(timeline) {}

  // One event's data received at `t`. "[DONE]" ends the stream. kDataLoss for a payload that
  // is not a JSON object; kInternal (message from the server) for an event carrying "error".
  Status OnEvent(std::string_view data, TokenTimeline::Clock::time_point t);

  bool done() const { return done_; }
  std::optional<int64_t> completion_tokens() const { return completion_tokens_; }
  std::optional<int64_t> prompt_tokens() const { return prompt_tokens_; }
  const std::string& finish_reason() const { return finish_reason_; }

 private:
  TokenTimeline* timeline_;
  bool done_ = false;
  std::optional<int64_t> completion_tokens_;
  std::optional<int64_t> prompt_tokens_;
  std::string finish_reason_;
};

}  // namespace strata::bench
