// A local OpenAI-style server for strata-bench's HTTP tests: cpp-httplib on 127.0.0.1 (a free
// port), answering POST [/PREFIX]/v1/completions with the canned scenario named by the request's
// "model" field, and GET /props. Also the SSE events llama.cpp's llama-server streams, for the
// parser tests.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace strata::bench::testing {

// The SSE events' JSON payloads of a 4-token completion (the last, with empty text, carries
// usage and timings), as llama-server sends them.
inline std::vector<std::string> LlamaServerEvents() {
  return {
      R"j({"choices":[{"text":"(","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":"\u0924\u0947","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":")","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":" \\\\","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion"})j",
      R"j({"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion","usage":{"completion_tokens":4,"prompt_tokens":32,"total_tokens":36},"timings":{"cache_n":0,"prompt_n":32,"predicted_n":4}})j",
  };
}

// One SSE event carrying `data`.
inline std::string SseEvent(const std::string& data) { return "data: " + data + "\n\n"; }

// The whole event stream of LlamaServerEvents(), [DONE] included.
inline std::string LlamaServerBody() {
  std::string body;
  for (const std::string& e : LlamaServerEvents()) body += SseEvent(e);
  return body + SseEvent("[DONE]");
}

// A token event of a streamed completion.
inline std::string TextEvent(const std::string& text) {
  return nlohmann::json{{"choices", {{{"text", text}, {"index", 0}}}}}.dump();
}

class FakeOpenAiServer {
 public:
  // Timing of the "slow" scenario.
  static constexpr int kSlowFirstMs = 100;
  static constexpr int kSlowGapMs = 150;
  static constexpr int kSlowTokens = 4;

  // The scenarios, by the request's "model":
  //   "llama"       LlamaServerBody(), chunked, one chunk per event (as llama-server)
  //   "dribble"     the same body, chunked in 7-byte pieces
  //   "whole"       the same body with a Content-Length, in one write
  //   "slow"        kSlowTokens token events, the first after kSlowFirstMs, then kSlowGapMs apart
  //   "stall"       the headers, then nothing for 3 s
  //   "cut"         two events of a 10,000-byte body, then the connection drops
  //   "error_event" a token event, then {"error": {"message": "context too long"}}
  //   "not_json"    "data: not json"
  //   "empty"       200 with an empty body
  //   "http_503"    503 with {"error": {"message": "Loading model"}}
  // `props`: GET /props answers (as llama-server); otherwise only GET /v1/models does (as
  // strata-server), listing the model "llama".
  explicit FakeOpenAiServer(bool props = true) {
    server_.Post(
        R"((/[^/]+)?/v1/completions)",
        [this](const httplib::Request& req, httplib::Response& res) { Complete(req, res); });
    if (props) {
      server_.Get("/props", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"model_path":"fake.gguf","total_slots":2})", "application/json");
      });
    }
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"llama","object":"model"}]})",
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FakeOpenAiServer(const FakeOpenAiServer&) = delete;
  FakeOpenAiServer& operator=(const FakeOpenAiServer&) = delete;
  ~FakeOpenAiServer() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

  // The last completion request as the server saw it.
  struct Seen {
    std::string path;
    std::string body;
    httplib::Headers headers;
  };
  Seen last_request() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_;
  }

 private:
  // Sleeps `ms`, or less once the server is stopping; false then.
  bool Pause(int ms) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      if (stopping_) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return !stopping_;
  }

  // Streams `pieces` chunked, one chunk each, after `delays_ms[i]` (0 when absent).
  void StreamChunks(httplib::Response& res, std::vector<std::string> pieces,
                    std::vector<int> delays_ms = {}) {
    auto next = std::make_shared<size_t>(0);
    res.set_chunked_content_provider(
        "text/event-stream", [this, pieces = std::move(pieces), delays_ms = std::move(delays_ms),
                              next](size_t, httplib::DataSink& sink) {
          const size_t i = (*next)++;
          if (i < delays_ms.size() && !Pause(delays_ms[i])) return false;
          if (i < pieces.size() && !sink.write(pieces[i].data(), pieces[i].size())) return false;
          if (i + 1 >= pieces.size()) sink.done();
          return true;
        });
  }

  void Complete(const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_ = Seen{req.path, req.body, req.headers};
    }
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    const std::string scenario =
        body.is_object() && body.contains("model") && body["model"].is_string()
            ? body["model"].get<std::string>()
            : "llama";
    std::vector<std::string> events;
    for (const std::string& e : LlamaServerEvents()) events.push_back(SseEvent(e));
    events.push_back(SseEvent("[DONE]"));
    if (scenario == "llama") {
      StreamChunks(res, events);
    } else if (scenario == "dribble") {
      const std::string all = LlamaServerBody();
      std::vector<std::string> pieces;
      for (size_t at = 0; at < all.size(); at += 7) pieces.push_back(all.substr(at, 7));
      StreamChunks(res, pieces);
    } else if (scenario == "whole") {
      res.set_content(LlamaServerBody(), "text/event-stream");
    } else if (scenario == "slow") {
      std::vector<std::string> pieces;
      std::vector<int> delays;
      for (int i = 0; i < kSlowTokens; ++i) {
        pieces.push_back(SseEvent(TextEvent("t" + std::to_string(i))));
        delays.push_back(i == 0 ? kSlowFirstMs : kSlowGapMs);
      }
      pieces.push_back(SseEvent("[DONE]"));
      StreamChunks(res, pieces, delays);
    } else if (scenario == "stall") {
      StreamChunks(res, {SseEvent(TextEvent("late")), SseEvent("[DONE]")}, {3000});
    } else if (scenario == "cut") {
      const std::string start = events[0] + events[1];
      res.set_content_provider(10000, "text/event-stream",
                               [start](size_t offset, size_t, httplib::DataSink& sink) {
                                 if (offset == 0) sink.write(start.data(), start.size());
                                 return offset == 0;
                               });
    } else if (scenario == "error_event") {
      StreamChunks(res, {SseEvent(TextEvent("a")),
                         SseEvent(R"({"error":{"code":400,"message":"context too long"}})"),
                         SseEvent("[DONE]")});
    } else if (scenario == "not_json") {
      StreamChunks(res, {SseEvent("not json"), SseEvent("[DONE]")});
    } else if (scenario == "empty") {
      res.set_content("", "text/event-stream");
    } else {  // "http_503"
      res.status = 503;
      res.set_content(R"({"error":{"code":503,"message":"Loading model"}})", "application/json");
    }
  }

  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  Seen last_;  // guarded by mutex_
};

}  // namespace strata::bench::testing
