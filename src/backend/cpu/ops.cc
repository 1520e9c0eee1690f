#include "strata/backend/cpu/ops.h"

#include <cmath>

namespace strata::backend::cpu {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void RopeTable(int64_t pos, int64_t rope_dim, float base, float freq_scale,
               const float* freq_factors, float* table) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(rope_dim));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
    const float angle = freq_scale * (theta / ff);
    table[2 * i] = std::cos(angle);
    table[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void RopeNeox(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const float* table) {
  const int64_t half = rope_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = table[2 * i];
      const float s = table[2 * i + 1];
      const float x0 = v[i];
      const float x1 = v[i + half];
      v[i] = x0 * c - x1 * s;
      v[i + half] = x0 * s + x1 * c;
    }
  }
}

void RopeNorm(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const float* table) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < rope_dim / 2; ++i) {
      const float c = table[2 * i];
      const float s = table[2 * i + 1];
      const float x0 = v[2 * i];
      const float x1 = v[2 * i + 1];
      v[2 * i] = x0 * c - x1 * s;
      v[2 * i + 1] = x0 * s + x1 * c;
    }
  }
}

namespace {

float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

}  // namespace

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void ScaleInPlace(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void SoftCapInPlace(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace strata::backend::cpu
