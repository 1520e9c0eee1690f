#include "strata/backend/cpu/ops.h"

#include <atomic>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace strata::backend::cpu {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Eight partial sums in double: one dependent chain of double adds cost ~4 cycles an element
  // (the compiler may not reorder it), ~5% of a prefill step. The order is fixed per row length,
  // so a row's result never depends on the batch around it.
  constexpr int64_t kLanes = 8;
  double part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  for (; i < n; ++i) part[0] += static_cast<double>(x[i]) * x[i];
  const double sum =
      ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
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

constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
constexpr float kGeluCoef = 0.044715f;

float GeluTanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoef * x * x)));
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

std::atomic<bool> force_scalar{false};

#if defined(__x86_64__)
// exp(t) for |t| <= 87 (normal results only), 8 lanes: t = n ln2 + r with |r| <= ln2/2 (ln2 in
// two parts, Cody & Waite), exp(r) by Cephes' degree-7 polynomial (within 2 ulp of expf),
// times 2^n built in the exponent field.
__attribute__((target("avx2,fma"))) __m256 Exp8(__m256 t) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// out = x / (1 + exp(t)) * up over 8 lanes, for the sigmoid forms of GELU (t = -2u) and SiLU
// (t = -x). Returns a lane mask of |t| > 87, which the caller recomputes in scalar code (the
// tails, where exp under- or overflows; they are rare).
__attribute__((target("avx2,fma"))) int SigmoidMul8(__m256 x, __m256 t, const float* up,
                                                    float* out) {
  const __m256 limit = _mm256_set1_ps(87.0f);
  const __m256 abs_t = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), t);
  const int tails = _mm256_movemask_ps(_mm256_cmp_ps(abs_t, limit, _CMP_GT_OQ));
  const __m256 e = Exp8(_mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-87.0f)), limit));
  const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  _mm256_storeu_ps(out, _mm256_mul_ps(y, _mm256_loadu_ps(up)));
  return tails;
}

// GELU(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3); the
// sigmoid form also avoids the cancellation of 1 + tanh(u) for negative x.
__attribute__((target("avx2,fma"))) void GeluTanhMulAvx2(const float* gate, const float* up,
                                                         int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(kGeluCoef), x2, _mm256_set1_ps(1.0f));
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), x), inner);
    float xs[8];
    _mm256_storeu_ps(xs, x);  // gate may alias out
    int tails = SigmoidMul8(x, _mm256_mul_ps(_mm256_set1_ps(-2.0f), u), up + i, out + i);
    while (tails != 0) {
      const int lane = __builtin_ctz(static_cast<unsigned>(tails));
      out[i + lane] = GeluTanh(xs[lane]) * up[i + lane];
      tails &= tails - 1;
    }
  }
  for (; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

__attribute__((target("avx2,fma"))) void SiluMulAvx2(const float* gate, const float* up, int64_t n,
                                                     float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    float xs[8];
    _mm256_storeu_ps(xs, x);
    int tails = SigmoidMul8(x, _mm256_sub_ps(_mm256_setzero_ps(), x), up + i, out + i);
    while (tails != 0) {
      const int lane = __builtin_ctz(static_cast<unsigned>(tails));
      out[i + lane] = Silu(xs[lane]) * up[i + lane];
      tails &= tails - 1;
    }
  }
  for (; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return have;
}
#endif

bool UseAvx2() {
#if defined(__x86_64__)
  return HaveAvx2() && !force_scalar.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

}  // namespace

void SetOpsForceScalar(bool force) { force_scalar.store(force); }

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
#if defined(__x86_64__)
  if (UseAvx2()) return GeluTanhMulAvx2(gate, up, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
#if defined(__x86_64__)
  if (UseAvx2()) return SiluMulAvx2(gate, up, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
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
