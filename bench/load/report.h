// The run's report: a human table on stdout and one JSON line (appended to --json FILE):
//   {"label": TEXT, "config": {...every flag...}, "server": {...}, "results": {...}}
// "results" keys: duration_s, completed, errors, errors_by_kind {kind: n},
// output_length_mismatches, stopped_early, stop_reason, total_prompt_tokens,
// total_output_tokens, requests_per_s, output_tokens_per_s, total_tokens_per_s,
// goodput_requests_per_s, and ttft_ms / itl_ms / tpot_ms / e2e_ms each
// {"count", "mean", "p50", "p90", "p95", "p99", "max"} (null numbers when count is 0).
//
// Thread rules: pure functions, except AppendJsonLine (writes a file).
#pragma once

#include <cstdio>
#include <string>

#include "bench/load/bench_config.h"
#include "bench/load/bench_results.h"
#include "bench/load/load_runner.h"
#include "strata/common/status.h"

namespace strata::bench {

// The table strata-bench prints.
std::string FormatTable(const BenchConfig& config, const BenchResults& results,
                        const LoadOutcome& outcome);

// The JSON line (no trailing newline; invalid UTF-8 in a string becomes U+FFFD). `server_json`
// is embedded as parsed; text that is not one JSON object becomes {}.
std::string FormatJsonLine(const BenchConfig& config, const std::string& server_json,
                           const BenchResults& results, const LoadOutcome& outcome);

// Appends `line` and a newline to `path`; kNotFound when it cannot be opened.
Status AppendJsonLine(const std::string& path, const std::string& line);

}  // namespace strata::bench
