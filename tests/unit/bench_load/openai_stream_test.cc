#include "bench/load/openai_stream.h"

#include <gtest/gtest.h>

#include "bench/load/sse_parser.h"
#include "unit/bench_load/http_stream_fixture.h"

namespace strata::bench {
namespace {

using Clock = TokenTimeline::Clock;
using std::chrono::milliseconds;

TEST(OpenAiStream, CountsOneTokenPerTextEventAndKeepsTheServerUsage) {
  const Clock::time_point t0 = Clock::now();
  TokenTimeline timeline;
  timeline.MarkSent(t0);
  OpenAiStream stream(&timeline);
  int ms = 100;
  for (const std::string& e : testing::LlamaServerEvents()) {
    ASSERT_TRUE(stream.OnEvent(e, t0 + milliseconds(ms)).ok()) << e;
    ms += 10;
  }
  EXPECT_FALSE(stream.done());
  ASSERT_TRUE(stream.OnEvent("[DONE]", t0 + milliseconds(200)).ok());
  EXPECT_TRUE(stream.done());
  EXPECT_EQ(timeline.tokens(), 4);  // the final event has empty text
  EXPECT_EQ(stream.completion_tokens().value_or(-1), 4);
  EXPECT_EQ(stream.prompt_tokens().value_or(-1), 32);
  EXPECT_EQ(stream.finish_reason(), "length");
  const RequestResult r = timeline.Finish(t0 + milliseconds(200));
  EXPECT_NEAR(r.ttft_s, 0.100, 1e-9);
  ASSERT_EQ(r.itl_s.size(), 3u);
  EXPECT_NEAR(r.itl_s[2], 0.010, 1e-9);
}

TEST(OpenAiStream, EventStreamSplitAnywhereGivesTheSameTokens) {
  const std::string body = testing::LlamaServerBody();
  for (size_t split = 0; split <= body.size(); ++split) {
    SseParser sse;
    TokenTimeline timeline;
    timeline.MarkSent(Clock::now());
    OpenAiStream stream(&timeline);
    for (std::string_view part :
         {std::string_view(body).substr(0, split), std::string_view(body).substr(split)}) {
      std::vector<std::string> events;
      ASSERT_TRUE(sse.Feed(part, &events).ok());
      for (const std::string& e : events) ASSERT_TRUE(stream.OnEvent(e, Clock::now()).ok());
    }
    EXPECT_TRUE(stream.done()) << split;
    EXPECT_EQ(timeline.tokens(), 4) << split;
  }
}

TEST(OpenAiStream, ReadsChatDeltasNativeTokensAndTimings) {
  TokenTimeline timeline;
  timeline.MarkSent(Clock::now());
  OpenAiStream stream(&timeline);
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"delta":{"role":"assistant"}}]})", Clock::now()).ok());
  EXPECT_EQ(timeline.tokens(), 0);
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"delta":{"content":"hi"}}]})", Clock::now()).ok());
  EXPECT_EQ(timeline.tokens(), 1);
  ASSERT_TRUE(stream.OnEvent(R"({"content":"ab","tokens":[5,6]})", Clock::now()).ok());
  EXPECT_EQ(timeline.tokens(), 3);
  ASSERT_TRUE(
      stream.OnEvent(R"({"content":"","timings":{"predicted_n":3,"prompt_n":7}})", Clock::now())
          .ok());
  EXPECT_EQ(stream.completion_tokens().value_or(-1), 3);
  EXPECT_EQ(stream.prompt_tokens().value_or(-1), 7);
}

TEST(OpenAiStream, MalformedOrErrorEventsAreErrorsNotCrashes) {
  TokenTimeline timeline;
  OpenAiStream stream(&timeline);
  for (const char* bad : {"{", "not json", "[1,2]", "{\"choices\": [", "\"str\"", ""}) {
    EXPECT_EQ(stream.OnEvent(bad, Clock::now()).code(), StatusCode::kDataLoss) << bad;
  }
  const Status error =
      stream.OnEvent(R"({"error":{"code":400,"message":"context too long"}})", Clock::now());
  EXPECT_EQ(error.code(), StatusCode::kInternal);
  EXPECT_NE(error.message().find("context too long"), std::string::npos);
  // Odd but valid shapes count no tokens.
  EXPECT_TRUE(stream.OnEvent(R"({"choices":[]})", Clock::now()).ok());
  EXPECT_TRUE(stream.OnEvent(R"({"choices":[3],"usage":"x"})", Clock::now()).ok());
  EXPECT_EQ(timeline.tokens(), 0);
}

}  // namespace
}  // namespace strata::bench
