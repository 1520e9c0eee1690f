#include "strata/trace/otlp_encoding.h"

#include <algorithm>
#include <type_traits>

#include "strata/otlp/v1/trace.pb.h"

namespace strata::trace {
namespace {

namespace pb = ::strata::otlp::v1;

void SetValue(const AttributeValue& value, pb::AnyValue* out) {
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out->set_string_value(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out->set_int_value(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out->set_double_value(v);
        } else {
          static_assert(std::is_same_v<T, bool>);
          out->set_bool_value(v);
        }
      },
      value);
}

void AddAttributes(const std::vector<Attribute>& attributes,
                   google::protobuf::RepeatedPtrField<pb::KeyValue>* out) {
  out->Reserve(static_cast<int>(attributes.size()));
  for (const Attribute& attribute : attributes) {
    pb::KeyValue* kv = out->Add();
    kv->set_key(attribute.key);
    SetValue(attribute.value, kv->mutable_value());
  }
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

// OTLP's times are unsigned; a (bogus) negative time goes as 0 rather than wrapping.
uint64_t UnixNano(int64_t t) { return t > 0 ? static_cast<uint64_t>(t) : 0; }

}  // namespace

std::string EncodeExportRequest(const std::vector<Attribute>& resource, std::string_view scope_name,
                                std::string_view scope_version, std::span<const Span> spans) {
  pb::ExportTraceServiceRequest request;
  pb::ResourceSpans* resource_spans = request.add_resource_spans();
  AddAttributes(resource, resource_spans->mutable_resource()->mutable_attributes());
  pb::ScopeSpans* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name(std::string(scope_name));
  scope_spans->mutable_scope()->set_version(std::string(scope_version));
  scope_spans->mutable_spans()->Reserve(static_cast<int>(spans.size()));
  for (const Span& span : spans) {
    pb::Span* out = scope_spans->add_spans();
    out->set_trace_id(Bytes(span.trace_id));
    out->set_span_id(Bytes(span.span_id));
    if (std::any_of(span.parent_span_id.begin(), span.parent_span_id.end(),
                    [](uint8_t b) { return b != 0; })) {
      out->set_parent_span_id(Bytes(span.parent_span_id));
    }
    out->set_name(span.name);
    out->set_kind(span.kind == SpanKind::kServer ? pb::Span::SPAN_KIND_SERVER
                                                 : pb::Span::SPAN_KIND_INTERNAL);
    out->set_start_time_unix_nano(UnixNano(span.start_unix_nano));
    out->set_end_time_unix_nano(UnixNano(span.end_unix_nano));
    AddAttributes(span.attributes, out->mutable_attributes());
    if (span.error) {
      out->mutable_status()->set_code(pb::Status::STATUS_CODE_ERROR);
      out->mutable_status()->set_message(span.status_message);
    }
  }
  return request.SerializeAsString();
}

}  // namespace strata::trace
