// BenchConfig: strata-bench's command line — every flag, its default, its check — and the
// "config" object of the JSON report.
//
// Thread rules: a plain value.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/load/bench_results.h"
#include "bench/load/workload.h"
#include "strata/common/status.h"

namespace strata::bench {

struct BenchConfig {
  std::string target = "strata";  // "strata" | "openai"
  std::string addr = "127.0.0.1:50051";
  std::string url = "http://127.0.0.1:8080";
  std::string model;
  int64_t channels = 1;
  // Closed loop by default (1 in flight); with --request-rate, 0 = no cap on requests in flight.
  std::optional<int64_t> concurrency;
  double request_rate = 0;  // 0 = not given (send as soon as a slot frees)
  double burstiness = 1;
  int64_t num_requests = 0;  // 0 = not given
  double duration_s = 0;     // 0 = not given
  int64_t warmup_requests = 0;
  std::string prompt_tokens_text = "128";
  std::string output_tokens_text = "128";
  IntRange prompt_tokens{128, 128};
  IntRange output_tokens{128, 128};
  std::string dataset;
  std::string token_ids_text = "1000:29999";
  IntRange token_ids{1000, 29999};
  uint64_t seed = 0;
  double temperature = 0;  // 0: greedy
  double top_p = 1;
  int64_t top_k = -1;  // -1: not sent
  double min_p = -1;   // -1: not sent
  Slo slo;
  int64_t max_errors = 10;
  double request_timeout_s = 600;
  double wait_server_s = 30;
  std::string json_path;
  std::string label;

  // In-flight cap as used: the flag, else 1 (closed loop) or 0 (open loop, uncapped).
  int64_t EffectiveConcurrency() const;
  // Requests to send when neither --num-requests nor --duration was given: 100.
  int64_t EffectiveNumRequests() const;
};

// The usage text for --help.
extern const char kBenchUsage[];

// Parses argv. kInvalidArgument naming the flag for an unknown flag, a missing or bad value, or
// an inconsistent combination. `*help` is set when --help was asked for.
StatusOr<BenchConfig> ParseBenchFlags(int argc, const char* const* argv, bool* help);

// The "config" object of the report: every flag value as used.
nlohmann::ordered_json ConfigJson(const BenchConfig& config);

}  // namespace strata::bench
