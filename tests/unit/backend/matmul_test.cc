#include "strata/backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "strata/model/dequantize.h"
#include "strata/model/fp16.h"
#include "unit/backend/random_weights.h"

namespace strata::backend::cpu {
namespace {

using model::GgmlType;

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

// ---- Path boundaries and agreement between kernel families -----------------------------------

// y = W x in double, with sum |x * w| per element: the scale of the fp32 error bound.
struct Reference {
  std::vector<double> y;      // [tokens, rows]
  std::vector<double> scale;  // [tokens, rows]
};

Reference ReferenceProduct(const std::vector<float>& wf, const float* x, int64_t rows, int64_t cols,
                           int64_t tokens) {
  Reference ref{std::vector<double>(tokens * rows), std::vector<double>(tokens * rows)};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      double scale = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(x[t * cols + c]) * wf[r * cols + c];
        sum += p;
        scale += std::fabs(p);
      }
      ref.y[t * rows + r] = sum;
      ref.scale[t * rows + r] = scale;
    }
  }
  return ref;
}

// Worst |a - b| / scale over all elements, with its place, for failure messages.
struct Deviation {
  double ratio = 0;
  int64_t t = 0, r = 0;
  double a = 0, b = 0;
};

Deviation WorstDeviation(const std::vector<float>& a, const std::vector<double>& b,
                         const std::vector<double>& scale, int64_t rows) {
  Deviation worst;
  for (size_t i = 0; i < a.size(); ++i) {
    const double ratio = std::isfinite(a[i]) ? std::fabs(a[i] - b[i]) / scale[i] : INFINITY;
    if (!(ratio <= worst.ratio)) {
      worst = {ratio, static_cast<int64_t>(i) / rows, static_cast<int64_t>(i) % rows, a[i], b[i]};
    }
  }
  return worst;
}

std::ostream& operator<<(std::ostream& os, const Deviation& d) {
  return os << "worst y[t=" << d.t << ", r=" << d.r << "] = " << d.a << " vs " << d.b << " (error "
            << d.ratio << " of sum|x*w|)";
}

// Widths past one dequantized slice (1024 columns) that end in a partial slice, so the
// accumulate-over-slices step and its remainder both run.
std::vector<int64_t> WideColsFor(GgmlType type) {
  const int64_t bs = model::TraitsOf(type).block_size;
  if (bs == 1) return {1024 + 33};
  if (bs == 32) return {1024 + 96};
  return {1024 + 256, 2048 + 256};
}

// The SIMD families only: each is compared with the scalar family on the same inputs.
class MatMulSimdTest : public testing::TestWithParam<std::tuple<GgmlType, std::string>> {
 protected:
  void SetUp() override {
    if (!SetMatMulIsa(std::get<1>(GetParam()))) {
      GTEST_SKIP() << "this CPU has no " << std::get<1>(GetParam());
    }
  }
  void TearDown() override { SetMatMulForceScalar(false); }
};

// Token counts on both sides of every switch in MatMul: the fused kernels (up to 2 tokens on
// AVX2, 4 on AVX-512), the few-token tile height (up to 4), the micro-kernel's token blocks (4
// and 6), and enough tokens to be split across the pool (2 x 24 and more) with odd remainders;
// rows on both sides of the 16-row fused unit and the 64-row tile.
TEST_P(MatMulSimdTest, AgreesWithScalarFamilyAndReferenceAcrossPathBoundaries) {
  const GgmlType type = std::get<0>(GetParam());
  const std::string isa = std::get<1>(GetParam());
  ThreadPool pool(3);
  std::mt19937 rng(static_cast<uint32_t>(type) * 104729 + 7);
  std::vector<int64_t> cols_list = ColsFor(type);
  for (int64_t wide : WideColsFor(type)) cols_list.push_back(wide);
  for (int64_t cols : cols_list) {
    for (int64_t rows : {1, 17, 67}) {
      const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
      std::vector<float> wf(rows * cols);
      ASSERT_TRUE(model::Dequantize(type, wq, rows * cols, wf.data()).ok());
      const WeightMatrix w{type, wq.data(), rows, cols};
      for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 25, 49, 100}) {
        const std::vector<float> x = RandomActivations(tokens * cols, rng);
        std::vector<float> y_simd(tokens * rows, std::nanf(""));
        std::vector<float> y_scalar(tokens * rows, std::nanf(""));
        ASSERT_TRUE(SetMatMulIsa(isa));
        MatMul(w, x.data(), tokens, y_simd.data(), &pool);
        ASSERT_TRUE(SetMatMulIsa("scalar"));
        MatMul(w, x.data(), tokens, y_scalar.data(), &pool);
        const Reference ref = ReferenceProduct(wf, x.data(), rows, cols, tokens);
        const double tol = Fp32Tolerance(cols);
        const std::string where = std::string(model::GgmlTypeName(type)) + " [" +
                                  std::to_string(rows) + " x " + std::to_string(cols) + "] x " +
                                  std::to_string(tokens) + " tokens: ";
        ASSERT_LE(WorstDeviation(y_simd, ref.y, ref.scale, rows).ratio, tol)
            << where << isa << " vs float64: " << WorstDeviation(y_simd, ref.y, ref.scale, rows);
        ASSERT_LE(WorstDeviation(y_scalar, ref.y, ref.scale, rows).ratio, tol)
            << where << "scalar vs float64: " << WorstDeviation(y_scalar, ref.y, ref.scale, rows);
        // Both within tol of the reference, hence within 2 tol of each other; checked directly
        // so a failure shows the pair.
        const std::vector<double> scalar_as_double(y_scalar.begin(), y_scalar.end());
        ASSERT_LE(WorstDeviation(y_simd, scalar_as_double, ref.scale, rows).ratio, 2 * tol)
            << where << isa
            << " vs scalar: " << WorstDeviation(y_simd, scalar_as_double, ref.scale, rows);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, MatMulSimdTest,
    testing::Combine(testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                     GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                     GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                                     GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                     GgmlType::kQ6_K),
                     testing::Values("avx512", "avx2")),
    [](const testing::TestParamInfo<MatMulSimdTest::ParamType>& info) {
      return std::string(model::GgmlTypeName(std::get<0>(info.param))) + "_" +
             std::get<1>(info.param);
    });

// 64-byte aligned activations with cols a multiple of 16 are used in place (no repacking); the
// weights need no alignment (4 bytes for F32). Both are exercised on purpose here; the sweeps
// above use std::vector buffers, whose activations are repacked unless the allocator happens to
// return a 64-byte boundary, and whose weights are always aligned.
TEST_P(MatMulTest, HandlesAlignedActivationsInPlaceAndUnalignedWeights) {
  const GgmlType type = std::get<0>(GetParam());
  const int64_t bs = model::TraitsOf(type).block_size;
  const std::vector<int64_t> cols_list =
      bs == 1 ? std::vector<int64_t>{16, 1040}
              : (bs == 32 ? std::vector<int64_t>{64, 1056} : std::vector<int64_t>{256, 1280});
  const size_t weight_offset = type == GgmlType::kF32 ? 4 : 1;
  ThreadPool pool(2);
  std::mt19937 rng(static_cast<uint32_t>(type) * 31337 + 3);
  for (int64_t cols : cols_list) {
    for (int64_t rows : {3, 70}) {
      const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
      std::vector<float> wf(rows * cols);
      ASSERT_TRUE(model::Dequantize(type, wq, rows * cols, wf.data()).ok());
      // The same bytes, starting `weight_offset` bytes past a 64-byte boundary.
      std::vector<uint8_t> storage(wq.size() + 64 + weight_offset);
      uint8_t* base = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64);
      uint8_t* shifted = base + weight_offset;
      std::memcpy(shifted, wq.data(), wq.size());
      const WeightMatrix w{type, shifted, rows, cols};
      for (int64_t tokens : {1, 2, 4, 5, 17}) {
        const std::vector<float> xv = RandomActivations(tokens * cols, rng);
        std::vector<float> x_storage(tokens * cols + 16);
        float* x = x_storage.data() +
                   (64 - reinterpret_cast<uintptr_t>(x_storage.data()) % 64) % 64 / sizeof(float);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(x) % 64, 0u);
        std::memcpy(x, xv.data(), xv.size() * sizeof(float));
        std::vector<float> y(tokens * rows, std::nanf(""));
        MatMul(w, x, tokens, y.data(), &pool);
        const Reference ref = ReferenceProduct(wf, x, rows, cols, tokens);
        const Deviation worst = WorstDeviation(y, ref.y, ref.scale, rows);
        ASSERT_LE(worst.ratio, Fp32Tolerance(cols))
            << model::GgmlTypeName(type) << " [" << rows << " x " << cols << "] x " << tokens
            << " tokens (" << MatMulIsa() << "): " << worst;
        // The activations are read, never written.
        ASSERT_EQ(0, std::memcmp(x, xv.data(), xv.size() * sizeof(float)));
      }
    }
  }
}

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
