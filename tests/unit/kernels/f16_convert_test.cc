#include "strata/kernels/f16_convert.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "strata/model/fp16.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

// Values over fp16's whole normal range and below it (where lo becomes subnormal or zero).
std::vector<float> SpreadValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-30.0f, 15.0f);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) {
    v = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
    if (rng() & 1) v = -v;
  }
  if (n > 0) x[0] = 0.0f;
  return x;
}

TEST(SplitToF16Kernel, HiAndLoAreTheRoundedScaledValueAndItsRoundedRemainder) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  for (float scale : {1.0f, 0.015625f}) {
    for (int64_t n : {1, 7, 97, 100003}) {
      const std::string what = "scale=" + std::to_string(scale) + " n=" + std::to_string(n);
      std::vector<float> x = SpreadValues(n, static_cast<uint32_t>(n));
      // Beyond fp16's range unscaled, within it at 1/64.
      if (scale < 1.0f && n > 2) {
        x[1] = 1.0e6f;
        x[2] = -3.0e6f;
      }
      test::DeviceBuffer<float> d_x(x);
      test::DeviceBuffer<uint16_t> d_hi(static_cast<size_t>(n));
      test::DeviceBuffer<uint16_t> d_lo(static_cast<size_t>(n));
      ASSERT_TRUE(d_x.ok() && d_hi.ok() && d_lo.ok());
      ASSERT_EQ(LaunchSplitToF16(d_x.get(), n, scale, d_hi.get(), d_lo.get(), nullptr), 0);
      const std::vector<uint16_t> hi = d_hi.Download();
      const std::vector<uint16_t> lo = d_lo.Download();
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] * scale;  // exact: a power of two
        const uint16_t want_hi = model::FloatToFp16(v);
        ASSERT_EQ(hi[i], want_hi) << what << " element " << i << " x=" << x[i];
        const float rest = v - model::Fp16ToFloat(want_hi);  // exact in fp32
        ASSERT_EQ(lo[i], model::FloatToFp16(rest)) << what << " element " << i;
        // (hi + lo) / scale carries x to ~22 bits, or to 2^-25 / scale absolute at worst.
        const double sum = (static_cast<double>(model::Fp16ToFloat(hi[i])) +
                            static_cast<double>(model::Fp16ToFloat(lo[i]))) /
                           scale;
        const double err = std::fabs(sum - static_cast<double>(x[i]));
        const double bound =
            std::ldexp(std::fabs(static_cast<double>(x[i])), -21) + std::ldexp(1.0, -25) / scale;
        ASSERT_LE(err, bound) << what << " element " << i << " x=" << x[i] << " sum=" << sum;
      }
      // Without lo only hi is written.
      ASSERT_EQ(LaunchSplitToF16(d_x.get(), n, scale, d_hi.get(), nullptr, nullptr), 0);
      EXPECT_EQ(d_hi.Download(), hi) << what;
    }
  }
}

TEST(SplitToF16Kernel, RefusesBadArgumentsWithoutLaunching) {
  // These return before any CUDA call, so they hold on machines without a device too.
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  float x[4] = {};
  uint16_t out[8];
  EXPECT_EQ(LaunchSplitToF16(x, -1, 1.0f, out, out + 4, nullptr), kInvalid);
  EXPECT_EQ(LaunchSplitToF16(nullptr, 4, 1.0f, out, out + 4, nullptr), kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 4, 1.0f, nullptr, out, nullptr), kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 4, 1.0f, reinterpret_cast<uint8_t*>(out) + 1, nullptr, nullptr),
            kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 4, 0.0f, out, out + 4, nullptr), kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 4, -1.0f, out, out + 4, nullptr), kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 4, std::numeric_limits<float>::infinity(), out, out + 4, nullptr),
            kInvalid);
  EXPECT_EQ(LaunchSplitToF16(x, 0, 1.0f, out, out + 4, nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
