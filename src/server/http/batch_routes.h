// The HTTP API's Files and Batches routes (OpenAI's shape) over a BatchApi:
//   POST   /v1/files                 multipart: purpose=batch, file=<JSONL>  -> file object
//   GET    /v1/files[?purpose=]      -> list
//   GET    /v1/files/{id}            -> file object
//   GET    /v1/files/{id}/content    -> the file's bytes
//   DELETE /v1/files/{id}            -> {"id", "object": "file", "deleted": true}
//   POST   /v1/batches               {"input_file_id", "endpoint", "completion_window": "24h",
//                                     "metadata"} -> batch object (its lines checked up front)
//   GET    /v1/batches[?after=&limit=] -> list, newest first
//   GET    /v1/batches/{id}          -> batch object
//   POST   /v1/batches/{id}/cancel   -> batch object
// Errors have the OpenAI error shape: 400 naming the field, 404 for an unknown id (or another
// API key's).
#pragma once

#include <httplib.h>

#include <string>

#include "strata/server/http/batch_api.h"

namespace strata::server::http {

// Each handler acts for `owner`, the caller's API key name ("" without API keys): BatchApi
// shows a caller only its own files and batches.
struct BatchRoutes {
  BatchApi api;

  using Request = httplib::Request;
  using Response = httplib::Response;
  void CreateFile(const std::string& owner, const Request& req, Response& res) const;
  void ListFiles(const std::string& owner, const Request& req, Response& res) const;
  void GetFile(const std::string& owner, const std::string& id, Response& res) const;
  void FileContent(const std::string& owner, const std::string& id, Response& res) const;
  void DeleteFile(const std::string& owner, const std::string& id, Response& res) const;
  void CreateBatch(const std::string& owner, const Request& req, Response& res) const;
  void ListBatches(const std::string& owner, const Request& req, Response& res) const;
  void GetBatch(const std::string& owner, const std::string& id, Response& res) const;
  void CancelBatch(const std::string& owner, const std::string& id, Response& res) const;
};

}  // namespace strata::server::http
