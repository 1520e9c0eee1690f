#include "strata/server/cache_admin_service.h"

#include <string>
#include <string_view>

#include "strata/server/generate_call.h"
#include "strata/server/grpc_auth.h"
#include "strata/server/request_parse.h"

namespace strata::server {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

CacheAdminService::CacheAdminService(CacheAdmin* admin) : admin_(admin) {
  // Bytes that do not parse get INVALID_ARGUMENT (request_parse.h), after the token is checked.
  const auto refuse = [this](grpc::CallbackServerContext* context, const Status& status) {
    if (Status auth = admin_->Authorize(AuthorizationOf(*context)); !auth.ok()) {
      return Finish(context, auth);
    }
    return Finish(context, status);
  };
  const auto index = [](std::string_view method) {
    return MethodIndex(v1::CacheAdmin::service_full_name(), method);
  };
  MarkMethodCallback(
      index("Invalidate"),
      new ParseCheckedUnaryHandler<v1::InvalidateRequest, v1::InvalidateResponse>(
          [this](grpc::CallbackServerContext* context, const v1::InvalidateRequest* request,
                 v1::InvalidateResponse* response) {
            return Invalidate(context, request, response);
          },
          refuse));
  MarkMethodCallback(
      index("BumpEpoch"),
      new ParseCheckedUnaryHandler<v1::BumpEpochRequest, v1::BumpEpochResponse>(
          [this](grpc::CallbackServerContext* context, const v1::BumpEpochRequest* request,
                 v1::BumpEpochResponse* response) { return BumpEpoch(context, request, response); },
          refuse));
}

grpc::ServerUnaryReactor* CacheAdminService::Invalidate(grpc::CallbackServerContext* context,
                                                        const v1::InvalidateRequest* request,
                                                        v1::InvalidateResponse* response) {
  if (Status auth = admin_->Authorize(AuthorizationOf(*context)); !auth.ok()) {
    return Finish(context, auth);
  }
  cache::CacheSelector selector;
  switch (request->selector_case()) {
    case v1::InvalidateRequest::kTag:
      selector = cache::CacheSelector::Tag(request->tag());
      break;
    case v1::InvalidateRequest::kNamespace:
      selector = cache::CacheSelector::Namespace(request->namespace_());
      break;
    case v1::InvalidateRequest::kAll:
      if (!request->all()) {
        return Finish(context, InvalidArgumentError("all must be true when it is the selector"));
      }
      selector = cache::CacheSelector::All();
      break;
    case v1::InvalidateRequest::SELECTOR_NOT_SET:
      return Finish(context, InvalidArgumentError("a selector is required: tag, namespace or all"));
  }
  StatusOr<int64_t> removed = admin_->Invalidate(selector);
  if (!removed.ok()) return Finish(context, removed.status());
  response->set_entries_removed(*removed);
  return Finish(context, OkStatus());
}

grpc::ServerUnaryReactor* CacheAdminService::BumpEpoch(grpc::CallbackServerContext* context,
                                                       const v1::BumpEpochRequest* /*request*/,
                                                       v1::BumpEpochResponse* response) {
  if (Status auth = admin_->Authorize(AuthorizationOf(*context)); !auth.ok()) {
    return Finish(context, auth);
  }
  StatusOr<uint64_t> epoch = admin_->BumpEpoch();
  if (!epoch.ok()) return Finish(context, epoch.status());
  response->set_epoch(*epoch);
  return Finish(context, OkStatus());
}

}  // namespace strata::server
