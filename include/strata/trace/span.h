// Span: one finished, timed operation of a trace, as the server records it; and SpanSink, where
// finished spans go (the OTLP exporter, or a test's recorder).
//
// Thread rules: a Span is a plain value, owned by whoever holds it. SpanSink::Emit may be called
// from any thread, concurrently; an implementation must never block on I/O in it (request
// threads call it), so an exporter queues and sends from its own thread.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "strata/trace/trace_context.h"

namespace strata::trace {

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct Attribute {
  std::string key;  // OpenTelemetry semantic conventions where one fits ("http.route", ...)
  AttributeValue value;
};

enum class SpanKind {
  kInternal,  // an operation inside the server
  kServer,    // the handling of one call from a client
};

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nano = 0;  // nanoseconds since the Unix epoch (system clock)
  int64_t end_unix_nano = 0;
  std::vector<Attribute> attributes;
  bool error = false;  // status ERROR with status_message; otherwise UNSET
  std::string status_message;
};

// Where finished spans go.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  // Takes the spans (usually one trace's, together). Must never block on I/O: it is called
  // from request threads.
  virtual void Emit(std::vector<Span> spans) = 0;
};

}  // namespace strata::trace
