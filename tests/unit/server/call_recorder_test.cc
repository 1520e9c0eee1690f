// CallRecorder: how a finished request ends its call, whatever the transport, and what it
// counts on the way.
#include "strata/server/call_recorder.h"

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>

#include "support/prometheus_text.h"

namespace strata::server {
namespace {

std::optional<double> Sample(const std::string& text, const std::string& series) {
  return strata::testing::MetricSample(text, series);
}

engine::StreamChunk Last(sampling::FinishReason reason, Status error = OkStatus()) {
  engine::StreamChunk c;
  c.finish_reason = reason;
  c.error = std::move(error);
  c.usage.prompt_tokens = 5;
  c.usage.completion_tokens = 2;
  c.timing.queue_seconds = 0.01;
  c.timing.time_to_first_token_seconds = 0.02;
  c.timing.total_seconds = 0.05;
  return c;
}

TEST(CallRecorder, EachEndingMapsToOneStatusAndErrorsAreCountedByCode) {
  metrics::ServerMetrics m({"0.1.0", "abc", "cpu", "m"});
  constexpr auto kNone = CallRecorder::Cancel::kNone;
  constexpr auto kClient = CallRecorder::Cancel::kClient;
  constexpr auto kDeadline = CallRecorder::Cancel::kDeadline;
  struct Case {
    sampling::FinishReason reason;
    CallRecorder::Cancel cancel;
    Status error;
    StatusCode want;
  };
  const Case cases[] = {
      {sampling::FinishReason::kStop, kNone, OkStatus(), StatusCode::kOk},
      {sampling::FinishReason::kLength, kNone, OkStatus(), StatusCode::kOk},
      {sampling::FinishReason::kCancelled, kClient, OkStatus(), StatusCode::kCancelled},
      {sampling::FinishReason::kCancelled, kDeadline, OkStatus(), StatusCode::kDeadlineExceeded},
      {sampling::FinishReason::kCancelled, kNone, OkStatus(), StatusCode::kUnavailable},
      {sampling::FinishReason::kError, kNone, OkStatus(), StatusCode::kInternal},
      {sampling::FinishReason::kError, kNone, InvalidArgumentError("bad row"),
       StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    CallRecorder recorder(&m, "r1");
    const Status got = recorder.OnLast(Last(c.reason, c.error), c.cancel);
    EXPECT_EQ(got.code(), c.want) << got.ToString();
    if (!c.error.ok()) {
      EXPECT_EQ(got.message(), "bad row");
    }
  }
  const std::string text = m.Serialize();
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"CANCELLED\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"DEADLINE_EXCEEDED\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"UNAVAILABLE\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"INTERNAL\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"INVALID_ARGUMENT\"}"), 1);
}

TEST(CallRecorder, ChunksCountTokensAndSpreadTheGapOverSeveral) {
  metrics::ServerMetrics m({"0.1.0", "abc", "cpu", "m"});
  CallRecorder recorder(&m, "r2");
  engine::StreamChunk a;
  a.token_ids = {7};
  a.time = std::chrono::steady_clock::time_point(std::chrono::seconds(10));
  engine::StreamChunk b;
  b.token_ids = {8, 9, 10};  // a verified speculative run
  b.time = a.time + std::chrono::milliseconds(300);
  engine::StreamChunk empty;  // text only: nothing counted
  recorder.OnChunk(a);
  recorder.OnChunk(b);
  recorder.OnChunk(empty);
  const std::string text = m.Serialize();
  EXPECT_EQ(Sample(text, "strata_generation_tokens_total"), 4);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_count"), 3);
  EXPECT_NEAR(*Sample(text, "strata_inter_token_latency_seconds_sum"), 0.3, 1e-9);
}

}  // namespace
}  // namespace strata::server
