#include "embedding/bert_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace strata::embedding::internal {
namespace {

TEST(BertOps, ErfApproxStaysWithinItsStatedError) {
  double worst = 0;
  float worst_x = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i) * 5e-5f;  // [-10, 10]
    const double err = std::abs(double(ErfApprox(x)) - std::erf(double(x)));
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 5e-7) << "at x = " << worst_x;
  EXPECT_EQ(ErfApprox(0.0f), 0.0f);
  EXPECT_EQ(ErfApprox(100.0f), 1.0f);
  EXPECT_EQ(ErfApprox(-100.0f), -1.0f);
}

TEST(BertOps, AddBiasGeluMatchesTheErfFormulaInDouble) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int n : {1, 7, 97, 1536}) {
    std::vector<float> x(n), bias(n);
    for (int i = 0; i < n; ++i) {
      x[i] = normal(rng);
      bias[i] = normal(rng);
    }
    std::vector<float> y = x;
    AddBiasGelu(y.data(), bias.data(), n);
    for (int i = 0; i < n; ++i) {
      const double v = double(x[i] + bias[i]);
      const double want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::abs(v))) << "n " << n << " i " << i;
    }
  }
}

TEST(BertOps, LayerNormMatchesADoubleReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  for (int n : {1, 7, 384, 385}) {
    std::vector<float> x(n), gamma(n), beta(n), out(n);
    for (int i = 0; i < n; ++i) {
      x[i] = normal(rng);
      gamma[i] = normal(rng);
      beta[i] = normal(rng);
    }
    LayerNorm(x.data(), gamma.data(), beta.data(), n, 1e-12f, out.data());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    for (int i = 0; i < n; ++i) {
      const double want = (x[i] - mean) / std::sqrt(var + 1e-12) * gamma[i] + beta[i];
      EXPECT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::abs(want))) << "n " << n;
    }
    LayerNorm(x.data(), gamma.data(), beta.data(), n, 1e-12f, x.data());  // in place
    EXPECT_EQ(x, out);
  }
}

}  // namespace
}  // namespace strata::embedding::internal
