#include "strata/trace/otlp_encoding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/otlp/v1/trace.pb.h"

namespace strata::trace {
namespace {

namespace pb = ::strata::otlp::v1;

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

TraceId SomeTraceId() {
  TraceId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(0xa0 + i);
  return id;
}

SpanId SomeSpanId(uint8_t first) {
  SpanId id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(first + i);
  return id;
}

pb::ExportTraceServiceRequest Decode(const std::string& body) {
  pb::ExportTraceServiceRequest request;
  EXPECT_TRUE(request.ParseFromString(body));
  return request;
}

TEST(EncodeExportRequest, CarriesEveryField) {
  Span root;
  root.trace_id = SomeTraceId();
  root.span_id = SomeSpanId(0x10);
  root.name = "POST /v1/chat/completions";
  root.kind = SpanKind::kServer;
  root.start_unix_nano = 1'700'000'000'123'456'789;
  root.end_unix_nano = 1'700'000'001'000'000'000;
  root.attributes = {{"http.route", std::string("/v1/chat/completions")},
                     {"gen_ai.usage.input_tokens", int64_t{42}},
                     {"strata.temperature", 0.75},
                     {"strata.cache_hit", true}};
  root.error = true;
  root.status_message = "deadline exceeded";

  Span child;
  child.trace_id = root.trace_id;
  child.span_id = SomeSpanId(0x20);
  child.parent_span_id = root.span_id;
  child.name = "engine.generate";
  child.start_unix_nano = 1'700'000'000'200'000'000;
  child.end_unix_nano = 1'700'000'000'900'000'000;

  const std::vector<Attribute> resource = {{"service.name", std::string("strata")},
                                           {"service.instance.id", std::string("pod-7")}};
  const std::vector<Span> spans = {root, child};
  const pb::ExportTraceServiceRequest request =
      Decode(EncodeExportRequest(resource, "strata", "1.2.3", spans));

  ASSERT_EQ(request.resource_spans_size(), 1);
  const pb::ResourceSpans& rs = request.resource_spans(0);
  ASSERT_EQ(rs.resource().attributes_size(), 2);
  EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "strata");
  EXPECT_EQ(rs.resource().attributes(1).key(), "service.instance.id");
  EXPECT_EQ(rs.resource().attributes(1).value().string_value(), "pod-7");
  ASSERT_EQ(rs.scope_spans_size(), 1);
  const pb::ScopeSpans& ss = rs.scope_spans(0);
  EXPECT_EQ(ss.scope().name(), "strata");
  EXPECT_EQ(ss.scope().version(), "1.2.3");
  ASSERT_EQ(ss.spans_size(), 2);

  const pb::Span& r = ss.spans(0);
  EXPECT_EQ(r.trace_id().size(), 16u);
  EXPECT_EQ(r.trace_id(), Bytes(root.trace_id));
  EXPECT_EQ(r.span_id().size(), 8u);
  EXPECT_EQ(r.span_id(), Bytes(root.span_id));
  EXPECT_TRUE(r.parent_span_id().empty()) << "a root span's parent is left empty";
  EXPECT_EQ(r.name(), "POST /v1/chat/completions");
  EXPECT_EQ(r.kind(), pb::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(r.start_time_unix_nano(), 1'700'000'000'123'456'789u);
  EXPECT_EQ(r.end_time_unix_nano(), 1'700'000'001'000'000'000u);
  ASSERT_EQ(r.attributes_size(), 4);
  EXPECT_EQ(r.attributes(0).key(), "http.route");
  EXPECT_EQ(r.attributes(0).value().value_case(), pb::AnyValue::kStringValue);
  EXPECT_EQ(r.attributes(0).value().string_value(), "/v1/chat/completions");
  EXPECT_EQ(r.attributes(1).key(), "gen_ai.usage.input_tokens");
  EXPECT_EQ(r.attributes(1).value().value_case(), pb::AnyValue::kIntValue);
  EXPECT_EQ(r.attributes(1).value().int_value(), 42);
  EXPECT_EQ(r.attributes(2).key(), "strata.temperature");
  EXPECT_EQ(r.attributes(2).value().value_case(), pb::AnyValue::kDoubleValue);
  EXPECT_EQ(r.attributes(2).value().double_value(), 0.75);
  EXPECT_EQ(r.attributes(3).key(), "strata.cache_hit");
  EXPECT_EQ(r.attributes(3).value().value_case(), pb::AnyValue::kBoolValue);
  EXPECT_TRUE(r.attributes(3).value().bool_value());
  ASSERT_TRUE(r.has_status());
  EXPECT_EQ(r.status().code(), pb::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(r.status().message(), "deadline exceeded");

  const pb::Span& c = ss.spans(1);
  EXPECT_EQ(c.trace_id(), Bytes(root.trace_id));
  EXPECT_EQ(c.span_id(), Bytes(child.span_id));
  EXPECT_EQ(c.parent_span_id().size(), 8u);
  EXPECT_EQ(c.parent_span_id(), Bytes(root.span_id));
  EXPECT_EQ(c.name(), "engine.generate");
  EXPECT_EQ(c.kind(), pb::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(c.start_time_unix_nano(), 1'700'000'000'200'000'000u);
  EXPECT_EQ(c.end_time_unix_nano(), 1'700'000'000'900'000'000u);
  EXPECT_EQ(c.attributes_size(), 0);
  EXPECT_EQ(c.status().code(), pb::Status::STATUS_CODE_UNSET);
  EXPECT_TRUE(c.status().message().empty());
}

TEST(EncodeExportRequest, NoSpansStillNamesResourceAndScope) {
  const pb::ExportTraceServiceRequest request =
      Decode(EncodeExportRequest({{"service.name", std::string("s")}}, "strata", "", {}));
  ASSERT_EQ(request.resource_spans_size(), 1);
  ASSERT_EQ(request.resource_spans(0).scope_spans_size(), 1);
  EXPECT_EQ(request.resource_spans(0).scope_spans(0).scope().name(), "strata");
  EXPECT_EQ(request.resource_spans(0).scope_spans(0).spans_size(), 0);
}

TEST(EncodeExportRequest, PlainLiteralsKeepTheirAttributeType) {
  // A plain int must become an int (not a bool or double), a string literal a string.
  Span span;
  span.trace_id = SomeTraceId();
  span.span_id = SomeSpanId(1);
  span.attributes = {{"n", 7}, {"b", false}, {"s", "x"}, {"d", -2.5}};
  const std::vector<Span> spans = {span};
  const pb::Span s = Decode(EncodeExportRequest({}, "strata", "", spans))
                         .resource_spans(0)
                         .scope_spans(0)
                         .spans(0);
  ASSERT_EQ(s.attributes_size(), 4);
  EXPECT_EQ(s.attributes(0).value().value_case(), pb::AnyValue::kIntValue);
  EXPECT_EQ(s.attributes(0).value().int_value(), 7);
  EXPECT_EQ(s.attributes(1).value().value_case(), pb::AnyValue::kBoolValue);
  EXPECT_FALSE(s.attributes(1).value().bool_value());
  EXPECT_EQ(s.attributes(2).value().value_case(), pb::AnyValue::kStringValue);
  EXPECT_EQ(s.attributes(2).value().string_value(), "x");
  EXPECT_EQ(s.attributes(3).value().double_value(), -2.5);
}

}  // namespace
}  // namespace strata::trace
