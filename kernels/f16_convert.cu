// fp32 -> (hi, lo) fp16 split: one thread per element over a grid-stride loop.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/f16_convert.h"

namespace strata::kernels {
namespace {

__global__ void SplitToF16Kernel(const float* __restrict__ x, int64_t n, float scale,
                                 __half* __restrict__ hi, __half* __restrict__ lo) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = __fmul_rn(x[i], scale);
    const __half h = __float2half_rn(v);
    hi[i] = h;
    if (lo != nullptr) lo[i] = __float2half_rn(__fsub_rn(v, __half2float(h)));
  }
}

}  // namespace

int LaunchSplitToF16(const float* x, int64_t n, float scale, void* hi, void* lo, void* stream) {
  if (n < 0 || !(scale > 0.0f) || scale > 3.0e38f) return detail::kInvalidValue;
  if (n == 0) return 0;
  if (x == nullptr || hi == nullptr || reinterpret_cast<uintptr_t>(hi) % 2 != 0 ||
      reinterpret_cast<uintptr_t>(lo) % 2 != 0) {
    return detail::kInvalidValue;
  }
  constexpr int kThreads = 256;
  SplitToF16Kernel<<<detail::Blocks1D(n, kThreads), kThreads, 0, detail::AsStream(stream)>>>(
      x, n, scale, static_cast<__half*>(hi), static_cast<__half*>(lo));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
