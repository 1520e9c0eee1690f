// CallTrace: the trace of one generation call, the same for every transport.
//
// It joins the caller's trace (a W3C `traceparent` value) or starts a new one, notes when the
// frontend's stages end (the request translated, the submit with its response-cache lookup,
// the first output handed to the transport) and, when the call ends, builds its spans and
// emits them to a SpanSink: a server span for the call, with children
//
//   tokenize       call received -> request translated (the prompt rendered and encoded)
//   cache_lookup   the submit of a cacheable request (strata.cache.hit says how it went)
//   queue          submitted -> first scheduled by the engine
//   prefill        one per forward over the prompt (start position, tokens)
//   decode         first token -> finished
//   detokenize     first token -> finished, with strata.busy_seconds the engine's time in it
//   response       first output handed to the transport -> the call's status
//
// (the engine's stages only when the engine computed the answer: a response-cache hit has
// none). A trace is exported only with a sink and when sampled: the caller's sampled flag, or
// always for a new trace. Its id exists either way, for the log line and the response.
//
// Thread rules: not thread-safe; the call that owns it serializes its use.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/engine/request_stream.h"
#include "strata/trace/span.h"
#include "strata/trace/trace_context.h"

namespace strata::server {

class CallTrace {
 public:
  using Clock = std::chrono::steady_clock;

  // `traceparent`: the caller's header or metadata value ("" or malformed: a new trace).
  // `name`: the call's span ("strata.v1.Generation/Generate", "POST /v1/completions").
  // `sink`: where the spans go; null: nowhere.
  CallTrace(std::string_view traceparent, std::string name, trace::SpanSink* sink);

  // 32 lowercase hex digits.
  const std::string& trace_id() const { return trace_id_hex_; }
  // Spans will be exported: the engine should record the request's prefill chunks.
  bool recording() const { return sink_ != nullptr && sampled_; }

  // An attribute of the call's span.
  void SetAttribute(std::string key, trace::AttributeValue value);

  // Stage marks, each taken once (later calls are ignored).
  void Translated();
  void Submitting(bool cacheable);
  void Submitted();
  void Delivering();  // the transport takes output of the request

  // The frontend's stages, for Timing (0 when not reached).
  double tokenize_seconds() const;
  double cache_lookup_seconds() const;

  // Ends the call with its request's last chunk and the status it ends with; emits the spans.
  void End(const engine::StreamChunk& last, const Status& status);
  // Ends a call that got no request (refused, or its translation failed).
  void End(const Status& status);

 private:
  void Emit(const engine::StreamChunk* last, const Status& status);

  trace::SpanSink* sink_;
  std::string name_;
  trace::TraceId trace_id_{};
  trace::SpanId parent_span_id_{};  // zero: no caller span
  trace::SpanId span_id_{};
  bool sampled_ = true;
  std::string trace_id_hex_;
  std::vector<trace::Attribute> attributes_;
  Clock::time_point start_;
  Clock::time_point translated_{};
  Clock::time_point submitting_{};
  Clock::time_point submitted_{};
  Clock::time_point delivering_{};
  bool cacheable_ = false;
  bool ended_ = false;
};

}  // namespace strata::server
