#include "bench/load/bench_results.h"

#include <algorithm>

namespace strata::bench {

bool MeetsSlo(const RequestResult& result, const Slo& slo) {
  if (!result.ok) return false;
  if (slo.ttft_ms && result.ttft_s * 1e3 > *slo.ttft_ms) return false;
  if (slo.tpot_ms) {
    const std::optional<double> tpot = TpotSeconds(result);
    if (tpot && *tpot * 1e3 > *slo.tpot_ms) return false;
  }
  if (slo.itl_ms && !result.itl_s.empty()) {
    const double worst = *std::max_element(result.itl_s.begin(), result.itl_s.end());
    if (worst * 1e3 > *slo.itl_ms) return false;
  }
  return true;
}

BenchResults AggregateResults(const std::vector<RequestResult>& results, double duration_s,
                              const Slo& slo) {
  BenchResults out;
  out.duration_s = duration_s;
  std::vector<double> ttft, itl, tpot, e2e;
  int64_t good = 0;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++out.errors;
      ++out.errors_by_kind[r.error_kind.empty() ? "unknown" : r.error_kind];
      continue;
    }
    ++out.completed;
    if (r.requested_output_tokens > 0 && r.output_tokens != r.requested_output_tokens) {
      ++out.output_length_mismatches;
    }
    out.total_prompt_tokens += r.prompt_tokens;
    out.total_output_tokens += r.output_tokens;
    if (r.output_tokens > 0) ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
    if (const std::optional<double> t = TpotSeconds(r)) tpot.push_back(*t * 1e3);
    if (MeetsSlo(r, slo)) ++good;
  }
  if (duration_s > 0) {
    out.requests_per_s = static_cast<double>(out.completed) / duration_s;
    out.output_tokens_per_s = static_cast<double>(out.total_output_tokens) / duration_s;
    out.total_tokens_per_s =
        static_cast<double>(out.total_prompt_tokens + out.total_output_tokens) / duration_s;
    out.goodput_requests_per_s = static_cast<double>(good) / duration_s;
  }
  out.ttft_ms = Summarize(std::move(ttft));
  out.itl_ms = Summarize(std::move(itl));
  out.tpot_ms = Summarize(std::move(tpot));
  out.e2e_ms = Summarize(std::move(e2e));
  return out;
}

}  // namespace strata::bench
