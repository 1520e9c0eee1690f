// MatMulPrecision::kInt8's small-token kernels (AVX-512 F/BW/VL/DQ + VNNI, chosen at run time;
// every function carries the target attribute itself).
//
// Layout: rows in the lanes. With the tile kernels' tokens-in-lanes layout
// (matmul_int8_avx512.cc) one token leaves 15 of 16 lanes of every vpdpbusd idle, and the tile
// round trip costs more than the products. Here a zmm holds 4 columns of 16 weight rows, and
// one token's 4 activation bytes for the same columns are broadcast from memory, so a vpdpbusd
// adds 4 products to 16 rows' integer block sums. The weights stream from the mmap once:
// 16 rows at a time, one (super-)block of each row is decoded (the block decoders of
// decode_x86.inc) into a few KiB that stay in L1, transposed in registers (a 4 x 4 dword
// transpose per 128-bit lane) and multiplied with every token; software prefetch runs one
// group of 16 rows ahead, since the hardware prefetchers stop at page boundaries.
//
// Numerics: each (row, token) follows the chain of the tile kernels exactly,
//   isum = c (the token's -128 * sum(q_x) for signed formats, else 0) + exact integer products,
//   acc = fma(float(isum), d_w * d_x, acc)      [+ acc = fma(m_w, d_x * sum(q_x), acc)]
// per 32-column block in column order (Q6_K: per 16-column half, with the half's scale). The
// integer sum is exact whatever the order of its products, d_w * d_x is one commutative
// rounding, and the fma operands are the same values: the results are bit-identical to the
// tile kernels', so a token's row does not depend on which path computed it.
#include "matmul_int8_internal.h"
#include "matmul_internal.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cstring>

#include "strata/model/fp16.h"
#include "x86_intrinsics.h"  // <immintrin.h>

namespace strata::backend::cpu::internal {
namespace avx512_vnni_lanes {
namespace {

#define STRATA_SIMD_NOINLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define STRATA_SIMD_INLINE inline __attribute__((always_inline)) STRATA_SIMD_NOINLINE
#define STRATA_SIMD_AVX512 1
#define STRATA_DECODE_BLOCKS_ONLY 1

#include "decode_x86.inc"

using Kind = Int8BlockKind;

constexpr int kRows = 16;  // rows per group: one per lane

// Rows sit in the lanes after the transpose in this order: the 16 bytes of slot s land in lane
// 4 * (s % 4) + s / 4, so row r is stored in slot Slot(r) (the map is its own inverse).
constexpr int Slot(int r) { return 4 * (r % 4) + r / 4; }

// One (super-)block of 16 rows, decoded: codes [chunk of 32 columns][half][slot][16 bytes]
// (unsigned; signed formats shifted by 128), d [chunk or half chunk][row], m [chunk][row].
struct Stage {
  alignas(64) uint8_t codes[256 / 32][2][kRows][16];
  alignas(64) float d[256 / 16][kRows];
  alignas(64) float m[256 / 32][kRows];
};

// Where the decoders' 32-value groups of row `row` go in the Stage (overloads as TileSink's).
struct StageSink {
  Stage* stage;
  int row;
  int slot;

  STRATA_SIMD_INLINE void Codes(int64_t e, __m256i q) const {
    uint8_t* dst = stage->codes[e / 32][0][slot];
    _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(q));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + kRows * 16), _mm256_extracti128_si256(q, 1));
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float scale) const {
    Codes(e, _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    stage->d[e / 32][row] = scale;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) const {
    Codes(e, _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    stage->d[e / 16][row] = d0;
    stage->d[e / 16 + 1][row] = d1;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float, float) const {
    Codes(e, q);
    stage->d[e / 32][row] = d0;
    stage->m[e / 32][row] = m0;
  }
};

// Half `h` of a 32-column chunk as 4 zmm: w[i] holds column dword 4h + i of all 16 rows (row r
// in lane r). Slots 4e .. 4e + 3 load as one zmm (lane L = slot 4e + L); the 4 x 4 dword
// transpose in each 128-bit lane puts dword i of slot 4e + L in lane 4L + e of w[i].
STRATA_SIMD_INLINE void LoadCodes(const uint8_t (*half)[16], __m512i w[4]) {
  const __m512i a0 = _mm512_load_si512(half[0]);
  const __m512i a1 = _mm512_load_si512(half[4]);
  const __m512i a2 = _mm512_load_si512(half[8]);
  const __m512i a3 = _mm512_load_si512(half[12]);
  const __m512i t0 = _mm512_unpacklo_epi32(a0, a1);
  const __m512i t1 = _mm512_unpackhi_epi32(a0, a1);
  const __m512i t2 = _mm512_unpacklo_epi32(a2, a3);
  const __m512i t3 = _mm512_unpackhi_epi32(a2, a3);
  w[0] = _mm512_unpacklo_epi64(t0, t2);
  w[1] = _mm512_unpackhi_epi64(t0, t2);
  w[2] = _mm512_unpacklo_epi64(t1, t3);
  w[3] = _mm512_unpackhi_epi64(t1, t3);
}

STRATA_SIMD_INLINE __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// isum += the 4 column dwords `w` of 16 rows . the token's bytes at q (16 columns).
STRATA_SIMD_INLINE __m512i Dot16(__m512i isum, const __m512i w[4], const int8_t* q) {
  isum = _mm512_dpbusd_epi32(isum, w[0], Bcast4(q));
  isum = _mm512_dpbusd_epi32(isum, w[1], Bcast4(q + 4));
  isum = _mm512_dpbusd_epi32(isum, w[2], Bcast4(q + 8));
  return _mm512_dpbusd_epi32(isum, w[3], Bcast4(q + 12));
}

// As the fused fp32 kernels: prefetch ahead of the rows being decoded.
STRATA_SIMD_INLINE void PrefetchRange(const uint8_t* p, int64_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t addr = begin & ~uintptr_t{63}; addr < begin + n; addr += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(addr), _MM_HINT_T0);
  }
}

// Rows [0, rows) x T tokens (t0 .. t0 + T - 1 of x).
template <class Decoder, Kind K, int T>
STRATA_SIMD_NOINLINE void Lanes(const uint8_t* w, int64_t row_bytes, int64_t rows,
                                const Int8Tokens& x, int64_t t0, float* y, int64_t ldy) {
  constexpr int kChunks = Decoder::kElems / 32;
  const int64_t cols = x.cols;
  const int64_t nb = cols / 32;
  const int64_t nb_type = cols / Decoder::kElems;
  // The next group's bytes, spread evenly over this group's steps.
  const int64_t prefetch_step = (kRows * row_bytes + nb_type - 1) / nb_type;
  const int8_t* q[T];
  const float* dx[T];
  const int32_t* c[T];
  const float* dsum[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    q[t] = x.q + (t0 + t) * cols;
    dx[t] = x.d + (t0 + t) * nb;
    c[t] = K == Kind::kSigned16 ? x.c16 + 2 * (t0 + t) * nb : x.c32 + (t0 + t) * nb;
    dsum[t] = x.dsum + (t0 + t) * nb;
  }
  Stage stage;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int rn = static_cast<int>(std::min<int64_t>(kRows, rows - r0));
    const uint8_t* src = w + r0 * row_bytes;
    if (rn < kRows) {
      // Lanes without a row: computed, never stored; zeros keep them defined.
      std::memset(&stage, 0, sizeof(stage));
    }
    __m512 acc[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb_type; ++b) {
      PrefetchRange(src + kRows * row_bytes + b * prefetch_step, prefetch_step);
      for (int r = 0; r < rn; ++r) {
        StageSink sink{&stage, r, Slot(r)};
        Decoder::Block(src + r * row_bytes + b * Decoder::kBytes, 0, sink);
      }
#pragma GCC unroll 16
      for (int k = 0; k < kChunks; ++k) {
        const int64_t blk = b * kChunks + k;  // the 32-column block
        const int64_t col = 32 * blk;
        __m512i wv[2][4];
        LoadCodes(stage.codes[k][0], wv[0]);
        LoadCodes(stage.codes[k][1], wv[1]);
        if constexpr (K == Kind::kSigned16) {
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m512 dw = _mm512_load_ps(stage.d[2 * k + h]);
#pragma GCC unroll 16
            for (int t = 0; t < T; ++t) {
              const __m512i isum =
                  Dot16(_mm512_set1_epi32(c[t][2 * blk + h]), wv[h], q[t] + col + 16 * h);
              acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                       _mm512_mul_ps(dw, _mm512_set1_ps(dx[t][blk])), acc[t]);
            }
          }
        } else {
          const __m512 dw = _mm512_load_ps(stage.d[k]);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const __m512i init =
                K == Kind::kMin32 ? _mm512_setzero_si512() : _mm512_set1_epi32(c[t][blk]);
            const __m512i isum = Dot16(Dot16(init, wv[0], q[t] + col), wv[1], q[t] + col + 16);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(dx[t][blk])), acc[t]);
          }
          if constexpr (K == Kind::kMin32) {
            const __m512 mw = _mm512_load_ps(stage.m[k]);
#pragma GCC unroll 16
            for (int t = 0; t < T; ++t) {
              acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(dsum[t][blk]), acc[t]);
            }
          }
        }
      }
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << rn) - 1);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r0, mask, acc[t]);
  }
}

// Lanes for the first tn (1 <= tn <= T) tokens from t0.
template <class Decoder, Kind K, int T>
STRATA_SIMD_INLINE void LanesTokens(int64_t tn, const uint8_t* w, int64_t row_bytes, int64_t rows,
                                    const Int8Tokens& x, int64_t t0, float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tn < T) {
      LanesTokens<Decoder, K, T - 1>(tn, w, row_bytes, rows, x, t0, y, ldy);
      return;
    }
  }
  Lanes<Decoder, K, T>(w, row_bytes, rows, x, t0, y, ldy);
}

// The most tokens one pass over the weights takes: T accumulators + 8 weight registers + a few
// temporaries fit the 32 zmm registers.
constexpr int64_t kMaxTokens = 16;

// An Int8FewFn for one format.
template <class Decoder, Kind K>
STRATA_SIMD_NOINLINE void Few(const uint8_t* w, int64_t row_bytes, int64_t rows,
                              const Int8Tokens& x, int64_t n_tokens, float* y, int64_t ldy) {
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int64_t tn = std::min(kMaxTokens, n_tokens - t0);
    LanesTokens<Decoder, K, kMaxTokens>(tn, w, row_bytes, rows, x, t0, y, ldy);
  }
}

#undef STRATA_DECODE_BLOCKS_ONLY
#undef STRATA_SIMD_AVX512
#undef STRATA_SIMD_INLINE
#undef STRATA_SIMD_NOINLINE

}  // namespace
}  // namespace avx512_vnni_lanes

Int8FewFn Avx512VnniInt8FewFor(model::GgmlType type) {
  using model::GgmlType;
  namespace k = avx512_vnni_lanes;
  switch (type) {
    case GgmlType::kQ8_0:
      return &k::Few<k::DecodeQ8_0, k::Kind::kSigned32>;
    case GgmlType::kQ4_0:
      return &k::Few<k::DecodeQ4_0, k::Kind::kSigned32>;
    case GgmlType::kQ5_0:
      return &k::Few<k::DecodeQ5_0, k::Kind::kSigned32>;
    case GgmlType::kQ4_1:
      return &k::Few<k::DecodeQ4_1, k::Kind::kMin32>;
    case GgmlType::kQ5_1:
      return &k::Few<k::DecodeQ5_1, k::Kind::kMin32>;
    case GgmlType::kQ4_K:
      return &k::Few<k::DecodeQ4_K, k::Kind::kMin32>;
    case GgmlType::kQ5_K:
      return &k::Few<k::DecodeQ5_K, k::Kind::kMin32>;
    case GgmlType::kQ6_K:
      return &k::Few<k::DecodeQ6_K, k::Kind::kSigned16>;
    default:
      return nullptr;
  }
}

}  // namespace strata::backend::cpu::internal

#else  // !defined(__x86_64__)

namespace strata::backend::cpu::internal {
Int8FewFn Avx512VnniInt8FewFor(model::GgmlType) { return nullptr; }
}  // namespace strata::backend::cpu::internal

#endif
