#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "strata/kernels/dequantize.h"
#include "strata/model/dequantize.h"
#include "strata/model/fp16.h"
#include "strata/model/ggml_type.h"
#include "support/device_buffer.h"

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

// Byte offsets of the fp16 fields in one block of `type`.
std::vector<int> Fp16FieldOffsets(model::GgmlType type) {
  switch (type) {
    case model::GgmlType::kQ8_0:
      return {0};
    case model::GgmlType::kQ4_K:
      return {0, 2};
    case model::GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// Random blocks of `type` whose fp16 fields are finite with magnitude below 2 (the high byte's
// top exponent bit cleared), so every decoded value fits fp16 (at most 2 * 63 * 15 for Q4_K).
std::vector<uint8_t> RandomBlocks(model::GgmlType type, int64_t blocks, uint32_t seed) {
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  std::vector<uint8_t> src(blocks * traits.type_size);
  std::mt19937 rng(seed);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < blocks; ++b) {
    for (int offset : Fp16FieldOffsets(type)) src[b * traits.type_size + offset + 1] &= 0xbf;
  }
  return src;
}

TEST(DequantizeToF16Kernel, EqualsTheCpuDequantizerRoundedToFp16) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  for (model::GgmlType type :
       {model::GgmlType::kQ8_0, model::GgmlType::kQ4_K, model::GgmlType::kQ6_K}) {
    const model::GgmlTypeTraits traits = model::TraitsOf(type);
    for (int64_t blocks : {1, 7, 97, 1025}) {
      const std::vector<uint8_t> src = RandomBlocks(type, blocks, static_cast<uint32_t>(blocks));
      const int64_t n = blocks * traits.block_size;
      std::vector<float> want(n);
      ASSERT_TRUE(model::Dequantize(type, src, n, want.data()).ok());
      test::DeviceBuffer<uint8_t> d_src(src);
      test::DeviceBuffer<uint16_t> d_dst(static_cast<size_t>(n));
      ASSERT_TRUE(d_src.ok() && d_dst.ok());
      ASSERT_EQ(LaunchDequantizeToF16(d_src.get(), static_cast<DequantizeType>(type), d_dst.get(),
                                      n, nullptr),
                0);
      const std::vector<uint16_t> got = d_dst.Download();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], model::FloatToFp16(want[i]))
            << traits.name << " blocks=" << blocks << " element " << i << ": got "
            << model::Fp16ToFloat(got[i]) << " want " << want[i];
      }
    }
  }
}

TEST(DequantizeToF16Kernel, RefusesPartialBlocksAndUnknownTypesWithoutLaunching) {
  // These return before any CUDA call, so they hold on machines without a device too.
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  uint16_t dst[256];
  const uint8_t src[256] = {};
  EXPECT_EQ(LaunchDequantizeToF16(src, DequantizeType::kQ8_0, dst, 48, nullptr), kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(src, DequantizeType::kQ4_K, dst, 128, nullptr), kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(src, DequantizeType::kQ6_K, dst, -256, nullptr), kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(src, static_cast<DequantizeType>(2), dst, 32, nullptr), kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(nullptr, DequantizeType::kQ8_0, dst, 32, nullptr), kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(src, DequantizeType::kQ8_0, reinterpret_cast<uint8_t*>(dst) + 1,
                                  32, nullptr),
            kInvalid);
  EXPECT_EQ(LaunchDequantizeToF16(src, DequantizeType::kQ8_0, dst, 0, nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
