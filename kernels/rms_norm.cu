// RMSNorm (Zhang & Sennrich 2019) with an optional fused residual add: one block per row, the sum
// of squares in double like the CPU backend, reduced with warp shuffles.
#include <cuda_runtime.h>

#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/rms_norm.h"

namespace strata::kernels {
namespace {

// No __restrict__: x, residual and out may be the same pointer. Each thread touches the same
// indices in both passes (same start and stride), so those aliases are race-free.
__global__ void RmsNormKernel(float* x, const float* residual, const float* weight, float* out,
                              int64_t rows, int64_t n, float eps) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float* xr = x + row * n;
    const float* rr = residual != nullptr ? residual + row * n : nullptr;
    float* outr = out + row * n;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float v = xr[i];
      if (rr != nullptr) {
        v = __fadd_rn(v, rr[i]);
        xr[i] = v;
      }
      // Exact in double (24-bit times 24-bit significands), so a contracted DFMA is harmless.
      sum += static_cast<double>(v) * static_cast<double>(v);
    }
    sum = detail::BlockSum(sum);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    // IEEE sqrt and division (nvcc's defaults without --use_fast_math), as on the CPU.
    const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      outr[i] = __fmul_rn(__fmul_rn(xr[i], scale), weight[i]);
    }
    // The next row's BlockSum reuses the shared scratch: wait until every warp has read it.
    __syncthreads();
  }
}

}  // namespace

int RmsNormThreads(int64_t n) {
  int64_t threads = (detail::CeilDiv(n, 4) + 31) / 32 * 32;
  if (threads < 32) threads = 32;
  if (threads > 1024) threads = 1024;
  return static_cast<int>(threads);
}

int LaunchRmsNorm(float* x, const float* residual, const float* weight, float* out, int64_t rows,
                  int64_t n, float eps, void* stream) {
  if (rows < 0 || rows > INT32_MAX || n < 1 || n > INT32_MAX) return detail::kInvalidValue;
  if (x == nullptr || weight == nullptr || out == nullptr) return detail::kInvalidValue;
  if (rows == 0) return 0;
  const int threads = RmsNormThreads(n);
  const unsigned blocks = detail::Blocks1D(rows, 1);
  RmsNormKernel<<<blocks, threads, 0, detail::AsStream(stream)>>>(x, residual, weight, out, rows, n,
                                                                  eps);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
