// BatchApi: the operations of the Files and Batches APIs, the same for both transports (the
// HTTP routes in batch_routes.h and the gRPC Jobs service): checks, the store and the runner.
// Errors are Statuses a transport maps onto its own: INVALID_ARGUMENT naming the field,
// NOT_FOUND for an unknown id, FAILED_PRECONDITION for a file a running job still reads.
//
// Thread rules: every method may be called from any thread; the store and the runner outlive
// the object.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/jobs/job_store.h"
#include "strata/server/http/batch_runner.h"

namespace strata::server::http {

// One page of ListBatches.
struct BatchPage {
  std::vector<jobs::BatchRecord> data;
  bool has_more = false;  // more jobs after the last one
};

class BatchApi {
 public:
  BatchApi(jobs::JobStore* store, BatchRunner* runner) : store_(store), runner_(runner) {}

  // Every operation acts for `owner`, the caller's API key name ("" without API keys): a file
  // or batch another owner created is NOT_FOUND, exactly as an unknown id (nothing says it
  // exists), and lists hold only the owner's.

  // An input file (purpose must be "batch").
  StatusOr<jobs::FileRecord> UploadFile(std::string_view owner, std::string_view purpose,
                                        std::string_view filename, std::string_view content) const;
  StatusOr<jobs::FileRecord> GetFile(std::string_view owner, std::string_view id) const;
  StatusOr<std::string> FileContent(std::string_view owner, std::string_view id) const;
  std::vector<jobs::FileRecord> ListFiles(std::string_view owner, std::string_view purpose) const {
    return store_->ListFiles(purpose, owner);
  }
  Status DeleteFile(std::string_view owner, std::string_view id) const;

  // A job on `input_file_id` for `endpoint` (completion window "24h"), its lines checked now:
  // the bad ones go to its error file. `metadata_json`: a JSON object as text, or "".
  StatusOr<jobs::BatchRecord> CreateBatch(std::string_view owner, const std::string& input_file_id,
                                          const std::string& endpoint,
                                          const std::string& completion_window,
                                          const std::string& metadata_json) const;
  StatusOr<jobs::BatchRecord> GetBatch(std::string_view owner, std::string_view id) const;
  // Newest first, after the job `after` ("" = from the newest); `limit` 1..100.
  StatusOr<BatchPage> ListBatches(std::string_view owner, std::string_view after,
                                  size_t limit) const;
  StatusOr<jobs::BatchRecord> CancelBatch(std::string_view owner, const std::string& id) const;

 private:
  jobs::JobStore* store_;
  BatchRunner* runner_;
};

}  // namespace strata::server::http
