#include "bench/load/arrival_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace strata::bench {
namespace {

struct Moments {
  double mean = 0;
  double cv = 0;  // coefficient of variation
};

Moments Draw(double rate, double burstiness, int n) {
  ArrivalProcess p(rate, burstiness, /*seed=*/1234);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double g = p.NextGapSeconds();
    EXPECT_GE(g, 0);
    sum += g;
    sum_sq += g * g;
  }
  Moments m;
  m.mean = sum / n;
  m.cv = std::sqrt(sum_sq / n - m.mean * m.mean) / m.mean;
  return m;
}

TEST(ArrivalProcess, PoissonGapsHaveMeanOneOverRateAndUnitCv) {
  // Exponential gaps: mean 1/rate, CV 1. With 100k draws the mean's standard error is 0.3%;
  // 3% bounds never flake for a fixed seed yet catch a wrong scale.
  const Moments m = Draw(4.0, 1.0, 100000);
  EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.03);
  EXPECT_NEAR(m.cv, 1.0, 0.03);
}

TEST(ArrivalProcess, BurstinessChangesTheSpreadNotTheMean) {
  // Gamma(shape k): CV = 1/sqrt(k).
  for (double k : {0.25, 4.0}) {
    const Moments m = Draw(10.0, k, 100000);
    EXPECT_NEAR(m.mean, 0.1, 0.1 * 0.05) << k;
    EXPECT_NEAR(m.cv, 1 / std::sqrt(k), 0.05 / std::sqrt(k)) << k;
  }
}

TEST(ArrivalProcess, InfiniteRateSendsAtOnce) {
  ArrivalProcess p(std::numeric_limits<double>::infinity(), 1.0, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.NextGapSeconds(), 0);
}

}  // namespace
}  // namespace strata::bench
