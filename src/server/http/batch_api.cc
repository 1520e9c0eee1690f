#include "strata/server/http/batch_api.h"

#include <chrono>
#include <utility>

#include "strata/server/http/batch_input.h"

namespace strata::server::http {
namespace {

constexpr int64_t kWindowSeconds = 24 * 3600;  // the one completion_window: "24h"

// The same answer as for an id that does not exist.
Status NotFound(std::string_view kind, std::string_view id) {
  std::string message = "no ";
  message += kind;
  message += " with id '";
  message += id;
  message += '\'';
  return NotFoundError(std::move(message));
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatusOr<jobs::FileRecord> BatchApi::UploadFile(std::string_view owner, std::string_view purpose,
                                                std::string_view filename,
                                                std::string_view content) const {
  if (purpose != "batch") {
    return InvalidArgumentError(
        "purpose must be 'batch' (the only files this server takes are batch inputs), got '" +
        std::string(purpose) + "'");
  }
  return store_->AddFile(purpose, filename.empty() ? "input.jsonl" : filename, content, UnixNow(),
                         owner);
}

StatusOr<jobs::FileRecord> BatchApi::GetFile(std::string_view owner, std::string_view id) const {
  StatusOr<jobs::FileRecord> file = store_->GetFile(id);
  if (file.ok() && file->owner != owner) return NotFound("file", id);
  return file;
}

StatusOr<std::string> BatchApi::FileContent(std::string_view owner, std::string_view id) const {
  STRATA_RETURN_IF_ERROR(GetFile(owner, id).status());
  return store_->FileContent(id);
}

Status BatchApi::DeleteFile(std::string_view owner, std::string_view id) const {
  STRATA_RETURN_IF_ERROR(GetFile(owner, id).status());
  return store_->DeleteFile(id);
}

StatusOr<jobs::BatchRecord> BatchApi::GetBatch(std::string_view owner, std::string_view id) const {
  StatusOr<jobs::BatchRecord> batch = store_->GetBatch(id);
  if (batch.ok() && batch->owner != owner) return NotFound("batch", id);
  return batch;
}

StatusOr<jobs::BatchRecord> BatchApi::CancelBatch(std::string_view owner,
                                                  const std::string& id) const {
  STRATA_RETURN_IF_ERROR(GetBatch(owner, id).status());
  return runner_->Cancel(id);
}

StatusOr<jobs::BatchRecord> BatchApi::CreateBatch(std::string_view owner,
                                                  const std::string& input_file_id,
                                                  const std::string& endpoint,
                                                  const std::string& completion_window,
                                                  const std::string& metadata_json) const {
  if (input_file_id.empty()) return InvalidArgumentError("input_file_id is required");
  if (!IsBatchEndpoint(endpoint)) {
    return InvalidArgumentError(
        "endpoint must be /v1/completions, /v1/chat/completions or /v1/embeddings");
  }
  if (completion_window != "24h") {
    return InvalidArgumentError("completion_window must be '24h'");
  }
  STRATA_ASSIGN_OR_RETURN(jobs::FileRecord file, GetFile(owner, input_file_id));
  if (file.purpose != "batch") {
    return InvalidArgumentError("input_file_id: the file's purpose must be 'batch'");
  }
  STRATA_ASSIGN_OR_RETURN(std::string content, store_->FileContent(input_file_id));
  const BatchLineEnv& env = runner_->env();
  StatusOr<BatchInput> input = ParseBatchInput(
      content, endpoint,
      [&env](std::string_view ep, std::string_view body) { return CheckBatchBody(env, ep, body); });
  if (!input.ok()) {
    return InvalidArgumentError("input_file_id: " + std::string(input.status().message()));
  }
  jobs::BatchRecord proto;
  proto.endpoint = endpoint;
  proto.input_file_id = input_file_id;
  proto.completion_window = completion_window;
  proto.metadata_json = metadata_json;
  proto.owner = std::string(owner);
  const int64_t now = UnixNow();
  STRATA_ASSIGN_OR_RETURN(
      jobs::BatchRecord batch,
      store_->CreateBatch(proto, input->lines, input->invalid, now, kWindowSeconds));
  if (input->lines.empty()) {
    // Nothing to run: every line is in the error file already.
    if (StatusOr<jobs::BatchRecord> done = store_->Complete(batch.id, now); done.ok()) {
      batch = std::move(*done);
    }
  }
  runner_->Wake();
  return batch;
}

StatusOr<BatchPage> BatchApi::ListBatches(std::string_view owner, std::string_view after,
                                          size_t limit) const {
  if (limit < 1 || limit > 100) return InvalidArgumentError("limit must be between 1 and 100");
  BatchPage page;
  page.data =
      store_->ListBatches(after, limit + 1, owner);  // one more: whether there is a next page
  page.has_more = page.data.size() > limit;
  if (page.has_more) page.data.resize(limit);
  return page;
}

}  // namespace strata::server::http
