// API keys on gRPC: the caller's `authorization` metadata through ApiKeys::Admit.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "strata/server/api_keys.h"

namespace strata::server {

// The caller's `authorization` metadata ("" when absent).
std::string AuthorizationOf(const grpc::ServerContextBase& ctx);

// Admits a call by `keys` (null: keys are off, every call is admitted without a lease). A call
// refused for a limit gets trailing metadata `retry-after` (seconds) besides its status.
KeyAdmission AdmitGrpcCall(ApiKeys* keys, grpc::ServerContextBase* ctx, bool generation);

}  // namespace strata::server
