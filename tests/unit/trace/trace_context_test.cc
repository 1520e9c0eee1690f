#include "strata/trace/trace_context.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace strata::trace {
namespace {

// The W3C Trace Context spec's example: trace 4bf92f35..., parent 00f067aa0ba902b7, sampled.
constexpr std::string_view kSpecExample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(ParseTraceparent, ReadsTheSpecExample) {
  const std::optional<TraceContext> context = ParseTraceparent(kSpecExample);
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(ToHex(context->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(context->span_id), "00f067aa0ba902b7");
  EXPECT_TRUE(context->sampled);
  EXPECT_EQ(context->trace_id[0], 0x4b);
  EXPECT_EQ(context->trace_id[15], 0x36);
  EXPECT_EQ(context->span_id[0], 0x00);
  EXPECT_EQ(context->span_id[7], 0xb7);
}

TEST(ParseTraceparent, SampledIsBitZeroOfTheFlags) {
  const std::string base = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-";
  ASSERT_TRUE(ParseTraceparent(base + "00").has_value());
  EXPECT_FALSE(ParseTraceparent(base + "00")->sampled);
  EXPECT_TRUE(ParseTraceparent(base + "01")->sampled);
  // Other bits are unknown flags: accepted, and only bit 0 is read.
  EXPECT_FALSE(ParseTraceparent(base + "02")->sampled);
  EXPECT_TRUE(ParseTraceparent(base + "03")->sampled);
  EXPECT_TRUE(ParseTraceparent(base + "ff")->sampled);
}

TEST(ParseTraceparent, RefusesMalformedValues) {
  const std::vector<std::string> bad = {
      "",
      "00",
      // uppercase hex, anywhere
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
      "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      // wrong lengths
      "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b77-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
      "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      // version 00 must be exactly 55 characters
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
      // version ff is invalid
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      // all-zero ids
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      // wrong separators, non-hex characters
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
      " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      // a future version longer than 55 characters without '-' at character 55
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
  };
  for (const std::string& value : bad) {
    EXPECT_FALSE(ParseTraceparent(value).has_value()) << "'" << value << "'";
  }
}

TEST(ParseTraceparent, AFutureVersionMayAppendFields) {
  const std::optional<TraceContext> context = ParseTraceparent(
      "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(ToHex(context->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(context->span_id), "00f067aa0ba902b7");
  EXPECT_TRUE(context->sampled);
  // A future version of exactly 55 characters is read like version 00.
  EXPECT_TRUE(
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").has_value());
}

TEST(FormatTraceparent, RoundTripsThroughParse) {
  for (const bool sampled : {false, true}) {
    const TraceId trace_id = NewTraceId();
    const SpanId span_id = NewSpanId();
    const std::string value = FormatTraceparent(trace_id, span_id, sampled);
    EXPECT_EQ(value.size(), 55u);
    EXPECT_EQ(value.substr(0, 3), "00-");
    EXPECT_EQ(value.substr(53), sampled ? "01" : "00");
    const std::optional<TraceContext> context = ParseTraceparent(value);
    ASSERT_TRUE(context.has_value()) << value;
    EXPECT_EQ(context->trace_id, trace_id);
    EXPECT_EQ(context->span_id, span_id);
    EXPECT_EQ(context->sampled, sampled);
  }
  const std::optional<TraceContext> example = ParseTraceparent(kSpecExample);
  ASSERT_TRUE(example.has_value());
  EXPECT_EQ(FormatTraceparent(example->trace_id, example->span_id, example->sampled), kSpecExample);
}

TEST(ToHex, IsLowercaseTwoDigitsPerByte) {
  const std::vector<uint8_t> bytes = {0x00, 0x0f, 0xab, 0xff, 0x10};
  EXPECT_EQ(ToHex(bytes), "000fabff10");
  EXPECT_EQ(ToHex({}), "");
}

TEST(NewIds, AreNonZeroAndDifferent) {
  std::set<TraceId> trace_ids;
  std::set<SpanId> span_ids;
  for (int i = 0; i < 1000; ++i) {
    const TraceId trace_id = NewTraceId();
    const SpanId span_id = NewSpanId();
    EXPECT_NE(trace_id, TraceId{});
    EXPECT_NE(span_id, SpanId{});
    trace_ids.insert(trace_id);
    span_ids.insert(span_id);
  }
  EXPECT_EQ(trace_ids.size(), 1000u);
  EXPECT_EQ(span_ids.size(), 1000u);
}

TEST(NewIds, DifferAcrossThreads) {
  // Per-thread generators must be seeded apart, not all from one fixed seed.
  std::vector<TraceId> ids(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&ids, i] { ids[i] = NewTraceId(); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(std::set<TraceId>(ids.begin(), ids.end()).size(), ids.size());
}

}  // namespace
}  // namespace strata::trace
