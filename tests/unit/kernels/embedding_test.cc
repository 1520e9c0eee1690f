#include "strata/kernels/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "per_token_test_util.h"
#include "strata/model/dequantize.h"
#include "strata/model/ggml_type.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using model::GgmlType;
using test::BitsEqual;
using test::DeviceBuffer;
using test::LaunchSucceeded;

// Byte offsets of the fp16 fields inside one block of `type` (scales, mins, F16 values).
std::vector<int> Fp16Offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kQ8_0:
      return {0};
    case GgmlType::kQ4_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// A random table of `vocab` rows of n elements. Every fp16 field gets a finite value (exponent
// below all-ones; subnormals and both signs included); F32 values are finite normals.
std::vector<uint8_t> RandomTable(GgmlType type, int64_t vocab, int64_t n, uint32_t seed) {
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const int64_t blocks = vocab * n / traits.block_size;
  std::vector<uint8_t> table(blocks * traits.type_size);
  std::mt19937 rng(seed);
  for (uint8_t& b : table) b = static_cast<uint8_t>(rng());
  if (type == GgmlType::kF32) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t i = 0; i < vocab * n; ++i) {
      const float f = dist(rng);
      std::memcpy(&table[4 * i], &f, 4);
    }
    return table;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    for (int offset : Fp16Offsets(type)) table[b * traits.type_size + offset + 1] &= 0xbf;
  }
  return table;
}

TEST(EmbeddingRowBytes, AgreesWithTheGgmlTraits) {
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const model::GgmlTypeTraits traits = model::TraitsOf(type);
    const int64_t n = 3 * 256;
    EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(type), n),
              n / traits.block_size * traits.type_size)
        << traits.name;
  }
}

TEST(EmbeddingRowBytes, RejectsOtherTypesAndPartialBlocks) {
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kQ4_0), 64), -1);
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kBF16), 64), -1);
  EXPECT_EQ(EmbeddingRowBytes(12345, 256), -1);
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kQ8_0), 48), -1);
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kQ4_K), 128), -1);
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kF32), 0), -1);
  EXPECT_EQ(EmbeddingRowBytes(static_cast<uint32_t>(GgmlType::kF32), 7), 28);
}

// type, n (in elements), scale
class EmbeddingSweep : public ::testing::TestWithParam<std::tuple<GgmlType, int64_t, float>> {};

TEST_P(EmbeddingSweep, GathersRowsBitForBitLikeTheCpuDequantizerThenScale) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [type, n, scale] = GetParam();
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const int64_t vocab = 37;
  const uint32_t seed = static_cast<uint32_t>(static_cast<uint32_t>(type) * 1000 + n);
  const std::vector<uint8_t> table = RandomTable(type, vocab, n, seed);
  // Repeats, the first and last rows, and two out-of-range ids (which give zero rows).
  const std::vector<int32_t> ids = {5, 0, 36, 5, 17, -1, 37, 2, 36, 11, 29};
  const int64_t tokens = static_cast<int64_t>(ids.size());

  DeviceBuffer<uint8_t> d_table(table);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_out(tokens * n);
  ASSERT_TRUE(d_table.ok() && d_ids.ok() && d_out.ok());
  ASSERT_TRUE(
      LaunchSucceeded(LaunchEmbeddingGather(d_table.get(), static_cast<EmbeddingType>(type), vocab,
                                            n, d_ids.get(), tokens, scale, d_out.get(), nullptr)));

  const int64_t row_bytes = n / traits.block_size * traits.type_size;
  std::vector<float> want(tokens * n, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) continue;
    std::span<const uint8_t> row(table.data() + ids[t] * row_bytes, row_bytes);
    ASSERT_TRUE(model::Dequantize(type, row, n, want.data() + t * n).ok());
    if (scale != 1.0f) {
      for (int64_t i = 0; i < n; ++i) want[t * n + i] *= scale;  // the CPU's ScaleInPlace
    }
  }
  EXPECT_TRUE(BitsEqual(d_out.Download(), want));
}

// Every type with whole-block widths among 1, 7 (odd), one block, 96, 256, 640 (gemma3-270m),
// 1280; scale 1 (skipped multiply) and sqrt(640).
std::vector<std::tuple<GgmlType, int64_t, float>> EmbeddingCases() {
  std::vector<std::tuple<GgmlType, int64_t, float>> cases;
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t n : {1, 7, 32, 96, 256, 640, 1280}) {
      if (n % model::TraitsOf(type).block_size != 0) continue;
      for (float scale : {1.0f, 25.298221f}) cases.emplace_back(type, n, scale);
    }
  }
  return cases;
}

// Names of the EmbeddingSweep cases, spelling out each parameter.
std::string EmbeddingSweepName(const ::testing::TestParamInfo<EmbeddingSweep::ParamType>& info) {
  const auto [type, n, scale] = info.param;
  return std::string(model::TraitsOf(type).name) + "N" + std::to_string(n) +
         (scale != 1.0f ? "Scaled" : "");
}

INSTANTIATE_TEST_SUITE_P(Types, EmbeddingSweep, ::testing::ValuesIn(EmbeddingCases()),
                         EmbeddingSweepName);

TEST(EmbeddingGather, ManyTokensCoverTheWholeGrid) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // More tokens than grid blocks (2^20): the grid-stride loop covers the rest.
  const int64_t vocab = 3, n = 32;
  const int64_t tokens = (int64_t{1} << 20) + 9;
  const std::vector<uint8_t> table = RandomTable(GgmlType::kQ8_0, vocab, n, 3);
  std::vector<int32_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) ids[t] = static_cast<int32_t>(t % vocab);
  DeviceBuffer<uint8_t> d_table(table);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_out(tokens * n);
  ASSERT_TRUE(d_table.ok() && d_ids.ok() && d_out.ok());
  ASSERT_TRUE(
      LaunchSucceeded(LaunchEmbeddingGather(d_table.get(), EmbeddingType::kQ8_0, vocab, n,
                                            d_ids.get(), tokens, 2.0f, d_out.get(), nullptr)));
  std::vector<float> rows(vocab * n);
  ASSERT_TRUE(model::Dequantize(GgmlType::kQ8_0, table, vocab * n, rows.data()).ok());
  std::vector<float> want(tokens * n);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) want[t * n + i] = rows[(t % vocab) * n + i] * 2.0f;
  }
  EXPECT_TRUE(BitsEqual(d_out.Download(), want));
}

TEST(EmbeddingGather, RefusesUnsupportedTypesAndPartialBlocks) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<uint8_t> table(1024);
  DeviceBuffer<int32_t> ids(std::vector<int32_t>{0});
  DeviceBuffer<float> out(256);
  ASSERT_TRUE(table.ok() && ids.ok() && out.ok());
  EXPECT_EQ(LaunchEmbeddingGather(table.get(), static_cast<EmbeddingType>(2), 1, 32, ids.get(), 1,
                                  1.0f, out.get(), nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchEmbeddingGather(table.get(), EmbeddingType::kQ4_K, 1, 32, ids.get(), 1, 1.0f,
                                  out.get(), nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchEmbeddingGather(table.get(), EmbeddingType::kF32, 0, 32, ids.get(), 1, 1.0f,
                                  out.get(), nullptr),
            test::kInvalidValue);
}

}  // namespace
}  // namespace strata::kernels
