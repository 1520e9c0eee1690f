#include "bench/load/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "strata/common/check.h"

namespace strata::bench {

double PercentileOfSorted(const std::vector<double>& sorted, double q) {
  STRATA_CHECK(!sorted.empty());
  STRATA_CHECK(q >= 0 && q <= 100);
  const double h = static_cast<double>(sorted.size() - 1) * q / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.count);
  s.p50 = PercentileOfSorted(values, 50);
  s.p90 = PercentileOfSorted(values, 90);
  s.p95 = PercentileOfSorted(values, 95);
  s.p99 = PercentileOfSorted(values, 99);
  s.max = values.back();
  return s;
}

}  // namespace strata::bench
