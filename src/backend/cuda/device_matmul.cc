#include "device_matmul.h"

#include <climits>
#include <string>

#include "cuda_status.h"
#include "strata/kernels/dequantize.h"
#include "strata/kernels/f16_convert.h"
#include "strata/kernels/quant_matmul.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;

int QuantMatMul(const DeviceMatrix& w, const float* x, int64_t tokens, float* y, int64_t ldy,
                cudaStream_t stream) {
  switch (w.type) {
    case GgmlType::kQ8_0:
      return kernels::LaunchQuantMatMulQ8_0(w.data, w.rows, w.cols, x, tokens, y, ldy, stream);
    case GgmlType::kQ4_K:
      return kernels::LaunchQuantMatMulQ4_K(w.data, w.rows, w.cols, x, tokens, y, ldy, stream);
    case GgmlType::kQ6_K:
      return kernels::LaunchQuantMatMulQ6_K(w.data, w.rows, w.cols, x, tokens, y, ldy, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

// C[tokens, ldy] (+)= B[tokens, cols] * A[rows, cols]^T in row-major terms. cuBLAS is column-
// major: A row-major [rows, cols] is column-major [cols, rows] (lda = cols), so
// C^T[rows, tokens] = op_T(A) [rows, cols] * B^T [cols, tokens] with B^T column-major, ldb = cols.
Status Gemm(cublasHandle_t handle, const void* a, cudaDataType_t ab_type, const void* b,
            int64_t rows, int64_t cols, int64_t tokens, float* c, int64_t ldc, float alpha,
            float beta, const std::string& name) {
  if (rows > INT_MAX || cols > INT_MAX || tokens > INT_MAX || ldc > INT_MAX) {
    return InternalError("matrix " + name + " is too large for one cuBLAS call");
  }
  const cublasStatus_t st =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                   static_cast<int>(tokens), static_cast<int>(cols), &alpha, a, ab_type,
                   static_cast<int>(cols), b, ab_type, static_cast<int>(cols), &beta, c, CUDA_R_32F,
                   static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return CublasStatus(static_cast<int>(st), "cublasGemmEx for " + name);
}

}  // namespace

MatMulPath ChooseMatMulPath(model::GgmlType type, int64_t tokens) {
  if (IsDeviceQuantized(type)) {
    return tokens <= kQuantMatMulMaxTokens ? MatMulPath::kQuantizedKernel
                                           : MatMulPath::kDequantF16Gemm;
  }
  if (type == GgmlType::kF16) return MatMulPath::kSplitF16Gemm;
  if (type == GgmlType::kF32) return MatMulPath::kF32Gemm;
  return MatMulPath::kUnsupported;
}

Status MatMul(const MatMulContext& ctx, const DeviceMatrix& w, const float* x, int64_t tokens,
              float* y, int64_t ldy) {
  if (tokens <= 0) return OkStatus();
  const MatMulPath path = ChooseMatMulPath(w.type, tokens);
  switch (path) {
    case MatMulPath::kQuantizedKernel:
      return CudaStatus(QuantMatMul(w, x, tokens, y, ldy, ctx.stream),
                        "quantized matmul " + w.name);
    case MatMulPath::kF32Gemm:
      return Gemm(ctx.cublas, w.data, CUDA_R_32F, x, w.rows, w.cols, tokens, y, ldy, 1.0f, 0.0f,
                  w.name);
    case MatMulPath::kUnsupported:
      return InternalError("matrix " + w.name + " has a type the device matmul cannot read");
    case MatMulPath::kDequantF16Gemm:
    case MatMulPath::kSplitF16Gemm:
      break;
  }

  const bool quantized = path == MatMulPath::kDequantF16Gemm;
  const void* a = w.data;
  if (quantized && w.f16 != nullptr) {
    a = w.f16;
  } else if (quantized) {
    if (w.rows * w.cols > ctx.dequant_f16_elements) {
      return InternalError("the fp16 dequantization workspace is too small for " + w.name);
    }
    STRATA_RETURN_IF_ERROR(CudaStatus(
        kernels::LaunchDequantizeToF16(w.data, static_cast<kernels::DequantizeType>(w.type),
                                       ctx.dequant_f16, w.rows * w.cols, ctx.stream),
        "dequantize " + w.name + " to fp16"));
    a = ctx.dequant_f16;
  }
  const bool split = path == MatMulPath::kSplitF16Gemm;
  const int64_t n = tokens * w.cols;
  // lo starts 256-byte aligned, like hi, so cuBLAS can use its vectorized kernels on both.
  const int64_t lo_offset = (n + 127) / 128 * 128;
  if ((split ? lo_offset + n : n) > ctx.x_f16_elements) {
    return InternalError("the fp16 activation scratch is too small for " + w.name);
  }
  constexpr float kUnscale = 1.0f / kF16ActivationScale;
  auto* hi = static_cast<uint16_t*>(ctx.x_f16);
  uint16_t* lo = split ? hi + lo_offset : nullptr;
  STRATA_RETURN_IF_ERROR(
      CudaStatus(kernels::LaunchSplitToF16(x, n, kF16ActivationScale, hi, lo, ctx.stream),
                 "fp16 conversion for " + w.name));
  STRATA_RETURN_IF_ERROR(
      Gemm(ctx.cublas, a, CUDA_R_16F, hi, w.rows, w.cols, tokens, y, ldy, kUnscale, 0.0f, w.name));
  if (split) {
    STRATA_RETURN_IF_ERROR(Gemm(ctx.cublas, a, CUDA_R_16F, lo, w.rows, w.cols, tokens, y, ldy,
                                kUnscale, 1.0f, w.name));
  }
  return OkStatus();
}

}  // namespace strata::backend::cuda
