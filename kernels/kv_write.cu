// Paged KV-cache write: one block row per token, its K and V rows converted and stored at the
// token's slot.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/kv_write.h"

namespace strata::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ T Convert(float x);
template <>
__device__ __forceinline__ float Convert<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half Convert<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T>
__global__ void KvWriteKernel(const float* __restrict__ k, const float* __restrict__ v,
                              const int64_t* __restrict__ slots, int64_t num_tokens, int64_t k_row,
                              int64_t v_row, T* __restrict__ k_cache, T* __restrict__ v_cache,
                              int64_t num_slots) {
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t slot = slots[t];
    if (slot < 0 || slot >= num_slots) continue;
    const float* kt = k + t * k_row;
    const float* vt = v + t * v_row;
    T* kc = k_cache + slot * k_row;  // 64-bit: slot * k_row may exceed 2^31
    T* vc = v_cache + slot * v_row;
    const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
    const int64_t first = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    for (int64_t i = first; i < k_row; i += step) kc[i] = Convert<T>(kt[i]);
    for (int64_t i = first; i < v_row; i += step) vc[i] = Convert<T>(vt[i]);
  }
}

}  // namespace

int LaunchKvWrite(const float* k, const float* v, const int64_t* slots, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim_k, int64_t head_dim_v, void* k_cache,
                  void* v_cache, int64_t num_slots, KvCacheDtype dtype, void* stream) {
  if (num_tokens < 0 || num_tokens > INT32_MAX || num_kv_heads < 1 || head_dim_k < 1 ||
      head_dim_v < 1 || num_slots < 1 || num_kv_heads > INT32_MAX / head_dim_k ||
      num_kv_heads > INT32_MAX / head_dim_v) {
    return detail::kInvalidValue;
  }
  const int64_t k_row = num_kv_heads * head_dim_k;
  const int64_t v_row = num_kv_heads * head_dim_v;
  // The largest element offset, num_slots * row, must fit in int64.
  if (num_slots > INT64_MAX / (k_row > v_row ? k_row : v_row)) return detail::kInvalidValue;
  if (num_tokens == 0) return 0;
  if (k == nullptr || v == nullptr || slots == nullptr || k_cache == nullptr ||
      v_cache == nullptr) {
    return detail::kInvalidValue;
  }
  const dim3 grid = detail::RowGrid(num_tokens, k_row > v_row ? k_row : v_row, kThreads);
  cudaStream_t s = detail::AsStream(stream);
  switch (dtype) {
    case KvCacheDtype::kF16:
      KvWriteKernel<__half><<<grid, kThreads, 0, s>>>(k, v, slots, num_tokens, k_row, v_row,
                                                      static_cast<__half*>(k_cache),
                                                      static_cast<__half*>(v_cache), num_slots);
      break;
    case KvCacheDtype::kF32:
      KvWriteKernel<float><<<grid, kThreads, 0, s>>>(k, v, slots, num_tokens, k_row, v_row,
                                                     static_cast<float*>(k_cache),
                                                     static_cast<float*>(v_cache), num_slots);
      break;
    default:
      return detail::kInvalidValue;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
