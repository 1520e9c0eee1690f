// CacheAdminService: the gRPC CacheAdmin service (proto/strata/v1/cache_admin.proto) over a
// CacheAdmin. The token comes as call metadata "authorization: Bearer <token>". Registered only
// when the server has an admin token (--admin-token-file).
//
// Thread rules: gRPC calls it from its threads; the CacheAdmin must outlive the server.
#pragma once

#include "strata/server/cache_admin.h"
#include "strata/v1/cache_admin.grpc.pb.h"

namespace strata::server {

class CacheAdminService final : public v1::CacheAdmin::CallbackService {
 public:
  explicit CacheAdminService(CacheAdmin* admin);

  grpc::ServerUnaryReactor* Invalidate(grpc::CallbackServerContext* context,
                                       const v1::InvalidateRequest* request,
                                       v1::InvalidateResponse* response) override;
  grpc::ServerUnaryReactor* BumpEpoch(grpc::CallbackServerContext* context,
                                      const v1::BumpEpochRequest* request,
                                      v1::BumpEpochResponse* response) override;

 private:
  CacheAdmin* admin_;
};

}  // namespace strata::server
