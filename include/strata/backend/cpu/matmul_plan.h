// Which activation precision (matmul.h) each weight matmul of the CPU backend runs at, and how
// that is decided: fixed by a setting, or measured on this CPU when the backend starts.
//
// kAuto times the model's own matrices with both precisions (MeasureMatMulPrecisions) and picks,
// per weight type, the faster one (ChooseMatMulPlan). The choice is per type, never per call
// size: a token's logits then do not depend on how many tokens share its step (each precision's
// kernels give the same bits alone or batched).
//
// Thread rules: a MatMulPlan is a value; MeasureMatMulPrecisions may run from any thread (its
// per-process memo of timings is locked) but occupies the pool it is given.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/backend/cpu/matmul.h"
#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/ggml_type.h"

namespace strata::backend::cpu {

enum class MatMulPrecisionSetting {
  kFp32,  // every matmul at fp32
  kInt8,  // every matmul at int8 where the CPU has integer kernels for its type
  kAuto,  // per weight type, the precision measured faster on this CPU
};

// "fp32" / "int8" / "auto". Parse returns false (and changes nothing) for any other name.
std::string_view MatMulPrecisionSettingName(MatMulPrecisionSetting setting);
bool ParseMatMulPrecisionSetting(std::string_view name, MatMulPrecisionSetting* setting);

// The time of one weight type's share of a forward pass at each precision: its matrices in the
// model, each counted as often as a pass uses it, multiplied with `tokens` token rows.
struct MatMulTypeTiming {
  model::GgmlType type = model::GgmlType::kF32;
  int64_t tokens = 0;
  double fp32_seconds = 0;
  double int8_seconds = 0;
};

class MatMulPlan {
 public:
  // Every type at `precision` (kInt8 falls back to fp32 per type where MatMul has no integer
  // kernel, as MatMul itself does).
  explicit MatMulPlan(MatMulPrecision precision = MatMulPrecision::kFp32);

  MatMulPrecision For(model::GgmlType type) const;
  void Set(model::GgmlType type, MatMulPrecision precision);

  // The timings the plan was chosen from (empty for a fixed plan).
  const std::vector<MatMulTypeTiming>& timings() const { return timings_; }
  void set_timings(std::vector<MatMulTypeTiming> timings) { timings_ = std::move(timings); }

  // For logs and ModelInfo: "int8 matmul", "fp32 matmul", "int8 matmul for Q4_K, fp32 for the
  // rest" (a given plan; types without int8 kernels on this CPU count as fp32), or for a
  // measured plan e.g.
  // "int8 matmul, measured (Q8_0 int8 0.41x, Q6_K fp32 1.12x)": each measured type, its choice
  // and int8's time relative to fp32's (the geometric mean over the measured token counts).
  std::string Describe() const;

 private:
  std::array<MatMulPrecision, 64> by_type_;  // indexed by GgmlType's value (all below 64)
  std::vector<MatMulTypeTiming> timings_;
};

// int8's time relative to fp32's for `type`: the geometric mean over the token counts timed
// for it. 0 when `timings` has none for the type.
double Int8TimeRatio(std::span<const MatMulTypeTiming> timings, model::GgmlType type);

// Below this ratio a type runs at int8. Ties within the margin go to int8: its logits are
// bit-identical however a step is batched, and a near tie is measurement noise.
inline constexpr double kInt8ChoiceMaxRatio = 1.02;

// The plan for `timings`: each timed type at int8 when Int8TimeRatio < kInt8ChoiceMaxRatio,
// fp32 otherwise; types without timings at fp32. Keeps the timings.
MatMulPlan ChooseMatMulPlan(std::vector<MatMulTypeTiming> timings);

// One matrix of the model and how many times a forward pass multiplies with it.
struct MatMulUse {
  WeightMatrix matrix;
  int64_t uses = 1;
};

struct MatMulMeasureOptions {
  std::vector<int64_t> token_counts = {1, 16};  // a decode row and a batched step
  int min_reps = 3;           // timed runs per shape, precision and token count, after a warm-up
  int max_reps = 10;          // at most this many,
  double min_seconds = 0.02;  // stopping once the runs of one side took this long
};

// Times every matrix whose type has integer kernels on this CPU (MatMulInt8Supports) with both
// precisions, on `pool`, and sums the times per type and token count, weighted by uses. Each
// time is the fastest run (fp32 and int8 runs alternate). Matrices of the same type and shape
// are timed once; a shape timed before in this process, on a pool of the same size, is not timed
// again. Returns nothing on CPUs without integer kernels.
std::vector<MatMulTypeTiming> MeasureMatMulPrecisions(std::span<const MatMulUse> matrices,
                                                      ThreadPool* pool,
                                                      const MatMulMeasureOptions& options = {});

}  // namespace strata::backend::cpu
