// Device helpers shared by the per-token kernels: launch geometry, the error code for a
// rejected shape, unaligned fp16 reads and a block-wide sum. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace strata::kernels::detail {

// What a Launch* returns for a shape it refuses (no launch happens).
constexpr int kInvalidValue = static_cast<int>(cudaErrorInvalidValue);

// Largest grid.x a kernel here is launched with; grid-stride loops cover the rest.
constexpr int64_t kMaxGridX = int64_t{1} << 20;
// Largest grid.y (the hardware limit).
constexpr int64_t kMaxGridY = 65535;

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of `threads` for a 1-D grid-stride loop over n items.
inline unsigned Blocks1D(int64_t n, int threads) {
  const int64_t want = CeilDiv(n, threads);
  return static_cast<unsigned>(want < kMaxGridX ? want : kMaxGridX);
}

// A [rows, columns] grid: blockIdx.x walks rows, blockIdx.y chunks of `threads` columns; both
// loops stride, so any row count and width is covered.
inline dim3 RowGrid(int64_t rows, int64_t columns, int threads) {
  const int64_t x = rows < kMaxGridX ? rows : kMaxGridX;
  const int64_t want_y = CeilDiv(columns, threads);
  const int64_t y = want_y < kMaxGridY ? want_y : kMaxGridY;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), 1);
}

// A little-endian fp16 at any byte address, widened exactly to float.
__device__ __forceinline__ float LoadFp16(const uint8_t* p) {
  __half_raw raw;
  raw.x = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__half(raw));
}

// Sum of `v` over the whole block, returned to every thread. blockDim.x must be a multiple of 32
// (at most 1024). Before calling it again in the same kernel, __syncthreads() so that every warp
// has read the shared scratch. Deterministic: the order of the additions depends only on
// blockDim.x.
__device__ __forceinline__ double BlockSum(double v) {
  __shared__ double partial[32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = lane < warps ? partial[lane] : 0.0;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace strata::kernels::detail
