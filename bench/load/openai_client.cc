#include "bench/load/openai_client.h"

#include <chrono>

#include "bench/load/json_value.h"
#include "bench/load/json_writer.h"
#include "bench/load/openai_stream.h"
#include "bench/load/sse_parser.h"

namespace strata::bench {

namespace {

// A short class of `status` for the error counts.
std::string ErrorKind(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnavailable:
      return "connect";
    case StatusCode::kDeadlineExceeded:
      return "timeout";
    case StatusCode::kDataLoss:
      return "protocol";
    case StatusCode::kInternal:
      return "server_error";
    default:
      return "io";
  }
}

}  // namespace

OpenAiClient::OpenAiClient(HttpUrl url, std::string model, double timeout_s)
    : url_(std::move(url)), model_(std::move(model)), timeout_s_(timeout_s) {}

OpenAiClient::~OpenAiClient() {
  std::map<int64_t, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& [index, thread] : threads) thread.join();
}

std::string OpenAiClient::RequestBody(const RequestSpec& spec, const std::string& model) {
  JsonWriter w;
  w.BeginObject();
  if (!model.empty()) w.Key("model").String(model);
  w.Key("prompt");
  if (spec.has_text) {
    w.String(spec.prompt_text);
  } else {
    w.BeginArray();
    for (int32_t id : spec.prompt_token_ids) w.Int(id);
    w.EndArray();
  }
  w.Key("max_tokens").Int(spec.output_tokens);
  w.Key("stream").Bool(true);
  w.Key("temperature").Number(0);
  w.Key("ignore_eos").Bool(true);
  w.Key("stream_options").BeginObject().Key("include_usage").Bool(true).EndObject();
  w.EndObject();
  return w.text();
}

void OpenAiClient::JoinFinished() {
  std::vector<std::thread> to_join;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t index : finished_) {
      auto it = threads_.find(index);
      if (it == threads_.end()) continue;
      to_join.push_back(std::move(it->second));
      threads_.erase(it);
    }
    finished_.clear();
  }
  for (std::thread& t : to_join) t.join();
}

void OpenAiClient::Start(int64_t index, const RequestSpec& spec, DoneCallback done) {
  JoinFinished();
  std::lock_guard<std::mutex> lock(mutex_);
  threads_[index] = std::thread([this, index, spec, done = std::move(done)]() {
    RequestResult result = Run(spec);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.push_back(index);
    }
    done(std::move(result));
  });
}

RequestResult OpenAiClient::Run(const RequestSpec& spec) const {
  const std::string body = RequestBody(spec, model_);
  TokenTimeline timeline;
  OpenAiStream stream(&timeline);
  SseParser sse;
  int http_status = 0;
  std::string error_body;
  std::vector<std::string> events;
  timeline.MarkSent();
  const Status status = HttpPostStream(
      url_, "/v1/completions", body, timeout_s_,
      [&](int code) {
        http_status = code;
        return OkStatus();
      },
      [&](std::string_view piece) -> Status {
        const auto now = TokenTimeline::Clock::now();
        if (http_status != 200) {
          error_body.append(piece.substr(0, 512));
          return OkStatus();
        }
        events.clear();
        STRATA_RETURN_IF_ERROR(sse.Feed(piece, &events));
        for (const std::string& event : events) STRATA_RETURN_IF_ERROR(stream.OnEvent(event, now));
        return OkStatus();
      });
  const auto end = TokenTimeline::Clock::now();
  RequestResult result;
  if (!status.ok()) {
    result.error_kind = ErrorKind(status);
    result.error_message = status.ToString();
  } else if (http_status != 200) {
    result.error_kind = "http_" + std::to_string(http_status);
    result.error_message = "HTTP " + std::to_string(http_status) + ": " + error_body.substr(0, 300);
  } else if (!stream.done() && timeline.tokens() == 0) {
    result.error_kind = "protocol";
    result.error_message = "stream ended without events";
  } else {
    result = timeline.Finish(end);
    if (stream.completion_tokens()) result.output_tokens = *stream.completion_tokens();
    result.prompt_tokens = stream.prompt_tokens().value_or(
        spec.has_text ? 0 : static_cast<int64_t>(spec.prompt_token_ids.size()));
  }
  result.requested_output_tokens = spec.output_tokens;
  return result;
}

StatusOr<std::string> OpenAiClient::ServerInfoJson(double wait_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(wait_s, 0.0));
  while (true) {
    Status last;
    bool retry = false;
    for (const char* path : {"/props", "/v1/models"}) {
      StatusOr<HttpResponse> response = HttpGet(url_, path, std::min(timeout_s_, 30.0));
      if (!response.ok()) {
        last = response.status();
        retry = true;
        break;
      }
      if (response->status_code == 503) {  // llama-server while loading the model
        last = UnavailableError("GET " + std::string(path) + ": HTTP 503 (still loading?)");
        retry = true;
        break;
      }
      if (response->status_code == 200 && ParseJsonObject(response->body).ok()) {
        return response->body;
      }
    }
    if (!retry) return std::string("{}");
    if (std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace strata::bench
