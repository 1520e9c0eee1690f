// MatMulPrecision::kInt8's driver: quantizes the activations (QuantizeRowInt8). For at most
// kInt8FewTokens tokens it keeps them token after token and spreads groups of 16 rows over the
// pool for the small-token kernels (matmul_int8_lanes_avx512.cc: rows in the lanes, weights
// decoded in registers as they stream from memory). Otherwise it packs them in groups of 16
// tokens for the tile kernels, and spreads units of rows x token groups over the pool; the tile
// kernels (matmul_int8_avx512.cc) decode each unit's weight rows once into a per-thread tile of
// 8-bit codes and run every group of the unit over it.
//
// Why the split does not change any result: every output element is one lane of one kernel
// call, computed by the same chain of fp32 operations over its blocks in column order (see
// matmul.h); which unit, register block or lane computes it is invisible in the bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "matmul_int8_internal.h"
#include "matmul_internal.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/common/check.h"

namespace strata::backend::cpu::internal {
namespace {

// Rows per unit of work: with one token group (decode) the unit's tile (32 rows x cols codes)
// stays in L1; with more groups each tile is reused by all of them, so it is taller (L2).
constexpr int64_t kUnitRowsOneGroup = 32;
constexpr int64_t kUnitRowsMany = 64;
// Rows per unit for the small-token kernels: a multiple of their 16-row groups; as the fused
// fp32 kernels, small enough that a descheduled thread holds up little.
constexpr int64_t kFewUnitRows = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Quantizes the tokens of group g and writes them in the packed layout (Int8Activations).
void PackGroup(QuantizeRowFn quantize, const float* x, int64_t n_tokens, int64_t g,
               const Int8Activations& a) {
  const int64_t cols = a.cols;
  const int64_t nb = cols / 32;
  thread_local std::vector<int8_t> q_row;
  thread_local std::vector<float> d_row;
  thread_local std::vector<int32_t> s_row;
  q_row.resize(cols);
  d_row.resize(nb);
  s_row.resize(2 * nb);
  auto* q = const_cast<int8_t*>(a.q) + g * a.q_stride;
  auto* d = const_cast<float*>(a.d) + g * a.blk_stride;
  auto* c32 = const_cast<int32_t*>(a.c32) + g * a.blk_stride;
  auto* c16 = const_cast<int32_t*>(a.c16) + 2 * g * a.blk_stride;
  auto* dsum = const_cast<float*>(a.dsum) + g * a.blk_stride;
  for (int64_t lane = 0; lane < kInt8Lanes; ++lane) {
    const int64_t t = g * kInt8Lanes + lane;
    if (t < n_tokens) {
      quantize(x + t * cols, cols, q_row.data(), d_row.data(), s_row.data());
    } else {
      std::fill(q_row.begin(), q_row.end(), int8_t{0});
      std::fill(d_row.begin(), d_row.end(), 0.0f);
      std::fill(s_row.begin(), s_row.end(), 0);
    }
    for (int64_t k = 0; k < cols / 4; ++k) {
      std::memcpy(q + (k * kInt8Lanes + lane) * 4, q_row.data() + 4 * k, 4);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const int32_t s0 = s_row[2 * b];
      const int32_t s1 = s_row[2 * b + 1];
      d[b * kInt8Lanes + lane] = d_row[b];
      c32[b * kInt8Lanes + lane] = -128 * (s0 + s1);
      c16[(2 * b) * kInt8Lanes + lane] = -128 * s0;
      c16[(2 * b + 1) * kInt8Lanes + lane] = -128 * s1;
      dsum[b * kInt8Lanes + lane] = d_row[b] * static_cast<float>(s0 + s1);
    }
  }
}

// Quantizes the n_tokens rows of x into the Int8Tokens layout (the same values as PackGroup)
// and runs few_fn over units of rows.
void MatMulInt8Few(const Int8Family& family, Int8FewFn few_fn, const uint8_t* w, int64_t row_bytes,
                   int64_t rows, int64_t cols, const float* x, int64_t n_tokens, float* y,
                   ThreadPool* pool) {
  const int64_t nb = cols / 32;
  const int64_t q_bytes = RoundUp64(n_tokens * cols);
  const int64_t blk_bytes = RoundUp64(n_tokens * nb * 4);
  thread_local AlignedBuffer<uint8_t> arena;
  // q, d, c32, c16 (two), dsum, and one token's sums16 (2 nb, at most two).
  uint8_t* base = arena.Get(q_bytes + 7 * blk_bytes);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + q_bytes);
  auto* c32 = reinterpret_cast<int32_t*>(base + q_bytes + blk_bytes);
  auto* c16 = reinterpret_cast<int32_t*>(base + q_bytes + 2 * blk_bytes);
  auto* dsum = reinterpret_cast<float*>(base + q_bytes + 4 * blk_bytes);
  auto* sums16 = reinterpret_cast<int32_t*>(base + q_bytes + 5 * blk_bytes);
  for (int64_t t = 0; t < n_tokens; ++t) {
    family.quantize_row(x + t * cols, cols, q + t * cols, d + t * nb, sums16);
    for (int64_t b = 0; b < nb; ++b) {
      const int32_t s0 = sums16[2 * b];
      const int32_t s1 = sums16[2 * b + 1];
      c32[t * nb + b] = -128 * (s0 + s1);
      c16[2 * (t * nb + b)] = -128 * s0;
      c16[2 * (t * nb + b) + 1] = -128 * s1;
      dsum[t * nb + b] = d[t * nb + b] * static_cast<float>(s0 + s1);
    }
  }
  const Int8Tokens tokens{q, d, c32, c16, dsum, cols};
  ForEach(pool, rows, kFewUnitRows, [&](int64_t begin, int64_t end) {
    few_fn(w + begin * row_bytes, row_bytes, end - begin, tokens, n_tokens, y + begin, rows);
  });
}

}  // namespace

void QuantizeRowInt8Scalar(const float* x, int64_t cols, int8_t* q, float* scales,
                           int32_t* sums16) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    for (int half = 0; half < 2; ++half) {
      int32_t sum = 0;
      for (int i = 16 * half; i < 16 * half + 16; ++i) {
        // x * id is at most 127 * (1 + a few ulp) in magnitude, so the clamp only guards.
        const int v = std::clamp(static_cast<int>(std::nearbyint(xb[i] * id)), -127, 127);
        q[32 * b + i] = static_cast<int8_t>(v);
        sum += v;
      }
      sums16[2 * b + half] = sum;
    }
  }
}

void MatMulInt8(const Int8Family& family, Int8RowsFn rows_fn, Int8FewFn few_fn, const uint8_t* w,
                int64_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n_tokens,
                float* y, ThreadPool* pool) {
  STRATA_CHECK(cols % 32 == 0);
  if (few_fn != nullptr && n_tokens <= kInt8FewTokens) {
    MatMulInt8Few(family, few_fn, w, row_bytes, rows, cols, x, n_tokens, y, pool);
    return;
  }
  // The kernels scatter a group's 16 results with 32-bit indices lane * rows.
  STRATA_CHECK(rows < (int64_t{1} << 31) / kInt8Lanes);
  const int64_t nb = cols / 32;
  const int64_t groups = CeilDiv(n_tokens, kInt8Lanes);

  // The packed activations live in the calling thread's arena for the duration of the call.
  const int64_t q_bytes = RoundUp64(groups * cols * kInt8Lanes);
  const int64_t blk_bytes = RoundUp64(groups * nb * kInt8Lanes * 4);
  thread_local AlignedBuffer<uint8_t> arena;
  uint8_t* base = arena.Get(q_bytes + 5 * blk_bytes);
  Int8Activations a;
  a.q = reinterpret_cast<const int8_t*>(base);
  a.d = reinterpret_cast<const float*>(base + q_bytes);
  a.c32 = reinterpret_cast<const int32_t*>(base + q_bytes + blk_bytes);
  a.c16 = reinterpret_cast<const int32_t*>(base + q_bytes + 2 * blk_bytes);
  a.dsum = reinterpret_cast<const float*>(base + q_bytes + 4 * blk_bytes);
  a.cols = cols;
  a.q_stride = cols * kInt8Lanes;
  a.blk_stride = nb * kInt8Lanes;
  ForEach(pool, groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) PackGroup(family.quantize_row, x, n_tokens, g, a);
  });

  const int64_t unit_rows = groups == 1 ? kUnitRowsOneGroup : kUnitRowsMany;
  const int64_t row_units = CeilDiv(rows, unit_rows);
  // With too few row units to keep every thread busy, split the token groups as well (each
  // unit then decodes its rows itself).
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  int64_t group_units = 1;
  if (row_units < 4 * threads) {
    group_units = std::min(groups, CeilDiv(4 * threads, row_units));
  }
  const int64_t unit_groups = CeilDiv(groups, group_units);
  group_units = CeilDiv(groups, unit_groups);

  ForEach(pool, row_units * group_units, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t r0 = unit / group_units * unit_rows;
      const int64_t r1 = std::min(rows, r0 + unit_rows);
      const int64_t g0 = unit % group_units * unit_groups;
      const int64_t g1 = std::min(groups, g0 + unit_groups);
      rows_fn(w + r0 * row_bytes, row_bytes, r1 - r0, a, g0, g1, n_tokens, y + r0, rows);
    }
  });
}

}  // namespace strata::backend::cpu::internal
