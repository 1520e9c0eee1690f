// MeasureMatMulPrecisions: times the model's matrices at fp32 and int8 (matmul_plan.h).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "matmul_internal.h"
#include "strata/backend/cpu/matmul_plan.h"

namespace strata::backend::cpu {
namespace {

struct ShapeKey {
  model::GgmlType type;
  int64_t rows;
  int64_t cols;
  int64_t tokens;
  int threads;

  bool operator<(const ShapeKey& o) const {
    return std::tie(type, rows, cols, tokens, threads) <
           std::tie(o.type, o.rows, o.cols, o.tokens, o.threads);
  }
};

struct ShapeTime {
  double fp32_seconds = 0;
  double int8_seconds = 0;
};

// Timings of shapes measured before in this process. Held while measuring: two measurements at
// once would slow each other down.
std::mutex memo_mutex;
std::map<ShapeKey, ShapeTime>& Memo() {
  static auto* memo = new std::map<ShapeKey, ShapeTime>();
  return *memo;
}

double TimeMatMul(const WeightMatrix& w, const float* x, int64_t tokens, float* y, ThreadPool* pool,
                  MatMulPrecision precision) {
  const auto start = std::chrono::steady_clock::now();
  MatMul(w, x, tokens, y, pool, MatMulOptions{precision});
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ShapeTime TimeShape(const WeightMatrix& w, const float* x, int64_t tokens, float* y,
                    ThreadPool* pool, const MatMulMeasureOptions& options) {
  // A warm-up run of each brings the weights into memory and grows the per-thread buffers.
  TimeMatMul(w, x, tokens, y, pool, MatMulPrecision::kFp32);
  TimeMatMul(w, x, tokens, y, pool, MatMulPrecision::kInt8);
  ShapeTime best{1e30, 1e30};
  double fp32_total = 0;
  double int8_total = 0;
  for (int rep = 0; rep < std::max(1, options.max_reps); ++rep) {
    const double fp32 = TimeMatMul(w, x, tokens, y, pool, MatMulPrecision::kFp32);
    const double int8 = TimeMatMul(w, x, tokens, y, pool, MatMulPrecision::kInt8);
    best.fp32_seconds = std::min(best.fp32_seconds, fp32);
    best.int8_seconds = std::min(best.int8_seconds, int8);
    fp32_total += fp32;
    int8_total += int8;
    if (rep + 1 >= options.min_reps && std::max(fp32_total, int8_total) >= options.min_seconds) {
      break;
    }
  }
  return best;
}

}  // namespace

std::vector<MatMulTypeTiming> MeasureMatMulPrecisions(std::span<const MatMulUse> matrices,
                                                      ThreadPool* pool,
                                                      const MatMulMeasureOptions& options) {
  int64_t max_cols = 0;
  int64_t max_rows = 0;
  int64_t max_tokens = 0;
  for (const MatMulUse& m : matrices) {
    if (!MatMulInt8Supports(m.matrix.type) || m.matrix.rows <= 0) continue;
    max_cols = std::max(max_cols, m.matrix.cols);
    max_rows = std::max(max_rows, m.matrix.rows);
  }
  for (int64_t t : options.token_counts) max_tokens = std::max(max_tokens, t);
  std::vector<MatMulTypeTiming> timings;
  if (max_cols == 0 || max_tokens <= 0) return timings;

  // Activations: a fixed pseudo-random pattern in [-1, 1), 64-byte aligned rows (no repacking).
  internal::AlignedBuffer<float> x_buffer;
  internal::AlignedBuffer<float> y_buffer;
  float* x = x_buffer.Get(max_tokens * max_cols);
  float* y = y_buffer.Get(max_tokens * max_rows);
  uint32_t state = 12345;
  for (int64_t i = 0; i < max_tokens * max_cols; ++i) {
    state = state * 1664525u + 1013904223u;
    x[i] = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }

  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::lock_guard<std::mutex> lock(memo_mutex);
  for (const MatMulUse& m : matrices) {
    if (!MatMulInt8Supports(m.matrix.type) || m.matrix.rows <= 0 || m.uses <= 0) continue;
    for (int64_t tokens : options.token_counts) {
      if (tokens <= 0) continue;
      const ShapeKey key{m.matrix.type, m.matrix.rows, m.matrix.cols, tokens, threads};
      auto it = Memo().find(key);
      if (it == Memo().end()) {
        it = Memo().emplace(key, TimeShape(m.matrix, x, tokens, y, pool, options)).first;
      }
      auto slot = std::find_if(timings.begin(), timings.end(), [&](const MatMulTypeTiming& t) {
        return t.type == m.matrix.type && t.tokens == tokens;
      });
      if (slot == timings.end()) {
        timings.push_back({m.matrix.type, tokens, 0, 0});
        slot = timings.end() - 1;
      }
      slot->fp32_seconds += static_cast<double>(m.uses) * it->second.fp32_seconds;
      slot->int8_seconds += static_cast<double>(m.uses) * it->second.int8_seconds;
    }
  }
  return timings;
}

}  // namespace strata::backend::cpu
