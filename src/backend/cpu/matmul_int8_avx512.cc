// MatMulPrecision::kInt8's kernels: AVX-512 F/BW/VL/DQ + VNNI, chosen at run time (see
// matmul.cc); every function carries the target attribute itself, nothing needs -m flags.
//
// Layout: rows in the lanes. A zmm holds 4 columns of 16 weight rows, and one token's 4
// activation bytes for the same columns are broadcast from memory, so a vpdpbusd adds 4
// products to 16 rows' integer block sums. (With tokens in the lanes instead, a few tokens
// leave most lanes idle, and the results must be scattered back into token rows.)
//
// Weights: per group of 16 rows, the first pass over the tokens decodes the rows' blocks (the
// block decoders of decode_x86.inc) as they stream from the mmap into a per-thread stage of
// unsigned 8-bit codes and fp32 scales (one row group over all columns: a few KiB to a few tens
// of KiB, in L1/L2), with software prefetch one group ahead, since the hardware prefetchers
// stop at page boundaries; each 32-column chunk is transposed in registers (a 4 x 4 dword
// transpose per 128-bit lane) and multiplied with up to 16 tokens held in fp32 accumulators.
// Every further 16 tokens run one more pass over the decoded stage: the weights are read from
// memory and decoded once per call, whatever the token count. (One exception: up to 16 tokens
// (Q6_K: 8) over a full group of rows in Q8_0, Q4_0, Q5_0, Q4_K or Q6_K, where no second pass
// shares the stage, unpack the weights in the transposing registers instead: Direct.) vpdpbusd
// multiplies unsigned by signed bytes, so formats with signed values (Q8_0, Q4_0, Q5_0, Q6_K: q in
// [-128, 127]) store q + 128 and start each block's integer sum at -128 * sum(q_x) (precomputed per
// token, Int8Tokens::c32/c16); formats with a min (Q4_1, Q5_1, Q4_K, Q5_K) keep their unsigned
// codes and add the min term in fp32.
//
// Numerics: each (row, token) gets exactly this chain, per 32-column block in column order
// (Q6_K: per 16-column half, with the half's scale):
//   isum = c (the token's -128 * sum(q_x) for signed formats, else 0) + exact integer products,
//   acc = fma(float(isum), d_w * d_x, acc)      [+ acc = fma(m_w, d_x * sum(q_x), acc)]
// whichever pass, lane, row group or thread computes it: results do not depend on the batch
// (see matmul.h).
#include "matmul_int8_internal.h"
#include "matmul_internal.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "strata/model/fp16.h"
#include "x86_intrinsics.h"  // <immintrin.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace strata::backend::cpu::internal {
namespace avx512_vnni {
namespace {

// In the sanitizer build (ASan + UBSan) the passes (Pass, Direct, and every helper they inline)
// are not instrumented: an out-of-line ASan check per vector load (__asan_loadN for every 16-
// and 64-byte access) made the int8 kernels 4x slower, and the checks of both sanitizers made
// this file by far the longest compile of that build (288 s, 35 s in release). Instead Kernel,
// the passes' only caller, checks once per call every byte range they may touch (the weight
// rows, the token arrays, the outputs, the stage): CheckKernelRanges below. What that leaves
// unchecked is an access by a pass outside those ranges, and undefined behaviour in the passes'
// scalar index arithmetic; the int8 tests, comparing every result with the references, run in
// the same build.
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_PASS_UNCHECKED __attribute__((no_sanitize("address", "undefined")))
#else
#define STRATA_PASS_UNCHECKED
#endif

#define STRATA_SIMD_NOINLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define STRATA_SIMD_INLINE \
  inline __attribute__((always_inline)) STRATA_PASS_UNCHECKED STRATA_SIMD_NOINLINE

#define STRATA_SIMD_AVX512 1
#define STRATA_DECODE_BLOCKS_ONLY 1

#include "decode_x86.inc"

using Kind = Int8BlockKind;

constexpr int kRows = 16;  // rows per group: one per lane

// Rows sit in the lanes after the transpose in this order: the 16 bytes of slot s land in lane
// 4 * (s % 4) + s / 4, so row r is stored in slot Slot(r) (the map is its own inverse).
constexpr int Slot(int r) { return 4 * (r % 4) + r / 4; }

// A group of 16 rows, decoded: per 32-column chunk, codes [half][slot][16 bytes] (unsigned;
// signed formats shifted by 128); d [chunk or half chunk][row], m [chunk][row]. With more than
// one pass over the tokens the stage keeps the whole group (all columns: decoded once, by the
// first pass, then in L1/L2 for the others); with one pass it holds one (super-)block at a
// time, a few KiB that stay in L1.
constexpr int64_t kChunkCodeBytes = 2 * kRows * 16;

struct Stage {
  uint8_t* codes;  // [chunks][2][kRows][16]
  float* d;        // [chunks or 2 chunks][kRows]
  float* m;        // [chunks][kRows]
  int64_t keep;    // 1: chunk i of the row is chunk i of the stage; 0: chunk i % kChunks
};

// Where the decoders' 32-value groups of row `row` go in the Stage: one overload per Kind (one
// scale, two half-block scales, scale and min); codes, d and m point at the (super-)block being
// decoded.
struct StageSink {
  uint8_t* codes;
  float* d;
  float* m;
  int row;
  int slot;

  STRATA_SIMD_INLINE void Codes(int64_t e, __m256i q) const {
    uint8_t* dst = codes + e / 32 * kChunkCodeBytes + slot * 16;
    _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(q));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + kRows * 16), _mm256_extracti128_si256(q, 1));
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float scale) const {
    Codes(e, _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    d[e / 32 * kRows + row] = scale;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float d1) const {
    Codes(e, _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))));
    d[e / 16 * kRows + row] = d0;
    d[(e / 16 + 1) * kRows + row] = d1;
  }
  STRATA_SIMD_INLINE void operator()(int64_t e, __m256i q, float d0, float m0, float, float) const {
    Codes(e, q);
    d[e / 32 * kRows + row] = d0;
    m[e / 32 * kRows + row] = m0;
  }
};

// Half `h` of a 32-column chunk as 4 zmm: w[i] holds column dword 4h + i of all 16 rows (row r
// in lane r). Slots 4e .. 4e + 3 load as one zmm (lane L = slot 4e + L); the 4 x 4 dword
// transpose in each 128-bit lane puts dword i of slot 4e + L in lane 4L + e of w[i].
STRATA_SIMD_INLINE void TransposeCodes(__m512i a0, __m512i a1, __m512i a2, __m512i a3,
                                       __m512i w[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(a0, a1);
  const __m512i t1 = _mm512_unpackhi_epi32(a0, a1);
  const __m512i t2 = _mm512_unpacklo_epi32(a2, a3);
  const __m512i t3 = _mm512_unpackhi_epi32(a2, a3);
  w[0] = _mm512_unpacklo_epi64(t0, t2);
  w[1] = _mm512_unpackhi_epi64(t0, t2);
  w[2] = _mm512_unpacklo_epi64(t1, t3);
  w[3] = _mm512_unpackhi_epi64(t1, t3);
}

STRATA_SIMD_INLINE void LoadCodes(const uint8_t* half, __m512i w[4]) {
  TransposeCodes(_mm512_load_si512(half), _mm512_load_si512(half + 4 * 16),
                 _mm512_load_si512(half + 8 * 16), _mm512_load_si512(half + 12 * 16), w);
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

// One pass of a group of 16 rows (rn of them real) over T tokens (t0 .. t0 + T - 1 of x): with
// kDecode the pass decodes the group's weights from src into the stage as it goes (the group's
// first pass), otherwise it reads them from the stage. y points at the group's first row.
template <class Decoder, Kind K, int T, bool kDecode>
STRATA_PASS_UNCHECKED STRATA_SIMD_NOINLINE void Pass(const Stage& stage, const uint8_t* src,
                                                     int64_t row_bytes, int rn, const Int8Tokens& x,
                                                     int64_t t0, float* y, int64_t ldy) {
  constexpr int kChunks = Decoder::kElems / 32;
  constexpr int kHalves = K == Kind::kSigned16 ? 2 : 1;
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
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb_type; ++b) {
    const int64_t blk0 = b * kChunks;      // the superblock's first 32-column block
    const int64_t s0 = stage.keep * blk0;  // its first chunk in the stage
    if constexpr (kDecode) {
      PrefetchRange(src + kRows * row_bytes + b * prefetch_step, prefetch_step);
      for (int r = 0; r < rn; ++r) {
        StageSink sink{stage.codes + s0 * kChunkCodeBytes, stage.d + s0 * kHalves * kRows,
                       stage.m + s0 * kRows, r, Slot(r)};
        Decoder::Block(src + r * row_bytes + b * Decoder::kBytes, 0, sink);
      }
    }
#pragma GCC unroll 16
    for (int k = 0; k < kChunks; ++k) {
      const int64_t blk = blk0 + k;  // the 32-column block
      const int64_t sk = s0 + k;     // its chunk in the stage
      const int64_t col = 32 * blk;
      const uint8_t* codes = stage.codes + sk * kChunkCodeBytes;
      __m512i wv[2][4];
      LoadCodes(codes, wv[0]);
      LoadCodes(codes + kRows * 16, wv[1]);
      if constexpr (K == Kind::kSigned16) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512 dw = _mm512_load_ps(stage.d + (2 * sk + h) * kRows);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const __m512i isum =
                Dot16(_mm512_set1_epi32(c[t][2 * blk + h]), wv[h], q[t] + col + 16 * h);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(dx[t][blk])), acc[t]);
          }
        }
      } else {
        const __m512 dw = _mm512_load_ps(stage.d + sk * kRows);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i init =
              K == Kind::kMin32 ? _mm512_setzero_si512() : _mm512_set1_epi32(c[t][blk]);
          const __m512i isum = Dot16(Dot16(init, wv[0], q[t] + col), wv[1], q[t] + col + 16);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                   _mm512_mul_ps(dw, _mm512_set1_ps(dx[t][blk])), acc[t]);
        }
        if constexpr (K == Kind::kMin32) {
          const __m512 mw = _mm512_load_ps(stage.m + sk * kRows);
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
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, mask, acc[t]);
}

// A few tokens over a full group of 16 rows, straight from the weights (Direct below): with
// one pass over the tokens nothing shares a decoded stage, and the staging (a store and a
// reload of every code, plus a per-row decode in 256-bit halves) was most of the instructions
// per weight byte. Instead the raw bytes of the 16 rows go into the transposing registers
// first, and the formats' bit fields are unpacked there, 16 rows per instruction: unpacking
// is bytewise, so it commutes with the dword transpose. The per-row scales come from gathers.
// Each (row, token) gets the same chain as in Pass, so the same bits: the codes stay unsigned
// (no shift by 128) and the block sums start at the matching part of c (-8, -16, -32 or -128
// times sum(q_x): exact integer shifts of it), so the integer sums are the same integers.

// w[i], lane r: bytes 4i .. 4i + 3 of the 16 bytes of row r at p (rows row_bytes apart): four
// rows per zmm in LoadCodes' slot order, then its transpose.
STRATA_SIMD_INLINE void LoadRows(const uint8_t* p, int64_t row_bytes, __m512i w[4]) {
  __m512i a[4];
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    // Slots 4e .. 4e + 3 hold rows Slot(4e) .. Slot(4e + 3).
    const auto row = [&](int slot) {
      return reinterpret_cast<const __m128i*>(p + Slot(slot) * row_bytes);
    };
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(row(4 * e)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(row(4 * e + 1)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(row(4 * e + 2)), 2);
    a[e] = _mm512_inserti32x4(v, _mm_loadu_si128(row(4 * e + 3)), 3);
  }
  TransposeCodes(a[0], a[1], a[2], a[3], w);
}

// Lane r: the 4 bytes of row r at p (a gather; rows row_bytes apart as in `offsets`).
STRATA_SIMD_INLINE __m512i GatherRows(const uint8_t* p, __m512i offsets) {
  return _mm512_i32gather_epi32(offsets, p, 1);
}

// fp16 in the low (kHigh: high) 16 bits of each lane -> fp32, exactly as LoadHalf.
template <bool kHigh>
STRATA_SIMD_INLINE __m512 HalvesToFloat(__m512i v) {
  if constexpr (kHigh) v = _mm512_srli_epi32(v, 16);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

// The low and high nibbles of each byte.
STRATA_SIMD_INLINE __m512i LowNibbles(__m512i v) {
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}
STRATA_SIMD_INLINE __m512i HighNibbles(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f));
}

// Token t0 + t of a direct pass: its codes, scales and block sums.
struct TokenRow {
  const int8_t* q;
  const float* d;
  const int32_t* c32;
  const int32_t* c16;
  const float* dsum;
};

// The T token rows from t0, and their accumulators zeroed.
template <int T>
STRATA_SIMD_INLINE void StartTokens(const Int8Tokens& x, int64_t t0, TokenRow (&tok)[T],
                                    __m512 (&acc)[T]) {
  const int64_t nb = x.cols / 32;
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const int64_t i = t0 + t;
    tok[t] = {x.q + i * x.cols, x.d + i * nb, x.c32 + i * nb, x.c16 + 2 * i * nb, x.dsum + i * nb};
    acc[t] = _mm512_setzero_ps();
  }
}

// acc[t] += the 16 rows' block sums with token t over the 32 columns from col: codes lo (the
// first 16 columns) and hi, sums started at init_shift of c32 (see above), scales dw.
template <int T>
STRATA_SIMD_INLINE void AccumulateBlock32(const TokenRow (&tok)[T], int64_t blk, int init_shift,
                                          const __m512i lo[4], const __m512i hi[4], __m512 dw,
                                          __m512 acc[T]) {
  const int64_t col = 32 * blk;
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512i init = _mm512_set1_epi32(tok[t].c32[blk] >> init_shift);
    const __m512i isum = Dot16(Dot16(init, lo, tok[t].q + col), hi, tok[t].q + col + 16);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                             _mm512_mul_ps(dw, _mm512_set1_ps(tok[t].d[blk])), acc[t]);
  }
}

// The frame of every direct pass: the T token rows from t0 and their accumulators; per block of
// kCols columns (kBytes per row), a prefetch of the next row group's share, then Block::Run's
// unpacking and products; at the end the 16 rows' results for each token. `offsets` (lane r:
// the byte offset of row r) serve the gathers.
template <int T, class Block, int64_t kCols, int64_t kBytes>
STRATA_SIMD_INLINE void DirectPass(const uint8_t* src, int64_t row_bytes, __m512i offsets,
                                   const Int8Tokens& x, int64_t t0, float* y, int64_t ldy) {
  const int64_t nb = x.cols / kCols;
  const int64_t prefetch_step = (kRows * row_bytes + nb - 1) / nb;
  TokenRow tok[T];
  __m512 acc[T];
  StartTokens(x, t0, tok, acc);
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchRange(src + kRows * row_bytes + b * prefetch_step, prefetch_step);
    Block::template Run<T>(src + b * kBytes, b, row_bytes, offsets, tok, acc);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
}

// Q4_0 / Q5_0 (kHigh: the 5th bits from the block's qh word): value = code - 8 (Q4_0) or
// code - 16 (Q5_0), codes kept unsigned.
template <bool kHigh>
struct DirectLegacy {
  static constexpr int kQs = kHigh ? 6 : 2;  // where the nibbles start

  template <int T>
  STRATA_SIMD_INLINE static void Run(const uint8_t* blk, int64_t b, int64_t row_bytes,
                                     __m512i offsets, const TokenRow (&tok)[T], __m512 (&acc)[T]) {
    // The shuffle puts byte j of each lane's qh word in all 4 bytes of the lane (vpshufb indexes
    // within 128 bits: lane p of 4 at bytes 4p .. 4p + 3); then bit k (low_bits) or 4 + k
    // (high_bits) of it is tested in byte k.
    const __m512i lane_bytes = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
    const __m512i low_bits = _mm512_set1_epi32(0x08040201);
    const __m512i high_bits = _mm512_set1_epi32(static_cast<int32_t>(0x80402010u));
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __m512 dw = HalvesToFloat<false>(GatherRows(blk, offsets));
    __m512i w[4];
    LoadRows(blk + kQs, row_bytes, w);
    __m512i lo[4];
    __m512i hi[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      lo[i] = LowNibbles(w[i]);
      hi[i] = HighNibbles(w[i]);
    }
    if constexpr (kHigh) {
      const __m512i qh = GatherRows(blk + 2, offsets);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Byte j of qh holds the 5th bits of columns 8j .. 8j + 7.
        const __m512i bytes = _mm512_shuffle_epi8(
            qh, _mm512_add_epi8(lane_bytes, _mm512_set1_epi8(static_cast<char>(j))));
        __m512i* codes = j < 2 ? lo : hi;
        const int i = 2 * (j % 2);
        codes[i] = _mm512_mask_add_epi8(codes[i], _mm512_test_epi8_mask(bytes, low_bits), codes[i],
                                        sixteen);
        codes[i + 1] = _mm512_mask_add_epi8(codes[i + 1], _mm512_test_epi8_mask(bytes, high_bits),
                                            codes[i + 1], sixteen);
      }
    }
    AccumulateBlock32<T>(tok, b, kHigh ? 3 : 4, lo, hi, dw, acc);
  }
};

// Q8_0: the signed codes shifted by 128, as in the stage.
struct DirectQ8_0 {
  template <int T>
  STRATA_SIMD_INLINE static void Run(const uint8_t* blk, int64_t b, int64_t row_bytes,
                                     __m512i offsets, const TokenRow (&tok)[T], __m512 (&acc)[T]) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512 dw = HalvesToFloat<false>(GatherRows(blk, offsets));
    __m512i wv[2][4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      LoadRows(blk + 2 + 16 * h, row_bytes, wv[h]);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) wv[h][i] = _mm512_xor_si512(wv[h][i], flip);
    }
    AccumulateBlock32<T>(tok, b, 0, wv[0], wv[1], dw, acc);
  }
};

// Q4_K: per 256-column superblock, the 16 rows' d, dmin and packed 6-bit scales and mins come
// in four gathers and are unpacked as KScales does, 16 rows at a time; each 32 bytes of
// nibbles hold two 32-column sub-blocks (low nibbles, then high).
struct DirectQ4_K {
  template <int T>
  STRATA_SIMD_INLINE static void Run(const uint8_t* blk, int64_t b, int64_t row_bytes,
                                     __m512i offsets, const TokenRow (&tok)[T], __m512 (&acc)[T]) {
    const __m512i six_bits = _mm512_set1_epi8(0x3f);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    const __m512i byte = _mm512_set1_epi32(0xff);
    const __m512i dd = GatherRows(blk, offsets);
    const __m512 d = HalvesToFloat<false>(dd);
    const __m512 neg_dmin = _mm512_xor_ps(HalvesToFloat<true>(dd), _mm512_set1_ps(-0.0f));
    const __m512i p0 = GatherRows(blk + 4, offsets);
    const __m512i p1 = GatherRows(blk + 8, offsets);
    const __m512i p2 = GatherRows(blk + 12, offsets);
    // Byte s of sc[s / 4] (mn[s / 4]): the scale (min) of sub-block s.
    const __m512i sc[2] = {_mm512_and_si512(p0, six_bits),
                           _mm512_or_si512(_mm512_and_si512(p2, low4),
                                           _mm512_and_si512(_mm512_srli_epi32(p0, 2), top2))};
    const __m512i mn[2] = {_mm512_and_si512(p1, six_bits),
                           _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(p2, 4), low4),
                                           _mm512_and_si512(_mm512_srli_epi32(p1, 2), top2))};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m512i w[2][4];  // [column half]: the two sub-blocks' nibbles
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) LoadRows(blk + 16 + 32 * c + 16 * h, row_bytes, w[h]);
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * c + half;  // sub-block: low nibbles, then high
        __m512i codes[2][4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            codes[h][i] = half == 0 ? LowNibbles(w[h][i]) : HighNibbles(w[h][i]);
          }
        }
        const int shift = 8 * (s % 4);
        const __m512 ds = _mm512_mul_ps(
            d, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc[s / 4], shift), byte)));
        const __m512 ndm = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_and_si512(
                                                       _mm512_srli_epi32(mn[s / 4], shift), byte)));
        const int64_t blk32 = 8 * b + s;
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const int64_t col = 32 * blk32;
          const __m512i isum = Dot16(Dot16(_mm512_setzero_si512(), codes[0], tok[t].q + col),
                                     codes[1], tok[t].q + col + 16);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                   _mm512_mul_ps(ds, _mm512_set1_ps(tok[t].d[blk32])), acc[t]);
          acc[t] = _mm512_fmadd_ps(ndm, _mm512_set1_ps(tok[t].dsum[blk32]), acc[t]);
        }
      }
    }
  }
};

// Q6_K: value = code - 32 with a 6-bit code (4 bits from ql, 2 from qh) and a scale per 16
// columns. Element 128 h + 32 s + 16 k + l of a superblock takes nibble s / 2 of
// ql[64 h + 32 (s % 2) + 16 k + l] and bits 2s .. 2s + 1 of qh[32 h + 16 k + l].
STRATA_SIMD_INLINE __m512i Q6Codes(__m512i ql, __m512i qh, int s) {
  const __m512i low = s < 2 ? LowNibbles(ql) : HighNibbles(ql);
  const __m512i high = _mm512_and_si512(_mm512_srli_epi16(qh, 2 * s), _mm512_set1_epi8(3));
  return _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
}

// The scale of 16-column sub-block `sub` (byte sub % 4 of scales[sub / 4], int8) times d.
STRATA_SIMD_INLINE __m512 Q6Scale(const __m512i scales[4], int sub, __m512 d) {
  const int shift = 24 - 8 * (sub % 4);
  return _mm512_mul_ps(
      d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(scales[sub / 4], shift), 24)));
}

// One token: per 128-column half h and 16-column half k of its 32-column blocks, one transpose
// each of ql (two) and qh serves the four blocks; their integer sums are all taken first, then
// the fma chain runs in column order as in Pass. More tokens: their sums would not fit the
// registers, so each block reloads its ql bytes and runs its chain at once.
struct DirectQ6_K {
  template <int T>
  STRATA_SIMD_INLINE static void Run(const uint8_t* blk, int64_t b, int64_t row_bytes,
                                     __m512i offsets, const TokenRow (&tok)[T], __m512 (&acc)[T]) {
    // d: the high half of the word at byte 206 (the block's last bytes).
    const __m512 d = HalvesToFloat<true>(GatherRows(blk + 206, offsets));
    __m512i scales[4];  // byte j of scales[i]: the int8 scale of 16-column sub-block 4i + j
    LoadRows(blk + 192, row_bytes, scales);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      if constexpr (T == 1) {
        __m512i isum[4][2];  // [32-column block s][16-column half k]
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          __m512i ql[2][4];
          __m512i qh[4];
          LoadRows(blk + 64 * h + 16 * k, row_bytes, ql[0]);
          LoadRows(blk + 64 * h + 32 + 16 * k, row_bytes, ql[1]);
          LoadRows(blk + 128 + 32 * h + 16 * k, row_bytes, qh);
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
            const int64_t blk32 = 8 * b + 4 * h + s;
            __m512i codes[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) codes[i] = Q6Codes(ql[s % 2][i], qh[i], s);
            const __m512i init = _mm512_set1_epi32(tok[0].c16[2 * blk32 + k] >> 2);
            isum[s][k] = Dot16(init, codes, tok[0].q + 32 * blk32 + 16 * k);
          }
        }
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          const int64_t blk32 = 8 * b + 4 * h + s;
          const __m512 dx = _mm512_set1_ps(tok[0].d[blk32]);
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            const __m512 dw = Q6Scale(scales, 8 * h + 2 * s + k, d);
            acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[s][k]), _mm512_mul_ps(dw, dx), acc[0]);
          }
        }
      } else {
        __m512i qh[2][4];
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) LoadRows(blk + 128 + 32 * h + 16 * k, row_bytes, qh[k]);
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          const int64_t blk32 = 8 * b + 4 * h + s;
#pragma GCC unroll 2
          for (int k = 0; k < 2; ++k) {
            __m512i codes[4];
            LoadRows(blk + 64 * h + 32 * (s % 2) + 16 * k, row_bytes, codes);
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) codes[i] = Q6Codes(codes[i], qh[k][i], s);
            const __m512 dw = Q6Scale(scales, 8 * h + 2 * s + k, d);
#pragma GCC unroll 16
            for (int t = 0; t < T; ++t) {
              const __m512i init = _mm512_set1_epi32(tok[t].c16[2 * blk32 + k] >> 2);
              const __m512i isum = Dot16(init, codes, tok[t].q + 32 * blk32 + 16 * k);
              acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                       _mm512_mul_ps(dw, _mm512_set1_ps(tok[t].d[blk32])), acc[t]);
            }
          }
        }
      }
    }
  }
};

// The most tokens Direct takes for Decoder (0: none; staged passes take the rest). Measured:
// Q6_K's pass for several tokens, which reloads ql per block, loses to the stage at 16 tokens.
template <class Decoder>
constexpr int kDirectTokens = std::is_same_v<Decoder, DecodeQ8_0> ||
                                      std::is_same_v<Decoder, DecodeQ4_0> ||
                                      std::is_same_v<Decoder, DecodeQ5_0> ||
                                      std::is_same_v<Decoder, DecodeQ4_K>
                                  ? 16
                                  : (std::is_same_v<Decoder, DecodeQ6_K> ? 8 : 0);

// T tokens from t0 over the full group of 16 rows at src, straight from the weights. Needs
// 16 * row_bytes < 2^31 (the gathers' offsets).
template <class Decoder, int T>
STRATA_PASS_UNCHECKED STRATA_SIMD_NOINLINE void Direct(const uint8_t* src, int64_t row_bytes,
                                                       const Int8Tokens& x, int64_t t0, float* y,
                                                       int64_t ldy) {
  // Byte offset of each row (lane r: row r), for the gathers.
  const __m512i offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(row_bytes)));
  if constexpr (std::is_same_v<Decoder, DecodeQ8_0>) {
    DirectPass<T, DirectQ8_0, 32, 34>(src, row_bytes, offsets, x, t0, y, ldy);
  } else if constexpr (std::is_same_v<Decoder, DecodeQ4_0>) {
    DirectPass<T, DirectLegacy<false>, 32, 18>(src, row_bytes, offsets, x, t0, y, ldy);
  } else if constexpr (std::is_same_v<Decoder, DecodeQ5_0>) {
    DirectPass<T, DirectLegacy<true>, 32, 22>(src, row_bytes, offsets, x, t0, y, ldy);
  } else if constexpr (std::is_same_v<Decoder, DecodeQ4_K>) {
    DirectPass<T, DirectQ4_K, 256, 144>(src, row_bytes, offsets, x, t0, y, ldy);
  } else if constexpr (std::is_same_v<Decoder, DecodeQ6_K>) {
    DirectPass<T, DirectQ6_K, 256, 210>(src, row_bytes, offsets, x, t0, y, ldy);
  }
}

// Direct for the tn (1 <= tn <= T) tokens from t0.
template <class Decoder, int T>
STRATA_SIMD_INLINE void DirectTokens(int64_t tn, const uint8_t* src, int64_t row_bytes,
                                     const Int8Tokens& x, int64_t t0, float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tn < T) {
      DirectTokens<Decoder, T - 1>(tn, src, row_bytes, x, t0, y, ldy);
      return;
    }
  }
  Direct<Decoder, T>(src, row_bytes, x, t0, y, ldy);
}

// The most tokens one pass takes: T accumulators + 8 weight registers + a few temporaries fit
// the 32 zmm registers.
constexpr int64_t kMaxTokens = 16;

// The decoding pass for the first tn (1 <= tn <= T) tokens from t0.
template <class Decoder, Kind K, int T>
STRATA_SIMD_INLINE void DecodingPass(int64_t tn, const Stage& stage, const uint8_t* src,
                                     int64_t row_bytes, int rn, const Int8Tokens& x, int64_t t0,
                                     float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tn < T) {
      DecodingPass<Decoder, K, T - 1>(tn, stage, src, row_bytes, rn, x, t0, y, ldy);
      return;
    }
  }
  Pass<Decoder, K, T, true>(stage, src, row_bytes, rn, x, t0, y, ldy);
}

// AddressSanitizer builds: a report (a load or store at the first bad byte) when any byte of
// [p, p + bytes) is not addressable; nothing in other builds.
inline void CheckRange([[maybe_unused]] const void* p, [[maybe_unused]] int64_t bytes,
                       [[maybe_unused]] bool write) {
#if defined(__SANITIZE_ADDRESS__)
  if (bytes <= 0) return;
  void* bad = __asan_region_is_poisoned(const_cast<void*>(p), static_cast<size_t>(bytes));
  if (bad != nullptr) {
    __asan_report_error(__builtin_return_address(0), __builtin_frame_address(0),
                        __builtin_frame_address(0), bad, write ? 1 : 0, 1);
  }
#endif
}

// Every byte a kernel call may read or write outside its stage (the passes are not
// instrumented: STRATA_PASS_UNCHECKED): the rows, each token array, each token's outputs.
inline void CheckKernelRanges([[maybe_unused]] const uint8_t* w, [[maybe_unused]] int64_t row_bytes,
                              [[maybe_unused]] int64_t rows, [[maybe_unused]] const Int8Tokens& x,
                              [[maybe_unused]] int64_t n_tokens, [[maybe_unused]] float* y,
                              [[maybe_unused]] int64_t ldy) {
#if defined(__SANITIZE_ADDRESS__)
  const int64_t nb = x.cols / 32;
  CheckRange(w, rows * row_bytes, false);
  CheckRange(x.q, n_tokens * x.cols, false);
  CheckRange(x.d, n_tokens * nb * 4, false);
  CheckRange(x.c32, n_tokens * nb * 4, false);
  CheckRange(x.c16, 2 * n_tokens * nb * 4, false);
  CheckRange(x.dsum, n_tokens * nb * 4, false);
  for (int64_t t = 0; t < n_tokens; ++t) CheckRange(y + t * ldy, rows * 4, true);
#endif
}

// An Int8KernelFn for one format: per group of 16 rows, a first pass over the remainder of the
// tokens (n_tokens % 16, or 16) decodes the weights as they stream from memory; passes over 16
// tokens each then reuse the decoded group.
template <class Decoder, Kind K>
STRATA_SIMD_NOINLINE void Kernel(const uint8_t* w, int64_t row_bytes, int64_t rows,
                                 const Int8Tokens& x, int64_t n_tokens, float* y, int64_t ldy) {
  CheckKernelRanges(w, row_bytes, rows, x, n_tokens, y, ldy);
  // Full groups of 16 rows straight from the weights where the format and token count allow;
  // the stage serves the rest (all groups, or a last partial one).
  int64_t r_staged = 0;
  constexpr int kDirect = kDirectTokens<Decoder>;
  if constexpr (kDirect > 0) {
    if (n_tokens <= kDirect && kRows * row_bytes < (int64_t{1} << 31)) {
      for (; r_staged + kRows <= rows; r_staged += kRows) {
        DirectTokens<Decoder, kDirect>(n_tokens, w + r_staged * row_bytes, row_bytes, x, 0,
                                       y + r_staged, ldy);
      }
      if (r_staged == rows) return;
    }
  }
  const int64_t keep = n_tokens > kMaxTokens ? 1 : 0;
  const int64_t chunks = keep != 0 ? x.cols / 32 : Decoder::kElems / 32;
  const int64_t halves = K == Kind::kSigned16 ? 2 : 1;
  const int64_t code_bytes = chunks * kChunkCodeBytes;
  const int64_t d_bytes = halves * chunks * kRows * 4;
  const int64_t m_bytes = chunks * kRows * 4;
  thread_local AlignedBuffer<uint8_t> arena;
  uint8_t* base = arena.Get(code_bytes + d_bytes + m_bytes);
  const Stage stage{base, reinterpret_cast<float*>(base + code_bytes),
                    reinterpret_cast<float*>(base + code_bytes + d_bytes), keep};
  CheckRange(base, code_bytes + d_bytes + m_bytes, true);
  const int64_t first = n_tokens % kMaxTokens != 0 ? n_tokens % kMaxTokens : kMaxTokens;
  for (int64_t r0 = r_staged; r0 < rows; r0 += kRows) {
    const int rn = static_cast<int>(std::min<int64_t>(kRows, rows - r0));
    if (rn < kRows) {
      // Lanes without a row: computed, never stored; zeros keep them defined.
      std::memset(base, 0, code_bytes + d_bytes + m_bytes);
    }
    const uint8_t* src = w + r0 * row_bytes;
    DecodingPass<Decoder, K, kMaxTokens>(first, stage, src, row_bytes, rn, x, 0, y + r0, ldy);
    for (int64_t t0 = first; t0 < n_tokens; t0 += kMaxTokens) {
      Pass<Decoder, K, kMaxTokens, false>(stage, src, row_bytes, rn, x, t0, y + r0, ldy);
    }
  }
}

Int8KernelFn KernelFor(model::GgmlType type) {
  using model::GgmlType;
  switch (type) {
    case GgmlType::kQ8_0:
      return &Kernel<DecodeQ8_0, Kind::kSigned32>;
    case GgmlType::kQ4_0:
      return &Kernel<DecodeQ4_0, Kind::kSigned32>;
    case GgmlType::kQ5_0:
      return &Kernel<DecodeQ5_0, Kind::kSigned32>;
    case GgmlType::kQ4_1:
      return &Kernel<DecodeQ4_1, Kind::kMin32>;
    case GgmlType::kQ5_1:
      return &Kernel<DecodeQ5_1, Kind::kMin32>;
    case GgmlType::kQ4_K:
      return &Kernel<DecodeQ4_K, Kind::kMin32>;
    case GgmlType::kQ5_K:
      return &Kernel<DecodeQ5_K, Kind::kMin32>;
    case GgmlType::kQ6_K:
      return &Kernel<DecodeQ6_K, Kind::kSigned16>;
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
#undef STRATA_PASS_UNCHECKED
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
  static const Int8Family family{"avx512_vnni", &avx512_vnni::KernelFor, &avx512_vnni::QuantizeRow};
  static const bool available = avx512_vnni::CpuHasAvx512Vnni();
  return available ? &family : nullptr;
}

}  // namespace strata::backend::cpu::internal

#else  // !defined(__x86_64__)

namespace strata::backend::cpu::internal {
const Int8Family* Avx512VnniInt8Family() { return nullptr; }
}  // namespace strata::backend::cpu::internal

#endif
