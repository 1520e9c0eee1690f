#include "bench/load/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace strata::bench {
namespace {

struct NumpyCase {
  std::vector<double> values;
  // numpy.percentile(values, q) for q = 0, 25, 50, 90, 95, 99, 100 (numpy 1.x/2.x default).
  std::vector<double> expected;
};

TEST(Percentile, MatchesNumpyLinearInterpolationOnSmallArrays) {
  const std::vector<double> qs = {0, 25, 50, 90, 95, 99, 100};
  const std::vector<NumpyCase> cases = {
      {{3.0}, {3, 3, 3, 3, 3, 3, 3}},
      {{1.0, 2.0}, {1.0, 1.25, 1.5, 1.9, 1.95, 1.99, 2.0}},
      {{5, 1, 4, 2, 3}, {1.0, 2.0, 3.0, 4.6, 4.8, 4.96, 5.0}},
      {{0.5, 10.0, 2.5, 7.25, 1.0, 3.0, 9.0}, {0.5, 1.75, 3.0, 9.4, 9.7, 9.94, 10.0}},
  };
  for (const NumpyCase& c : cases) {
    std::vector<double> sorted = c.values;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_NEAR(PercentileOfSorted(sorted, qs[i]), c.expected[i], 1e-12)
          << "n=" << sorted.size() << " q=" << qs[i];
    }
  }
}

TEST(Percentile, EvenlySpacedValuesGiveTheirRank) {
  // 0, 1, ..., 1000: the q-th percentile is exactly 10 * q.
  std::vector<double> values;
  for (int i = 0; i <= 1000; ++i) values.push_back(i);
  for (double q : {0.0, 1.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0}) {
    EXPECT_NEAR(PercentileOfSorted(values, q), 10 * q, 1e-9) << q;
  }
}

TEST(Summarize, ExponentialSampleQuantilesMatchTheDistribution) {
  // Exp(1): quantile(p) = -ln(1 - p), mean 1. 200k draws with a fixed seed; the sampling error
  // of the P99 is about 0.05 here, so 0.15 never flakes yet catches an off-by-rank rule.
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> exp(1.0);
  std::vector<double> values(200000);
  for (double& v : values) v = exp(rng);
  const Summary s = Summarize(values);
  EXPECT_EQ(s.count, 200000);
  EXPECT_NEAR(s.mean, 1.0, 0.01);
  EXPECT_NEAR(s.p50, std::log(2.0), 0.01);
  EXPECT_NEAR(s.p90, -std::log(0.10), 0.03);
  EXPECT_NEAR(s.p95, -std::log(0.05), 0.05);
  EXPECT_NEAR(s.p99, -std::log(0.01), 0.15);
  EXPECT_EQ(s.max, *std::max_element(values.begin(), values.end()));
}

TEST(Summarize, OrdersPercentilesAndIgnoresInputOrder) {
  const Summary s = Summarize({9, 1, 5, 3, 7});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_DOUBLE_EQ(s.p50, 5);
  EXPECT_LE(s.p50, s.p90);
  EXPECT_LE(s.p90, s.p95);
  EXPECT_LE(s.p95, s.p99);
  EXPECT_LE(s.p99, s.max);
  EXPECT_DOUBLE_EQ(s.max, 9);
}

TEST(Summarize, EmptyInputHasCountZero) {
  const Summary s = Summarize({});
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.max, 0);
}

}  // namespace
}  // namespace strata::bench
