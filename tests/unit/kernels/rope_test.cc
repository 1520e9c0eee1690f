#include "strata/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "per_token_test_util.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::AllClose;
using test::BitsEqual;
using test::DeviceBuffer;
using test::LaunchSucceeded;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The fp32 angles of the CPU backend's RopeTable (src/backend/cpu/ops.cc), which are the
// contract: theta by repeated fp32 multiplication. (A float64 angle would differ from them by up
// to ~rope_dim/2 ulp times the position, i.e. by whole radians at long contexts.)
std::vector<float> CpuAngles(int64_t pos, int64_t rope_dim, float base, float freq_scale,
                             const float* freq_factors) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(rope_dim));
  std::vector<float> angles(rope_dim / 2);
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const float ff = freq_factors != nullptr ? freq_factors[i] : 1.0f;
    angles[i] = freq_scale * (theta / ff);
    theta *= theta_scale;
  }
  return angles;
}

// Rotation in float64 from the fp32 angles. Also returns, per element, |v0| + |v1| of its pair
// (the scale of the rounding error), 0 for unrotated dimensions.
void Reference(const std::vector<float>& x, int64_t tokens, int64_t heads, int64_t head_dim,
               int64_t rope_dim, RopeStyle style, const std::vector<int64_t>& pos, float base,
               float freq_scale, const float* freq_factors, std::vector<double>* out,
               std::vector<double>* magnitude) {
  out->assign(x.begin(), x.end());
  magnitude->assign(x.size(), 0.0);
  const int64_t half = rope_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> angles = CpuAngles(pos[t], rope_dim, base, freq_scale, freq_factors);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t row = (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = row + (style == RopeStyle::kNeox ? i : 2 * i);
        const int64_t i1 = row + (style == RopeStyle::kNeox ? i + half : 2 * i + 1);
        const double c = std::cos(static_cast<double>(angles[i]));
        const double s = std::sin(static_cast<double>(angles[i]));
        const double x0 = x[i0];
        const double x1 = x[i1];
        (*out)[i0] = x0 * c - x1 * s;
        (*out)[i1] = x0 * s + x1 * c;
        (*magnitude)[i0] = (*magnitude)[i1] = std::fabs(x0) + std::fabs(x1);
      }
    }
  }
}

TEST(RopeThetaScale, IsTheCpuTablesFloatPower) {
  // volatile: the compiler must not fold std::pow at compile time (correctly rounded there,
  // libm's at run time, where the CPU backend calls it).
  volatile float base = 10000.0f;
  volatile float big_base = 1000000.0f;
  EXPECT_EQ(RopeThetaScale(base, 128), std::pow(base, -2.0f / 128.0f));
  EXPECT_EQ(RopeThetaScale(big_base, 64), std::pow(big_base, -2.0f / 64.0f));
  EXPECT_FLOAT_EQ(RopeThetaScale(10000.0f, 2), 1e-4f);
}

struct RopeShape {
  int64_t head_dim;
  int64_t rope_dim;
};

// style, shape, tokens, with freq factors
class RopeSweep : public ::testing::TestWithParam<std::tuple<RopeStyle, RopeShape, int64_t, bool>> {
};

TEST_P(RopeSweep, RotatesQAndKLikeTheCpuTableWithinAFewUlp) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [style, shape, tokens, with_factors] = GetParam();
  const int64_t q_heads = 4, k_heads = 2;
  const float base = 10000.0f, freq_scale = 0.25f;
  const uint32_t seed = static_cast<uint32_t>(shape.head_dim * 131 + shape.rope_dim + tokens);
  std::mt19937 rng(seed);
  std::vector<int64_t> pos(tokens);
  // Long-context positions as well as small ones: the angles then stress the fp32 recipe.
  std::uniform_int_distribution<int64_t> pos_dist(0, 131071);
  for (int64_t t = 0; t < tokens; ++t) pos[t] = t < 3 ? t : pos_dist(rng);
  std::vector<float> factors(shape.rope_dim / 2);
  std::uniform_real_distribution<float> factor_dist(1.0f, 8.0f);
  for (float& f : factors) f = factor_dist(rng);
  const std::vector<float> q = Random(tokens * q_heads * shape.head_dim, seed + 1);
  const std::vector<float> k = Random(tokens * k_heads * shape.head_dim, seed + 2);

  DeviceBuffer<float> d_q(q), d_k(k), d_factors(factors);
  DeviceBuffer<int64_t> d_pos(pos);
  ASSERT_TRUE(d_q.ok() && d_k.ok() && d_factors.ok() && d_pos.ok());
  const float* ff = with_factors ? d_factors.get() : nullptr;
  ASSERT_TRUE(LaunchSucceeded(LaunchRope(d_q.get(), q_heads, d_k.get(), k_heads, d_pos.get(),
                                         tokens, shape.head_dim, shape.rope_dim, style, base,
                                         freq_scale, ff, nullptr)));

  const float* host_ff = with_factors ? factors.data() : nullptr;
  for (const auto& [x, d_x, heads] :
       {std::tuple{&q, &d_q, q_heads}, std::tuple{&k, &d_k, k_heads}}) {
    std::vector<double> want;
    std::vector<double> magnitude;
    Reference(*x, tokens, heads, shape.head_dim, shape.rope_dim, style, pos, base, freq_scale,
              host_ff, &want, &magnitude);
    const std::vector<float> got = d_x->Download();
    // cos/sin rounded to fp32 (half an ulp each) and four rounded products: a few ulp of the
    // pair's magnitude. Unrotated dimensions must be untouched (tolerance 0).
    EXPECT_TRUE(AllClose(got, want, [&](size_t i) { return 1e-6 * magnitude[i]; }))
        << "heads=" << heads;
  }
}

// Names of the RopeSweep cases, spelling out each parameter.
std::string RopeSweepName(const ::testing::TestParamInfo<RopeSweep::ParamType>& info) {
  const auto [style, shape, tokens, factors] = info.param;
  return std::string(style == RopeStyle::kNeox ? "Neox" : "Norm") + "HeadDim" +
         std::to_string(shape.head_dim) + "RopeDim" + std::to_string(shape.rope_dim) + "Tokens" +
         std::to_string(tokens) + (factors ? "FreqFactors" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeSweep,
    ::testing::Combine(::testing::Values(RopeStyle::kNorm, RopeStyle::kNeox),
                       ::testing::Values(RopeShape{2, 2}, RopeShape{6, 4}, RopeShape{64, 64},
                                         RopeShape{128, 128}, RopeShape{128, 64},
                                         RopeShape{256, 256}),
                       ::testing::Values<int64_t>(1, 7, 97), ::testing::Bool()),
    RopeSweepName);

TEST(Rope, PositionZeroIsTheIdentity) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const std::vector<float> q = Random(3 * 128, 5);
  DeviceBuffer<float> d_q(q);
  DeviceBuffer<int64_t> d_pos(std::vector<int64_t>{0});
  ASSERT_TRUE(d_q.ok() && d_pos.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchRope(d_q.get(), 3, nullptr, 0, d_pos.get(), 1, 128, 128,
                                         RopeStyle::kNeox, 10000.0f, 1.0f, nullptr, nullptr)));
  EXPECT_TRUE(BitsEqual(d_q.Download(), q));
}

TEST(Rope, NormAndNeoxPairDifferentDimensions) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // One head of 4 dims, position 1, base 1 (all angles 1 rad): Norm rotates (0,1), (2,3); Neox
  // rotates (0,2), (1,3). With x = e0 the two differ in which dimension receives sin(1).
  const std::vector<float> x = {1, 0, 0, 0};
  DeviceBuffer<int64_t> d_pos(std::vector<int64_t>{1});
  for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox}) {
    DeviceBuffer<float> d_x(x);
    ASSERT_TRUE(d_x.ok() && d_pos.ok());
    ASSERT_TRUE(LaunchSucceeded(LaunchRope(d_x.get(), 1, nullptr, 0, d_pos.get(), 1, 4, 4, style,
                                           1.0f, 1.0f, nullptr, nullptr)));
    const std::vector<float> got = d_x.Download();
    const int sin_dim = style == RopeStyle::kNorm ? 1 : 2;
    EXPECT_NEAR(got[0], std::cos(1.0), 1e-7);
    EXPECT_NEAR(got[sin_dim], std::sin(1.0), 1e-7);
    EXPECT_EQ(got[3 - sin_dim], 0.0f);
    EXPECT_EQ(got[3], 0.0f);
  }
}

TEST(Rope, RefusesOddOrOversizedRopeDims) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> x(64);
  DeviceBuffer<int64_t> pos(std::vector<int64_t>{0});
  ASSERT_TRUE(x.ok() && pos.ok());
  float* p = x.get();
  const int64_t* ps = pos.get();
  EXPECT_EQ(LaunchRope(p, 1, nullptr, 0, ps, 1, 8, 7, RopeStyle::kNorm, 1e4f, 1, nullptr, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchRope(p, 1, nullptr, 0, ps, 1, 8, 10, RopeStyle::kNorm, 1e4f, 1, nullptr, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchRope(p, 1, nullptr, 2, ps, 1, 8, 8, RopeStyle::kNorm, 1e4f, 1, nullptr, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchRope(p, 1, nullptr, 0, ps, 1, 8, 8, RopeStyle::kNorm, 0.0f, 1, nullptr, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchRope(p, 1, nullptr, 0, ps, 1, 8, 0, RopeStyle::kNorm, 1e4f, 1, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace strata::kernels
