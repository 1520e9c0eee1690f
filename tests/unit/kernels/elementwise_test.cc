#include "strata/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "per_token_test_util.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::AllClose;
using test::BitsEqual;
using test::DeviceBuffer;
using test::LaunchSucceeded;
using test::Random;

// Sizes: 1, odd, one past a block of 256 threads, and a few million.
class ElementwiseSizes : public ::testing::TestWithParam<int64_t> {};

// fp32 add and multiply round once on both sides, so the host's float results are the exact
// expectation (the float64 reference rounded to fp32).
TEST_P(ElementwiseSizes, AddInPlaceIsTheFp32Sum) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = GetParam();
  const std::vector<float> x = Random(n, 10.0f, 1), y = Random(n, 0.1f, 2);
  DeviceBuffer<float> d_x(x), d_y(y);
  ASSERT_TRUE(d_x.ok() && d_y.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchAddInPlace(d_x.get(), d_y.get(), n, nullptr)));
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(double{x[i]} + double{y[i]});
  EXPECT_TRUE(BitsEqual(d_x.Download(), want));
  EXPECT_TRUE(BitsEqual(d_y.Download(), y));  // y untouched
}

TEST_P(ElementwiseSizes, ScaleInPlaceIsTheFp32Product) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = GetParam();
  const std::vector<float> x = Random(n, 3.0f, 3);
  const float s = 0.0883883476f;  // 1 / sqrt(128)
  DeviceBuffer<float> d_x(x);
  ASSERT_TRUE(d_x.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchScaleInPlace(d_x.get(), s, n, nullptr)));
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(double{x[i]} * double{s});
  EXPECT_TRUE(BitsEqual(d_x.Download(), want));
}

TEST_P(ElementwiseSizes, SoftCapMatchesFloat64ToAboutAnUlp) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t n = GetParam();
  std::vector<float> x = Random(n, 40.0f, 4);
  x[0] = 1e30f;  // saturates at +cap
  if (n > 1) x[1] = -1e-30f;
  const float cap = 30.0f;
  DeviceBuffer<float> d_x(x);
  ASSERT_TRUE(d_x.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchSoftCapInPlace(d_x.get(), cap, n, nullptr)));
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = cap * std::tanh(double{x[i]} / cap);
  // x / cap and the final product round once each, tanh once (its slope is at most 1): 2e-7.
  EXPECT_TRUE(AllClose(d_x.Download(), want,
                       [&](size_t i) { return 2.5e-7 * std::fabs(want[i]) + 1e-40; }));
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseSizes,
                         ::testing::Values<int64_t>(1, 7, 97, 257, (int64_t{1} << 22) + 5));

TEST(ScaleInPlace, CoversMoreElementsThanOneLapOfTheGrid) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // The grid is capped at 2^20 blocks of 256 threads: elements past 2^28 come from the
  // grid-stride loop's second lap.
  const int64_t n = (int64_t{1} << 28) + 3;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) - 500.0f;
  DeviceBuffer<float> d_x(x);
  ASSERT_TRUE(d_x.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchScaleInPlace(d_x.get(), 0.5f, n, nullptr)));
  for (float& v : x) v *= 0.5f;
  EXPECT_TRUE(BitsEqual(d_x.Download(), x));
}

TEST(AddInPlace, AddsAVectorToItself) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> x = Random(1000, 1.0f, 5);
  DeviceBuffer<float> d_x(x);
  ASSERT_TRUE(d_x.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchAddInPlace(d_x.get(), d_x.get(), 1000, nullptr)));
  std::vector<float> want(x);
  for (float& w : want) w *= 2.0f;
  EXPECT_TRUE(BitsEqual(d_x.Download(), want));
}

TEST(AddBiasInPlace, AddsTheBiasToEveryRow) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  for (int64_t rows : {1, 7, 97}) {
    for (int64_t n : {1, 7, 896, 1025}) {
      const std::vector<float> x = Random(rows * n, 2.0f, static_cast<uint32_t>(rows + n));
      const std::vector<float> bias = Random(n, 1.0f, static_cast<uint32_t>(rows * n));
      DeviceBuffer<float> d_x(x), d_bias(bias);
      ASSERT_TRUE(d_x.ok() && d_bias.ok());
      ASSERT_TRUE(LaunchSucceeded(LaunchAddBiasInPlace(d_x.get(), d_bias.get(), rows, n, nullptr)));
      std::vector<float> want(rows * n);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < n; ++i) want[r * n + i] = x[r * n + i] + bias[i];
      }
      EXPECT_TRUE(BitsEqual(d_x.Download(), want)) << "rows=" << rows << " n=" << n;
    }
  }
}

TEST(SoftCapInPlace, RefusesACapThatIsNotPositiveAndFinite) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> x(8);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(LaunchSoftCapInPlace(x.get(), 0.0f, 8, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchSoftCapInPlace(x.get(), -30.0f, 8, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchSoftCapInPlace(x.get(), std::numeric_limits<float>::infinity(), 8, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchSoftCapInPlace(x.get(), std::numeric_limits<float>::quiet_NaN(), 8, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchAddInPlace(x.get(), x.get(), -1, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchScaleInPlace(x.get(), 2.0f, 0, nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
