#include "strata/sampling/deterministic_exp.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::sampling {
namespace {

TEST(DeterministicExp, IsWithinAFewUlpOfExpOnItsDomain) {
  double worst = 0.0;
  float worst_at = 0.0f;
  float previous = 1.0f;
  // A fine grid over [-87, 0] plus the values near 0.
  for (int i = 0; i <= 2'000'000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 2'000'000.0f;
    const float got = DeterministicExp(x);
    const double want = std::exp(static_cast<double>(x));
    const double relative = std::fabs(got - want) / want;
    if (relative > worst) {
      worst = relative;
      worst_at = x;
    }
    ASSERT_LE(got, previous) << "not monotone at " << x;
    previous = got;
  }
  for (float x = -1e-30f; x > -1e-3f; x *= 3.0f) {
    EXPECT_NEAR(DeterministicExp(x), std::exp(static_cast<double>(x)), 1.2e-7) << x;
  }
  EXPECT_LT(worst, 2.4e-7) << "at " << worst_at;  // 4 ulp at 2^-24 relative
}

TEST(DeterministicExp, HandlesTheEnds) {
  EXPECT_EQ(DeterministicExp(0.0f), 1.0f);
  EXPECT_EQ(DeterministicExp(-0.0f), 1.0f);
  EXPECT_EQ(DeterministicExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(DeterministicExp(-87.5f), 0.0f);
  EXPECT_EQ(DeterministicExp(-1e30f), 0.0f);
  EXPECT_GE(DeterministicExp(-87.0f), std::numeric_limits<float>::min());  // still normal
}

// Pinned bit patterns: the weights, and so every seeded draw, must not change with the
// compiler or the machine (given -ffp-contract=off; see the header).
TEST(DeterministicExp, GivesPinnedBits) {
  struct Pin {
    float x;
    uint32_t bits;
  };
  for (const Pin& pin : {Pin{-0.5f, 0x3F1B4598u}, Pin{-1.0f, 0x3EBC5AB2u}, Pin{-3.25f, 0x3D1ED1B4u},
                         Pin{-20.0f, 0x310DA433u}, Pin{-86.9f, 0x00C60F89u}}) {
    EXPECT_EQ(std::bit_cast<uint32_t>(DeterministicExp(pin.x)), pin.bits) << pin.x;
  }
}

}  // namespace
}  // namespace strata::sampling
