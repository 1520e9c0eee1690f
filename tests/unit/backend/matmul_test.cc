#include "strata/backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "strata/model/dequantize.h"
#include "strata/model/fp16.h"

namespace strata::backend::cpu {
namespace {

using model::GgmlType;

// Writes a random fp16 scale of magnitude [lo, hi) and random sign at p.
void PutScale(uint8_t* p, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> magnitude(lo, hi);
  const float v = (rng() & 1) != 0 ? magnitude(rng) : -magnitude(rng);
  const uint16_t h = model::FloatToFp16(v);
  std::memcpy(p, &h, sizeof(h));
}

// A random [rows, cols] matrix of `type`: random bits everywhere (quants, packed sub-block
// scales), then every fp16 block scale overwritten with a sane finite value, so the matrix holds
// every quant pattern but no NaN or infinity.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const int64_t blocks = rows * cols / traits.block_size;
  std::vector<uint8_t> data(blocks * traits.type_size);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* blk = data.data() + i * traits.type_size;
    switch (type) {
      case GgmlType::kF32: {
        const float v = normal(rng);
        std::memcpy(blk, &v, sizeof(v));
        break;
      }
      case GgmlType::kF16: {
        const uint16_t h = model::FloatToFp16(normal(rng));
        std::memcpy(blk, &h, sizeof(h));
        break;
      }
      case GgmlType::kBF16: {
        const uint16_t h = model::FloatToBf16(normal(rng));
        std::memcpy(blk, &h, sizeof(h));
        break;
      }
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0:
      case GgmlType::kQ5_0:
        PutScale(blk, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        PutScale(blk, rng, 1e-3f, 1e-1f);      // d
        PutScale(blk + 2, rng, 1e-3f, 1e-1f);  // m or dmin
        break;
      case GgmlType::kQ2_K:
        PutScale(blk + 80, rng, 1e-3f, 1e-1f);
        PutScale(blk + 82, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ3_K:
        PutScale(blk + 108, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ6_K:
        PutScale(blk + 208, rng, 1e-4f, 1e-2f);
        break;
      default:
        ADD_FAILURE() << "no generator for " << model::GgmlTypeName(type);
    }
  }
  return data;
}

std::vector<float> RandomActivations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// Column counts: one to three blocks, then model-like widths (K-quants need multiples of 256).
std::vector<int64_t> ColsFor(GgmlType type) {
  const int64_t bs = model::TraitsOf(type).block_size;
  if (bs == 1) return {1, 7, 33, 640, 2048};
  if (bs == 32) return {32, 64, 96, 640, 2048};
  return {256, 512, 768, 1024, 2048};
}

struct Worst {
  double ratio = 0;  // |y - ref| / sum |x * w|
  int64_t rows = 0, cols = 0, tokens = 0, t = 0, r = 0;
  double got = 0, want = 0, scale = 0;
};

// Every path sums fp32 products in chains of at most cols / 8 terms (8+ partial sums), then
// combines a few of them, so |error| <= (cols / 8 + 16) * u * sum |x * w| with u = 2^-24 (the
// standard bound for recursive summation, Higham 2002, section 3.1); the SIMD dequantizers are
// bit-exact with model::Dequantize, so the weights add no error.
double Fp32Tolerance(int64_t cols) { return (static_cast<double>(cols) / 8 + 16) * 0x1p-24; }

// Runs MatMul over the shape sweep for `type` and returns the worst element relative to its
// tolerance scale.
void CheckSweep(GgmlType type, ThreadPool* pool, const std::vector<int64_t>& row_counts,
                const std::vector<int64_t>& token_counts) {
  std::mt19937 rng(static_cast<uint32_t>(type) * 7919 + 1);
  for (int64_t cols : ColsFor(type)) {
    for (int64_t rows : row_counts) {
      const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
      std::vector<float> wf(rows * cols);
      ASSERT_TRUE(model::Dequantize(type, wq, rows * cols, wf.data()).ok());
      const WeightMatrix w{type, wq.data(), rows, cols};
      for (int64_t tokens : token_counts) {
        const std::vector<float> x = RandomActivations(tokens * cols, rng);
        std::vector<float> y(tokens * rows, std::nanf(""));
        MatMul(w, x.data(), tokens, y.data(), pool);
        Worst worst;
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0;
            double scale = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const double p = static_cast<double>(x[t * cols + c]) * wf[r * cols + c];
              ref += p;
              scale += std::fabs(p);
            }
            const double got = y[t * rows + r];
            const double ratio = std::isfinite(got) ? std::fabs(got - ref) / scale : INFINITY;
            if (!(ratio <= worst.ratio)) {
              worst = {ratio, rows, cols, tokens, t, r, got, ref, scale};
            }
          }
        }
        ASSERT_LE(worst.ratio, Fp32Tolerance(cols))
            << model::GgmlTypeName(type) << " [" << worst.rows << " x " << worst.cols << "] x "
            << worst.tokens << " tokens (" << MatMulIsa() << "): worst y[t=" << worst.t
            << ", r=" << worst.r << "] = " << worst.got << ", want " << worst.want << " (error "
            << worst.ratio << " of sum|x*w| = " << worst.scale << ")";
      }
    }
  }
}

class MatMulTest : public testing::TestWithParam<std::tuple<GgmlType, std::string>> {
 protected:
  void SetUp() override {
    if (!SetMatMulIsa(std::get<1>(GetParam()))) {
      GTEST_SKIP() << "this CPU has no " << std::get<1>(GetParam());
    }
  }
  void TearDown() override { SetMatMulForceScalar(false); }
};

TEST_P(MatMulTest, MatchesFloat64ReferenceOnOddShapes) {
  ThreadPool pool(3);  // more threads than this machine may have cores: dynamic chunks
  CheckSweep(std::get<0>(GetParam()), &pool, {1, 7, 97, 300}, {1, 2, 3, 7, 16, 33, 64});
}

TEST_P(MatMulTest, MatchesWithoutAPool) {
  CheckSweep(std::get<0>(GetParam()), nullptr, {5, 66}, {1, 5, 13});
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, MatMulTest,
    testing::Combine(testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                     GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                     GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                                     GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                     GgmlType::kQ6_K),
                     testing::Values("avx512", "avx2", "scalar")),
    [](const testing::TestParamInfo<MatMulTest::ParamType>& info) {
      return std::string(model::GgmlTypeName(std::get<0>(info.param))) + "_" +
             std::get<1>(info.param);
    });

TEST(MatMul, SupportsExactlyTheListedTypes) {
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
        GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
        GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(MatMulSupports(type)) << model::GgmlTypeName(type);
  }
  for (GgmlType type : {GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kIQ4_NL, GgmlType::kI8,
                        GgmlType::kF64, GgmlType::kMXFP4}) {
    EXPECT_FALSE(MatMulSupports(type)) << model::GgmlTypeName(type);
  }
}

TEST(MatMul, NamesItsKernelFamily) {
  SetMatMulForceScalar(true);
  EXPECT_EQ(MatMulIsa(), "scalar");
  SetMatMulForceScalar(false);
  const std::string_view best = MatMulIsa();
  EXPECT_TRUE(best == "avx512" || best == "avx2" || best == "scalar") << best;
  EXPECT_FALSE(SetMatMulIsa("sse9"));
  EXPECT_EQ(MatMulIsa(), best);
}

TEST(MatMul, ZeroTokensWritesNothing) {
  const std::vector<uint8_t> w(34 * 4, 0);
  float y = 42.0f;
  MatMul({GgmlType::kQ8_0, w.data(), 4, 32}, nullptr, 0, &y, nullptr);
  EXPECT_EQ(y, 42.0f);
}

}  // namespace
}  // namespace strata::backend::cpu
