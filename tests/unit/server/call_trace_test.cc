#include "strata/server/call_trace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class RecordingSink final : public trace::SpanSink {
 public:
  void Emit(std::vector<trace::Span> spans) override { calls.push_back(std::move(spans)); }
  std::vector<std::vector<trace::Span>> calls;
};

const trace::AttributeValue* Find(const trace::Span& span, const std::string& key) {
  for (const trace::Attribute& a : span.attributes) {
    if (a.key == key) return &a.value;
  }
  return nullptr;
}

// The last chunk of a request the engine computed: submitted at `t0`, scheduled 1 ms later,
// two prompt chunks, first token at 4 ms, finished at 9 ms.
engine::StreamChunk EngineLast(Clock::time_point t0) {
  engine::StreamChunk last;
  last.finish_reason = sampling::FinishReason::kStop;
  last.usage.prompt_tokens = 12;
  last.usage.completion_tokens = 5;
  engine::RequestStages& st = last.timing.stages;
  st.submitted = t0;
  st.first_scheduled = t0 + milliseconds(1);
  st.prefill_chunks = {{t0 + milliseconds(1), t0 + milliseconds(2), 0, 8},
                       {t0 + milliseconds(2), t0 + milliseconds(3), 8, 4}};
  st.first_token = t0 + milliseconds(4);
  st.finished = t0 + milliseconds(9);
  last.timing.detokenize_seconds = 0.0005;
  return last;
}

TEST(CallTraceTest, JoinsTheCallersTraceAndBuildsASpanPerStage) {
  RecordingSink sink;
  CallTrace trace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "call", &sink);
  EXPECT_EQ(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(trace.recording());
  trace.SetAttribute("rpc.system", std::string("grpc"));
  trace.Translated();
  trace.Submitting(/*cacheable=*/true);
  const Clock::time_point t0 = Clock::now();
  trace.Submitted();
  trace.Delivering();
  trace.End(EngineLast(t0), OkStatus());
  EXPECT_GE(trace.tokenize_seconds(), 0);
  EXPECT_GE(trace.cache_lookup_seconds(), 0);

  ASSERT_EQ(sink.calls.size(), 1u);
  const std::vector<trace::Span>& spans = sink.calls[0];
  const trace::Span& root = spans[0];
  EXPECT_EQ(root.name, "call");
  EXPECT_EQ(root.kind, trace::SpanKind::kServer);
  EXPECT_EQ(trace::ToHex(root.parent_span_id), "00f067aa0ba902b7");
  EXPECT_FALSE(root.error);
  ASSERT_NE(Find(root, "rpc.system"), nullptr);
  EXPECT_EQ(std::get<int64_t>(*Find(root, "gen_ai.usage.output_tokens")), 5);
  EXPECT_EQ(std::get<std::string>(*Find(root, "strata.finish_reason")), "stop");

  std::map<std::string, std::vector<const trace::Span*>> children;
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].trace_id, root.trace_id);
    EXPECT_EQ(spans[i].parent_span_id, root.span_id);
    EXPECT_NE(spans[i].span_id, root.span_id);
    EXPECT_LE(spans[i].start_unix_nano, spans[i].end_unix_nano);
    children[spans[i].name].push_back(&spans[i]);
  }
  for (const char* name :
       {"tokenize", "cache_lookup", "queue", "decode", "detokenize", "response"}) {
    EXPECT_EQ(children[name].size(), 1u) << name;
  }
  ASSERT_EQ(children["prefill"].size(), 2u);
  EXPECT_EQ(std::get<int64_t>(*Find(*children["prefill"][1], "strata.prefill.start_position")), 8);
  const trace::Span& queue = *children["queue"][0];
  EXPECT_EQ(queue.end_unix_nano - queue.start_unix_nano, 1'000'000);
  const trace::Span& decode = *children["decode"][0];
  EXPECT_EQ(decode.end_unix_nano - decode.start_unix_nano, 5'000'000);
  EXPECT_EQ(std::get<bool>(*Find(*children["cache_lookup"][0], "strata.cache.hit")), false);

  trace.End(OkStatus());  // a second end is ignored
  EXPECT_EQ(sink.calls.size(), 1u);
}

TEST(CallTraceTest, ACacheAnswerHasNoEngineStages) {
  RecordingSink sink;
  CallTrace trace("", "call", &sink);
  trace.Translated();
  trace.Submitting(true);
  trace.Submitted();
  engine::StreamChunk last = EngineLast(Clock::now());
  last.from_cache = true;
  trace.End(last, OkStatus());
  ASSERT_EQ(sink.calls.size(), 1u);
  std::vector<std::string> names;
  for (const trace::Span& s : sink.calls[0]) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"call", "tokenize", "cache_lookup", "response"}));
}

TEST(CallTraceTest, ANewTraceWithoutAValidParent) {
  RecordingSink sink;
  for (const char* header :
       {"", "garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}) {
    CallTrace trace(header, "call", &sink);
    EXPECT_EQ(trace.trace_id().size(), 32u) << header;
    EXPECT_NE(trace.trace_id(), "00000000000000000000000000000000");
    EXPECT_NE(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_TRUE(trace.recording());
    trace.End(Status(StatusCode::kNotFound, "no such model"));
    const trace::Span& root = sink.calls.back()[0];
    EXPECT_EQ(root.parent_span_id, trace::SpanId{});
    EXPECT_TRUE(root.error);
    EXPECT_NE(root.status_message.find("NOT_FOUND"), std::string::npos);
  }
}

TEST(CallTraceTest, AnUnsampledCallerOrNoSinkExportsNothingButKeepsTheId) {
  RecordingSink sink;
  CallTrace unsampled("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "call", &sink);
  EXPECT_FALSE(unsampled.recording());
  EXPECT_EQ(unsampled.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  unsampled.End(OkStatus());
  CallTrace no_sink("", "call", nullptr);
  EXPECT_FALSE(no_sink.recording());
  no_sink.End(EngineLast(Clock::now()), OkStatus());
  EXPECT_TRUE(sink.calls.empty());
}

}  // namespace
}  // namespace strata::server
