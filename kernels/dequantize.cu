// Dequantization kernels: one thread per output element, blocks of the quantized tensor read
// straight from device memory.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "block_decode.cuh"
#include "launch_util.cuh"
#include "strata/kernels/dequantize.h"

namespace strata::kernels {
namespace {

constexpr int kQ8_0BlockElements = 32;
constexpr int kQ8_0BlockBytes = 34;

__global__ void DequantizeQ8_0Kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                     int64_t num_elements) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_elements) return;
  const uint8_t* block = src + (i / kQ8_0BlockElements) * kQ8_0BlockBytes;
  // The scale is an unaligned fp16: assemble it from bytes.
  __half_raw raw;
  raw.x = static_cast<unsigned short>(block[0] | (block[1] << 8));
  float d = __half2float(__half(raw));
  int8_t q = static_cast<int8_t>(block[2 + i % kQ8_0BlockElements]);
  dst[i] = d * static_cast<float>(q);
}

// One thread per output element over a grid-stride loop.
template <DequantizeType kType>
__global__ void DequantizeToF16Kernel(const uint8_t* __restrict__ src, __half* __restrict__ dst,
                                      int64_t num_elements) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_elements;
       i += stride) {
    float v = 0.0f;
    if constexpr (kType == DequantizeType::kQ8_0) v = detail::DecodeQ8_0(src, i);
    if constexpr (kType == DequantizeType::kQ4_K) v = detail::DecodeQ4_K(src, i);
    if constexpr (kType == DequantizeType::kQ6_K) v = detail::DecodeQ6_K(src, i);
    dst[i] = __float2half_rn(v);
  }
}

template <DequantizeType kType>
void LaunchToF16(const void* src, void* dst, int64_t num_elements, cudaStream_t stream) {
  constexpr int kThreads = 256;
  DequantizeToF16Kernel<kType><<<detail::Blocks1D(num_elements, kThreads), kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(src), static_cast<__half*>(dst), num_elements);
}

}  // namespace

int LaunchDequantizeToF16(const void* src, DequantizeType type, void* dst, int64_t num_elements,
                          void* stream) {
  int64_t block_elements = 0;
  switch (type) {
    case DequantizeType::kQ8_0:
      block_elements = 32;
      break;
    case DequantizeType::kQ4_K:
    case DequantizeType::kQ6_K:
      block_elements = 256;
      break;
  }
  if (block_elements == 0 || num_elements < 0 || num_elements % block_elements != 0) {
    return detail::kInvalidValue;
  }
  if (num_elements == 0) return 0;
  if (src == nullptr || dst == nullptr || reinterpret_cast<uintptr_t>(dst) % 2 != 0) {
    return detail::kInvalidValue;
  }
  cudaStream_t s = detail::AsStream(stream);
  switch (type) {
    case DequantizeType::kQ8_0:
      LaunchToF16<DequantizeType::kQ8_0>(src, dst, num_elements, s);
      break;
    case DequantizeType::kQ4_K:
      LaunchToF16<DequantizeType::kQ4_K>(src, dst, num_elements, s);
      break;
    case DequantizeType::kQ6_K:
      LaunchToF16<DequantizeType::kQ6_K>(src, dst, num_elements, s);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchDequantizeQ8_0(const void* src, float* dst, int64_t num_elements, void* stream) {
  if (num_elements <= 0) return 0;
  constexpr int kThreads = 256;
  int64_t blocks = (num_elements + kThreads - 1) / kThreads;
  DequantizeQ8_0Kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                         static_cast<cudaStream_t>(stream)>>>(static_cast<const uint8_t*>(src), dst,
                                                              num_elements);
  return static_cast<int>(cudaGetLastError());
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

}  // namespace strata::kernels
