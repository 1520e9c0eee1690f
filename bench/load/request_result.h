// What one benchmark request measured, client side. Times are seconds on the client's steady
// clock, relative to the moment the request was sent.
//
// Thread rules: a plain value; filled by one client callback, then handed to the load runner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::bench {

struct RequestResult {
  bool ok = false;
  // When !ok: a short class for the error counts ("UNAVAILABLE", "connect", "http_503",
  // "protocol", ...) and a message for the first-error line.
  std::string error_kind;
  std::string error_message;

  double ttft_s = 0;  // send -> first output token (0 when none came)
  double e2e_s = 0;   // send -> the stream's end
  // Gaps between consecutive output tokens (output_tokens - 1 of them once ok; see
  // TokenTimeline for how a message with several tokens is split).
  std::vector<double> itl_s;
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t requested_output_tokens = 0;  // what the workload asked for (max_tokens)
};

// Time per output token after the first: (E2E - TTFT) / (output_tokens - 1). Empty for a failed
// request or one with fewer than 2 output tokens (no gap to measure).
std::optional<double> TpotSeconds(const RequestResult& result);

}  // namespace strata::bench
