#include "strata/server/call_trace.h"

#include <optional>
#include <utility>

#include "strata/sampling/finish_reason.h"

namespace strata::server {
namespace {

using Clock = CallTrace::Clock;

bool Reached(Clock::time_point t) { return t != Clock::time_point(); }

double Seconds(Clock::time_point from, Clock::time_point to) {
  if (!Reached(from) || !Reached(to) || to < from) return 0;
  return std::chrono::duration<double>(to - from).count();
}

// Steady-clock times as Unix nanoseconds, through one reading of both clocks.
class UnixTime {
 public:
  UnixTime()
      : offset_ns_(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count() -
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                .count()) {}

  int64_t operator()(Clock::time_point t) const {
    return offset_ns_ +
           std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

 private:
  int64_t offset_ns_;
};

}  // namespace

CallTrace::CallTrace(std::string_view traceparent, std::string name, trace::SpanSink* sink)
    : sink_(sink), name_(std::move(name)), span_id_(trace::NewSpanId()), start_(Clock::now()) {
  if (std::optional<trace::TraceContext> parent = trace::ParseTraceparent(traceparent)) {
    trace_id_ = parent->trace_id;
    parent_span_id_ = parent->span_id;
    sampled_ = parent->sampled;
  } else {
    trace_id_ = trace::NewTraceId();
  }
  trace_id_hex_ = trace::ToHex(trace_id_);
}

void CallTrace::SetAttribute(std::string key, trace::AttributeValue value) {
  attributes_.push_back({std::move(key), std::move(value)});
}

void CallTrace::Translated() {
  if (!Reached(translated_)) translated_ = Clock::now();
}

void CallTrace::Submitting(bool cacheable) {
  if (Reached(submitting_)) return;
  submitting_ = Clock::now();
  cacheable_ = cacheable;
}

void CallTrace::Submitted() {
  if (!Reached(submitted_)) submitted_ = Clock::now();
}

void CallTrace::Delivering() {
  if (!Reached(delivering_)) delivering_ = Clock::now();
}

double CallTrace::tokenize_seconds() const { return Seconds(start_, translated_); }

double CallTrace::cache_lookup_seconds() const {
  return cacheable_ ? Seconds(submitting_, submitted_) : 0;
}

void CallTrace::End(const engine::StreamChunk& last, const Status& status) { Emit(&last, status); }

void CallTrace::End(const Status& status) { Emit(nullptr, status); }

void CallTrace::Emit(const engine::StreamChunk* last, const Status& status) {
  if (ended_) return;
  ended_ = true;
  const Clock::time_point end = Clock::now();
  if (!recording()) return;
  const UnixTime unix;

  std::vector<trace::Span> spans;
  trace::Span root;
  root.trace_id = trace_id_;
  root.span_id = span_id_;
  root.parent_span_id = parent_span_id_;
  root.name = name_;
  root.kind = trace::SpanKind::kServer;
  root.start_unix_nano = unix(start_);
  root.end_unix_nano = unix(end);
  root.attributes = std::move(attributes_);
  if (!status.ok()) {
    root.error = true;
    root.status_message = std::string(StatusCodeName(status.code())) + ": " + status.message();
  }
  const auto child = [&](std::string name, Clock::time_point from, Clock::time_point to,
                         std::vector<trace::Attribute> attributes = {}) {
    if (!Reached(from) || !Reached(to) || to < from) return;
    trace::Span s;
    s.trace_id = trace_id_;
    s.span_id = trace::NewSpanId();
    s.parent_span_id = span_id_;
    s.name = std::move(name);
    s.start_unix_nano = unix(from);
    s.end_unix_nano = unix(to);
    s.attributes = std::move(attributes);
    spans.push_back(std::move(s));
  };

  child("tokenize", start_, translated_);
  if (cacheable_) {
    child("cache_lookup", submitting_, submitted_,
          {{"strata.cache.hit", last != nullptr && last->from_cache}});
  }
  if (last != nullptr) {
    const engine::RequestUsage& usage = last->usage;
    root.attributes.push_back({"gen_ai.usage.input_tokens", usage.prompt_tokens});
    root.attributes.push_back({"gen_ai.usage.output_tokens", usage.completion_tokens});
    root.attributes.push_back({"strata.cached_prompt_tokens", usage.cached_prompt_tokens});
    root.attributes.push_back(
        {"strata.finish_reason", std::string(sampling::FinishReasonName(*last->finish_reason))});
    root.attributes.push_back({"strata.from_cache", last->from_cache});
    if (!last->from_cache) {
      const engine::RequestStages& st = last->timing.stages;
      root.attributes.push_back({"strata.preemptions", int64_t{st.preemptions}});
      child("queue", st.submitted, Reached(st.first_scheduled) ? st.first_scheduled : st.finished);
      for (const engine::PrefillChunkTime& c : st.prefill_chunks) {
        child("prefill", c.start, c.end,
              {{"strata.prefill.start_position", c.start_position},
               {"strata.prefill.tokens", c.tokens}});
      }
      if (st.prefill_chunks_dropped > 0) {
        root.attributes.push_back(
            {"strata.prefill.chunks_not_recorded", st.prefill_chunks_dropped});
      }
      child("decode", st.first_token, st.finished,
            {{"strata.decode.tokens", usage.completion_tokens}});
      child("detokenize", st.first_token, st.finished,
            {{"strata.busy_seconds", last->timing.detokenize_seconds}});
    }
  }
  child("response", Reached(delivering_) ? delivering_ : end, end);
  spans.insert(spans.begin(), std::move(root));
  sink_->Emit(std::move(spans));
}

}  // namespace strata::server
