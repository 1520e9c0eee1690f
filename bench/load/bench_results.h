// BenchResults: one run's numbers, aggregated from its requests, and the SLOs goodput counts
// against.
//
// Which samples feed each latency: TTFT, E2E and TPOT one per successful request (TPOT only for
// requests with >= 2 output tokens); ITL every inter-token gap of every successful request,
// pooled. Throughputs divide by the run's wall time (first send -> last completion).
//
// Thread rules: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/load/request_result.h"
#include "bench/load/stats.h"

namespace strata::bench {

// Service-level objectives in milliseconds; unset ones do not constrain.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  // Every inter-token gap of the request must be within it (its worst gap, not a mean).
  std::optional<double> itl_ms;
};

// Whether a request counts towards goodput: ok and within every SLO given. A request with one
// output token has no TPOT and no gaps, so only its TTFT is checked.
bool MeetsSlo(const RequestResult& result, const Slo& slo);

struct BenchResults {
  double duration_s = 0;
  int64_t completed = 0;
  int64_t errors = 0;
  std::map<std::string, int64_t> errors_by_kind;
  // Completed requests whose output length differs from the one asked for.
  int64_t output_length_mismatches = 0;
  int64_t total_prompt_tokens = 0;  // of completed requests
  int64_t total_output_tokens = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;  // (prompt + output) / duration
  // Completed requests meeting the SLOs per second; equals requests_per_s when none is given.
  double goodput_requests_per_s = 0;
  Summary ttft_ms;
  Summary itl_ms;
  Summary tpot_ms;
  Summary e2e_ms;
};

// Aggregates `results` (warmup excluded) over `duration_s` seconds (> 0).
BenchResults AggregateResults(const std::vector<RequestResult>& results, double duration_s,
                              const Slo& slo);

}  // namespace strata::bench
