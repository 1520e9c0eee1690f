// RoPE on [num_tokens, heads, head_dim] q and k in place: one block per token builds the token's
// cos/sin table in shared memory (the CPU's fp32 angle recipe), then rotates every head.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "launch_util.cuh"
#include "strata/kernels/rope.h"

namespace strata::kernels {
namespace {

constexpr int kRopeThreads = 256;

__device__ __forceinline__ void RotateHeads(float* x, int64_t heads, int64_t head_dim, int64_t half,
                                            bool neox, const float* table) {
  const int64_t pairs = heads * half;
  for (int64_t j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int64_t h = j / half;
    const int64_t i = j % half;
    float* v = x + h * head_dim;
    const int64_t i0 = neox ? i : 2 * i;
    const int64_t i1 = neox ? i + half : 2 * i + 1;
    const float c = table[2 * i];
    const float s = table[2 * i + 1];
    const float x0 = v[i0];
    const float x1 = v[i1];
    v[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[i1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

__global__ void RopeKernel(float* __restrict__ q, int64_t q_heads, float* __restrict__ k,
                           int64_t k_heads, const int64_t* __restrict__ positions,
                           int64_t num_tokens, int64_t head_dim, int64_t rope_dim, bool neox,
                           float theta_scale, float freq_scale,
                           const float* __restrict__ freq_factors) {
  extern __shared__ float table[];  // [rope_dim]: cos_0, sin_0, cos_1, sin_1, ...
  const int64_t half = rope_dim / 2;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    // theta_i = pos * theta_scale^i by repeated multiplication, serially: the same roundings as
    // the CPU's loop (a closed form would differ in the last bits, which pos amplifies).
    if (threadIdx.x == 0) {
      float theta = static_cast<float>(positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        table[2 * i] = theta;
        theta = __fmul_rn(theta, theta_scale);
      }
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
      const float angle = __fmul_rn(freq_scale, __fdiv_rn(table[2 * i], ff));
      double s = 0.0;
      double c = 0.0;
      sincos(static_cast<double>(angle), &s, &c);
      table[2 * i] = static_cast<float>(c);
      table[2 * i + 1] = static_cast<float>(s);
    }
    __syncthreads();
    RotateHeads(q + t * q_heads * head_dim, q_heads, head_dim, half, neox, table);
    if (k != nullptr) RotateHeads(k + t * k_heads * head_dim, k_heads, head_dim, half, neox, table);
    // The next token overwrites the table.
    __syncthreads();
  }
}

}  // namespace

float RopeThetaScale(float base, int64_t rope_dim) {
  // The CPU backend's expression, character for character (float overload of std::pow).
  return std::pow(base, -2.0f / static_cast<float>(rope_dim));
}

int LaunchRope(float* q, int64_t q_heads, float* k, int64_t k_heads, const int64_t* positions,
               int64_t num_tokens, int64_t head_dim, int64_t rope_dim, RopeStyle style, float base,
               float freq_scale, const float* freq_factors, void* stream) {
  if (num_tokens < 0 || num_tokens > INT32_MAX || q_heads < 0 || k_heads < 0 || head_dim < 1 ||
      rope_dim < 0 || rope_dim > head_dim || rope_dim % 2 != 0 || !(base > 0.0f)) {
    return detail::kInvalidValue;
  }
  if (style != RopeStyle::kNorm && style != RopeStyle::kNeox) return detail::kInvalidValue;
  if (k == nullptr && k_heads != 0) return detail::kInvalidValue;
  if ((q == nullptr && q_heads != 0) || (positions == nullptr && num_tokens != 0)) {
    return detail::kInvalidValue;
  }
  // rope_dim floats of shared memory per block; 48 KiB (12288 floats) is the default limit.
  if (rope_dim > 12288) return detail::kInvalidValue;
  if (num_tokens == 0 || rope_dim == 0 || q_heads + k_heads == 0) return 0;
  const unsigned blocks = detail::Blocks1D(num_tokens, 1);
  const size_t shared_bytes = static_cast<size_t>(rope_dim) * sizeof(float);
  RopeKernel<<<blocks, kRopeThreads, shared_bytes, detail::AsStream(stream)>>>(
      q, q_heads, k, k_heads, positions, num_tokens, head_dim, rope_dim, style == RopeStyle::kNeox,
      RopeThetaScale(base, rope_dim), freq_scale, freq_factors);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
