// MatMulPrecision::kInt8's kernels: AVX-512 F/BW/VL/DQ + VNNI, chosen at run time (see
// matmul.cc); every function carries the target attribute itself, nothing needs -m flags.
//
// Layout: tokens in lanes. The activations come packed 16 tokens to a zmm (4 columns of each
// token per 32-bit lane, Int8Activations); a weight row's 4 codes for the same columns are
// broadcast to all lanes, so one vpdpbusd adds 4 products for 16 tokens of one row. A register
// block of R rows x T groups of 16 tokens (8 x 1 or 4 x 2) keeps R x T integer block sums and
// R x T fp32 accumulators in registers; per 32-column block (16 for Q6_K's half blocks) each
// integer sum is converted and folded into its accumulator with the block's two scales:
//   acc = fma(float(isum), d_w * d_x, acc)              (+ fma(m_w, d_x * sum(q_x), acc))
// Every element gets exactly that chain, in column order, whatever R, T, lane or thread
// computes it: results do not depend on the batch (see matmul.h).
//
// Weights: each call decodes a unit's rows once (the block decoders of decode_x86.inc) into a
// per-thread tile of unsigned 8-bit codes plus per-block fp32 scales, and every token group of
// the unit runs over it. vpdpbusd multiplies unsigned by signed bytes, so formats with signed
// values (Q8_0, Q4_0, Q5_0, Q6_K: q in [-128, 127]) store q + 128 and start each block's integer
// sum at -128 * sum(q_x) (precomputed per token, Int8Activations::c32/c16); formats with a min
// (Q4_1, Q5_1, Q4_K, Q5_K) store their unsigned codes and add the min term in fp32.
#include "matmul_int8_internal.h"
#include "matmul_internal.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "strata/model/fp16.h"
#include "x86_intrinsics.h"  // <immintrin.h>

namespace strata::backend::cpu::internal {
namespace avx512_vnni {
namespace {

#define STRATA_SIMD_NOINLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define STRATA_SIMD_INLINE inline __attribute__((always_inline)) STRATA_SIMD_NOINLINE
#define STRATA_SIMD_AVX512 1
#define STRATA_DECODE_BLOCKS_ONLY 1

#include "decode_x86.inc"

using Kind = Int8BlockKind;

// Where the decoders' 32-value groups go in the tile: codes as unsigned bytes, scales (and mins)
// per block. Which overload a decoder calls matches its Kind.
struct TileSink {
  uint8_t* codes;  // this row's codes
  float* d;        // per 32 (kSigned32, kMin32) or per 16 (kSigned16) columns
  float* m;        // per 32 columns (kMin32)

  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float scale) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + e),
                        _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    d[e / 32] = scale;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + e),
                        _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    d[e / 16] = d0;
    d[e / 16 + 1] = d1;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float, float) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + e), q);
    d[e / 32] = d0;
    m[e / 32] = m0;
  }
};

// The rows' codes and scales: codes [rows][ldc], d [rows][ldd], m [rows][ldm].
struct Tile {
  const uint8_t* codes;
  int64_t ldc;
  const float* d;
  int64_t ldd;
  const float* m;
  int64_t ldm;
};

STRATA_SIMD_INLINE uint32_t Load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// R rows x T groups of 16 tokens over all nb blocks; out: [R][T][16] fp32.
template <Kind K, int R, int T>
STRATA_SIMD_NOINLINE void Kernel(const Tile& tile, const Int8Activations& a, int64_t g, int64_t nb,
                                 float* out) {
  constexpr int kHalves = K == Kind::kSigned16 ? 2 : 1;
  constexpr int kSteps = 8 / kHalves;  // 4-column steps per (half) block
  const int8_t* aq[T];
  const float* ad[T];
  const int32_t* ac[T];
  const float* as[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    aq[t] = a.q + (g + t) * a.q_stride;
    ad[t] = a.d + (g + t) * a.blk_stride;
    ac[t] =
        K == Kind::kSigned16 ? a.c16 + 2 * (g + t) * a.blk_stride : a.c32 + (g + t) * a.blk_stride;
    as[t] = a.dsum + (g + t) * a.blk_stride;
  }
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 2
    for (int h = 0; h < kHalves; ++h) {
      const int64_t sub = b * kHalves + h;  // index of the (half) block
      __m512i isum[R][T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512i init = K == Kind::kMin32 ? _mm512_setzero_si512()
                                               : _mm512_load_si512(ac[t] + sub * kInt8Lanes);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) isum[r][t] = init;
      }
#pragma GCC unroll 8
      for (int k = 0; k < kSteps; ++k) {
        const int64_t col = sub * (32 / kHalves) + 4 * k;
        __m512i x[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) x[t] = _mm512_load_si512(aq[t] + col * kInt8Lanes);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i wv =
              _mm512_set1_epi32(static_cast<int>(Load4(tile.codes + r * tile.ldc + col)));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) isum[r][t] = _mm512_dpbusd_epi32(isum[r][t], wv, x[t]);
        }
      }
      __m512 dx[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) dx[t] = _mm512_load_ps(ad[t] + b * kInt8Lanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 dw = _mm512_set1_ps(tile.d[r * tile.ldd + sub]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          acc[r][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]), _mm512_mul_ps(dw, dx[t]), acc[r][t]);
        }
      }
    }
    if constexpr (K == Kind::kMin32) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 mw = _mm512_set1_ps(tile.m[r * tile.ldm + b]);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm512_fmadd_ps(mw, _mm512_load_ps(as[t] + b * kInt8Lanes), acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm512_store_ps(out + (r * T + t) * kInt8Lanes, acc[r][t]);
  }
}

// Rows decoded per tile; a unit (matmul_int8.cc) has at most this many.
constexpr int64_t kTileRows = 64;
// The register blocks: 8 rows x 1 group, or 4 rows x 2 groups (both 16 integer and 16 fp32
// accumulators, leaving registers for the activations and the broadcast weights). Tiles are
// padded to a multiple of kPadRows rows.
constexpr int kPadRows = 8;
// As the fused fp32 kernels (matmul_avx512.cc): prefetch this far ahead of the rows being
// decoded, since the hardware prefetchers stop at page boundaries.
constexpr int64_t kPrefetchBytes = 2048;

STRATA_SIMD_INLINE void PrefetchAhead(const uint8_t* p, int64_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t addr = begin & ~uintptr_t{63}; addr < begin + n; addr += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(addr), _MM_HINT_T0);
  }
}

// Writes rows [0, rn) x groups [g, g + T) of a kernel's output to y, skipping the padding
// tokens (>= n_tokens): one scatter per row and group (lane l goes to y[l * ldy]).
template <int T>
STRATA_SIMD_INLINE void Store(const float* out, int64_t rn, int64_t g, int64_t n_tokens, float* y,
                              int64_t ldy) {
  const __m512i index =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(ldy)));
  for (int t = 0; t < T; ++t) {
    const int64_t t0 = (g + t) * kInt8Lanes;
    const int64_t lanes = std::min<int64_t>(kInt8Lanes, n_tokens - t0);
    if (lanes <= 0) break;
    const __mmask16 mask = static_cast<__mmask16>((1u << lanes) - 1);
    for (int64_t r = 0; r < rn; ++r) {
      _mm512_mask_i32scatter_ps(y + t0 * ldy + r, mask, index,
                                _mm512_load_ps(out + (r * T + t) * kInt8Lanes), 4);
    }
  }
}

// An Int8RowsFn for one format.
template <class Decoder, Kind K>
STRATA_SIMD_NOINLINE void Rows(const uint8_t* w, int64_t row_bytes, int64_t rows,
                               const Int8Activations& a, int64_t g0, int64_t g1, int64_t n_tokens,
                               float* y, int64_t ldy) {
  const int64_t cols = a.cols;
  const int64_t nb = cols / 32;
  const int64_t nb_type = cols / Decoder::kElems;
  const int64_t ldd = K == Kind::kSigned16 ? 2 * nb : nb;
  const int64_t code_bytes = kTileRows * cols;
  const int64_t d_bytes = (kTileRows * ldd * 4 + 63) / 64 * 64;
  thread_local AlignedBuffer<uint8_t> arena;
  uint8_t* base = arena.Get(code_bytes + d_bytes + kTileRows * nb * 4);
  uint8_t* codes = base;
  float* d = reinterpret_cast<float*>(base + code_bytes);
  float* m = reinterpret_cast<float*>(base + code_bytes + d_bytes);
  alignas(64) float out[kPadRows * kInt8Lanes];

  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int64_t rn = std::min(kTileRows, rows - r0);
    for (int64_t r = 0; r < rn; ++r) {
      const uint8_t* src = w + (r0 + r) * row_bytes;
      PrefetchAhead(src + kPrefetchBytes, row_bytes);
      TileSink sink{codes + r * cols, d + r * ldd, m + r * nb};
      DecodeRow<Decoder>(src, nb_type, sink);
    }
    const int64_t padded = (rn + kPadRows - 1) / kPadRows * kPadRows;
    if (padded > rn) {
      // Padding rows: computed, never stored; zeros keep them finite.
      std::memset(codes + rn * cols, 0, (padded - rn) * cols);
      std::memset(d + rn * ldd, 0, (padded - rn) * ldd * sizeof(float));
      std::memset(m + rn * nb, 0, (padded - rn) * nb * sizeof(float));
    }
    float* yt = y + r0;
    int64_t g = g0;
    for (; g + 2 <= g1; g += 2) {
      for (int64_t r = 0; r < padded; r += 4) {
        const Tile tile{codes + r * cols, cols, d + r * ldd, ldd, m + r * nb, nb};
        Kernel<K, 4, 2>(tile, a, g, nb, out);
        Store<2>(out, std::min<int64_t>(4, rn - r), g, n_tokens, yt + r, ldy);
      }
    }
    if (g < g1) {
      for (int64_t r = 0; r < padded; r += 8) {
        const Tile tile{codes + r * cols, cols, d + r * ldd, ldd, m + r * nb, nb};
        Kernel<K, 8, 1>(tile, a, g, nb, out);
        Store<1>(out, std::min<int64_t>(8, rn - r), g, n_tokens, yt + r, ldy);
      }
    }
  }
}

Int8RowsFn RowsFor(model::GgmlType type) {
  using model::GgmlType;
  switch (type) {
    case GgmlType::kQ8_0:
      return &Rows<DecodeQ8_0, Kind::kSigned32>;
    case GgmlType::kQ4_0:
      return &Rows<DecodeQ4_0, Kind::kSigned32>;
    case GgmlType::kQ5_0:
      return &Rows<DecodeQ5_0, Kind::kSigned32>;
    case GgmlType::kQ4_1:
      return &Rows<DecodeQ4_1, Kind::kMin32>;
    case GgmlType::kQ5_1:
      return &Rows<DecodeQ5_1, Kind::kMin32>;
    case GgmlType::kQ4_K:
      return &Rows<DecodeQ4_K, Kind::kMin32>;
    case GgmlType::kQ5_K:
      return &Rows<DecodeQ5_K, Kind::kMin32>;
    case GgmlType::kQ6_K:
      return &Rows<DecodeQ6_K, Kind::kSigned16>;
    default:
      return nullptr;
  }
}

// QuantizeRowInt8, bit for bit as QuantizeRowInt8Scalar: max |x| is exact, d and 1 / d are the
// same IEEE operations, x * id is one rounded product, and the conversion rounds to nearest even
// as nearbyint does in the default rounding mode.
STRATA_SIMD_NOINLINE void QuantizeRow(const float* x, int64_t cols, int8_t* q, float* scales,
                                      int32_t* sums16) {
  const __m512i lo = _mm512_set1_epi32(-127);
  const __m512i hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    const __m512 vid = _mm512_set1_ps(id);
    __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    i0 = _mm512_min_epi32(_mm512_max_epi32(i0, lo), hi);
    i1 = _mm512_min_epi32(_mm512_max_epi32(i1, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtepi32_epi8(i1));
    sums16[2 * b] = _mm512_reduce_add_epi32(i0);
    sums16[2 * b + 1] = _mm512_reduce_add_epi32(i1);
  }
}

#undef STRATA_DECODE_BLOCKS_ONLY
#undef STRATA_SIMD_AVX512
#undef STRATA_SIMD_INLINE
#undef STRATA_SIMD_NOINLINE

bool CpuHasAvx512Vnni() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

}  // namespace
}  // namespace avx512_vnni

const Int8Family* Avx512VnniInt8Family() {
  static const Int8Family family{"avx512_vnni", &avx512_vnni::RowsFor, &Avx512VnniInt8FewFor,
                                 &avx512_vnni::QuantizeRow};
  static const bool available = avx512_vnni::CpuHasAvx512Vnni();
  return available ? &family : nullptr;
}

}  // namespace strata::backend::cpu::internal

#else  // !defined(__x86_64__)

namespace strata::backend::cpu::internal {
const Int8Family* Avx512VnniInt8Family() { return nullptr; }
}  // namespace strata::backend::cpu::internal

#endif
