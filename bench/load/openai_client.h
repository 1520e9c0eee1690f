// OpenAiClient: the `--target openai` client — streaming POST /v1/completions through
// cpp-httplib, one connection and one thread per request in flight.
//
// Request body: {"model"?, "prompt": [token ids] or "text", "max_tokens": N, "stream": true,
// "temperature": 0, "ignore_eos": true, "stream_options": {"include_usage": true}}.
// The body's bytes go to SseParser as they arrive and each event to OpenAiStream, stamped with
// the time its bytes were received (TTFT and gaps are timed here, client side).
//
// Connections: each request opens its own ("Connection: close"), as llama-server and
// strata-server serve a kept-alive connection on one pool thread until it closes: with more
// requests in flight than server threads, reused connections would be served again and again
// while new ones wait in the server's queue, which skews TTFT.
//
// Errors (RequestResult::error_kind): "connect" (no connection), "timeout" (the connect or one
// socket wait outlasted `timeout_s`), "protocol" (malformed HTTP or SSE, a response cut short,
// a stream without events), "server_error" (an event carrying "error"), "http_NNN" (a status
// other than 200; the message quotes the start of the body), "io" (anything else).
//
// Thread rules: Start from one thread (the runner's); `done` runs on the request's own thread.
// The destructor joins every request thread, so it waits for requests in flight.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/load/target_client.h"

namespace strata::bench {

// "http://HOST[:PORT][/PREFIX]" (port 80 by default; a trailing "/" of the prefix dropped).
struct HttpUrl {
  std::string host;
  int port = 80;
  std::string path_prefix;  // "" or "/something"
};

// kInvalidArgument for another scheme, a bad port or no host.
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

class OpenAiClient : public TargetClient {
 public:
  // `model`: sent as "model" when not empty (see ServerInfoJson); `timeout_s` bounds the connect
  // and each socket wait, not the whole exchange.
  OpenAiClient(HttpUrl url, std::string model, double timeout_s);
  ~OpenAiClient() override;

  void Start(int64_t index, const RequestSpec& spec, DoneCallback done) override;
  // GET /props (llama.cpp), else GET /v1/models; "{}" when neither answers with a JSON object.
  // Without a `model`, requests then name the first model /v1/models lists (strata-server
  // requires one). Call it before the first Start.
  StatusOr<std::string> ServerInfoJson(double wait_s) override;

  // The JSON body of a request (exposed for tests).
  static std::string RequestBody(const RequestSpec& spec, const std::string& model);

 private:
  RequestResult Run(const RequestSpec& spec) const;
  void JoinFinished();

  HttpUrl url_;
  std::string model_;
  double timeout_s_;
  std::mutex mutex_;
  std::map<int64_t, std::thread> threads_;  // by request index
  std::vector<int64_t> finished_;           // guarded by mutex_
};

}  // namespace strata::bench
