// OTLP encoding: spans as the protobuf body of an OTLP/HTTP trace export
// (strata.otlp.v1.ExportTraceServiceRequest, wire-compatible with OpenTelemetry's).
//
// Thread rules: a pure function; any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/trace/span.h"

namespace strata::trace {

// The serialized ExportTraceServiceRequest holding `spans` under one ResourceSpans (with
// `resource` as its attributes) and one ScopeSpans (the instrumentation scope `scope_name`,
// `scope_version`). Ids go as 16 and 8 raw bytes; an all-zero parent is left empty (a root
// span); kServer and kInternal map to SPAN_KIND_SERVER and SPAN_KIND_INTERNAL; an error span has
// status ERROR with its message, any other status UNSET. An empty scope_version is left unset.
std::string EncodeExportRequest(const std::vector<Attribute>& resource, std::string_view scope_name,
                                std::string_view scope_version, std::span<const Span> spans);

}  // namespace strata::trace
