#include "bench/load/openai_client.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include "bench/load/json_fields.h"
#include "bench/load/openai_stream.h"
#include "bench/load/sse_parser.h"

namespace strata::bench {

namespace {

using Clock = TokenTimeline::Clock;

constexpr size_t kMaxErrorBody = 512;  // bytes of a non-200 body kept for the message

// A client for one exchange: its own connection, closed afterwards (see the header for why).
std::unique_ptr<httplib::Client> MakeClient(const HttpUrl& url, double timeout_s) {
  auto client = std::make_unique<httplib::Client>(url.host, url.port);
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>((timeout_s - std::floor(timeout_s)) * 1e6);
  client->set_connection_timeout(sec, usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  client->set_keep_alive(false);
  // The request goes out as two writes (head, body): without this, Nagle's algorithm could hold
  // the body back until the head is acknowledged, adding a delayed ACK to TTFT.
  client->set_tcp_nodelay(true);
  client->set_default_headers({{"User-Agent", "strata-bench"}});
  return client;
}

// A short class of a failed body callback's `status` for the error counts.
std::string ErrorKind(const Status& status) {
  switch (status.code()) {
    case StatusCode::kDataLoss:
      return "protocol";
    case StatusCode::kInternal:
      return "server_error";
    default:
      return "io";
  }
}

// A short class of cpp-httplib's `error`; `waited_out`: the socket had been idle for the whole
// time-out when it failed (cpp-httplib reports a read or write time-out as a plain Read/Write).
std::string ErrorKind(httplib::Error error, bool waited_out) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::BindIPAddress:
      return "connect";
    case httplib::Error::Read:
      return waited_out ? "timeout" : "protocol";
    case httplib::Error::Write:
      return waited_out ? "timeout" : "io";
    default:
      return "io";
  }
}

// `error` in words (cpp-httplib's own names are one word: "Read").
std::string Describe(httplib::Error error, const HttpUrl& url) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
      return "cannot connect to " + url.host + ":" + std::to_string(url.port);
    case httplib::Error::Read:
      return "reading the response failed (connection closed, response malformed or cut short)";
    case httplib::Error::Write:
      return "sending the request failed";
    default:
      return "HTTP client error " + httplib::to_string(error);
  }
}

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgumentError("URL must start with http://, got '" + std::string(url) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string_view::npos) out.path_prefix = std::string(rest.substr(slash));
  while (!out.path_prefix.empty() && out.path_prefix.back() == '/') out.path_prefix.pop_back();
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    const std::string_view port = authority.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (ec != std::errc() || end != port.data() + port.size() || out.port <= 0 ||
        out.port > 65535) {
      return InvalidArgumentError("bad port in URL '" + std::string(url) + "'");
    }
    authority = authority.substr(0, colon);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']') {
    authority = authority.substr(1, authority.size() - 2);
  }
  if (authority.empty()) return InvalidArgumentError("no host in URL '" + std::string(url) + "'");
  out.host = std::string(authority);
  return out;
}

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
  nlohmann::ordered_json body;
  if (!model.empty()) body["model"] = model;
  if (spec.has_text) {
    body["prompt"] = spec.prompt_text;
  } else {
    body["prompt"] = spec.prompt_token_ids;
  }
  body["max_tokens"] = spec.output_tokens;
  body["stream"] = true;
  body["temperature"] = spec.temperature;
  if (spec.temperature > 0) {
    body["top_p"] = spec.top_p;
    body["seed"] = spec.seed;
    if (spec.top_k >= 0) body["top_k"] = spec.top_k;
    if (spec.min_p >= 0) body["min_p"] = spec.min_p;
  }
  body["ignore_eos"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return JsonText(body);
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
  const std::unique_ptr<httplib::Client> http = MakeClient(url_, timeout_s_);
  TokenTimeline timeline;
  OpenAiStream stream(&timeline);
  SseParser sse;
  int http_status = 0;
  std::string error_body;
  std::vector<std::string> events;
  Status body_status;               // the first error found in the body; it stops the read
  Clock::time_point last_activity;  // the last time bytes came (for telling time-outs apart)

  httplib::Request request;
  request.method = "POST";
  request.path = url_.path_prefix + "/v1/completions";
  request.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  request.body = RequestBody(spec, model_);
  request.response_handler = [&](const httplib::Response& response) {
    last_activity = Clock::now();
    http_status = response.status;
    return true;
  };
  // Called as each piece of the (de-chunked) body arrives: its events are stamped now.
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    last_activity = now;
    if (http_status != 200) {
      error_body.append(data, std::min(size, kMaxErrorBody - error_body.size()));
      return true;
    }
    events.clear();
    body_status = sse.Feed(std::string_view(data, size), &events);
    for (size_t i = 0; body_status.ok() && i < events.size(); ++i) {
      body_status = stream.OnEvent(events[i], now);
    }
    return body_status.ok();
  };

  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  timeline.MarkSent();
  last_activity = timeline.sent();
  const bool sent = http->send(request, response, error);
  const Clock::time_point end = Clock::now();

  RequestResult result;
  if (!body_status.ok()) {
    result.error_kind = ErrorKind(body_status);
    result.error_message = body_status.ToString();
  } else if (!sent) {
    const bool waited_out = end - last_activity >= std::chrono::duration<double>(timeout_s_);
    result.error_kind = ErrorKind(error, waited_out);
    result.error_message = "POST " + request.path + ": " + Describe(error, url_) +
                           (waited_out ? " (no data for the request time-out)" : "");
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
  const std::unique_ptr<httplib::Client> http = MakeClient(url_, std::min(timeout_s_, 30.0));
  const httplib::Headers headers = {{"Accept", "application/json"}};
  while (true) {
    Status last;
    bool retry = false;
    for (const char* path : {"/props", "/v1/models"}) {
      const httplib::Result response = http->Get(url_.path_prefix + path, headers);
      if (!response) {
        last =
            UnavailableError("GET " + std::string(path) + ": " + Describe(response.error(), url_));
        retry = true;
        break;
      }
      if (response->status == 503) {  // llama-server while loading the model
        last = UnavailableError("GET " + std::string(path) + ": HTTP 503 (still loading?)");
        retry = true;
        break;
      }
      if (response->status != 200) continue;
      const StatusOr<nlohmann::json> info = ParseJsonObject(response->body);
      if (!info.ok()) continue;
      if (model_.empty() && std::string_view(path) == "/v1/models") {
        // A server without /props (strata-server, vLLM) may require "model": use the first
        // one it lists.
        const nlohmann::json* data = FindField(*info, "data");
        if (data != nullptr && data->is_array() && !data->empty()) {
          model_ = std::string(AsString(FindField(data->front(), "id")));
        }
      }
      return response->body;
    }
    if (!retry) return std::string("{}");
    if (std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace strata::bench
