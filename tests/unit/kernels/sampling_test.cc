#include "strata/kernels/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "strata/sampling/deterministic_exp.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Normal logits (sigma 3) with a few masked (-inf) and NaN entries.
std::vector<float> RandomLogits(int64_t vocab, uint32_t seed, bool holes = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (auto& v : logits) v = dist(rng);
  if (holes && vocab > 4) {
    for (int i = 0; i < 3; ++i) logits[rng() % vocab] = -kInf;
    logits[rng() % vocab] = kNan;
  }
  return logits;
}

float Clean(float v) { return std::isnan(v) ? -kInf : v; }

int32_t ReferenceArgMax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (Clean(logits[i]) > Clean(logits[static_cast<size_t>(best)])) best = static_cast<int32_t>(i);
  }
  return best;
}

// The sampler's filtered distribution in float64 (sampler.h): the kept ids in ascending order
// with their weights, plus what the choice of top_p needs.
struct Distribution {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total = 0.0;
};

std::vector<float> Weights(const std::vector<float>& logits, float temperature) {
  float max = -kInf;
  for (float v : logits) max = std::max(max, Clean(v));
  const float inv_t = 1.0f / temperature;
  std::vector<float> w(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    w[i] = sampling::DeterministicExp((Clean(logits[i]) - max) * inv_t);
  }
  return w;
}

// Ids kept by top_k and min_p, canonically ordered (weight descending, ties to the lower id);
// *top_k_total gets the mass top_k keeps.
std::vector<int32_t> TopKMinP(const std::vector<float>& logits, const std::vector<float>& w,
                              const DeviceSamplingParams& p, double* top_k_total) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return Clean(logits[a]) > Clean(logits[b]); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) ids.resize(p.top_k);
  *top_k_total = 0.0;
  for (int32_t id : ids) *top_k_total += w[id];
  std::vector<int32_t> kept;
  for (int32_t id : ids) {
    if (w[id] >= p.min_p) kept.push_back(id);
  }
  std::stable_sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
  return kept;
}

Distribution Reference(const std::vector<float>& logits, const DeviceSamplingParams& p) {
  const std::vector<float> w = Weights(logits, p.temperature);
  double top_k_total = 0.0;
  std::vector<int32_t> kept = TopKMinP(logits, w, p, &top_k_total);
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * top_k_total;
    double acc = 0.0;
    for (size_t i = 0; i < kept.size(); ++i) {
      acc += w[kept[i]];
      if (acc >= target) {
        kept.resize(i + 1);
        break;
      }
    }
  }
  std::sort(kept.begin(), kept.end());
  Distribution d;
  for (int32_t id : kept) {
    d.ids.push_back(id);
    d.weights.push_back(w[id]);
    d.total += w[id];
  }
  return d;
}

// A top_p that keeps exactly `keep` (>= 1) of the top_k/min_p survivors, halfway between two
// cumulative boundaries so that rounding cannot move the cut.
float TopPKeeping(const std::vector<float>& logits, const DeviceSamplingParams& p, size_t keep) {
  const std::vector<float> w = Weights(logits, p.temperature);
  double top_k_total = 0.0;
  const std::vector<int32_t> kept = TopKMinP(logits, w, p, &top_k_total);
  keep = std::min(keep, kept.size());
  double before = 0.0;
  for (size_t i = 0; i + 1 < keep; ++i) before += w[kept[i]];
  return static_cast<float>((before + 0.5 * w[kept[keep - 1]]) / top_k_total);
}

// The u that draws the n-th kept token (in id order) from the middle of its CDF interval.
double UFor(const Distribution& d, size_t n) {
  double before = 0.0;
  for (size_t i = 0; i < n; ++i) before += d.weights[i];
  return (before + 0.5 * d.weights[n]) / d.total;
}

std::vector<int32_t> ArgMaxOnDevice(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                                    int64_t ld) {
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
  EXPECT_TRUE(d_logits.ok() && d_tokens.ok());
  EXPECT_EQ(LaunchArgMax(d_logits.get(), rows, vocab, ld, d_tokens.get(), nullptr), 0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return d_tokens.Download();
}

// Samples every row of `logits` ([rows, vocab]) with its own params.
std::vector<int32_t> SampleOnDevice(const std::vector<float>& logits, int64_t vocab,
                                    const std::vector<DeviceSamplingParams>& params) {
  const auto rows = static_cast<int64_t>(params.size());
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
  DeviceBuffer<uint8_t> d_params(static_cast<size_t>(rows) * sizeof(DeviceSamplingParams));
  EXPECT_TRUE(d_logits.ok() && d_tokens.ok() && d_params.ok());
  EXPECT_EQ(cudaMemcpy(d_params.get(), params.data(), rows * sizeof(DeviceSamplingParams),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(LaunchSample(d_logits.get(), rows, vocab, vocab,
                         reinterpret_cast<const DeviceSamplingParams*>(d_params.get()),
                         d_tokens.get(), nullptr),
            0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return d_tokens.Download();
}

// `rows` copies of one row of logits.
std::vector<float> Repeat(const std::vector<float>& row, size_t rows) {
  std::vector<float> out;
  for (size_t r = 0; r < rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

TEST(DeviceArgMax, MatchesTheGreedyRuleOnRandomRowsWithAStride) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  for (int64_t vocab : {1, 7, 97, 1025, 4097, 262144}) {
    const int64_t rows = 5;
    const int64_t ld = vocab + 5;
    std::vector<float> logits;
    std::vector<int32_t> want;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row = RandomLogits(vocab, static_cast<uint32_t>(vocab * 10 + r));
      want.push_back(ReferenceArgMax(row));
      row.resize(static_cast<size_t>(ld), 1e30f);  // padding beyond vocab is never read
      logits.insert(logits.end(), row.begin(), row.end());
    }
    EXPECT_EQ(ArgMaxOnDevice(logits, rows, vocab, ld), want) << "vocab " << vocab;
  }
}

TEST(DeviceArgMax, TiesGoToTheLowestIdAndNanCountsAsMinusInfinity) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t vocab = 5000;
  std::vector<std::vector<float>> rows;
  std::vector<int32_t> want;
  std::vector<float> tie(vocab, 0.5f);
  tie[4000] = 2.0f;
  tie[1234] = 2.0f;
  tie[3999] = 2.0f;
  rows.push_back(tie);
  want.push_back(1234);
  std::vector<float> all_equal(vocab, -3.0f);
  rows.push_back(all_equal);
  want.push_back(0);
  std::vector<float> nans(vocab, kNan);
  nans[77] = -1e30f;
  rows.push_back(nans);
  want.push_back(77);
  rows.push_back(std::vector<float>(vocab, -kInf));
  want.push_back(0);
  rows.push_back(std::vector<float>(vocab, kNan));
  want.push_back(0);
  std::vector<float> zeros(vocab, -1.0f);
  zeros[900] = -0.0f;
  zeros[300] = 0.0f;
  rows.push_back(zeros);
  want.push_back(300);
  std::vector<float> logits;
  for (const auto& row : rows) logits.insert(logits.end(), row.begin(), row.end());
  EXPECT_EQ(ArgMaxOnDevice(logits, static_cast<int64_t>(rows.size()), vocab, vocab), want);
}

TEST(DeviceSample, TemperatureZeroTopKOneAndInfiniteLogitsAreGreedy) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t vocab = 32000;
  std::vector<float> row = RandomLogits(vocab, 5);
  row[31000] = 50.0f;
  row[20000] = 50.0f;  // a tie: 20000 wins
  std::vector<float> with_inf = row;
  with_inf[25000] = kInf;
  with_inf[26000] = kInf;
  DeviceSamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.u = 0.99;
  DeviceSamplingParams top1;
  top1.top_k = 1;
  top1.u = 0.99;
  DeviceSamplingParams hot;
  hot.temperature = 5.0f;
  hot.u = 0.5;
  std::vector<float> logits = Repeat(row, 2);
  logits.insert(logits.end(), with_inf.begin(), with_inf.end());
  const std::vector<int32_t> got = SampleOnDevice(logits, vocab, {greedy, top1, hot});
  EXPECT_EQ(got, (std::vector<int32_t>{20000, 20000, 25000}));
}

struct Case {
  int64_t vocab;
  float temperature;
  int32_t top_k;
  float min_p;
  int top_p_keep;  // 0: top_p = 1; else a top_p that keeps this many of the survivors
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  std::ostringstream name;
  name << "vocab" << info.param.vocab << "_t" << static_cast<int>(info.param.temperature * 10)
       << "_k" << info.param.top_k << "_minp" << static_cast<int>(info.param.min_p * 1000)
       << "_topp" << info.param.top_p_keep;
  return name.str();
}

class DeviceSampleSweep : public testing::TestWithParam<Case> {};

// For several kept tokens n, u from the middle of n's CDF interval must draw n: the filtered
// set and the inverse CDF (in id order) agree with the float64 reference.
TEST_P(DeviceSampleSweep, DrawsTheTokenWhoseCdfIntervalHoldsU) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const Case c = GetParam();
  const std::vector<float> row =
      RandomLogits(c.vocab, static_cast<uint32_t>(c.vocab + c.top_k + c.top_p_keep));
  DeviceSamplingParams p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.min_p = c.min_p;
  if (c.top_p_keep > 0) p.top_p = TopPKeeping(row, p, static_cast<size_t>(c.top_p_keep));
  const Distribution d = Reference(row, p);
  ASSERT_FALSE(d.ids.empty());

  // Kept tokens to aim at: the first, the last, and some in between, skipping any whose
  // interval is too thin to aim at reliably (the device's fixed-point sums are within
  // vocab * 2^-46 < 4e-9 of the exact ones, in units where the best token weighs 1).
  std::vector<size_t> targets = {0, d.ids.size() - 1, d.ids.size() / 2, d.ids.size() / 3,
                                 (d.ids.size() * 7) / 8};
  std::vector<DeviceSamplingParams> params;
  std::vector<int32_t> want;
  for (size_t n : targets) {
    if (d.weights[n] < 1e-6) continue;
    DeviceSamplingParams q = p;
    q.u = UFor(d, n);
    params.push_back(q);
    want.push_back(d.ids[n]);
  }
  ASSERT_FALSE(params.empty());
  const std::vector<int32_t> got = SampleOnDevice(Repeat(row, params.size()), c.vocab, params);
  EXPECT_EQ(got, want) << "kept " << d.ids.size() << " tokens, top_p " << p.top_p;
}

std::vector<Case> SweepCases() {
  std::vector<Case> cases;
  for (int64_t vocab : {1, 7, 97, 4097, 262144}) {
    cases.push_back({vocab, 1.0f, 0, 0.0f, 0});
    cases.push_back({vocab, 0.7f, 40, 0.0f, 0});
    cases.push_back({vocab, 1.3f, 0, 0.05f, 0});
    cases.push_back({vocab, 1.0f, 0, 0.0f, 20});
    cases.push_back({vocab, 0.8f, 50, 0.01f, 7});
    cases.push_back({vocab, 2.0f, 1000, 0.0f, 300});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Params, DeviceSampleSweep, testing::ValuesIn(SweepCases()), CaseName);

// top_p = 1 and top_k = 0 draw over the whole vocabulary: tokens spread across all of it are
// reachable, each exactly where the reference's CDF puts it.
TEST(DeviceSample, FullVocabularyDrawFollowsTheCdfInIdOrder) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t vocab = 262144;
  std::vector<float> row = RandomLogits(vocab, 99, /*holes=*/false);
  for (auto& v : row) v *= 0.1f;  // near-uniform: every token matters
  DeviceSamplingParams p;
  const Distribution d = Reference(row, p);
  ASSERT_EQ(d.ids.size(), static_cast<size_t>(vocab));
  std::vector<DeviceSamplingParams> params;
  std::vector<int32_t> want;
  for (size_t n : {size_t{0}, size_t{1}, size_t{1023}, size_t{1024}, size_t{100000}, size_t{200001},
                   size_t{262142}, size_t{262143}}) {
    DeviceSamplingParams q = p;
    q.u = UFor(d, n);
    params.push_back(q);
    want.push_back(static_cast<int32_t>(n));
  }
  EXPECT_EQ(SampleOnDevice(Repeat(row, params.size()), vocab, params), want);
}

TEST(DeviceSample, TopKTiesKeepTheLowestIdsAndMaskedTokensAreNeverDrawn) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t vocab = 3000;
  std::vector<float> equal(vocab, 1.0f);  // all tied: top_k = 5 keeps ids 0..4
  std::vector<float> masked(vocab, -kInf);
  masked[10] = 0.0f;
  masked[2000] = 0.0f;  // two finite tokens; top_k = 100 keeps them and 98 masked ones
  masked[500] = kNan;
  DeviceSamplingParams k5;
  k5.top_k = 5;
  std::vector<DeviceSamplingParams> params;
  std::vector<float> logits;
  std::vector<int32_t> want;
  for (int n = 0; n < 5; ++n) {
    k5.u = (n + 0.5) / 5.0;
    params.push_back(k5);
    logits.insert(logits.end(), equal.begin(), equal.end());
    want.push_back(n);
  }
  DeviceSamplingParams k100;
  k100.top_k = 100;
  for (double u : {0.0, 0.25, 0.49, 0.51, 0.999999}) {
    k100.u = u;
    params.push_back(k100);
    logits.insert(logits.end(), masked.begin(), masked.end());
    want.push_back(u < 0.5 ? 10 : 2000);
  }
  EXPECT_EQ(SampleOnDevice(logits, vocab, params), want);
}

TEST(DeviceSample, MinPDropsTokensLighterThanItsShareOfTheBest) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t vocab = 10;
  // Weights exp(logit): 1, e^-1, e^-2, e^-3, ... ; min_p = 0.2 keeps e^0 and e^-1 only
  // (e^-2 = 0.135 < 0.2).
  std::vector<float> row(vocab);
  for (int i = 0; i < vocab; ++i) row[i] = -static_cast<float>((i * 7) % 10);  // id 0 best
  DeviceSamplingParams p;
  p.min_p = 0.2f;
  const Distribution d = Reference(row, p);
  ASSERT_EQ(d.ids.size(), 2u);
  std::vector<DeviceSamplingParams> params;
  std::vector<int32_t> want;
  for (double u : {0.01, 0.5, 0.72, 0.74, 0.99}) {
    p.u = u;
    params.push_back(p);
    // The kept ids in order, 0 (w = 1) and 3 (w = e^-1): the boundary is at 1 / (1 + e^-1).
    want.push_back(u < 1.0 / (1.0 + std::exp(-1.0)) ? 0 : 3);
  }
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(SampleOnDevice(Repeat(row, params.size()), vocab, params), want);
}

TEST(DeviceSample, RejectsBadShapes) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> d_logits(16);
  DeviceBuffer<int32_t> d_tokens(2);
  ASSERT_TRUE(d_logits.ok() && d_tokens.ok());
  const int invalid = static_cast<int>(cudaErrorInvalidValue);
  EXPECT_EQ(LaunchArgMax(d_logits.get(), 1, 0, 16, d_tokens.get(), nullptr), invalid);
  EXPECT_EQ(LaunchArgMax(d_logits.get(), 1, 16, 8, d_tokens.get(), nullptr), invalid);
  EXPECT_EQ(LaunchArgMax(d_logits.get(), 1, kMaxSamplingVocab + 1, kMaxSamplingVocab + 1,
                         d_tokens.get(), nullptr),
            invalid);
  EXPECT_EQ(LaunchSample(d_logits.get(), 1, 16, 16, nullptr, d_tokens.get(), nullptr), invalid);
  EXPECT_EQ(LaunchArgMax(d_logits.get(), 0, 16, 16, d_tokens.get(), nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
