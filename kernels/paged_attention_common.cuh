// Device helpers shared by the paged attention kernels: reading KV elements as float, locating a
// cached position's K/V row through the block table, warp reductions.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "strata/kernels/paged_attention.h"

namespace strata::kernels::paged_attention {

constexpr unsigned kFullMask = 0xffffffffu;

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

}  // namespace strata::kernels::paged_attention
