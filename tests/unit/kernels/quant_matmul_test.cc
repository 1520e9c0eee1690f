#include "strata/kernels/quant_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "strata/model/dequantize.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::DeviceBuffer;

struct Format {
  const char* name;
  model::GgmlType type;
  int block_elements;
  int block_bytes;
  // Offsets of the fp16 scales' high bytes inside a block (masked so scales stay finite).
  std::vector<int> fp16_high_bytes;
  int (*launch)(const void*, int64_t, int64_t, const float*, int64_t, float*, int64_t, void*);
};

const Format& FormatOf(model::GgmlType type) {
  static const Format kQ8_0{"Q8_0", model::GgmlType::kQ8_0, 32, 34, {1}, LaunchQuantMatMulQ8_0};
  static const Format kQ4_K{"Q4_K", model::GgmlType::kQ4_K, 256, 144,
                            {1, 3}, LaunchQuantMatMulQ4_K};
  static const Format kQ6_K{"Q6_K", model::GgmlType::kQ6_K, 256, 210, {209}, LaunchQuantMatMulQ6_K};
  switch (type) {
    case model::GgmlType::kQ8_0:
      return kQ8_0;
    case model::GgmlType::kQ4_K:
      return kQ4_K;
    default:
      return kQ6_K;
  }
}

// Random blocks with finite scales (fp16 exponent never all ones: |scale| < 2), and their
// values as the CPU dequantizer decodes them.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [rows, cols]
};

Weights RandomWeights(const Format& f, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Weights w;
  const int64_t blocks = rows * (cols / f.block_elements);
  w.bytes.resize(static_cast<size_t>(blocks * f.block_bytes));
  for (auto& b : w.bytes) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < blocks; ++b) {
    for (int offset : f.fp16_high_bytes) w.bytes[b * f.block_bytes + offset] &= 0x3b;
  }
  w.values.resize(static_cast<size_t>(rows * cols));
  EXPECT_TRUE(
      model::Dequantize(f.type, w.bytes, static_cast<uint64_t>(rows * cols), w.values.data()).ok());
  return w;
}

std::vector<float> RandomActivations(int64_t tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  for (auto& v : x) v = dist(rng);
  return x;
}

constexpr float kUntouched = 12345.0f;  // fills y's padding columns, which must stay as they are

// Runs the kernel with ldy = rows + 3; y comes back [tokens, ldy].
std::vector<float> RunOnDevice(const Format& f, const Weights& w, int64_t rows, int64_t cols,
                               const std::vector<float>& x, int64_t tokens, int64_t ldy) {
  DeviceBuffer<uint8_t> d_w(w.bytes);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<float> d_y(std::vector<float>(static_cast<size_t>(tokens * ldy), kUntouched));
  EXPECT_TRUE(d_w.ok() && d_x.ok() && d_y.ok());
  EXPECT_EQ(f.launch(d_w.get(), rows, cols, d_x.get(), tokens, d_y.get(), ldy, nullptr), 0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return d_y.Download();
}

struct Shape {
  model::GgmlType type;
  int64_t rows;
  int64_t blocks_per_row;
  int64_t tokens;
};

std::string ShapeName(const testing::TestParamInfo<Shape>& info) {
  std::ostringstream name;
  name << FormatOf(info.param.type).name << "_rows" << info.param.rows << "_blocks"
       << info.param.blocks_per_row << "_tokens" << info.param.tokens;
  return name.str();
}

class QuantMatMulSweep : public testing::TestWithParam<Shape> {};

TEST_P(QuantMatMulSweep, MatchesAFloat64ReferenceOverTheDequantizedWeights) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const Shape s = GetParam();
  const Format& f = FormatOf(s.type);
  const int64_t cols = s.blocks_per_row * f.block_elements;
  const int64_t ldy = s.rows + 3;
  const Weights w = RandomWeights(f, s.rows, cols, static_cast<uint32_t>(s.rows * 131 + cols));
  const std::vector<float> x = RandomActivations(s.tokens, cols, static_cast<uint32_t>(cols));
  const std::vector<float> y = RunOnDevice(f, w, s.rows, cols, x, s.tokens, ldy);
  ASSERT_EQ(y.size(), static_cast<size_t>(s.tokens * ldy));

  double worst = 0.0;  // error / tolerance
  std::string worst_at;
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t r = 0; r < s.rows; ++r) {
      double want = 0.0;
      double magnitude = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(w.values[r * cols + c]) * x[t * cols + c];
        want += p;
        magnitude += std::fabs(p);
      }
      const float got = y[t * ldy + r];
      const double tolerance = 1e-5 * magnitude + 1e-30;
      const double ratio = std::fabs(got - want) / tolerance;
      if (!(ratio <= worst)) {  // NaN counts as worst
        worst = std::isnan(ratio) ? INFINITY : ratio;
        worst_at = "token " + std::to_string(t) + " row " + std::to_string(r) + ": got " +
                   std::to_string(got) + " want " + std::to_string(want) + " (sum |w*x| " +
                   std::to_string(magnitude) + ")";
      }
    }
    for (int64_t r = s.rows; r < ldy; ++r) {
      ASSERT_EQ(y[t * ldy + r], kUntouched) << "token " << t << " wrote padding column " << r;
    }
  }
  EXPECT_LE(worst, 1.0) << "worst element: " << worst_at;
}

std::vector<Shape> SweepShapes() {
  std::vector<Shape> shapes;
  for (auto type : {model::GgmlType::kQ8_0, model::GgmlType::kQ4_K, model::GgmlType::kQ6_K}) {
    const int64_t block_elements = FormatOf(type).block_elements;
    // Columns past one shared-memory chunk for every pass width (8192 / 1 .. 8192 / 16).
    const int64_t several_chunks = 8192 / block_elements + 1;
    for (int64_t rows : {1, 7, 97}) {
      for (int64_t blocks : {int64_t{1}, int64_t{3}, several_chunks}) {
        for (int64_t tokens : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16}) {
          shapes.push_back({type, rows, blocks, tokens});
        }
      }
    }
    // More rows than fit the grid's first CTAs' worth evenly; more tokens than one pass.
    for (int64_t tokens : {1, 6, 16}) shapes.push_back({type, 4097, 3, tokens});
    shapes.push_back({type, 97, 3, 21});
    shapes.push_back({type, 33, several_chunks, 37});
  }
  return shapes;
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantMatMulSweep, testing::ValuesIn(SweepShapes()), ShapeName);

class QuantMatMulFormat : public testing::TestWithParam<model::GgmlType> {};

// One-hot activations pick single weights out of the product exactly (every other term is an
// exact zero), so this checks the decode of every weight against model::Dequantize bit for bit.
TEST_P(QuantMatMulFormat, DecodesEveryWeightExactlyAsTheCpuDequantizer) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const Format& f = FormatOf(GetParam());
  const int64_t rows = 97;
  const int64_t cols = 2 * f.block_elements;
  const Weights w = RandomWeights(f, rows, cols, 7);
  constexpr int64_t kTokens = 16;
  for (int64_t first = 0; first < cols; first += kTokens) {
    std::vector<float> x(static_cast<size_t>(kTokens * cols), 0.0f);
    for (int64_t t = 0; t < kTokens; ++t) x[t * cols + first + t] = 1.0f;
    const std::vector<float> y = RunOnDevice(f, w, rows, cols, x, kTokens, rows);
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[t * rows + r], w.values[r * cols + first + t])
            << "row " << r << " column " << first + t;
      }
    }
  }
}

// Every lane visits the same blocks in the same order whatever the pass width, so a token's
// output does not depend on how many tokens share the call.
TEST_P(QuantMatMulFormat, ATokensOutputIsBitIdenticalAloneOrInABatch) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const Format& f = FormatOf(GetParam());
  const int64_t rows = 97;
  const int64_t cols = (8192 / f.block_elements + 3) * f.block_elements;
  const int64_t tokens = 19;  // passes of 16 and 4 (3 used)
  const Weights w = RandomWeights(f, rows, cols, 11);
  const std::vector<float> x = RandomActivations(tokens, cols, 13);
  const std::vector<float> batched = RunOnDevice(f, w, rows, cols, x, tokens, rows);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> x_t(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    const std::vector<float> alone = RunOnDevice(f, w, rows, cols, x_t, 1, rows);
    ASSERT_EQ(std::memcmp(alone.data(), batched.data() + t * rows, rows * sizeof(float)), 0)
        << "token " << t;
  }
}

TEST_P(QuantMatMulFormat, RejectsColumnsThatAreNotWholeBlocks) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const Format& f = FormatOf(GetParam());
  DeviceBuffer<uint8_t> d_w(static_cast<size_t>(4 * f.block_bytes));
  DeviceBuffer<float> d_x(static_cast<size_t>(4 * f.block_elements));
  DeviceBuffer<float> d_y(4);
  ASSERT_TRUE(d_w.ok() && d_x.ok() && d_y.ok());
  const int invalid = static_cast<int>(cudaErrorInvalidValue);
  EXPECT_EQ(f.launch(d_w.get(), 1, f.block_elements + 16, d_x.get(), 1, d_y.get(), 1, nullptr),
            invalid);
  EXPECT_EQ(f.launch(d_w.get(), 1, 0, d_x.get(), 1, d_y.get(), 1, nullptr), invalid);
  EXPECT_EQ(f.launch(d_w.get(), 2, f.block_elements, d_x.get(), 1, d_y.get(), 1, nullptr), invalid)
      << "ldy < rows";
  EXPECT_EQ(f.launch(d_w.get(), 1, f.block_elements, d_x.get() + 1, 1, d_y.get(), 1, nullptr),
            invalid)
      << "x not 16-byte aligned";
  EXPECT_EQ(f.launch(d_w.get(), 0, f.block_elements, d_x.get(), 1, d_y.get(), 1, nullptr), 0);
  EXPECT_EQ(f.launch(d_w.get(), 1, f.block_elements, d_x.get(), 0, d_y.get(), 1, nullptr), 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantMatMulFormat,
                         testing::Values(model::GgmlType::kQ8_0, model::GgmlType::kQ4_K,
                                         model::GgmlType::kQ6_K),
                         [](const testing::TestParamInfo<model::GgmlType>& info) {
                           return std::string(FormatOf(info.param).name);
                         });

// Host-only: the pass plan needs no device.
TEST(QuantMatMulPlan, PassesAreThePowersOfTwoUpTo16ThatCoverTheTokensLeft) {
  EXPECT_EQ(QuantMatMulTokensPerPass(1), 1);
  EXPECT_EQ(QuantMatMulTokensPerPass(2), 2);
  EXPECT_EQ(QuantMatMulTokensPerPass(3), 4);
  EXPECT_EQ(QuantMatMulTokensPerPass(5), 8);
  EXPECT_EQ(QuantMatMulTokensPerPass(8), 8);
  EXPECT_EQ(QuantMatMulTokensPerPass(9), 16);
  EXPECT_EQ(QuantMatMulTokensPerPass(16), 16);
  EXPECT_EQ(QuantMatMulTokensPerPass(1000), 16);
}

TEST(QuantMatMulPlan, ChunksHoldWholeSuperBlocksIn32KiB) {
  for (int width : {1, 2, 4, 8, 16}) {
    EXPECT_EQ(QuantMatMulChunkCols(width) % 256, 0) << width;
    EXPECT_EQ(QuantMatMulChunkCols(width) * width * 4, 32768) << width;
  }
}

}  // namespace
}  // namespace strata::kernels
