// Host-only: which kernel the CUDA backend's MatMul picks per weight format and token count.
#include <gtest/gtest.h>

#include "backend/cuda/device_matmul.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;

TEST(MatMulPath, QuantizedWeightsUseTheQuantizedKernelUpTo16Tokens) {
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_EQ(ChooseMatMulPath(t, 1), MatMulPath::kQuantizedKernel);
    EXPECT_EQ(ChooseMatMulPath(t, 16), MatMulPath::kQuantizedKernel);
    EXPECT_EQ(ChooseMatMulPath(t, 17), MatMulPath::kDequantF16Gemm);
    EXPECT_EQ(ChooseMatMulPath(t, 4096), MatMulPath::kDequantF16Gemm);
  }
}

TEST(MatMulPath, FloatWeightsGoToCublasAtEveryTokenCount) {
  for (int64_t tokens : {1, 16, 17, 1000}) {
    EXPECT_EQ(ChooseMatMulPath(GgmlType::kF16, tokens), MatMulPath::kSplitF16Gemm);
    EXPECT_EQ(ChooseMatMulPath(GgmlType::kF32, tokens), MatMulPath::kF32Gemm);
  }
}

TEST(MatMulPath, FormatsConvertedAtLoadAreNotDeviceFormats) {
  // BF16, Q5_0, Q4_1, ... are converted to F32/F16 when uploaded; MatMul never sees them.
  for (GgmlType t : {GgmlType::kBF16, GgmlType::kQ5_0, GgmlType::kQ4_1, GgmlType::kQ5_K}) {
    EXPECT_EQ(ChooseMatMulPath(t, 1), MatMulPath::kUnsupported);
    EXPECT_FALSE(IsDeviceQuantized(t));
  }
}

}  // namespace
}  // namespace strata::backend::cuda
