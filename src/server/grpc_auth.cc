#include "strata/server/grpc_auth.h"

namespace strata::server {

std::string AuthorizationOf(const grpc::ServerContextBase& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return std::string(it->second.data(), it->second.size());
}

KeyAdmission AdmitGrpcCall(ApiKeys* keys, grpc::ServerContextBase* ctx, bool generation) {
  if (keys == nullptr) return {};
  KeyAdmission admitted = keys->Admit(AuthorizationOf(*ctx), generation);
  if (admitted.status.code() == StatusCode::kResourceExhausted) {
    ctx->AddTrailingMetadata("retry-after", std::to_string(admitted.retry_after_seconds));
  }
  return admitted;
}

}  // namespace strata::server
