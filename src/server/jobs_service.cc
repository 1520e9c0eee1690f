#include "strata/server/jobs_service.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "strata/server/generate_call.h"
#include "strata/server/grpc_auth.h"

namespace strata::server {
namespace {

using nlohmann::json;

void ToProto(const jobs::FileRecord& f, v1::JobFile* out) {
  out->set_id(f.id);
  out->set_purpose(f.purpose);
  out->set_filename(f.filename);
  out->set_bytes(f.bytes);
  out->set_created_at(f.created_at);
}

void ToProto(const jobs::BatchRecord& b, v1::Batch* out) {
  out->set_id(b.id);
  out->set_endpoint(b.endpoint);
  out->set_input_file_id(b.input_file_id);
  out->set_completion_window(b.completion_window);
  out->set_status(std::string(jobs::BatchStateName(b.state)));
  out->set_output_file_id(b.output_file_id);
  out->set_error_file_id(b.error_file_id);
  out->set_created_at(b.created_at);
  out->set_in_progress_at(b.in_progress_at);
  out->set_expires_at(b.expires_at);
  out->set_finalizing_at(b.finalizing_at);
  out->set_completed_at(b.completed_at);
  out->set_failed_at(b.failed_at);
  out->set_expired_at(b.expired_at);
  out->set_cancelling_at(b.cancelling_at);
  out->set_cancelled_at(b.cancelled_at);
  out->mutable_request_counts()->set_total(b.counts.total);
  out->mutable_request_counts()->set_completed(b.counts.completed);
  out->mutable_request_counts()->set_failed(b.counts.failed);
  if (!b.metadata_json.empty()) {
    const json metadata = json::parse(b.metadata_json, nullptr, /*allow_exceptions=*/false);
    if (metadata.is_object()) {
      for (const auto& [key, value] : metadata.items()) {
        if (value.is_string()) (*out->mutable_metadata())[key] = value.get<std::string>();
      }
    }
  }
}

// The answer of a call whose operation gave `result`, written into `out` when it is OK.
template <class Record, class Proto>
grpc::Status Answer(const StatusOr<Record>& result, Proto* out) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  ToProto(*result, out);
  return grpc::Status::OK;
}

}  // namespace

StatusOr<std::string> JobsService::Admit(grpc::ServerContext* ctx) const {
  KeyAdmission admitted = AdmitGrpcCall(api_keys_, ctx, /*generation=*/false);
  if (!admitted.status.ok()) return admitted.status;
  return admitted.lease ? admitted.lease->key_name() : std::string();
}

grpc::Status JobsService::UploadFile(grpc::ServerContext* ctx, const v1::UploadFileRequest* request,
                                     v1::JobFile* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  return Answer(
      api_.UploadFile(*owner, request->purpose(), request->filename(), request->content()),
      response);
}

grpc::Status JobsService::GetFile(grpc::ServerContext* ctx, const v1::JobFileId* request,
                                  v1::JobFile* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  return Answer(api_.GetFile(*owner, request->id()), response);
}

grpc::Status JobsService::GetFileContent(grpc::ServerContext* ctx, const v1::JobFileId* request,
                                         v1::JobFileContent* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  StatusOr<std::string> content = api_.FileContent(*owner, request->id());
  if (!content.ok()) return ToGrpcStatus(content.status());
  response->set_content(std::move(*content));
  return grpc::Status::OK;
}

grpc::Status JobsService::CreateBatch(grpc::ServerContext* ctx,
                                      const v1::CreateBatchRequest* request, v1::Batch* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  if (request->metadata_size() > 16) {
    return ToGrpcStatus(InvalidArgumentError("metadata has more than 16 keys"));
  }
  json metadata = json::object();
  for (const auto& [key, value] : request->metadata()) {
    if (key.size() > 64 || value.size() > 512) {
      return ToGrpcStatus(InvalidArgumentError(
          "metadata keys must be at most 64 characters and values at most 512"));
    }
    metadata[key] = value;
  }
  return Answer(
      api_.CreateBatch(
          *owner, request->input_file_id(), request->endpoint(), request->completion_window(),
          metadata.empty() ? "" : metadata.dump(-1, ' ', false, json::error_handler_t::replace)),
      response);
}

grpc::Status JobsService::GetBatch(grpc::ServerContext* ctx, const v1::BatchId* request,
                                   v1::Batch* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  return Answer(api_.GetBatch(*owner, request->id()), response);
}

grpc::Status JobsService::ListBatches(grpc::ServerContext* ctx,
                                      const v1::ListBatchesRequest* request,
                                      v1::ListBatchesResponse* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  const int32_t limit = request->limit() == 0 ? 20 : request->limit();
  StatusOr<http::BatchPage> page =
      api_.ListBatches(*owner, request->after(), limit < 0 ? 0 : static_cast<size_t>(limit));
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const jobs::BatchRecord& b : page->data) ToProto(b, response->add_data());
  response->set_has_more(page->has_more);
  return grpc::Status::OK;
}

grpc::Status JobsService::CancelBatch(grpc::ServerContext* ctx, const v1::BatchId* request,
                                      v1::Batch* response) {
  const StatusOr<std::string> owner = Admit(ctx);
  if (!owner.ok()) return ToGrpcStatus(owner.status());
  return Answer(api_.CancelBatch(*owner, request->id()), response);
}

}  // namespace strata::server
