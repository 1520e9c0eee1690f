#include "strata/backend/cuda/memory_plan.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace strata::backend::cuda {

int GraphBucketIndex(int64_t num_seqs) {
  if (num_seqs < 1) return -1;
  for (size_t i = 0; i < kGraphBuckets.size(); ++i) {
    if (num_seqs <= kGraphBuckets[i]) return static_cast<int>(i);
  }
  return -1;
}

int64_t KvBytesPerBlock(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim_k,
                        int64_t head_dim_v, int64_t block_size) {
  constexpr int64_t kFp16Bytes = 2;
  return num_layers * block_size * num_kv_heads * (head_dim_k + head_dim_v) * kFp16Bytes;
}

int32_t KvPoolBlocks(int64_t free_bytes, double memory_fraction, int64_t workspace_bytes,
                     int64_t kv_budget_bytes, int64_t bytes_per_block) {
  if (bytes_per_block <= 0) return 0;
  int64_t budget = kv_budget_bytes;
  if (budget <= 0) {
    budget = static_cast<int64_t>(std::floor(static_cast<double>(free_bytes) * memory_fraction)) -
             workspace_bytes;
  }
  if (budget <= 0) return 0;
  const int64_t blocks = budget / bytes_per_block;
  return blocks > INT32_MAX ? INT32_MAX : static_cast<int32_t>(blocks);
}

StatusOr<bool> PlanF16WeightCopies(F16WeightCopies mode, const F16CopyInputs& in) {
  if (mode == F16WeightCopies::kOff || in.copy_bytes <= 0) return false;
  const int64_t share =
      static_cast<int64_t>(std::floor(static_cast<double>(in.free_bytes) * in.memory_fraction));
  const std::string what = "the fp16 copies of the quantized weights (" +
                           std::to_string(in.copy_bytes) + " bytes, f16_weight_copies on)";
  const std::string fix = "set f16_weight_copies (--cuda-f16-weights) to auto or off, or ";
  if (in.kv_budget_bytes > 0) {
    // The pool is the budget either way: the copies only have to fit beside it.
    const bool fits = in.workspace_bytes + in.copy_bytes + in.kv_budget_bytes <= share;
    if (fits || mode == F16WeightCopies::kAuto) return fits;
    return FailedPreconditionError(
        what + " do not fit beside the KV budget of " + std::to_string(in.kv_budget_bytes) +
        " bytes and " + std::to_string(in.workspace_bytes) + " bytes of workspaces in " +
        std::to_string(share) + " bytes (memory_fraction " + std::to_string(in.memory_fraction) +
        " of " + std::to_string(in.free_bytes) + " bytes free); " + fix + "lower kv_budget_bytes");
  }
  const int64_t pool_with = share - in.workspace_bytes - in.copy_bytes;
  const int64_t pool_without = share - in.workspace_bytes - in.dequant_bytes;
  const bool holds_a_block = in.bytes_per_block > 0 && pool_with >= in.bytes_per_block;
  if (mode == F16WeightCopies::kAuto) {
    // Compared doubled rather than halved: no rounding at the boundary.
    return holds_a_block && 2 * pool_with >= pool_without;
  }
  if (holds_a_block) return true;
  return FailedPreconditionError(
      what + " do not fit: " + std::to_string(share) + " bytes (memory_fraction " +
      std::to_string(in.memory_fraction) + " of " + std::to_string(in.free_bytes) +
      " bytes free) less " + std::to_string(in.workspace_bytes) +
      " bytes of workspaces and the copies leave no KV block of " +
      std::to_string(in.bytes_per_block) + " bytes; " + fix + "raise memory_fraction");
}

}  // namespace strata::backend::cuda
