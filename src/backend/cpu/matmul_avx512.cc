// The "avx512" kernel family: AVX-512 F/BW/VL/DQ plus AVX2/FMA/F16C, chosen at run time (see
// matmul.cc). Every function carries the target attribute itself; nothing here needs -m flags.
#include "matmul_internal.h"

#if defined(__x86_64__)

#include <array>
#include <cstring>
#include <utility>

#include "strata/model/fp16.h"
#include "x86_intrinsics.h"  // <immintrin.h>

namespace strata::backend::cpu::internal {
namespace avx512 {
namespace {

#define STRATA_SIMD_NOINLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define STRATA_SIMD_INLINE inline __attribute__((always_inline)) STRATA_SIMD_NOINLINE
#define STRATA_SIMD_AVX512 1

constexpr int kFusedTokens = 4;

// 32 int8 values -> two zmm of floats, d * q + m.
STRATA_SIMD_INLINE void Widen(__m256i q, float d0, float m0, float d1, float m1, __m512& w0,
                              __m512& w1) {
  const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
  const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  w0 = _mm512_fmadd_ps(q0, _mm512_set1_ps(d0), _mm512_set1_ps(m0));
  w1 = _mm512_fmadd_ps(q1, _mm512_set1_ps(d1), _mm512_set1_ps(m1));
}

// 32 int8 values -> two zmm of their float values.
STRATA_SIMD_INLINE void Widen(__m256i q, __m512& q0, __m512& q1) {
  q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
  q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
}

struct StoreSink {
  float* dst;
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float d1,
                                     float m1) const {
    __m512 w0;
    __m512 w1;
    Widen(q, d0, m0, d1, m1, w0, w1);
    _mm512_storeu_ps(dst + e, w0);
    _mm512_storeu_ps(dst + e + 16, w1);
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) const {
    __m512 q0;
    __m512 q1;
    Widen(q, q0, q1);
    _mm512_storeu_ps(dst + e, _mm512_mul_ps(q0, _mm512_set1_ps(d0)));
    _mm512_storeu_ps(dst + e + 16, _mm512_mul_ps(q1, _mm512_set1_ps(d1)));
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d) const { (*this)(e, q, d, d); }
};

// Two accumulators per token (one per 16-element half) so consecutive blocks do not wait on
// each other's FMA latency.
template <int T>
struct FmaSink {
  const float* x;
  int64_t ldx;
  __m512 acc0[T];
  __m512 acc1[T];

  STRATA_SIMD_INLINE FmaSink(const float* x_in, int64_t ldx_in) : x(x_in), ldx(ldx_in) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm512_setzero_ps();
      acc1[t] = _mm512_setzero_ps();
    }
  }

  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float d1, float m1) {
    __m512 w0;
    __m512 w1;
    Widen(q, d0, m0, d1, m1, w0, w1);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float* xt = x + t * ldx + e;
      acc0[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xt + 16), acc1[t]);
    }
  }

  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) {
    (*this)(e, q, d0, 0.0f, d1, 0.0f);
  }

  // One scale for all 32: with one token, scale the block's dot product instead of its 32
  // weights (one multiply fewer on the saturated vector ports).
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d) {
    if constexpr (T == 1) {
      __m512 q0;
      __m512 q1;
      Widen(q, q0, q1);
      const __m512 p = _mm512_fmadd_ps(q1, _mm512_loadu_ps(x + e + 16),
                                       _mm512_mul_ps(q0, _mm512_loadu_ps(x + e)));
      acc0[0] = _mm512_fmadd_ps(p, _mm512_set1_ps(d), acc0[0]);
    } else {
      (*this)(e, q, d, 0.0f, d, 0.0f);
    }
  }

  STRATA_SIMD_INLINE void Finish(float* y, int64_t ldy, bool accumulate) const {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
      y[t * ldy] = accumulate ? y[t * ldy] + s : s;
    }
  }
};

#include "decode_x86.inc"

// ---- fp32 micro-kernel ------------------------------------------------------------------------

// Register tile: kTileRows weight rows x kTileTokens tokens = 24 zmm accumulators, plus 4 weight
// vectors and one activation vector: 29 of the 32 zmm registers. Each step loads 10 vectors for
// 24 FMAs, so the two FMA ports, not the loads, set the pace.
constexpr int kTileRows = 4;
constexpr int kTileTokens = 6;

// [a, b, c, d] -> the four horizontal sums.
STRATA_SIMD_INLINE __m128 Sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
  const __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
  const __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
  // Lane-wise: [a01 a23 b01 b23 | a45 a67 b45 b67], then [a0-3 b0-3 c0-3 d0-3 | a4-7 ...].
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

template <int R, int T>
STRATA_SIMD_INLINE void TileStep(__m512 (&acc)[R][T], const float* w, int64_t ldw, const float* x,
                                 int64_t ldx, int64_t c, __mmask16 mask) {
  __m512 wv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_ps(mask, w + r * ldw + c);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + t * ldx + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
  }
}

template <int R, int T>
STRATA_SIMD_NOINLINE void Tile(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k,
                               float* y, int64_t ldy, bool accumulate) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) TileStep<R, T>(acc, w, ldw, x, ldx, c, 0xffff);
  if (c < k) {
    TileStep<R, T>(acc, w, ldw, x, ldx, c, static_cast<__mmask16>((1u << (k - c)) - 1));
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float* yt = y + t * ldy;
    if constexpr (R == 4) {
      __m128 s = Sum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]);
      if (accumulate) s = _mm_add_ps(s, _mm_loadu_ps(yt));
      _mm_storeu_ps(yt, s);
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float s = _mm512_reduce_add_ps(acc[r][t]);
        yt[r] = accumulate ? yt[r] + s : s;
      }
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                        bool);

template <int R, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> TileRow(std::index_sequence<I...>) {
  return {&Tile<R, static_cast<int>(I) + 1>...};
}

// kTiles[r - 1][t - 1] handles r rows x t tokens.
constexpr std::array<std::array<TileFn, kTileTokens>, kTileRows> kTiles = {
    TileRow<1>(std::make_index_sequence<kTileTokens>()),
    TileRow<2>(std::make_index_sequence<kTileTokens>()),
    TileRow<3>(std::make_index_sequence<kTileTokens>()),
    TileRow<4>(std::make_index_sequence<kTileTokens>()),
};

// A GemmFn. Token groups outside, row groups inside: the group's activations (6 x k floats)
// stay in L1 while the weight rows stream from L2.
void Gemm(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx, int64_t n_tokens,
          int64_t k, float* y, int64_t ldy, bool accumulate) {
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
    const int64_t tn = n_tokens - t0 < kTileTokens ? n_tokens - t0 : kTileTokens;
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
      const int64_t rn = rows - r0 < kTileRows ? rows - r0 : kTileRows;
      kTiles[rn - 1][tn - 1](w + r0 * ldw, ldw, x + t0 * ldx, ldx, k, y + t0 * ldy + r0, ldy,
                             accumulate);
    }
  }
}

#undef STRATA_SIMD_AVX512
#undef STRATA_SIMD_INLINE
#undef STRATA_SIMD_NOINLINE

}  // namespace
}  // namespace avx512

const KernelFamily* Avx512Family() {
  static const KernelFamily family{"avx512", &avx512::Gemm, &avx512::DequantFor, &avx512::FusedFor,
                                   /*max_fused_tokens=*/4};
  return &family;
}

}  // namespace strata::backend::cpu::internal

#else  // !defined(__x86_64__)

namespace strata::backend::cpu::internal {
const KernelFamily* Avx512Family() { return nullptr; }
}  // namespace strata::backend::cpu::internal

#endif
