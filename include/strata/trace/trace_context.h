// Trace context: the ids that tie a span to its trace, and their W3C `traceparent` header form
// (W3C Trace Context, level 1, https://www.w3.org/TR/trace-context/#traceparent-header).
//
// Thread rules: every function may be called from any thread. NewTraceId and NewSpanId draw from
// a per-thread generator, so concurrent calls never share state.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace strata::trace {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

// A caller's position in a trace, from a W3C `traceparent` header.
struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};      // the caller's span: the parent of the server's
  bool sampled = false;  // trace-flags bit 0
};

// Parses a `traceparent` value, "VV-<32 hex>-<16 hex>-FF" (version, trace id, parent span id,
// flags), lowercase hex only. Version "ff" is invalid; version 00 must be exactly 55 characters;
// a higher version may be longer only if character 55 is '-' (its first four fields are read
// as version 00's, the rest ignored). An all-zero trace id or span id is invalid. nullopt when
// invalid: the caller then starts a new trace, as the spec asks.
std::optional<TraceContext> ParseTraceparent(std::string_view value);

// The version-00 `traceparent` value for these ids: 55 characters, flags "01" when sampled,
// otherwise "00".
std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, bool sampled);

// Random ids (a per-thread generator seeded from std::random_device), never all zero.
TraceId NewTraceId();
SpanId NewSpanId();

// Lowercase hex of `bytes`, two characters a byte.
std::string ToHex(std::span<const uint8_t> bytes);

}  // namespace strata::trace
