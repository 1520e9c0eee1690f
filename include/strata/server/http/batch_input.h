// The input file of a batch job (OpenAI's Batch API): JSONL, one request per line,
//   {"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}
// read and checked line by line before the job is created. A line that cannot run (not a JSON
// object, no or a repeated custom_id, another method or url than the batch's endpoint, a body
// the endpoint's parser refuses, a stream request, another model) becomes a result for the
// error file at once, naming the problem; the others are the job's lines. Blank lines are
// skipped (their number still counts for messages).
//
// Thread rules: plain functions.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/jobs/job_store.h"

namespace strata::server::http {

// The endpoints a batch may target.
inline constexpr std::string_view kBatchEndpoints[] = {"/v1/completions", "/v1/chat/completions",
                                                       "/v1/embeddings"};
bool IsBatchEndpoint(std::string_view endpoint);

struct BatchInputLimits {
  size_t max_lines = 50000;
  size_t max_line_bytes = 1 << 20;
};

struct BatchInput {
  std::vector<jobs::BatchLine> lines;     // to run, in file order
  std::vector<jobs::LineResult> invalid;  // error-file lines of those that cannot
};

// Checks a request line's body for `endpoint` (the batch's); OK or the error to report. The
// server passes one that parses with the endpoint's own parser and checks the model name.
using BatchBodyCheck = std::function<Status(std::string_view endpoint, std::string_view body)>;

// Reads `content` for a batch on `endpoint`. INVALID_ARGUMENT for the file as a whole: empty,
// over max_lines request lines, a line over max_line_bytes.
StatusOr<BatchInput> ParseBatchInput(std::string_view content, std::string_view endpoint,
                                     const BatchBodyCheck& check,
                                     const BatchInputLimits& limits = {});

// A result line of OpenAI's output and error files. `response_body`: JSON text (the endpoint's
// answer, or an {"error": ...} body), or "" for none (null); `error_code`/`error_message`: the
// line's error, or "" for none (null).
std::string BatchResultLine(std::string_view custom_id, int http_status,
                            std::string_view request_id, std::string_view response_body,
                            std::string_view error_code, std::string_view error_message);

}  // namespace strata::server::http
