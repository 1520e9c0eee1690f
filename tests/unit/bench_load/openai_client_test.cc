#include "bench/load/openai_client.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>

#include "bench/load/json_fields.h"
#include "unit/bench_load/http_stream_fixture.h"

namespace strata::bench {
namespace {

using testing::FakeOpenAiServer;

// Sends one request (the fake server's scenario as the model) and waits for its result.
RequestResult RunOne(const HttpUrl& url, const std::string& scenario, double timeout_s = 10.0) {
  OpenAiClient client(url, scenario, timeout_s);
  RequestSpec spec;
  spec.prompt_token_ids = {11, 22, 33};
  spec.output_tokens = 4;
  std::promise<RequestResult> promise;
  std::future<RequestResult> future = promise.get_future();
  client.Start(0, spec, [&promise](RequestResult r) { promise.set_value(std::move(r)); });
  return future.get();
}

HttpUrl Local(int port, std::string prefix = "") {
  return HttpUrl{"127.0.0.1", port, std::move(prefix)};
}

TEST(ParseHttpUrl, ReadsHostPortAndPrefix) {
  auto u = ParseHttpUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->path_prefix, "");
  u = ParseHttpUrl("http://example:81/api/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 81);
  EXPECT_EQ(u->path_prefix, "/api");
  u = ParseHttpUrl("http://localhost");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  u = ParseHttpUrl("http://[::1]:9");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(ParseHttpUrl("https://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("http://x:99999").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("http://:80").status().code(), StatusCode::kInvalidArgument);
}

TEST(OpenAiClient, RequestBodyAsksForGreedyIgnoreEosTokenIds) {
  RequestSpec spec;
  spec.prompt_token_ids = {11, 22, 33};
  spec.output_tokens = 16;
  const auto body = ParseJsonObject(OpenAiClient::RequestBody(spec, "m"));
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(body->at("model"), "m");
  EXPECT_EQ(body->at("prompt"), nlohmann::json::array({11, 22, 33}));
  EXPECT_EQ(body->at("max_tokens"), 16);
  EXPECT_EQ(body->at("stream"), true);
  EXPECT_EQ(body->at("ignore_eos"), true);
  EXPECT_EQ(body->at("temperature"), 0);
  EXPECT_FALSE(body->contains("top_p"));  // greedy: no sampling fields
  EXPECT_FALSE(body->contains("seed"));
  EXPECT_EQ(body->at("stream_options").at("include_usage"), true);

  spec.has_text = true;
  spec.prompt_text = "say \"hi\"\n";
  const auto text_body = ParseJsonObject(OpenAiClient::RequestBody(spec, ""));
  ASSERT_TRUE(text_body.ok());
  EXPECT_EQ(text_body->at("prompt"), "say \"hi\"\n");
  EXPECT_FALSE(text_body->contains("model"));
}

TEST(OpenAiClient, ASampledRequestSendsTopPItsSeedAndTheFiltersGiven) {
  RequestSpec spec;
  spec.prompt_token_ids = {11};
  spec.output_tokens = 4;
  spec.temperature = 1.0;
  spec.top_p = 0.95;
  spec.seed = 1234;
  const auto body = ParseJsonObject(OpenAiClient::RequestBody(spec, "m"));
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(body->at("temperature"), 1.0);
  EXPECT_EQ(body->at("top_p"), 0.95);
  EXPECT_EQ(body->at("seed"), 1234);
  EXPECT_FALSE(body->contains("top_k"));  // not given: the server's default
  EXPECT_FALSE(body->contains("min_p"));
  spec.top_k = 0;
  spec.min_p = 0.05;
  const auto filtered = ParseJsonObject(OpenAiClient::RequestBody(spec, "m"));
  ASSERT_TRUE(filtered.ok());
  EXPECT_EQ(filtered->at("top_k"), 0);
  EXPECT_EQ(filtered->at("min_p"), 0.05);
}

TEST(OpenAiClient, PostsTheStreamingRequestUnderThePrefixOnItsOwnConnection) {
  FakeOpenAiServer server;
  const RequestResult r = RunOne(Local(server.port(), "/api"), "llama");
  ASSERT_TRUE(r.ok) << r.error_message;
  const FakeOpenAiServer::Seen seen = server.last_request();
  EXPECT_EQ(seen.path, "/api/v1/completions");
  const auto header = [&](const char* name) {
    const auto it = seen.headers.find(name);
    return it == seen.headers.end() ? std::string() : it->second;
  };
  EXPECT_EQ(header("Connection"), "close");
  EXPECT_EQ(header("Content-Type"), "application/json");
  EXPECT_EQ(header("Accept"), "text/event-stream");
  EXPECT_EQ(header("User-Agent"), "strata-bench");
  const auto body = ParseJsonObject(seen.body);
  ASSERT_TRUE(body.ok()) << seen.body;
  EXPECT_EQ(body->at("prompt"), nlohmann::json::array({11, 22, 33}));
  EXPECT_EQ(body->at("max_tokens"), 4);
}

TEST(OpenAiClient, ReadsTheEventsHoweverTheBodyIsFramed) {
  FakeOpenAiServer server;
  for (const char* scenario : {"llama", "dribble", "whole"}) {
    const RequestResult r = RunOne(Local(server.port()), scenario);
    ASSERT_TRUE(r.ok) << scenario << ": " << r.error_message;
    EXPECT_EQ(r.output_tokens, 4) << scenario;
    EXPECT_EQ(r.prompt_tokens, 32) << scenario;  // the server's usage, not the 3 ids sent
    EXPECT_EQ(r.requested_output_tokens, 4) << scenario;
    EXPECT_EQ(r.itl_s.size(), 3u) << scenario;
    EXPECT_GT(r.ttft_s, 0) << scenario;
    EXPECT_GE(r.e2e_s, r.ttft_s) << scenario;
  }
}

TEST(OpenAiClient, TimesEachTokenWhenItsBytesArriveNotAtTheEnd) {
  FakeOpenAiServer server;
  const RequestResult r = RunOne(Local(server.port()), "slow");
  ASSERT_TRUE(r.ok) << r.error_message;
  EXPECT_EQ(r.output_tokens, FakeOpenAiServer::kSlowTokens);
  EXPECT_GE(r.ttft_s, 0.9 * FakeOpenAiServer::kSlowFirstMs / 1e3);
  ASSERT_EQ(r.itl_s.size(), static_cast<size_t>(FakeOpenAiServer::kSlowTokens - 1));
  for (const double gap : r.itl_s) EXPECT_GE(gap, 0.9 * FakeOpenAiServer::kSlowGapMs / 1e3);
}

TEST(OpenAiClient, ClassifiesFailuresForTheErrorCounts) {
  FakeOpenAiServer server;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"http_503", "http_503", "Loading model"},
      {"error_event", "server_error", "context too long"},
      {"not_json", "protocol", "SSE event"},
      {"empty", "protocol", "without events"},
      {"cut", "protocol", "POST /v1/completions"},
  };
  for (const auto& [scenario, kind, needle] : cases) {
    const RequestResult r = RunOne(Local(server.port()), scenario);
    EXPECT_FALSE(r.ok) << scenario;
    EXPECT_EQ(r.error_kind, kind) << scenario << ": " << r.error_message;
    EXPECT_NE(r.error_message.find(needle), std::string::npos)
        << scenario << ": " << r.error_message;
  }
}

TEST(OpenAiClient, ReportsATimeoutAndARefusedConnection) {
  int port = 0;
  {
    FakeOpenAiServer server;
    port = server.port();
    const RequestResult r = RunOne(Local(port), "stall", /*timeout_s=*/0.3);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_kind, "timeout") << r.error_message;
  }
  // The server is gone: nothing listens on its port any more.
  const RequestResult r = RunOne(Local(port), "llama");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_kind, "connect") << r.error_message;
}

TEST(OpenAiClient, ServerInfoIsPropsOrAnErrorOnceTheWaitIsOver) {
  int port = 0;
  {
    FakeOpenAiServer server;
    port = server.port();
    OpenAiClient client(Local(port), "", 5.0);
    const StatusOr<std::string> info = client.ServerInfoJson(1.0);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    const auto props = ParseJsonObject(*info);
    ASSERT_TRUE(props.ok()) << *info;
    EXPECT_EQ(props->at("total_slots"), 2);
  }
  OpenAiClient client(Local(port), "", 5.0);
  EXPECT_EQ(client.ServerInfoJson(0.3).status().code(), StatusCode::kUnavailable);
}

TEST(OpenAiClient, WithoutPropsRequestsNameTheFirstListedModel) {
  FakeOpenAiServer server(/*props=*/false);
  OpenAiClient client(Local(server.port()), "", 5.0);
  const StatusOr<std::string> info = client.ServerInfoJson(1.0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_NE(info->find("\"data\""), std::string::npos) << *info;
  std::promise<RequestResult> promise;
  std::future<RequestResult> future = promise.get_future();
  RequestSpec spec;
  spec.prompt_token_ids = {5};
  spec.output_tokens = 4;
  client.Start(0, spec, [&promise](RequestResult r) { promise.set_value(std::move(r)); });
  const RequestResult r = future.get();
  EXPECT_TRUE(r.ok) << r.error_message;
  const auto body = ParseJsonObject(server.last_request().body);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->at("model"), "llama");
}

}  // namespace
}  // namespace strata::bench
