// JobsService: strata.v1.Jobs (proto/strata/v1/jobs.proto), batch jobs over gRPC through the
// same BatchApi as the HTTP API's /v1/files and /v1/batches (--jobs-db). Every call needs an
// API key when keys are configured, and a key sees only the files and batches it created;
// errors are the BatchApi's codes (INVALID_ARGUMENT naming the field, NOT_FOUND for an unknown
// id or another key's).
//
// The service is synchronous: a call holds a gRPC sync-server thread for a few store
// operations (an upload's or a job creation's check of every line included), never an engine
// or callback-API thread.
//
// Thread rules: gRPC calls it from its threads; the BatchApi's store and runner outlive the
// server.
#pragma once

#include "strata/server/api_keys.h"
#include "strata/server/http/batch_api.h"
#include "strata/v1/jobs.grpc.pb.h"

namespace strata::server {

class JobsService final : public v1::Jobs::Service {
 public:
  // `api_keys`: null when no key is needed.
  JobsService(http::BatchApi api, ApiKeys* api_keys) : api_(api), api_keys_(api_keys) {}

  grpc::Status UploadFile(grpc::ServerContext* ctx, const v1::UploadFileRequest* request,
                          v1::JobFile* response) override;
  grpc::Status GetFile(grpc::ServerContext* ctx, const v1::JobFileId* request,
                       v1::JobFile* response) override;
  grpc::Status GetFileContent(grpc::ServerContext* ctx, const v1::JobFileId* request,
                              v1::JobFileContent* response) override;
  grpc::Status CreateBatch(grpc::ServerContext* ctx, const v1::CreateBatchRequest* request,
                           v1::Batch* response) override;
  grpc::Status GetBatch(grpc::ServerContext* ctx, const v1::BatchId* request,
                        v1::Batch* response) override;
  grpc::Status ListBatches(grpc::ServerContext* ctx, const v1::ListBatchesRequest* request,
                           v1::ListBatchesResponse* response) override;
  grpc::Status CancelBatch(grpc::ServerContext* ctx, const v1::BatchId* request,
                           v1::Batch* response) override;

 private:
  // The caller's key name ("" without keys), or why the call is refused.
  StatusOr<std::string> Admit(grpc::ServerContext* ctx) const;

  http::BatchApi api_;
  ApiKeys* api_keys_;
};

}  // namespace strata::server
