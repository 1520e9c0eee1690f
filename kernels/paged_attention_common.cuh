// Device helpers shared by the paged attention kernels: reading KV elements as float, locating a
// cached position's K/V row through the block table, warp reductions.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "strata/kernels/paged_attention.h"

namespace strata::kernels::paged_attention {

constexpr unsigned kFullMask = 0xffffffffu;

// Query heads one decode CTA serves (larger GQA groups take several CTAs per KV head).
constexpr int kMaxGroup = 8;

// CTAs per KV head in a decode grid's y dimension.
inline int32_t HeadChunks(int32_t num_heads, int32_t num_kv_heads) {
  const int32_t group = num_heads / num_kv_heads;
  return (group + kMaxGroup - 1) / kMaxGroup;
}

__device__ __forceinline__ float KvToFloat(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float KvToFloat(const __half* p, int64_t i) {
  return __half2float(p[i]);
}

__device__ __forceinline__ float WarpMax(float x) {
  for (int offset = 16; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  }
  return x;
}

__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// Element offset of (position `pos`, KV head `kv_head`) in one layer's K (or V) of a cache laid
// out [num_blocks, block_size, num_kv_heads, head_dim]: the row's first element. 64-bit
// throughout, so caches past 2^31 elements index correctly.
__device__ __forceinline__ int64_t KvRowOffset(const int32_t* table, int32_t pos,
                                               int32_t block_size, int32_t num_kv_heads,
                                               int32_t kv_head, int32_t head_dim) {
  const int64_t block = table[pos / block_size];
  const int64_t slot = pos % block_size;
  return ((block * block_size + slot) * num_kv_heads + kv_head) * static_cast<int64_t>(head_dim);
}

// The positions a query at `pos` sees: [lo, pos] (CPU semantics: P - window < p <= P).
__device__ __forceinline__ int32_t FirstVisible(int32_t pos, int32_t sliding_window) {
  if (sliding_window <= 0) return 0;
  const int64_t lo = static_cast<int64_t>(pos) - sliding_window + 1;  // no int32 overflow
  return lo > 0 ? static_cast<int32_t>(lo) : 0;
}

// The keys one split-K partition of a decode takes (PagedAttentionDecodePlan): the visible keys
// [lo, ctx) cut into chunks of chunk_tokens, each of the `used` partitions an equal run of whole
// chunks. Partitions >= used get an empty range. 64-bit arithmetic: no overflow for any ctx.
struct PartitionKeys {
  int32_t begin = 0;  // first key
  int32_t end = 0;    // one past the last key
  int32_t used = 0;   // partitions with keys (0 when the sequence has none)
};

__device__ __forceinline__ PartitionKeys KeysOfPartition(int32_t ctx, int32_t sliding_window,
                                                         int32_t chunk_tokens,
                                                         int32_t num_partitions, int32_t part) {
  PartitionKeys r;
  const int32_t lo = ctx > 0 ? FirstVisible(ctx - 1, sliding_window) : 0;
  const int64_t visible = ctx > lo ? ctx - lo : 0;
  const int64_t chunks = (visible + chunk_tokens - 1) / chunk_tokens;
  const int64_t per = (chunks + num_partitions - 1) / num_partitions;  // chunks per partition
  if (per == 0) return r;
  r.used = static_cast<int32_t>((chunks + per - 1) / per);
  if (part < r.used) {
    const int64_t begin = lo + static_cast<int64_t>(part) * per * chunk_tokens;
    const int64_t end = begin + per * chunk_tokens;
    r.begin = static_cast<int32_t>(begin);
    r.end = static_cast<int32_t>(end < ctx ? end : ctx);
  }
  return r;
}

}  // namespace strata::kernels::paged_attention
