// RunLoad: sends a workload's requests to a target, closed loop (a fixed number in flight) or
// open loop (sends on an arrival process, optionally capped in flight), and collects what each
// request measured.
//
// Bounds: stops sending after `num_requests` (if > 0) and/or once `duration_s` (if > 0) has
// passed since the first send, then waits for the requests in flight, which count. Once more than
// `max_errors` requests failed it stops sending early (stopped_early, with the reason).
//
// Thread rules: blocks the calling thread, which is the only one calling client.Start.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench/load/request_result.h"
#include "bench/load/target_client.h"
#include "bench/load/workload.h"

namespace strata::bench {

struct LoadOptions {
  int64_t concurrency = 1;  // max requests in flight; 0 = no cap (open loop only)
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  double burstiness = 1;  // gamma shape of the gaps (1 = Poisson)
  int64_t num_requests = 0;
  double duration_s = 0;
  int64_t max_errors = 10;
  uint64_t seed = 0;        // of the arrival process
  int64_t first_index = 0;  // Workload::Request(first_index + i) is the i-th request
};

struct LoadOutcome {
  std::vector<RequestResult> results;  // in completion order
  double duration_s = 0;               // first send -> last completion
  bool stopped_early = false;
  std::string stop_reason;
  std::string first_error;  // the first failed request's message
};

LoadOutcome RunLoad(TargetClient& client, const Workload& workload, const LoadOptions& options);

}  // namespace strata::bench
