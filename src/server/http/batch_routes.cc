#include "batch_routes.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "strata/server/http/openai_request.h"

namespace strata::server::http {
namespace {

using nlohmann::json;

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// The OpenAI error for `status`; `param` names the field when the message does not start with
// one.
void SendError(httplib::Response& res, const Status& status, const std::string& param = "") {
  ApiError e = ApiErrorFromStatus(status, Endpoint::kCompletions);
  if (!param.empty() && e.param.empty()) e.param = param;
  res.status = e.http_status;
  res.set_content(ErrorBody(e), "application/json");
}

json Nullable(int64_t unix_seconds) {
  return unix_seconds == 0 ? json(nullptr) : json(unix_seconds);
}

json Nullable(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

json FileJson(const jobs::FileRecord& f) {
  return {{"id", f.id},
          {"object", "file"},
          {"bytes", f.bytes},
          {"created_at", f.created_at},
          {"filename", f.filename},
          {"purpose", f.purpose},
          {"status", "processed"},
          {"status_details", nullptr}};
}

json BatchJson(const jobs::BatchRecord& b) {
  json metadata = nullptr;
  if (!b.metadata_json.empty()) {
    metadata = json::parse(b.metadata_json, nullptr, /*allow_exceptions=*/false);
    if (metadata.is_discarded()) metadata = nullptr;
  }
  return {
      {"id", b.id},
      {"object", "batch"},
      {"endpoint", b.endpoint},
      {"errors", nullptr},
      {"input_file_id", b.input_file_id},
      {"completion_window", b.completion_window},
      {"status", std::string(jobs::BatchStateName(b.state))},
      {"output_file_id", Nullable(b.output_file_id)},
      {"error_file_id", Nullable(b.error_file_id)},
      {"created_at", b.created_at},
      {"in_progress_at", Nullable(b.in_progress_at)},
      {"expires_at", Nullable(b.expires_at)},
      {"finalizing_at", Nullable(b.finalizing_at)},
      {"completed_at", Nullable(b.completed_at)},
      {"failed_at", Nullable(b.failed_at)},
      {"expired_at", Nullable(b.expired_at)},
      {"cancelling_at", Nullable(b.cancelling_at)},
      {"cancelled_at", Nullable(b.cancelled_at)},
      {"request_counts",
       {{"total", b.counts.total}, {"completed", b.counts.completed}, {"failed", b.counts.failed}}},
      {"metadata", std::move(metadata)}};
}

// OpenAI's metadata: at most 16 string pairs, keys up to 64 characters, values up to 512.
Status CheckMetadata(const json& metadata) {
  if (metadata.is_null()) return OkStatus();
  if (!metadata.is_object()) return InvalidArgumentError("metadata must be an object");
  if (metadata.size() > 16) return InvalidArgumentError("metadata has more than 16 keys");
  for (const auto& [key, value] : metadata.items()) {
    if (key.size() > 64 || !value.is_string() || value.get<std::string>().size() > 512) {
      return InvalidArgumentError(
          "metadata must map keys of at most 64 characters to strings of at most 512");
    }
  }
  return OkStatus();
}

}  // namespace

void BatchRoutes::CreateFile(const std::string& owner, const Request& req, Response& res) const {
  if (!req.is_multipart_form_data() || !req.has_file("file")) {
    return SendError(res, InvalidArgumentError("a multipart form with a 'file' part is required"),
                     "file");
  }
  const std::string purpose = req.has_file("purpose") ? req.get_file_value("purpose").content : "";
  const httplib::MultipartFormData& file = req.get_file_value("file");
  StatusOr<jobs::FileRecord> added = api.UploadFile(owner, purpose, file.filename, file.content);
  if (!added.ok()) return SendError(res, added.status(), "purpose");
  SendJson(res, 200, FileJson(*added));
}

void BatchRoutes::ListFiles(const std::string& owner, const Request& req, Response& res) const {
  json data = json::array();
  for (const jobs::FileRecord& f : api.ListFiles(owner, req.get_param_value("purpose"))) {
    data.push_back(FileJson(f));
  }
  SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}, {"has_more", false}});
}

void BatchRoutes::GetFile(const std::string& owner, const std::string& id, Response& res) const {
  StatusOr<jobs::FileRecord> file = api.GetFile(owner, id);
  if (!file.ok()) return SendError(res, file.status());
  SendJson(res, 200, FileJson(*file));
}

void BatchRoutes::FileContent(const std::string& owner, const std::string& id,
                              Response& res) const {
  StatusOr<std::string> content = api.FileContent(owner, id);
  if (!content.ok()) return SendError(res, content.status());
  res.status = 200;
  res.set_content(std::move(*content), "application/octet-stream");
}

void BatchRoutes::DeleteFile(const std::string& owner, const std::string& id, Response& res) const {
  if (Status deleted = api.DeleteFile(owner, id); !deleted.ok()) return SendError(res, deleted);
  SendJson(res, 200, {{"id", id}, {"object", "file"}, {"deleted", true}});
}

void BatchRoutes::CreateBatch(const std::string& owner, const Request& req, Response& res) const {
  const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return SendError(res, InvalidArgumentError("the request body must be a JSON object"));
  }
  const auto text = [&](const char* name) -> std::string {
    const auto it = body.find(name);
    return it != body.end() && it->is_string() ? it->get<std::string>() : "";
  };
  const json metadata = body.value("metadata", json(nullptr));
  if (Status checked = CheckMetadata(metadata); !checked.ok()) {
    return SendError(res, checked, "metadata");
  }
  StatusOr<jobs::BatchRecord> batch =
      api.CreateBatch(owner, text("input_file_id"), text("endpoint"), text("completion_window"),
                      metadata.is_null() ? "" : metadata.dump());
  if (!batch.ok()) return SendError(res, batch.status());
  SendJson(res, 200, BatchJson(*batch));
}

void BatchRoutes::ListBatches(const std::string& owner, const Request& req, Response& res) const {
  size_t limit = 20;
  if (req.has_param("limit")) {
    const std::string given = req.get_param_value("limit");
    const bool digits =
        !given.empty() && given.size() <= 3 && std::all_of(given.begin(), given.end(), ::isdigit);
    limit = digits ? static_cast<size_t>(std::stoi(given)) : 0;
  }
  StatusOr<BatchPage> page = api.ListBatches(owner, req.get_param_value("after"), limit);
  if (!page.ok()) return SendError(res, page.status(), "limit");
  json data = json::array();
  for (const jobs::BatchRecord& b : page->data) data.push_back(BatchJson(b));
  SendJson(res, 200,
           {{"object", "list"},
            {"data", std::move(data)},
            {"first_id", page->data.empty() ? json(nullptr) : json(page->data.front().id)},
            {"last_id", page->data.empty() ? json(nullptr) : json(page->data.back().id)},
            {"has_more", page->has_more}});
}

void BatchRoutes::GetBatch(const std::string& owner, const std::string& id, Response& res) const {
  StatusOr<jobs::BatchRecord> batch = api.GetBatch(owner, id);
  if (!batch.ok()) return SendError(res, batch.status());
  SendJson(res, 200, BatchJson(*batch));
}

void BatchRoutes::CancelBatch(const std::string& owner, const std::string& id,
                              Response& res) const {
  StatusOr<jobs::BatchRecord> batch = api.CancelBatch(owner, id);
  if (!batch.ok()) return SendError(res, batch.status());
  SendJson(res, 200, BatchJson(*batch));
}

}  // namespace strata::server::http
