// Request: what a client asked for, as the frontend hands it to the Engine. A plain value;
// the engine keeps its own execution state per request in a Sequence (engine thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/engine/token_constraint.h"
#include "strata/sampling/sampling_params.h"

namespace strata::engine {

using RequestId = int64_t;

// What a response cache wrapped around the engine may do with a request (cache/); the engine
// itself ignores it. Filled by the frontend's translator.
struct CachePolicy {
  // The request may be answered from, and stored in, a response cache: it is deterministic
  // (greedy, or a seed the client chose) and the client did not opt out.
  bool cacheable = false;
  std::string cache_namespace;    // entries are shared only within a namespace ("" = default)
  int64_t ttl_seconds = 0;        // > 0: at most this long (the server's default caps it)
  std::vector<std::string> tags;  // labels an operator can invalidate the entry by
  // The request may also be answered with the answer of an earlier request whose text is
  // similar (the semantic cache), when everything else about the two is equal: `semantic_text`
  // is the text compared (the prompt, or a chat's last user message), `semantic_context` what
  // else must be equal (a chat's earlier turns, rendered). Empty text: no semantic lookup.
  bool semantic = false;
  std::string semantic_text;
  std::string semantic_context;
};

struct Request {
  std::vector<int32_t> prompt;      // token ids, BOS included where the model wants one
  sampling::SamplingParams params;  // Engine::Submit validates it
  // Scheduling class: higher is admitted first and preempted last; FCFS within a class.
  int32_t priority = 0;
  // Background work (batch job lines): while any other request is held, the engine gives
  // background requests only the step time --batch-max-slowdown allows (Scheduler,
  // StepCostModel); with nothing else to do they take whole steps. Served and preempted after
  // every other request whatever their priorities.
  bool background = false;
  // May the engine speculate for this request (when it runs a proposer)? Outputs are the same
  // either way (speculation is exact); a client may opt out, e.g. to measure without it.
  bool speculative = true;
  CachePolicy cache;
  // Structured output: the tokens the output may consist of (token_constraint.h); null = any.
  std::shared_ptr<TokenConstraint> constraint;
  // Record when each forward over its prompt ran (RequestStages::prefill_chunks), for a trace
  // of the request. The other stage times are kept for every request.
  bool record_stages = false;
};

}  // namespace strata::engine
