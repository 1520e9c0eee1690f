// GeGLU / SwiGLU: one thread per element over a [rows, columns] grid.
#include <cuda_runtime.h>

#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/activation.h"

namespace strata::kernels {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
constexpr float kGeluCoef = 0.044715f;

// GELU(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)). For u -> -inf, exp overflows to inf and
// the result is -0; for u -> +inf it is x.
__device__ __forceinline__ float GeluTanh(float x) {
  const float u = kSqrt2OverPi * x * fmaf(kGeluCoef, x * x, 1.0f);
  return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }

// No __restrict__: out may alias gate or up (same index, same thread).
template <GatedActivation kAct>
__global__ void GatedActivationKernel(const float* gate, int64_t gate_stride, const float* up,
                                      int64_t up_stride, float* out, int64_t out_stride,
                                      int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* g = gate + r * gate_stride;
    const float* u = up + r * up_stride;
    float* o = out + r * out_stride;
    for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      const float a = kAct == GatedActivation::kGeluTanh ? GeluTanh(g[i]) : Silu(g[i]);
      o[i] = a * u[i];
    }
  }
}

}  // namespace

int LaunchGatedActivation(GatedActivation activation, const float* gate, int64_t gate_stride,
                          const float* up, int64_t up_stride, float* out, int64_t out_stride,
                          int64_t num_tokens, int64_t n, void* stream) {
  if (num_tokens < 0 || n < 0 || n > INT32_MAX || gate_stride < n || up_stride < n ||
      out_stride < n) {
    return detail::kInvalidValue;
  }
  if (num_tokens == 0 || n == 0) return 0;
  if (gate == nullptr || up == nullptr || out == nullptr) return detail::kInvalidValue;
  const dim3 grid = detail::RowGrid(num_tokens, n, kThreads);
  cudaStream_t s = detail::AsStream(stream);
  switch (activation) {
    case GatedActivation::kGeluTanh:
      GatedActivationKernel<GatedActivation::kGeluTanh><<<grid, kThreads, 0, s>>>(
          gate, gate_stride, up, up_stride, out, out_stride, num_tokens, n);
      break;
    case GatedActivation::kSilu:
      GatedActivationKernel<GatedActivation::kSilu><<<grid, kThreads, 0, s>>>(
          gate, gate_stride, up, up_stride, out, out_stride, num_tokens, n);
      break;
    default:
      return detail::kInvalidValue;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
