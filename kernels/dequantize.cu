// Dequantization kernels: one thread per output element, blocks of the quantized tensor read
// straight from device memory.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace

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
