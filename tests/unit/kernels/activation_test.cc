#include "strata/kernels/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "per_token_test_util.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::AllClose;
using test::DeviceBuffer;
using test::LaunchSucceeded;

// The exact functions in float64 (GELU in its tanh approximation, which is the model's
// definition; its sigmoid form avoids cancellation for negative inputs).
double GeluTanh(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// Gate values: normal, plus the awkward ones (zero, both signs of large, where exp saturates).
std::vector<float> Gates(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  const float specials[] = {0.0f,  -0.0f, 1e-20f, -1e-20f, 5.0f,    -5.0f, 9.0f,
                            -9.0f, 20.0f, -20.0f, 100.0f,  -100.0f, 1e20f, -1e20f};
  for (size_t i = 0; i < n && i < std::size(specials); ++i) v[(i * 7919) % n] = specials[i];
  return v;
}

enum class Layout { kSeparate, kSeparateOverGate, kFusedHalves };

// activation, layout, tokens, n
class GatedActivationSweep
    : public ::testing::TestWithParam<std::tuple<GatedActivation, Layout, int64_t, int64_t>> {};

TEST_P(GatedActivationSweep, MatchesFloat64Reference) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [act, layout, tokens, n] = GetParam();
  const uint32_t seed = static_cast<uint32_t>(tokens * 7777 + n);
  const std::vector<float> gate = Gates(tokens * n, seed);
  std::mt19937 rng(seed + 1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> up(tokens * n);
  for (float& u : up) u = dist(rng);

  std::vector<float> got;
  if (layout == Layout::kFusedHalves) {
    // One [tokens, 2n] buffer: gate in the first half of each row, up in the second.
    std::vector<float> fused(tokens * 2 * n);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        fused[t * 2 * n + i] = gate[t * n + i];
        fused[t * 2 * n + n + i] = up[t * n + i];
      }
    }
    DeviceBuffer<float> d_fused(fused), d_out(tokens * n);
    ASSERT_TRUE(d_fused.ok() && d_out.ok());
    ASSERT_TRUE(LaunchSucceeded(LaunchGatedActivation(act, d_fused.get(), 2 * n, d_fused.get() + n,
                                                      2 * n, d_out.get(), n, tokens, n, nullptr)));
    got = d_out.Download();
  } else {
    DeviceBuffer<float> d_gate(gate), d_up(up), d_out(tokens * n);
    ASSERT_TRUE(d_gate.ok() && d_up.ok() && d_out.ok());
    float* out = layout == Layout::kSeparateOverGate ? d_gate.get() : d_out.get();
    ASSERT_TRUE(LaunchSucceeded(
        LaunchGatedActivation(act, d_gate.get(), n, d_up.get(), n, out, n, tokens, n, nullptr)));
    got = layout == Layout::kSeparateOverGate ? d_gate.Download() : d_out.Download();
  }

  std::vector<double> want(tokens * n);
  std::vector<double> exp_arg(tokens * n);  // |argument of the exponential|
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = act == GatedActivation::kGeluTanh ? GeluTanh(gate[i]) : Silu(gate[i]);
    want[i] = a * up[i];
    const double x = gate[i];
    exp_arg[i] =
        act == GatedActivation::kGeluTanh
            ? std::fabs(2.0 * std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x))
            : std::fabs(x);
  }
  // fp32 with expf (2 ulp): a few ulp of the result, plus the argument's own rounding (about two
  // ulp of it, for GELU's computed u) amplified by the exponential: 3e-7 * |arg| relative. Below
  // ~1e-35 the result is subnormal or flushed to zero by exp's overflow.
  // (A zero result, from exp overflowing to infinity, is held to the absolute bound only.)
  EXPECT_TRUE(AllClose(got, want, [&](size_t i) {
    return want[i] == 0 ? 1e-35 : (6e-7 + 3e-7 * exp_arg[i]) * std::fabs(want[i]) + 1e-35;
  }));
}

// Names of the GatedActivationSweep cases, spelling out each parameter.
std::string GatedActivationSweepName(
    const ::testing::TestParamInfo<GatedActivationSweep::ParamType>& info) {
  const auto [act, layout, tokens, n] = info.param;
  const char* layouts[] = {"Separate", "SeparateOverGate", "FusedHalves"};
  return std::string(act == GatedActivation::kGeluTanh ? "GeluTanh" : "Silu") +
         layouts[static_cast<int>(layout)] + "Tokens" + std::to_string(tokens) + "N" +
         std::to_string(n);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatedActivationSweep,
    ::testing::Combine(::testing::Values(GatedActivation::kGeluTanh, GatedActivation::kSilu),
                       ::testing::Values(Layout::kSeparate, Layout::kSeparateOverGate,
                                         Layout::kFusedHalves),
                       ::testing::Values<int64_t>(1, 7, 33),
                       ::testing::Values<int64_t>(1, 7, 97, 1025)),
    GatedActivationSweepName);

TEST(GatedActivation, SiluIsWithinFiveUlpOfTheExactFunction) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // SiLU's exponent argument is exact, so only expf (2 ulp) and three roundings remain.
  const int64_t n = 4096;
  std::vector<float> gate(n);
  for (int64_t i = 0; i < n; ++i) gate[i] = -8.0f + 16.0f * static_cast<float>(i) / n;
  const std::vector<float> up(n, 1.0f);
  DeviceBuffer<float> d_gate(gate), d_up(up), d_out(n);
  ASSERT_TRUE(d_gate.ok() && d_up.ok() && d_out.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchGatedActivation(GatedActivation::kSilu, d_gate.get(), n,
                                                    d_up.get(), n, d_out.get(), n, 1, n, nullptr)));
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = Silu(gate[i]);
  EXPECT_TRUE(AllClose(d_out.Download(), want,
                       [&](size_t i) { return 6e-7 * std::fabs(want[i]) + 1e-38; }));
}

TEST(GatedActivation, RefusesStridesShorterThanTheRow) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> buf(64);
  ASSERT_TRUE(buf.ok());
  float* p = buf.get();
  const auto kSilu = GatedActivation::kSilu;
  EXPECT_EQ(LaunchGatedActivation(kSilu, p, 7, p, 8, p, 8, 2, 8, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchGatedActivation(kSilu, p, 8, p, 8, p, 7, 2, 8, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchGatedActivation(kSilu, p, 8, p, 8, p, 8, -1, 8, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchGatedActivation(kSilu, p, 8, p, 8, p, 8, 0, 8, nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
