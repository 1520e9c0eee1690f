// A streamed completion as llama.cpp's llama-server sends it (HTTP/1.1, chunked, one SSE event
// per chunk, a final event with usage and timings, then [DONE]), for the parser tests.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace strata::bench::testing {

// The SSE events' JSON payloads (the last before [DONE] carries usage and timings).
inline std::vector<std::string> LlamaServerEvents() {
  return {
      R"j({"choices":[{"text":"(","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":"\u0924\u0947","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":")","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":" \\\\","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion","usage":{"completion_tokens":4,"prompt_tokens":32,"total_tokens":36},"timings":{"cache_n":0,"prompt_n":32,"predicted_n":4}})j",
  };
}

// `body` in chunked transfer coding, one chunk per piece (lower-case hex sizes, as llama-server).
inline std::string Chunked(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", p.size());
    out += size;
    out += p;
    out += "\r\n";
  }
  out += "0\r\n\r\n";
  return out;
}

// The whole HTTP response of the events above.
inline std::string LlamaServerResponse() {
  std::vector<std::string> pieces;
  for (const std::string& e : LlamaServerEvents()) pieces.push_back("data: " + e + "\n\n");
  pieces.push_back("data: [DONE]\n\n");
  return "HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nContent-Type: text/event-stream\r\n"
         "Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n" +
         Chunked(pieces);
}

}  // namespace strata::bench::testing
