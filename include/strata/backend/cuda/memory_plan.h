// Host arithmetic of the CUDA backend's memory and graph plan: which CUDA-graph bucket a decode
// batch runs in, whether the quantized weights get fp16 copies, and how many KV blocks the
// device memory left holds. Pure functions, no device needed (unit-tested on every machine); any
// thread.
#pragma once

#include <array>
#include <cstdint>

#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/status.h"

namespace strata::backend::cuda {

// Batch sizes at which decode steps are captured as CUDA graphs; a batch runs in the smallest
// bucket that holds it, padded with dummy sequences.
inline constexpr std::array<int32_t, 8> kGraphBuckets = {1, 2, 4, 8, 16, 32, 64, 128};

// Index into kGraphBuckets of the smallest bucket >= num_seqs; -1 when num_seqs < 1 or larger
// than the largest bucket (the batch then runs eagerly).
int GraphBucketIndex(int64_t num_seqs);

// Bytes of one fp16 KV block: every layer's K and V rows of `block_size` tokens.
int64_t KvBytesPerBlock(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim_k,
                        int64_t head_dim_v, int64_t block_size);

// KV blocks for the pool. With kv_budget_bytes > 0 that budget is used as given; otherwise the
// budget is floor(free_bytes * memory_fraction) - workspace_bytes, where free_bytes is the
// device's free memory after the weights were uploaded and workspace_bytes what the backend
// allocates besides the pool. Returns budget / bytes_per_block, 0 when the budget is not
// positive, at most INT32_MAX; bytes_per_block must be positive.
int32_t KvPoolBlocks(int64_t free_bytes, double memory_fraction, int64_t workspace_bytes,
                     int64_t kv_budget_bytes, int64_t bytes_per_block);

// What the fp16 weight copies decision weighs, in bytes.
struct F16CopyInputs {
  int64_t free_bytes = 0;        // device memory free after the weights were uploaded
  double memory_fraction = 0.9;  // share of free_bytes for the copies, workspaces and KV pool
  int64_t kv_budget_bytes = 0;   // an explicit KV pool size; 0: what the share leaves
  int64_t workspace_bytes = 0;   // the workspaces besides the fp16 dequantization workspace
  int64_t dequant_bytes = 0;     // the fp16 dequantization workspace, needed without copies
  int64_t copy_bytes = 0;        // fp16 copies of every quantized matrix the matmuls read
  int64_t bytes_per_block = 0;   // one KV block
};

// Whether CudaBackend makes the fp16 weight copies (which then replace the dequantization
// workspace). With share = floor(free_bytes * memory_fraction):
//   kOff, or copy_bytes == 0 (nothing quantized): false.
//   Without a KV budget the pool gets share - workspace_bytes - copy_bytes with the copies and
//   share - workspace_bytes - dequant_bytes without. kAuto: true when the first is at least one
//   block and at least half of the second. kOn: true when it is at least one block.
//   With a KV budget the pool is that budget either way, and the copies are made (kAuto, kOn)
//   when they fit beside it: workspace_bytes + copy_bytes + kv_budget_bytes <= share.
// FAILED_PRECONDITION, with the numbers and what to change, where kOn's condition fails.
StatusOr<bool> PlanF16WeightCopies(F16WeightCopies mode, const F16CopyInputs& in);

}  // namespace strata::backend::cuda
