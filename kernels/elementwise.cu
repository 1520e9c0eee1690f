// Element-wise ops: grid-stride loops, one element per thread per step.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/elementwise.h"

namespace strata::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// No __restrict__: y may be x.
__global__ void AddKernel(float* x, const float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) x[i] = __fadd_rn(x[i], y[i]);
}

__global__ void AddBiasKernel(float* __restrict__ x, const float* __restrict__ bias, int64_t rows,
                              int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* xr = x + r * n;
    for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      xr[i] = __fadd_rn(xr[i], bias[i]);
    }
  }
}

__global__ void ScaleKernel(float* x, float s, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) x[i] = __fmul_rn(x[i], s);
}

__global__ void SoftCapKernel(float* x, float cap, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float t = __fdiv_rn(x[i], cap);
    x[i] = __fmul_rn(cap, static_cast<float>(tanh(static_cast<double>(t))));
  }
}

}  // namespace

int LaunchAddInPlace(float* x, const float* y, int64_t n, void* stream) {
  if (n < 0) return detail::kInvalidValue;
  if (n == 0) return 0;
  if (x == nullptr || y == nullptr) return detail::kInvalidValue;
  AddKernel<<<detail::Blocks1D(n, kThreads), kThreads, 0, detail::AsStream(stream)>>>(x, y, n);
  return static_cast<int>(cudaGetLastError());
}

int LaunchAddBiasInPlace(float* x, const float* bias, int64_t rows, int64_t n, void* stream) {
  if (rows < 0 || n < 0) return detail::kInvalidValue;
  if (rows == 0 || n == 0) return 0;
  if (x == nullptr || bias == nullptr) return detail::kInvalidValue;
  const dim3 grid = detail::RowGrid(rows, n, kThreads);
  AddBiasKernel<<<grid, kThreads, 0, detail::AsStream(stream)>>>(x, bias, rows, n);
  return static_cast<int>(cudaGetLastError());
}

int LaunchScaleInPlace(float* x, float s, int64_t n, void* stream) {
  if (n < 0) return detail::kInvalidValue;
  if (n == 0) return 0;
  if (x == nullptr) return detail::kInvalidValue;
  ScaleKernel<<<detail::Blocks1D(n, kThreads), kThreads, 0, detail::AsStream(stream)>>>(x, s, n);
  return static_cast<int>(cudaGetLastError());
}

int LaunchSoftCapInPlace(float* x, float cap, int64_t n, void* stream) {
  if (n < 0 || !(cap > 0.0f) || !std::isfinite(cap)) return detail::kInvalidValue;
  if (n == 0) return 0;
  if (x == nullptr) return detail::kInvalidValue;
  SoftCapKernel<<<detail::Blocks1D(n, kThreads), kThreads, 0, detail::AsStream(stream)>>>(x, cap,
                                                                                          n);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
