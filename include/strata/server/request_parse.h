// Refusing request bytes that do not parse: INVALID_ARGUMENT naming what is wrong.
//
// gRPC's callback handlers end a call whose request does not deserialize with UNIMPLEMENTED and
// an empty message, and protobuf writes its complaint ("String field ... contains invalid UTF-8")
// to stderr in its own format. The wire contract says INVALID_ARGUMENT, so each method's handler
// is wrapped (ParseCheckedUnaryHandler, ParseCheckedStreamHandler): bytes that do not parse reach
// the service as an empty request marked refused (the mark travels in the request itself), and the
// service's `refuse` callback ends the call with INVALID_ARGUMENT and a message from
// DescribeUnparsable ("field 'chat.messages[1].content' is not valid UTF-8"). RouteLibraryLogs
// sends protobuf's (and gRPC's) own log lines through Log; the lines a parse of client bytes writes
// are debug (the refusal says it).
//
// Thread rules: the handlers are called by gRPC on any thread; DescribeUnparsable is pure.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpc/byte_buffer.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "strata/common/status.h"

namespace strata::server {

// Why `bytes` is not a valid message of `type`: the first field that is not valid UTF-8, is
// truncated or has the wrong wire type, named by its path; a general sentence when no field
// is to blame. Never fails.
std::string DescribeUnparsable(const google::protobuf::Descriptor& type, std::string_view bytes);
std::string DescribeUnparsable(const google::protobuf::Descriptor& type, grpc_byte_buffer* bytes);

// The index gRPC's generated code gives `method` of the service named `service` (their order in
// the .proto), for Service::MarkMethodCallback.
int MethodIndex(std::string_view service, std::string_view method);

// Routes protobuf's and gRPC's own log lines to Log, in the server's format (call once, before
// serving). gRPC's errors are mostly a peer's doing (a failed TLS handshake): they log as warn.
void RouteLibraryLogs();

// While alive, protobuf log lines of this thread come from parsing a client's bytes.
class ClientParseScope {
 public:
  ClientParseScope();
  ~ClientParseScope();
  ClientParseScope(const ClientParseScope&) = delete;
  ClientParseScope& operator=(const ClientParseScope&) = delete;
};

namespace internal {

// A refused request carries its refusal in itself: an unknown length-delimited field with the
// highest field number protobuf allows, holding the message (a client that sends such a field
// itself only gets its own call refused).
inline constexpr int kRefusalField = 536870911;

inline void MarkRefused(google::protobuf::Message* request, const std::string& message) {
  request->Clear();
  request->GetReflection()->MutableUnknownFields(request)->AddLengthDelimited(kRefusalField,
                                                                              message);
}

// The refusal a request carries (INVALID_ARGUMENT), or OK.
inline Status RefusalOf(const google::protobuf::Message& request) {
  const google::protobuf::UnknownFieldSet& unknown =
      request.GetReflection()->GetUnknownFields(request);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& field = unknown.field(i);
    if (field.number() == kRefusalField &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return InvalidArgumentError(field.length_delimited());
    }
  }
  return OkStatus();
}

// Parses as gRPC does (`parse`); on failure, describes the bytes (kept by reference to the same
// slices, since the parse consumes them), marks `placeholder()` (an empty request the call then
// carries) refused and reports OK, so that the call reaches the service's handler.
template <class Request, class Parse, class Placeholder>
void* ParseChecked(grpc_byte_buffer* bytes, grpc::Status* status, Parse parse,
                   Placeholder placeholder) {
  // Another reference to the same slices: the parse consumes `bytes`.
  std::unique_ptr<grpc_byte_buffer, void (*)(grpc_byte_buffer*)> kept(
      bytes != nullptr ? grpc_byte_buffer_copy(bytes) : nullptr, &grpc_byte_buffer_destroy);
  void* request = nullptr;
  {
    ClientParseScope scope;
    request = parse(status);
  }
  if (status->ok()) return request;
  const std::string why = DescribeUnparsable(*Request::descriptor(), kept.get());
  Request* refused = placeholder();
  MarkRefused(refused,
              "the request does not parse as " + Request::descriptor()->full_name() + ": " + why);
  *status = grpc::Status::OK;
  return refused;
}

}  // namespace internal

// A unary method's handler: gRPC's own, with unparsable bytes refused by `refuse`.
template <class Request, class Response>
class ParseCheckedUnaryHandler final : public grpc::internal::MethodHandler {
 public:
  using Handler = std::function<grpc::ServerUnaryReactor*(grpc::CallbackServerContext*,
                                                          const Request*, Response*)>;
  using Refuse =
      std::function<grpc::ServerUnaryReactor*(grpc::CallbackServerContext*, const Status&)>;

  ParseCheckedUnaryHandler(Handler handler, Refuse refuse)
      : inner_([this, handler = std::move(handler), refuse = std::move(refuse)](
                   grpc::CallbackServerContext* ctx, const Request* request, Response* response) {
          Status failed = internal::RefusalOf(*request);
          return failed.ok() ? handler(ctx, request, response) : refuse(ctx, failed);
        }) {}

  void RunHandler(const HandlerParameter& param) override { inner_.RunHandler(param); }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* bytes, grpc::Status* status,
                    void** handler_data) override {
    return internal::ParseChecked<Request>(
        bytes, status,
        [&](grpc::Status* s) { return inner_.Deserialize(call, bytes, s, handler_data); },
        [handler_data] {
          // gRPC's handler keeps its request/response holder even when the parse fails.
          return static_cast<grpc::MessageHolder<Request, Response>*>(*handler_data)->request();
        });
  }

 private:
  grpc::internal::CallbackUnaryHandler<Request, Response> inner_;
};

// A server-streaming method's handler: gRPC's own, with unparsable bytes refused by `refuse`.
template <class Request, class Response>
class ParseCheckedStreamHandler final : public grpc::internal::MethodHandler {
 public:
  using Handler = std::function<grpc::ServerWriteReactor<Response>*(grpc::CallbackServerContext*,
                                                                    const Request*)>;
  using Refuse = std::function<grpc::ServerWriteReactor<Response>*(grpc::CallbackServerContext*,
                                                                   const Status&)>;

  ParseCheckedStreamHandler(Handler handler, Refuse refuse)
      : inner_([this, handler = std::move(handler), refuse = std::move(refuse)](
                   grpc::CallbackServerContext* ctx, const Request* request) {
          Status failed = internal::RefusalOf(*request);
          return failed.ok() ? handler(ctx, request) : refuse(ctx, failed);
        }) {}

  void RunHandler(const HandlerParameter& param) override { inner_.RunHandler(param); }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* bytes, grpc::Status* status,
                    void** handler_data) override {
    return internal::ParseChecked<Request>(
        bytes, status,
        [&](grpc::Status* s) { return inner_.Deserialize(call, bytes, s, handler_data); },
        [call] {
          // gRPC's handler frees its request when the parse fails; the call's arena holds this
          // one, which the call destroys when it is done, as it would gRPC's.
          return new (grpc::g_core_codegen_interface->grpc_call_arena_alloc(call, sizeof(Request)))
              Request();
        });
  }

 private:
  grpc::internal::CallbackServerStreamingHandler<Request, Response> inner_;
};

}  // namespace strata::server
