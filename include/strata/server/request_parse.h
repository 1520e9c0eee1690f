// Refusing request bytes that do not parse: INVALID_ARGUMENT naming what is wrong.
//
// gRPC's callback handlers end a call whose request does not deserialize with UNIMPLEMENTED and
// an empty message, and protobuf writes its complaint ("String field ... contains invalid UTF-8")
// to stderr in its own format. The wire contract says INVALID_ARGUMENT, so each method's handler
// is wrapped (ParseCheckedUnaryHandler, ParseCheckedStreamHandler): bytes that do not parse reach
// the service as an empty request marked refused, and the service's `refuse` callback ends the
// call with INVALID_ARGUMENT and a message from DescribeUnparsable ("field
// 'chat.messages[1].content' is not valid UTF-8"). RouteLibraryLogs sends protobuf's (and
// gRPC's) own log lines through Log; the lines a parse of client bytes writes are debug (the
// refusal says it).
//
// Thread rules: the handlers are called by gRPC on any thread; DescribeUnparsable is pure.
#pragma once

#include <google/protobuf/descriptor.h>
#include <grpc/byte_buffer.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
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

// The refusals of one method: the request objects whose bytes did not parse, each with why.
class ParseFailures {
 public:
  void Add(const void* request, Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_[request] = std::move(status);
  }
  // The refusal of `request` (removed), or OK when its bytes parsed.
  Status Take(const void* request) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = failures_.find(request);
    if (it == failures_.end()) return OkStatus();
    Status status = std::move(it->second);
    failures_.erase(it);
    return status;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<const void*, Status> failures_;
};

// Parses as gRPC does (`parse`); on failure, describes the bytes (kept by reference to the same
// slices, since the parse consumes them), records the refusal against `placeholder()` (an empty
// request the call then carries) and reports OK, so that the call reaches the service's handler.
template <class Request, class Parse, class Placeholder>
void* ParseChecked(grpc_byte_buffer* bytes, grpc::Status* status, Parse parse,
                   Placeholder placeholder, ParseFailures* failures) {
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
  Request* empty = placeholder();
  empty->Clear();
  failures->Add(empty, InvalidArgumentError("the request does not parse as " +
                                            Request::descriptor()->full_name() + ": " + why));
  *status = grpc::Status::OK;
  return empty;
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
          Status failed = failures_.Take(request);
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
        },
        &failures_);
  }

 private:
  internal::ParseFailures failures_;
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
          Status failed = failures_.Take(request);
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
        },
        &failures_);
  }

 private:
  internal::ParseFailures failures_;
  grpc::internal::CallbackServerStreamingHandler<Request, Response> inner_;
};

}  // namespace strata::server
