#include "bench/load/request_result.h"

namespace strata::bench {

std::optional<double> TpotSeconds(const RequestResult& result) {
  if (!result.ok || result.output_tokens < 2) return std::nullopt;
  return (result.e2e_s - result.ttft_s) / static_cast<double>(result.output_tokens - 1);
}

}  // namespace strata::bench
