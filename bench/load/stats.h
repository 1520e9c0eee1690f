// Percentiles and the mean/P50/P90/P95/P99/max summary strata-bench reports for a latency.
//
// Percentile method: linear interpolation between closest ranks, numpy's default
// (`numpy.percentile(..., method="linear")`, Hyndman & Fan 1996 type 7): for n sorted values
// x[0..n-1] and q in [0, 100], h = (n - 1) * q / 100 and the percentile is
// x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). P0 is the minimum, P100 the
// maximum; one value is every percentile.
//
// Thread rules: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::bench {

// The q-th percentile (q in [0, 100]) of `sorted` (ascending, non-empty) by the rule above.
double PercentileOfSorted(const std::vector<double>& sorted, double q);

// A latency's summary, in the unit of the values summarized. `count` == 0 means no samples (all
// other fields are then 0 and the report prints them as null).
struct Summary {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// Summary of `values` (any order; taken by value to sort).
Summary Summarize(std::vector<double> values);

}  // namespace strata::bench
