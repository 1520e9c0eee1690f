// Host arithmetic of the CUDA backend's memory and graph plan: which CUDA-graph bucket a decode
// batch runs in, and how many KV blocks the device memory left holds. Pure functions, no device
// needed (unit-tested on every machine); any thread.
#pragma once

#include <array>
#include <cstdint>

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

}  // namespace strata::backend::cuda
