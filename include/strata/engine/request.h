// Request: what a client asked for, as the frontend hands it to the Engine. A plain value;
// the engine keeps its own execution state per request in a Sequence (engine thread only).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/sampling/sampling_params.h"

namespace strata::engine {

using RequestId = int64_t;

struct Request {
  std::vector<int32_t> prompt;      // token ids, BOS included where the model wants one
  sampling::SamplingParams params;  // Engine::Submit validates it
  // Scheduling class: higher is admitted first and preempted last; FCFS within a class.
  int32_t priority = 0;
};

}  // namespace strata::engine
