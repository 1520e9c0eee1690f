// OpenAiClient: the `--target openai` client — streaming POST /v1/completions over the bench's
// own HTTP/1.1 client, one connection and one thread per request in flight.
//
// Request body: {"model"?, "prompt": [token ids] or "text", "max_tokens": N, "stream": true,
// "temperature": 0, "ignore_eos": true, "stream_options": {"include_usage": true}}.
// Measurements follow OpenAiStream's rules; TTFT and gaps are timed here, client side.
//
// Thread rules: Start from one thread (the runner's); `done` runs on the request's own thread.
// The destructor joins every request thread, so it waits for requests in flight.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/load/http_client.h"
#include "bench/load/target_client.h"

namespace strata::bench {

class OpenAiClient : public TargetClient {
 public:
  // `model`: sent as "model" when not empty; `timeout_s` bounds each socket wait.
  OpenAiClient(HttpUrl url, std::string model, double timeout_s);
  ~OpenAiClient() override;

  void Start(int64_t index, const RequestSpec& spec, DoneCallback done) override;
  // GET /props (llama.cpp), else GET /v1/models; "{}" when neither answers with JSON.
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
