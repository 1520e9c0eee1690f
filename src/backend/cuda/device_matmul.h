// y = W x for one weight matrix on the device (backend/cuda internal): picks the kernel by the
// matrix's format and the token count.
//
//   Q8_0/Q4_K/Q6_K, tokens <= kQuantMatMulMaxTokens: the weight-only quantized matmul
//       (kernels/quant_matmul_*.cu): fp32 activations, exact weights, fp32 accumulation.
//   Q8_0/Q4_K/Q6_K, more tokens: W in fp16 — its persistent copy (DeviceMatrix::f16, made once
//       at load when the memory plan allows) or else dequantized into the shared workspace on
//       this call (the same kernel, so the same values either way) — x converted to fp16, cuBLAS
//       GEMM with fp32 accumulation and output (tensor cores). The weights are then rounded to
//       fp16 (2^-12 relative), so activations in plain fp16 cost no more accuracy than that.
//   F16: cuBLAS GEMM on fp16 tensor cores with x split into two fp16 halves (hi + lo, see
//       f16_convert.h) and both products summed in fp32, i.e. two GEMMs. Why: an fp16 weight is
//       exact, so the only rounding fp16 activations would add is theirs (~5e-4 relative), which
//       is enough to flip greedy choices against the CPU backend's fp32 activations; the split
//       keeps ~22 bits of x for twice the tensor-core work, which prefill affords. (A tf32 path
//       over fp32 copies of the weights would double weight memory and still round x to 10
//       bits.)
//   F32: cuBLAS fp32 GEMM (CUBLAS_COMPUTE_32F: no tf32), exact products like the CPU's.
// Activations converted to fp16 are first multiplied by kF16ActivationScale (and the GEMM by its
// inverse, both exact powers of two): fp16 overflows at 65504, and activations entering a
// matmul can exceed that in some models (Gemma's are known to run large), where an unscaled
// conversion would give inf and then NaN logits. With 1/64 the range reaches ~4e6, and values
// below 2^-8 lose relative precision but keep an absolute error under 2e-6 — negligible in a
// dot product over O(1) activations.
// Everything is enqueued on ctx.stream; nothing allocates, so calls can be graph-captured.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "device_weights.h"
#include "strata/common/status.h"

namespace strata::backend::cuda {

// Token counts up to which quantized matrices use the quantized matmul kernels (their passes of
// up to 16 tokens stream the weights once each; beyond that, one dequantization and a GEMM cost
// less than repeated passes).
inline constexpr int64_t kQuantMatMulMaxTokens = 16;

inline constexpr float kF16ActivationScale = 1.0f / 64.0f;

// How MatMul multiplies a matrix of `type` (a device format) by `tokens` activation rows.
enum class MatMulPath {
  kQuantizedKernel,  // quant_matmul, fp32 activations
  kDequantF16Gemm,   // fp16 copy (or dequantize to fp16), fp16 activations, cuBLAS
  kSplitF16Gemm,     // fp16 weights, activations as fp16 hi + lo, two cuBLAS GEMMs
  kF32Gemm,          // cuBLAS fp32
  kUnsupported,      // not a device format
};
MatMulPath ChooseMatMulPath(model::GgmlType type, int64_t tokens);

struct MatMulContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  // fp16 workspace for a dequantized matrix: >= DeviceWeights::max_quantized_elements elements;
  // null when no matrix is quantized or every quantized one has its fp16 copy. Shared by every
  // call (stream-ordered).
  void* dequant_f16 = nullptr;
  int64_t dequant_f16_elements = 0;
  // fp16 scratch for x: >= 2 * tokens * cols + 128 elements of the largest call (hi, then lo
  // from the next multiple of 128 elements).
  void* x_f16 = nullptr;
  int64_t x_f16_elements = 0;
};

// y[t * ldy + r] = sum_c W[r, c] * x[t * w.cols + c] for t < tokens, r < w.rows.
// x: [tokens, w.cols] fp32, 16-byte aligned; y: [tokens, ldy] fp32, ldy >= w.rows; x and y must
// not overlap. INTERNAL when a launch or cuBLAS call fails (or the scratch is too small).
Status MatMul(const MatMulContext& ctx, const DeviceMatrix& w, const float* x, int64_t tokens,
              float* y, int64_t ldy);

}  // namespace strata::backend::cuda
