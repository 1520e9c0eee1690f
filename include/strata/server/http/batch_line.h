// One line of a batch job run through the serving core, answered as the endpoint would answer
// it over HTTP (the same parsers, translator, engine and caches), as background work at the
// batch priority: interactive requests are admitted first, batch sequences are preempted first,
// and while interactive requests run the engine gives batch sequences only the step time
// --batch-max-slowdown allows (engine::Request::background).
//
// A line ends with a result for the output file (the endpoint answered 200) or the error file
// (it answered an error), or with no result when it could not run now (the server is loading
// or draining, the queue is full, the runner stops or the batch was cancelled): the line stays
// pending and runs later.
//
// Thread rules: plain functions, any thread; RunBatchLine blocks until the line is done.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "strata/common/status.h"
#include "strata/embedding/text_embedder.h"
#include "strata/jobs/job_store.h"
#include "strata/server/serving_state.h"

namespace strata::server::http {

struct BatchLineEnv {
  ServingState* state = nullptr;
  std::string model_id;                 // the name lines give as "model" (or the GGUF's name)
  int32_t completions_max_tokens = 16;  // /v1/completions without max_tokens
  embedding::TextEmbedder* embeddings = nullptr;  // null: /v1/embeddings lines fail (404)
  int32_t priority = std::numeric_limits<int32_t>::min();
};

// The check ParseBatchInput applies to each body: the endpoint's parser accepts it, it does
// not ask for a stream, and it names the served model.
Status CheckBatchBody(const BatchLineEnv& env, std::string_view endpoint, std::string_view body);

// Runs `line` of a batch on `endpoint`. `stop` is polled while the request runs: true cancels
// it (and the line gets no result).
std::optional<jobs::LineResult> RunBatchLine(const BatchLineEnv& env, std::string_view endpoint,
                                             const jobs::BatchLine& line,
                                             const std::function<bool()>& stop);

}  // namespace strata::server::http
