// MatMulPrecision::kInt8's driver: quantizes the activations (QuantizeRowInt8), token after
// token, and spreads units of 16-row groups (and, when the rows are too few to keep every thread
// busy, of 16-token chunks) over the pool for the kernels (matmul_int8_avx512.cc: rows in the
// lanes, weights decoded once per unit as they stream from memory). Several matrices over the
// same activations (MatMulSameInput) share the quantization and the parallel region.
//
// Why the split does not change any result: every output element is one lane of one kernel
// call, computed by the same chain of fp32 operations over its blocks in column order (see
// matmul.h); which unit, pass, lane or thread computes it is invisible in the bits.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "matmul_int8_internal.h"
#include "matmul_internal.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/common/check.h"

namespace strata::backend::cpu::internal {
namespace {

// Rows per unit: a multiple of the kernels' 16-row groups; as the fused fp32 kernels, small
// enough that a descheduled thread holds up little.
constexpr int64_t kUnitRows = 16;
// Tokens per chunk when the tokens are split as well: a multiple of the kernels' 16-token
// passes.
constexpr int64_t kChunkTokens = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

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

void MatMulInt8(const Int8Family& family, std::span<const Int8Job> jobs, int64_t cols,
                const float* x, int64_t n_tokens, ThreadPool* pool) {
  STRATA_CHECK(cols % 32 == 0);
  STRATA_CHECK(!jobs.empty() && jobs.size() <= kMaxInt8Jobs && n_tokens >= 1);
  const int64_t nb = cols / 32;
  // The quantized activations live in the calling thread's arena for the duration of the call.
  const int64_t q_bytes = RoundUp64(n_tokens * cols);
  const int64_t blk_bytes = RoundUp64(n_tokens * nb * 4);
  thread_local AlignedBuffer<uint8_t> arena;
  // q, d, c32, c16 (two), dsum.
  uint8_t* base = arena.Get(q_bytes + 5 * blk_bytes);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + q_bytes);
  auto* c32 = reinterpret_cast<int32_t*>(base + q_bytes + blk_bytes);
  auto* c16 = reinterpret_cast<int32_t*>(base + q_bytes + 2 * blk_bytes);
  auto* dsum = reinterpret_cast<float*>(base + q_bytes + 4 * blk_bytes);
  // A few tokens quantize faster than the pool wakes up.
  ForEach(n_tokens >= kChunkTokens ? pool : nullptr, n_tokens, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<int32_t> sums16;
    sums16.resize(2 * nb);
    for (int64_t t = begin; t < end; ++t) {
      family.quantize_row(x + t * cols, cols, q + t * cols, d + t * nb, sums16.data());
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t s0 = sums16[2 * b];
        const int32_t s1 = sums16[2 * b + 1];
        c32[t * nb + b] = -128 * (s0 + s1);
        c16[2 * (t * nb + b)] = -128 * s0;
        c16[2 * (t * nb + b) + 1] = -128 * s1;
        dsum[t * nb + b] = d[t * nb + b] * static_cast<float>(s0 + s1);
      }
    }
  });

  // Each job's units: 16-row groups, times token chunks where the job's row groups are too few
  // to keep every thread busy (each unit then decodes its rows itself). Units are numbered job
  // after job, rows outer, so a range of units with one token chunk per job is a run of rows.
  struct Split {
    int64_t first_unit;   // the job's first unit
    int64_t token_units;  // token chunks per 16-row group
    int64_t unit_tokens;  // tokens per chunk
  };
  std::array<Split, kMaxInt8Jobs + 1> split{};
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t chunks = CeilDiv(n_tokens, kChunkTokens);
  for (size_t j = 0; j < jobs.size(); ++j) {
    STRATA_CHECK(jobs[j].rows >= 1);
    const int64_t row_units = CeilDiv(jobs[j].rows, kUnitRows);
    int64_t token_units = 1;
    if (row_units < 4 * threads) token_units = std::min(chunks, CeilDiv(4 * threads, row_units));
    const int64_t unit_tokens = CeilDiv(chunks, token_units) * kChunkTokens;
    split[j].token_units = CeilDiv(n_tokens, unit_tokens);
    split[j].unit_tokens = unit_tokens;
    split[j + 1].first_unit = split[j].first_unit + row_units * split[j].token_units;
  }
  const int64_t total = split[jobs.size()].first_unit;

  ForEach(pool, total, 1, [&](int64_t begin, int64_t end) {
    size_t j = 0;
    while (split[j + 1].first_unit <= begin) ++j;
    while (begin < end) {
      const Int8Job& job = jobs[j];
      const Split& s = split[j];
      const int64_t stop = std::min(end, split[j + 1].first_unit);
      if (s.token_units == 1) {
        // One call for the run of row groups.
        const Int8Tokens tokens{q, d, c32, c16, dsum, cols};
        const int64_t r0 = (begin - s.first_unit) * kUnitRows;
        const int64_t r1 = std::min(job.rows, (stop - s.first_unit) * kUnitRows);
        job.kernel(job.w + r0 * job.row_bytes, job.row_bytes, r1 - r0, tokens, n_tokens, job.y + r0,
                   job.rows);
      } else {
        for (int64_t unit = begin - s.first_unit; unit < stop - s.first_unit; ++unit) {
          const int64_t r0 = unit / s.token_units * kUnitRows;
          const int64_t rn = std::min(job.rows, r0 + kUnitRows) - r0;
          const int64_t t0 = unit % s.token_units * s.unit_tokens;
          const int64_t tn = std::min(n_tokens, t0 + s.unit_tokens) - t0;
          const Int8Tokens tokens{q + t0 * cols,     d + t0 * nb,    c32 + t0 * nb,
                                  c16 + 2 * t0 * nb, dsum + t0 * nb, cols};
          job.kernel(job.w + r0 * job.row_bytes, job.row_bytes, rn, tokens, tn,
                     job.y + t0 * job.rows + r0, job.rows);
        }
      }
      begin = stop;
      ++j;
    }
  });
}

}  // namespace strata::backend::cpu::internal
