#include "strata/kernels/rms_norm.h"

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
using test::Random;

// Rows of the float64 reference: out = v / sqrt(mean(v^2) + eps) * w with v the fp32 input
// (after the fp32 residual add, which the kernel stores and so is part of the contract).
std::vector<double> Reference(const std::vector<float>& v, const std::vector<float>& w,
                              int64_t rows, int64_t n, float eps) {
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[r * n + i]) * v[r * n + i];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(n) + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = v[r * n + i] * inv * w[i];
  }
  return out;
}

TEST(RmsNormThreads, AboutFourElementsPerThreadInWholeWarpsUpTo1024) {
  EXPECT_EQ(RmsNormThreads(1), 32);
  EXPECT_EQ(RmsNormThreads(128), 32);
  EXPECT_EQ(RmsNormThreads(129), 64);
  EXPECT_EQ(RmsNormThreads(640), 160);
  EXPECT_EQ(RmsNormThreads(4096), 1024);
  EXPECT_EQ(RmsNormThreads(int64_t{1} << 30), 1024);
  for (int64_t n : {1, 7, 97, 1000, 5000}) EXPECT_EQ(RmsNormThreads(n) % 32, 0) << n;
}

enum class Mode { kPlain, kPlainInPlace, kResidual, kResidualInPlace };

// rows, n, mode
class RmsNormSweep : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, Mode>> {};

TEST_P(RmsNormSweep, MatchesFloat64ReferenceAndWritesTheResidualSumBack) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [rows, n, mode] = GetParam();
  const bool residual = mode == Mode::kResidual || mode == Mode::kResidualInPlace;
  const bool in_place = mode == Mode::kPlainInPlace || mode == Mode::kResidualInPlace;
  const float eps = 1e-6f;
  const uint32_t seed = static_cast<uint32_t>(rows * 1000 + n);
  std::vector<float> x = Random(rows * n, 2.0f, seed);
  const std::vector<float> res = Random(rows * n, 0.5f, seed + 1);
  const std::vector<float> w = Random(n, 1.0f, seed + 2);

  DeviceBuffer<float> d_x(x), d_res(res), d_w(w), d_out(rows * n);
  ASSERT_TRUE(d_x.ok() && d_res.ok() && d_w.ok() && d_out.ok());
  float* out = in_place ? d_x.get() : d_out.get();
  ASSERT_TRUE(LaunchSucceeded(LaunchRmsNorm(d_x.get(), residual ? d_res.get() : nullptr, d_w.get(),
                                            out, rows, n, eps, nullptr)));

  std::vector<float> sum = x;
  if (residual) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = x[i] + res[i];  // fp32, as stored
  }
  const std::vector<double> want = Reference(sum, w, rows, n, eps);
  const std::vector<float> got = in_place ? d_x.Download() : d_out.Download();
  // fp32: the scale and two products each round once (a few ulp), well inside 1e-5.
  EXPECT_TRUE(AllClose(got, want, [&](size_t i) { return 1e-5 * std::fabs(want[i]) + 1e-30; }));
  if (!in_place) {
    // x holds x + residual (bit for bit) with a residual, x unchanged without.
    EXPECT_TRUE(BitsEqual(d_x.Download(), sum));
  }
}

// Names of the RmsNormSweep cases, spelling out each parameter.
std::string RmsNormSweepName(const ::testing::TestParamInfo<RmsNormSweep::ParamType>& info) {
  const auto [rows, n, mode] = info.param;
  const char* names[] = {"Plain", "PlainInPlace", "Residual", "ResidualInPlace"};
  return "Rows" + std::to_string(rows) + "N" + std::to_string(n) + names[static_cast<int>(mode)];
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormSweep,
                         ::testing::Combine(::testing::Values<int64_t>(1, 7, 33),
                                            ::testing::Values<int64_t>(1, 7, 97, 128, 640, 4097),
                                            ::testing::Values(Mode::kPlain, Mode::kPlainInPlace,
                                                              Mode::kResidual,
                                                              Mode::kResidualInPlace)),
                         RmsNormSweepName);

TEST(RmsNorm, PerHeadNormOfAQTensorIsOneCallOverTokensTimesHeads) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t tokens = 5, heads = 4, head_dim = 256;
  const std::vector<float> q = Random(tokens * heads * head_dim, 3.0f, 11);
  const std::vector<float> w = Random(head_dim, 1.0f, 12);
  DeviceBuffer<float> d_q(q), d_w(w);
  ASSERT_TRUE(d_q.ok() && d_w.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchRmsNorm(d_q.get(), nullptr, d_w.get(), d_q.get(),
                                            tokens * heads, head_dim, 1e-6f, nullptr)));
  const std::vector<double> want = Reference(q, w, tokens * heads, head_dim, 1e-6f);
  const std::vector<float> got = d_q.Download();
  EXPECT_TRUE(AllClose(got, want, [&](size_t i) { return 1e-5 * std::fabs(want[i]) + 1e-30; }));
}

TEST(RmsNorm, MoreRowsThanTheGridStillCoversEveryRow) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // 2^20 blocks is the grid cap: the rows after it come from the grid-stride loop, which reuses
  // the reduction's shared scratch.
  const int64_t rows = (int64_t{1} << 20) + 37, n = 3;
  const std::vector<float> x = Random(rows * n, 1.0f, 21);
  const std::vector<float> w = Random(n, 1.0f, 22);
  DeviceBuffer<float> d_x(x), d_w(w), d_out(rows * n);
  ASSERT_TRUE(d_x.ok() && d_w.ok() && d_out.ok());
  ASSERT_TRUE(LaunchSucceeded(
      LaunchRmsNorm(d_x.get(), nullptr, d_w.get(), d_out.get(), rows, n, 1e-5f, nullptr)));
  const std::vector<double> want = Reference(x, w, rows, n, 1e-5f);
  const std::vector<float> got = d_out.Download();
  EXPECT_TRUE(AllClose(got, want, [&](size_t i) { return 1e-5 * std::fabs(want[i]) + 1e-30; }));
}

TEST(RmsNorm, EpsilonDominatesAZeroRow) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // A zero row normalises to zero (not NaN): the scale is 1 / sqrt(eps).
  const int64_t n = 64;
  std::vector<float> x(n, 0.0f);
  x[3] = 1e-4f;
  const std::vector<float> w(n, 2.0f);
  DeviceBuffer<float> d_x(x), d_w(w), d_out(n);
  ASSERT_TRUE(d_x.ok() && d_w.ok() && d_out.ok());
  ASSERT_TRUE(LaunchSucceeded(
      LaunchRmsNorm(d_x.get(), nullptr, d_w.get(), d_out.get(), 1, n, 1e-2f, nullptr)));
  const std::vector<double> want = Reference(x, w, 1, n, 1e-2f);
  const std::vector<float> got = d_out.Download();
  EXPECT_TRUE(AllClose(got, want, [&](size_t i) { return 1e-5 * std::fabs(want[i]) + 1e-30; }));
  EXPECT_NEAR(got[3], 1e-4 * 10.0 * 2.0, 1e-9);
}

TEST(RmsNorm, RefusesEmptyOrOversizedRowsWithoutLaunching) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> buf(16);
  ASSERT_TRUE(buf.ok());
  float* p = buf.get();
  EXPECT_EQ(LaunchRmsNorm(p, nullptr, p, p, 1, 0, 1e-6f, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, nullptr, p, p, -1, 4, 1e-6f, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, nullptr, p, p, 1, int64_t{1} << 31, 1e-6f, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, nullptr, nullptr, p, 1, 4, 1e-6f, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, nullptr, p, p, 0, 4, 1e-6f, nullptr), 0);  // nothing to do
}

}  // namespace
}  // namespace strata::kernels
