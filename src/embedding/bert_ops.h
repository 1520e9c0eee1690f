// Per-row operations of the BERT forward pass (BertEncoder). Internal to src/embedding/; pure
// functions on caller-owned buffers, any thread.
#pragma once

#include <cstdint>

namespace strata::embedding::internal {

// out = (x - mean) / sqrt(var + eps) * gamma + beta over one row of n (Ba et al. 2016), the
// mean and the biased variance taken in double. `out` may alias `x`.
void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t n, float eps,
               float* out);

// erf(x) in fp32 without libm, so loops over it vectorize: Eigen's rational approximation
// (generic_fast_erf_float: x P(x^2) / Q(x^2) on [-4, 4], +-1 beyond). Absolute error below
// 5e-7 everywhere (libm's erff: ~1e-7).
inline float ErfApprox(float x) {
  // Beyond |x| = 4, erf(x) rounds to +-1 in fp32.
  x = x < -4.0f ? -4.0f : x;
  x = x > 4.0f ? 4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return x * p / q;
}

// x[i] = gelu(x[i] + bias[i]) with the erf form of GELU, 0.5 x (1 + erf(x / sqrt 2))
// (Hendrycks & Gimpel 2016; BERT's "gelu", not the tanh approximation), erf by ErfApprox:
// absolute error below 1e-6 * max(1, |x|).
void AddBiasGelu(float* x, const float* bias, int64_t n);

// x[i] += bias[i] + residual[i].
void AddBiasResidual(float* x, const float* bias, const float* residual, int64_t n);

// x[i] += bias[i].
void AddBias(float* x, const float* bias, int64_t n);

}  // namespace strata::embedding::internal
