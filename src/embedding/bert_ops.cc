#include "bert_ops.h"

#include <cmath>

namespace strata::embedding::internal {

void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t n, float eps,
               float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  const auto m = static_cast<float>(mean);
  const auto s = static_cast<float>(inv);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * s * gamma[i] + beta[i];
}

void AddBiasGelu(float* x, const float* bias, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + bias[i];
    x[i] = 0.5f * v * (1.0f + ErfApprox(v * kInvSqrt2));
  }
}

void AddBiasResidual(float* x, const float* bias, const float* residual, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += bias[i] + residual[i];
}

void AddBias(float* x, const float* bias, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
}

}  // namespace strata::embedding::internal
