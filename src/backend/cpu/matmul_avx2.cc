// The "avx2" kernel family: AVX2 + FMA + F16C, chosen at run time (see matmul.cc). Every
// function carries the target attribute itself; nothing here needs -m flags.
#include "matmul_internal.h"

#if defined(__x86_64__)

#include <array>
#include <cstring>
#include <utility>

#include "strata/model/fp16.h"
#include "x86_intrinsics.h"  // <immintrin.h>

namespace strata::backend::cpu::internal {
namespace avx2 {
namespace {

#define STRATA_SIMD_NOINLINE __attribute__((target("avx2,fma,f16c")))
#define STRATA_SIMD_INLINE inline __attribute__((always_inline)) STRATA_SIMD_NOINLINE

// 16 ymm registers: two tokens x two rows x two accumulators, plus the decoded weights.
constexpr int kFusedTokens = 2;

// 32 int8 values -> four ymm of floats, d * q + m (d0, m0 for the first 16).
STRATA_SIMD_INLINE void Widen(__m256i q, float d0, float m0, float d1, float m1, __m256 (&w)[4]) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m256 vd0 = _mm256_set1_ps(d0);
  const __m256 vm0 = _mm256_set1_ps(m0);
  const __m256 vd1 = _mm256_set1_ps(d1);
  const __m256 vm1 = _mm256_set1_ps(m1);
  w[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vd0, vm0);
  w[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo))), vd0,
                         vm0);
  w[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vd1, vm1);
  w[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi))), vd1,
                         vm1);
}

STRATA_SIMD_INLINE float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct StoreSink {
  float* dst;
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float d1,
                                     float m1) const {
    __m256 w[4];
    Widen(q, d0, m0, d1, m1, w);
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(dst + e + 8 * i, w[i]);
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) const {
    (*this)(e, q, d0, 0.0f, d1, 0.0f);
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d) const {
    (*this)(e, q, d, 0.0f, d, 0.0f);
  }
};

template <int T>
struct FmaSink {
  const float* x;
  int64_t ldx;
  __m256 acc0[T];
  __m256 acc1[T];

  STRATA_SIMD_INLINE FmaSink(const float* x_in, int64_t ldx_in) : x(x_in), ldx(ldx_in) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm256_setzero_ps();
      acc1[t] = _mm256_setzero_ps();
    }
  }

  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float d1, float m1) {
    __m256 w[4];
    Widen(q, d0, m0, d1, m1, w);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float* xt = x + t * ldx + e;
      acc0[t] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xt), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xt + 8), acc1[t]);
      acc0[t] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xt + 16), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xt + 24), acc1[t]);
    }
  }

  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) {
    (*this)(e, q, d0, 0.0f, d1, 0.0f);
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d) {
    (*this)(e, q, d, 0.0f, d, 0.0f);
  }

  STRATA_SIMD_INLINE void Finish(float* y, int64_t ldy, bool accumulate) const {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float s = HorizontalSum(_mm256_add_ps(acc0[t], acc1[t]));
      y[t * ldy] = accumulate ? y[t * ldy] + s : s;
    }
  }
};

#include "decode_x86.inc"

// ---- fp32 micro-kernel ------------------------------------------------------------------------

// Register tile: 3 weight rows x 4 tokens = 12 ymm accumulators + 3 weight vectors + 1
// activation vector = all 16 registers; 7 loads per 12 FMAs.
constexpr int kTileRows = 3;
constexpr int kTileTokens = 4;

// Lanes [0, n) of a mask for _mm256_maskload_ps: kMaskTable + 8 - n.
alignas(32) constexpr int32_t kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};

template <int R, int T, bool kMasked>
STRATA_SIMD_INLINE void TileStep(__m256 (&acc)[R][T], const float* w, int64_t ldw, const float* x,
                                 int64_t ldx, int64_t c, __m256i mask) {
  __m256 wv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    wv[r] = kMasked ? _mm256_maskload_ps(w + r * ldw + c, mask) : _mm256_loadu_ps(w + r * ldw + c);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256 xv =
        kMasked ? _mm256_maskload_ps(x + t * ldx + c, mask) : _mm256_loadu_ps(x + t * ldx + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
  }
}

template <int R, int T>
STRATA_SIMD_NOINLINE void Tile(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k,
                               float* y, int64_t ldy, bool accumulate) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 <= k; c += 8) {
    TileStep<R, T, false>(acc, w, ldw, x, ldx, c, _mm256_setzero_si256());
  }
  if (c < k) {
    const __m256i mask =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - (k - c)));
    TileStep<R, T, true>(acc, w, ldw, x, ldx, c, mask);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    float* yt = y + t * ldy;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float s = HorizontalSum(acc[r][t]);
      yt[r] = accumulate ? yt[r] + s : s;
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
};

// A GemmFn; see the avx512 family for the loop order.
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

#undef STRATA_SIMD_INLINE
#undef STRATA_SIMD_NOINLINE

}  // namespace
}  // namespace avx2

const KernelFamily* Avx2Family() {
  static const KernelFamily family{"avx2", &avx2::Gemm, &avx2::DequantFor, &avx2::FusedFor,
                                   /*max_fused_tokens=*/2};
  return &family;
}

}  // namespace strata::backend::cpu::internal

#else  // !defined(__x86_64__)

namespace strata::backend::cpu::internal {
const KernelFamily* Avx2Family() { return nullptr; }
}  // namespace strata::backend::cpu::internal

#endif
