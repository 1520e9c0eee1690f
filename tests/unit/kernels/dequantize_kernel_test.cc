#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "strata/kernels/dequantize.h"
#include "strata/model/dequantize.h"

namespace strata::kernels {
namespace {

TEST(DequantizeKernel, Q8_0MatchesTheCpuDequantizerBitForBit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (int64_t blocks : {1, 7, 97, 4097}) {
    std::mt19937 rng(static_cast<uint32_t>(blocks));
    std::vector<uint8_t> src(blocks * 34);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < blocks; ++b) {
      src[b * 34 + 1] &= 0x3b;  // keep scales finite: exponent bits never all ones
    }
    int64_t n = blocks * 32;
    std::vector<float> want(n);
    ASSERT_TRUE(model::Dequantize(model::GgmlType::kQ8_0, src, n, want.data()).ok());

    void* d_src = nullptr;
    float* d_dst = nullptr;
    ASSERT_EQ(cudaMalloc(&d_src, src.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_dst), n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_src, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(LaunchDequantizeQ8_0(d_src, d_dst, n, nullptr), 0);
    std::vector<float> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), d_dst, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    cudaFree(d_src);
    cudaFree(d_dst);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << "blocks=" << blocks << " element " << i << ": got " << got[i] << " want " << want[i];
    }
  }
}

}  // namespace
}  // namespace strata::kernels
