#include "strata/backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "strata/common/check.h"
#include "strata/model/fp16.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_ATTN_X86 1
#define STRATA_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace strata::backend::cpu {
namespace {

// Keys per online-softmax step: one max/rescale per row per chunk, and the chunk's K (then V)
// rows stay in L1 while every row of the tile uses them.
constexpr int kChunk = 32;
// (query, head) rows that share one pass over K/V.
constexpr int kMaxRows = 16;
// Queries join a tile only while their key ranges start and end within this many positions of
// the tile's first query; keys outside a row's own range are masked, so this bounds the waste.
constexpr int64_t kMaxTileSpread = kChunk;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The kernels of one (isa, element type). Row-major buffers:
//   q:   [rows, dk] (already scaled)     s / w: [rows, kChunk]
//   acc: [rows, dv]                      k / v: nk row pointers of dk / dv elements
struct KernelOps {
  // s[r][j] = q[r] · k[j] for j < nk.
  void (*scores)(const void* const* k, int nk, const float* q, int rows, int dk, float* s,
                 float* tmp);
  // x[j] = exp(x[j] - m) for j < n; returns the sum of the new x[j].
  float (*exp_sum)(float* x, int n, float m);
  // acc[r] = acc[r] * alpha[r] + sum_j w[r][j] * v[j].
  void (*accumulate)(const void* const* v, int nk, const float* w, const float* alpha, int rows,
                     int dv, float* acc, float* tmp);
};

// Element type tag of a q8_0 row (int8 values, then fp16 scales: kv_storage.h).
struct Q8 {};

// ---- Portable scalar path ------------------------------------------------------------------

template <typename T>
const float* RowAsFloat(const void* row, int n, float* tmp) {
  if constexpr (std::is_same_v<T, float>) {
    (void)n;
    (void)tmp;
    return static_cast<const float*>(row);
  } else if constexpr (std::is_same_v<T, Q8>) {
    DequantizeQ8Row(row, n, tmp);
    return tmp;
  } else {
    const auto* h = static_cast<const uint16_t*>(row);
    for (int d = 0; d < n; ++d) tmp[d] = model::Fp16ToFloat(h[d]);
    return tmp;
  }
}

template <typename T>
void ScoresScalar(const void* const* k, int nk, const float* q, int rows, int dk, float* s,
                  float* tmp) {
  for (int j = 0; j < nk; ++j) {
    const float* kf = RowAsFloat<T>(k[j], dk, tmp);
    for (int r = 0; r < rows; ++r) {
      const float* qr = q + static_cast<std::ptrdiff_t>(r) * dk;
      float sum = 0.0f;
      for (int d = 0; d < dk; ++d) sum += qr[d] * kf[d];
      s[r * kChunk + j] = sum;
    }
  }
}

float ExpSumScalar(float* x, int n, float m) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    sum += x[j];
  }
  return sum;
}

template <typename T>
void AccumulateScalar(const void* const* v, int nk, const float* w, const float* alpha, int rows,
                      int dv, float* acc, float* tmp) {
  for (int r = 0; r < rows; ++r) {
    float* ar = acc + static_cast<std::ptrdiff_t>(r) * dv;
    for (int d = 0; d < dv; ++d) ar[d] *= alpha[r];
  }
  for (int j = 0; j < nk; ++j) {
    const float* vf = RowAsFloat<T>(v[j], dv, tmp);
    for (int r = 0; r < rows; ++r) {
      const float wr = w[r * kChunk + j];
      if (wr == 0.0f) continue;
      float* ar = acc + static_cast<std::ptrdiff_t>(r) * dv;
      for (int d = 0; d < dv; ++d) ar[d] += wr * vf[d];
    }
  }
}

// ---- AVX2 + FMA + F16C path ----------------------------------------------------------------

#ifdef STRATA_ATTN_X86

// Elements [d, d + 8) of a row of `dim` elements as floats; d is a multiple of 8.
template <typename T>
STRATA_AVX2 inline __m256 Load8(const void* row, int d, int dim) {
  if constexpr (std::is_same_v<T, float>) {
    (void)dim;
    return _mm256_loadu_ps(static_cast<const float*>(row) + d);
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    (void)dim;
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + d)));
  } else {
    // q8_0: widen 8 signed bytes and multiply by their group's scale, exactly as
    // DequantizeQ8Row does (the product is exact in fp32).
    const auto* bytes = static_cast<const char*>(row);
    const __m256 x = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + d))));
    uint16_t h = 0;
    std::memcpy(&h, bytes + dim + 2 * (d / kQ8Group), sizeof(h));
    const __m256 scale = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
    return _mm256_mul_ps(x, scale);
  }
}

// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)): the same order as HorizontalSum8, so a
// score does not depend on how many rows and keys were computed together.
STRATA_AVX2 inline float HorizontalSum(__m256 v) {
  const __m256 pairs = _mm256_hadd_ps(v, v);
  const __m256 quads = _mm256_hadd_ps(pairs, pairs);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
}

// [HorizontalSum(v[0]), ..., HorizontalSum(v[7])] with 9 shuffles and adds instead of 40.
STRATA_AVX2 inline __m256 HorizontalSum8(const __m256* v) {
  const __m256 ab = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 cd = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  // ab holds the four 4-element partial sums of v[0..3] of the low half in its low lane and of
  // the high half in its high lane; likewise cd for v[4..7].
  return _mm256_add_ps(_mm256_permute2f128_ps(ab, cd, 0x20), _mm256_permute2f128_ps(ab, cd, 0x31));
}

// exp(x) for x <= 0, within ~2 ulp: Cephes expf (x = n ln2 + r, |r| <= ln2/2, degree-6
// polynomial for e^r, 2^n built in the exponent bits). Inputs below -87.3 give ~2^-126 instead
// of 0, which is below anything that can change an fp32 softmax sum. A NaN stays NaN (max/min
// return their second operand when either is NaN).
STRATA_AVX2 inline __m256 Exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.3365447504f), x);
  x = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in a short high part (exact product with n) and a correction.
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

STRATA_AVX2 float ExpSumAvx2(float* x, int n, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
    _mm256_storeu_ps(x + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (j < n) {
    alignas(32) float tail[8];
    const int rest = n - j;
    for (int i = 0; i < 8; ++i) tail[i] = i < rest ? x[j + i] : kNegInf;
    __m256 e = Exp8(_mm256_sub_ps(_mm256_load_ps(tail), mv));
    // Padding lanes clamp to ~2^-126, not 0: zero them before they reach the sum.
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    e = _mm256_and_ps(e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(rest), lane)));
    _mm256_store_ps(tail, e);
    for (int i = 0; i < rest; ++i) x[j + i] = tail[i];
    sum = _mm256_add_ps(sum, e);
  }
  return HorizontalSum(sum);
}

// NR rows times NK keys of dot products at once: NR * NK independent accumulator chains, each
// K chunk widened once for NR rows and each q chunk loaded once for NK keys.
template <typename T, int NR, int NK>
STRATA_AVX2 void ScoresTile(const void* const* k, const float* q, int dk, float* s) {
  __m256 acc[NR][NK];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NK; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  for (int d = 0; d < dk; d += 8) {
    __m256 kv[NK];
#pragma GCC unroll 4
    for (int j = 0; j < NK; ++j) kv[j] = Load8<T>(k[j], d, dk);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m256 qv = _mm256_loadu_ps(q + static_cast<std::ptrdiff_t>(r) * dk + d);
#pragma GCC unroll 4
      for (int j = 0; j < NK; ++j) acc[r][j] = _mm256_fmadd_ps(qv, kv[j], acc[r][j]);
    }
  }
  if constexpr (NR * NK == 8) {
    alignas(32) float sums[8];
    _mm256_store_ps(sums, HorizontalSum8(&acc[0][0]));
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < NK; ++j) s[r * kChunk + j] = sums[r * NK + j];
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < NK; ++j) s[r * kChunk + j] = HorizontalSum(acc[r][j]);
    }
  }
}

template <typename T, int NR>
STRATA_AVX2 void ScoresRows(const void* const* k, int nk, const float* q, int dk, float* s) {
  // Keep NR * NK <= 8 accumulators (plus NK widened K chunks and a q chunk) in 16 registers.
  constexpr int kNk = NR <= 2 ? 4 : (NR <= 4 ? 2 : 1);
  int j = 0;
  for (; j + kNk <= nk; j += kNk) ScoresTile<T, NR, kNk>(k + j, q, dk, s + j);
  for (; j < nk; ++j) ScoresTile<T, NR, 1>(k + j, q, dk, s + j);
}

template <typename T>
STRATA_AVX2 void ScoresAvx2(const void* const* k, int nk, const float* q, int rows, int dk,
                            float* s, float* /*tmp*/) {
  for (int r0 = 0; r0 < rows; r0 += 8) {
    const float* qr = q + static_cast<std::ptrdiff_t>(r0) * dk;
    float* sr = s + r0 * kChunk;
    switch (std::min(rows - r0, 8)) {
      case 1:
        ScoresRows<T, 1>(k, nk, qr, dk, sr);
        break;
      case 2:
        ScoresRows<T, 2>(k, nk, qr, dk, sr);
        break;
      case 3:
        ScoresRows<T, 3>(k, nk, qr, dk, sr);
        break;
      case 4:
        ScoresRows<T, 4>(k, nk, qr, dk, sr);
        break;
      case 5:
        ScoresRows<T, 5>(k, nk, qr, dk, sr);
        break;
      case 6:
        ScoresRows<T, 6>(k, nk, qr, dk, sr);
        break;
      case 7:
        ScoresRows<T, 7>(k, nk, qr, dk, sr);
        break;
      default:
        ScoresRows<T, 8>(k, nk, qr, dk, sr);
        break;
    }
  }
}

// NR rows times ND chunks of 8 output dims held in registers over all nk keys: each V chunk is
// widened once for NR rows; ND > 1 gives few rows enough independent FMA chains.
template <typename T, int NR, int ND>
STRATA_AVX2 void AccumulateTile(const void* const* v, int nk, const float* w, const float* alpha,
                                int dv, float* acc) {
  for (int d = 0; d < dv; d += 8 * ND) {
    __m256 a[NR][ND];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m256 scale = _mm256_set1_ps(alpha[r]);
#pragma GCC unroll 4
      for (int c = 0; c < ND; ++c) {
        a[r][c] = _mm256_mul_ps(
            _mm256_loadu_ps(acc + static_cast<std::ptrdiff_t>(r) * dv + d + 8 * c), scale);
      }
    }
    for (int j = 0; j < nk; ++j) {
      __m256 vv[ND];
#pragma GCC unroll 4
      for (int c = 0; c < ND; ++c) vv[c] = Load8<T>(v[j], d + 8 * c, dv);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const __m256 wr = _mm256_broadcast_ss(w + r * kChunk + j);
#pragma GCC unroll 4
        for (int c = 0; c < ND; ++c) a[r][c] = _mm256_fmadd_ps(wr, vv[c], a[r][c]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
      for (int c = 0; c < ND; ++c) {
        _mm256_storeu_ps(acc + static_cast<std::ptrdiff_t>(r) * dv + d + 8 * c, a[r][c]);
      }
    }
  }
}

template <typename T, int NR>
STRATA_AVX2 void AccumulateRows(const void* const* v, int nk, const float* w, const float* alpha,
                                int dv, float* acc) {
  constexpr int kNd = NR == 1 ? 4 : (NR <= 3 ? 2 : 1);
  if (dv % (8 * kNd) == 0) {
    AccumulateTile<T, NR, kNd>(v, nk, w, alpha, dv, acc);
  } else {
    AccumulateTile<T, NR, 1>(v, nk, w, alpha, dv, acc);
  }
}

template <typename T>
STRATA_AVX2 void AccumulateAvx2(const void* const* v, int nk, const float* w, const float* alpha,
                                int rows, int dv, float* acc, float* /*tmp*/) {
  for (int r0 = 0; r0 < rows; r0 += 8) {
    const float* wr = w + r0 * kChunk;
    const float* al = alpha + r0;
    float* ar = acc + static_cast<std::ptrdiff_t>(r0) * dv;
    switch (std::min(rows - r0, 8)) {
      case 1:
        AccumulateRows<T, 1>(v, nk, wr, al, dv, ar);
        break;
      case 2:
        AccumulateRows<T, 2>(v, nk, wr, al, dv, ar);
        break;
      case 3:
        AccumulateRows<T, 3>(v, nk, wr, al, dv, ar);
        break;
      case 4:
        AccumulateRows<T, 4>(v, nk, wr, al, dv, ar);
        break;
      case 5:
        AccumulateRows<T, 5>(v, nk, wr, al, dv, ar);
        break;
      case 6:
        AccumulateRows<T, 6>(v, nk, wr, al, dv, ar);
        break;
      case 7:
        AccumulateRows<T, 7>(v, nk, wr, al, dv, ar);
        break;
      default:
        AccumulateRows<T, 8>(v, nk, wr, al, dv, ar);
        break;
    }
  }
}

#endif  // STRATA_ATTN_X86

KernelOps SelectOps(KvIsa isa, KvDtype dtype) {
#ifdef STRATA_ATTN_X86
  if (isa == KvIsa::kAvx2) {
    switch (dtype) {
      case KvDtype::kF16:
        return {&ScoresAvx2<uint16_t>, &ExpSumAvx2, &AccumulateAvx2<uint16_t>};
      case KvDtype::kQ8_0:
        return {&ScoresAvx2<Q8>, &ExpSumAvx2, &AccumulateAvx2<Q8>};
      case KvDtype::kF32:
        break;
    }
    return {&ScoresAvx2<float>, &ExpSumAvx2, &AccumulateAvx2<float>};
  }
#endif
  (void)isa;
  switch (dtype) {
    case KvDtype::kF16:
      return {&ScoresScalar<uint16_t>, &ExpSumScalar, &AccumulateScalar<uint16_t>};
    case KvDtype::kQ8_0:
      return {&ScoresScalar<Q8>, &ExpSumScalar, &AccumulateScalar<Q8>};
    case KvDtype::kF32:
      break;
  }
  return {&ScoresScalar<float>, &ExpSumScalar, &AccumulateScalar<float>};
}

// ---- Tiles and the online softmax ----------------------------------------------------------

// One (query, head) row: its visible keys are [lo, hi].
struct Row {
  const float* q;  // [dk]
  float* out;      // [dv]
  int64_t lo;
  int64_t hi;
};

struct Tile {
  int32_t kv_head = 0;
  int rows = 0;
  Row row[kMaxRows];
  int64_t lo = 0;  // union of the rows' ranges
  int64_t hi = 0;
};

// Per-thread buffers, grown on demand and reused across calls.
struct Scratch {
  std::vector<float> q;    // [kMaxRows, dk], scaled
  std::vector<float> acc;  // [kMaxRows, dv]
  std::vector<float> tmp;  // [max(dk, dv)]
  float s[kMaxRows * kChunk];
  float m[kMaxRows];
  float l[kMaxRows];
  float alpha[kMaxRows];
  const void* k[2][kChunk];  // row pointers of the current and the next chunk
  const void* v[2][kChunk];
};

struct Context {
  const PagedAttentionArgs* args;
  KernelOps ops;
  int32_t dk;
  int32_t dv;
  int32_t block_size;
  int64_t k_token_stride_bytes;
  int64_t v_token_stride_bytes;
  int64_t k_head_bytes;  // offset of one KV head within a token row
  int64_t v_head_bytes;
  int64_t k_row_bytes;  // one head's K (V) of one token
  int64_t v_row_bytes;
  bool prefetch;  // rows are strided (several KV heads)
};

// Walks a sequence's positions through its blocks, handing out one KV head's row pointers.
class KeyCursor {
 public:
  KeyCursor(const Context& ctx, int64_t pos)
      : ctx_(ctx),
        block_index_(pos / ctx.block_size),
        slot_(static_cast<int32_t>(pos % ctx.block_size)) {}

  // Pointers to the K and V rows of the next n positions.
  void Gather(int n, const void** k, const void** v) {
    for (int j = 0; j < n; ++j) {
      if (k_block_ == nullptr || slot_ == 0) {
        const PagedAttentionArgs& args = *ctx_.args;
        const kv::BlockId id = args.block_ids[static_cast<std::size_t>(block_index_)];
        k_block_ =
            static_cast<const std::byte*>(args.kv->KBlock(args.layer, id)) + ctx_.k_head_bytes;
        v_block_ =
            static_cast<const std::byte*>(args.kv->VBlock(args.layer, id)) + ctx_.v_head_bytes;
      }
      k[j] = k_block_ + slot_ * ctx_.k_token_stride_bytes;
      v[j] = v_block_ + slot_ * ctx_.v_token_stride_bytes;
      if (++slot_ == ctx_.block_size) {
        slot_ = 0;
        ++block_index_;
      }
    }
  }

 private:
  const Context& ctx_;
  int64_t block_index_;
  int32_t slot_;
  const std::byte* k_block_ = nullptr;
  const std::byte* v_block_ = nullptr;
};

void Prefetch(const void* const* rows, int n, int64_t row_bytes) {
  for (int j = 0; j < n; ++j) {
    const auto* row = static_cast<const char*>(rows[j]);
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b);
  }
}

void RunTile(const Context& ctx, const Tile& tile, Scratch& sc) {
  const PagedAttentionArgs& args = *ctx.args;
  const int rows = tile.rows;
  const int32_t dk = ctx.dk;
  const int32_t dv = ctx.dv;
  for (int r = 0; r < rows; ++r) {
    float* qs = sc.q.data() + static_cast<std::ptrdiff_t>(r) * dk;
    for (int32_t d = 0; d < dk; ++d) qs[d] = tile.row[r].q[d] * args.scale;
    sc.m[r] = kNegInf;
    sc.l[r] = 0.0f;
  }
  std::fill_n(sc.acc.begin(), static_cast<std::ptrdiff_t>(rows) * dv, 0.0f);

  // Chunks are cells of a grid fixed at absolute multiples of kChunk (clipped to the tile), so a
  // row meets the same sequence of max updates and rescales whatever tile it is in: the result
  // of a row is bit-identical however the tasks are split or grouped (batch invariance).
  auto chunk_len = [&](int64_t c0) {
    const int64_t cell_end = (c0 / kChunk + 1) * kChunk;  // exclusive
    return static_cast<int>(std::min(cell_end, tile.hi + 1) - c0);
  };
  // The row pointers of the next chunk are gathered one chunk ahead. With several KV heads a
  // head's rows are strided and the hardware prefetcher falls behind, so they are prefetched
  // while the current chunk computes (measured: 1.6x faster decode with 8 KV heads of 128); one
  // KV head's rows are contiguous within a block and prefetching them only costs time.
  KeyCursor cursor(ctx, tile.lo);
  int cur = 0;
  int64_t c0 = tile.lo;
  int nk = chunk_len(c0);
  cursor.Gather(nk, sc.k[cur], sc.v[cur]);
  while (nk > 0) {
    const int64_t next_c0 = c0 + nk;
    const int next_nk = next_c0 <= tile.hi ? chunk_len(next_c0) : 0;
    if (next_nk > 0) {
      cursor.Gather(next_nk, sc.k[1 - cur], sc.v[1 - cur]);
      if (ctx.prefetch) Prefetch(sc.k[1 - cur], next_nk, ctx.k_row_bytes);
    }

    ctx.ops.scores(sc.k[cur], nk, sc.q.data(), rows, dk, sc.s, sc.tmp.data());

    for (int r = 0; r < rows; ++r) {
      float* s = sc.s + r * kChunk;
      // The row's visible keys in this chunk: [a, b).
      const int a = static_cast<int>(std::max<int64_t>(tile.row[r].lo - c0, 0));
      const int b = static_cast<int>(std::min<int64_t>(tile.row[r].hi - c0 + 1, nk));
      if (a >= b) {
        std::fill_n(s, nk, 0.0f);
        sc.alpha[r] = 1.0f;
        continue;
      }
      float chunk_max = s[a];
      for (int j = a + 1; j < b; ++j) chunk_max = std::max(chunk_max, s[j]);
      const float m_new = std::max(sc.m[r], chunk_max);
      sc.alpha[r] = std::exp(sc.m[r] - m_new);  // 0 on the first chunk (m = -inf)
      const float sum = ctx.ops.exp_sum(s + a, b - a, m_new);
      std::fill(s, s + a, 0.0f);
      std::fill(s + b, s + nk, 0.0f);
      sc.l[r] = sc.l[r] * sc.alpha[r] + sum;
      sc.m[r] = m_new;
    }

    if (next_nk > 0 && ctx.prefetch) Prefetch(sc.v[1 - cur], next_nk, ctx.v_row_bytes);
    ctx.ops.accumulate(sc.v[cur], nk, sc.s, sc.alpha, rows, dv, sc.acc.data(), sc.tmp.data());
    cur = 1 - cur;
    c0 = next_c0;
    nk = next_nk;
  }

  for (int r = 0; r < rows; ++r) {
    // Every row sees at least its own position, so l >= 1.
    const float inv = 1.0f / sc.l[r];
    const float* acc = sc.acc.data() + static_cast<std::ptrdiff_t>(r) * dv;
    float* out = tile.row[r].out;
    for (int32_t d = 0; d < dv; ++d) out[d] = acc[d] * inv;
  }
}

}  // namespace

int64_t PagedAttentionTasks(const PagedAttentionArgs& args) {
  STRATA_CHECK(args.kv != nullptr);
  return args.n_q * args.kv->config().num_kv_heads;
}

void PagedAttention(const PagedAttentionArgs& args, int64_t task_begin, int64_t task_end) {
  PagedAttention(args, task_begin, task_end, BestKvIsa());
}

void PagedAttention(const PagedAttentionArgs& args, int64_t task_begin, int64_t task_end,
                    KvIsa isa) {
  STRATA_CHECK(args.kv != nullptr);
  const KvCacheConfig& config = args.kv->config();
  const int64_t num_tasks = PagedAttentionTasks(args);
  STRATA_CHECK(0 <= task_begin && task_begin <= task_end && task_end <= num_tasks);
  if (task_begin == task_end) return;
  STRATA_CHECK(args.layer >= 0 && args.layer < config.num_layers);
  STRATA_CHECK(args.n_heads > 0 && args.n_heads % config.num_kv_heads == 0);
  STRATA_CHECK(args.q != nullptr && args.q_pos != nullptr && args.out != nullptr);
  STRATA_CHECK(args.sliding_window >= 0);
  STRATA_CHECK(KvIsaSupported(isa));

  const int32_t dk = config.head_dim_k;
  const int32_t dv = config.head_dim_v;
  if (dk % 8 != 0 || dv % 8 != 0) isa = KvIsa::kScalar;
  const KvLayout& layout = args.kv->layout();
  Context ctx{&args,
              SelectOps(isa, config.dtype),
              dk,
              dv,
              config.block_size,
              layout.k_token_stride(),
              layout.v_token_stride(),
              0,
              0,
              layout.k_row_bytes(),
              layout.v_row_bytes(),
              config.num_kv_heads > 1};

  thread_local Scratch sc;
  sc.q.resize(static_cast<std::size_t>(kMaxRows) * dk);
  sc.acc.resize(static_cast<std::size_t>(kMaxRows) * dv);
  sc.tmp.resize(static_cast<std::size_t>(std::max(dk, dv)));

  const int32_t group = args.n_heads / config.num_kv_heads;
  const int64_t capacity = static_cast<int64_t>(args.block_ids.size()) * config.block_size;
  auto key_range = [&](int64_t i, int64_t* lo, int64_t* hi) {
    const int64_t pos = args.q_pos[i];
    STRATA_CHECK(pos >= 0 && pos < capacity);
    *hi = pos;
    *lo = args.sliding_window > 0 ? std::max<int64_t>(0, pos - args.sliding_window + 1) : 0;
  };
  auto add_row = [&](Tile* tile, int64_t i, int32_t head, int64_t lo, int64_t hi) {
    Row& row = tile->row[tile->rows++];
    row.q = args.q + (i * args.n_heads + head) * dk;
    row.out = args.out + (i * args.n_heads + head) * dv;
    row.lo = lo;
    row.hi = hi;
    tile->lo = std::min(tile->lo, lo);
    tile->hi = std::max(tile->hi, hi);
  };

  const int64_t queries_per_tile = std::max(1, kMaxRows / group);
  int64_t t = task_begin;
  while (t < task_end) {
    Tile tile;
    tile.kv_head = static_cast<int32_t>(t / args.n_q);
    ctx.k_head_bytes = tile.kv_head * layout.k_row_bytes();
    ctx.v_head_bytes = tile.kv_head * layout.v_row_bytes();
    const int32_t head0 = tile.kv_head * group;
    int64_t i = t % args.n_q;
    int64_t lo0 = 0;
    int64_t hi0 = 0;
    key_range(i, &lo0, &hi0);
    tile.lo = lo0;
    tile.hi = hi0;
    if (group > kMaxRows) {
      // One query's heads split in several tiles, each its own pass over K/V.
      for (int32_t h0 = 0; h0 < group; h0 += kMaxRows) {
        Tile part = tile;
        for (int32_t h = h0; h < std::min(group, h0 + kMaxRows); ++h) {
          add_row(&part, i, head0 + h, lo0, hi0);
        }
        RunTile(ctx, part, sc);
      }
      ++t;
      continue;
    }
    // Consecutive queries of the same KV head whose ranges nearly coincide share the tile.
    int64_t taken = 0;
    while (true) {
      int64_t lo = 0;
      int64_t hi = 0;
      key_range(i, &lo, &hi);
      if (taken > 0 &&
          (std::abs(lo - lo0) > kMaxTileSpread || std::abs(hi - hi0) > kMaxTileSpread)) {
        break;
      }
      for (int32_t h = 0; h < group; ++h) add_row(&tile, i, head0 + h, lo, hi);
      ++taken;
      ++i;
      if (taken == queries_per_tile || t + taken == task_end || i == args.n_q) break;
    }
    RunTile(ctx, tile, sc);
    t += taken;
  }
}

}  // namespace strata::backend::cpu
