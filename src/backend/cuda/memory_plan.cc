#include "strata/backend/cuda/memory_plan.h"

#include <cmath>
#include <cstdint>

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

}  // namespace strata::backend::cuda
