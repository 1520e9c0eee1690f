#include "strata/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "strata/sampling/deterministic_exp.h"
#include "strata/sampling/xoshiro256.h"

namespace strata::sampling {
namespace {

constexpr size_t kFullVocab = 262144;  // Gemma 3's vocabulary
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

enum class Shape {
  kPeaked,  // like an LLM: N(0, 3) with a few strong tokens
  kTies,    // few distinct values, so most comparisons are ties
  kFlat,    // nearly uniform: the nucleus is a large part of the vocabulary
};

std::vector<float> RandomLogits(size_t vocab_size, uint64_t seed, Shape shape) {
  Xoshiro256 rng(seed);
  std::vector<float> logits(vocab_size);
  for (float& x : logits) {
    // Box-Muller; 1 - u keeps the log finite.
    const double u1 = 1.0 - rng.NextDouble();
    const double u2 = rng.NextDouble();
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    switch (shape) {
      case Shape::kPeaked:
        x = static_cast<float>(3.0 * normal);
        break;
      case Shape::kTies:
        x = std::round(static_cast<float>(normal) * 2.0f) / 2.0f;
        break;
      case Shape::kFlat:
        x = static_cast<float>(0.01 * normal);
        break;
    }
  }
  if (shape == Shape::kPeaked) {
    for (int i = 0; i < 5 && static_cast<size_t>(i) < vocab_size; ++i) {
      logits[rng.Next() % vocab_size] = 12.0f - static_cast<float>(i);
    }
  }
  return logits;
}

size_t ArgMax(const std::vector<float>& logits) {
  return static_cast<size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t SampleCopy(Sampler& sampler, std::vector<float> logits) { return sampler.Sample(logits); }

// The specification of Sampler::Sample for finite, penalty-free logits, written the obvious
// way (full sorts, serial sums): the tokens it may return, in id order, with their weights.
struct Kept {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Kept ReferenceKept(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  const float max = *std::max_element(logits.begin(), logits.end());
  const float inv_t = 1.0f / p.temperature;
  std::vector<float> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = DeterministicExp((logits[i] - max) * inv_t);

  std::vector<bool> kept(n, true);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (size_t r = static_cast<size_t>(p.top_k); r < n; ++r) kept[order[r]] = false;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i]) total += w[i];
  }
  for (size_t i = 0; i < n; ++i) {
    if (w[i] < p.min_p) kept[i] = false;
  }
  if (p.top_p < 1.0f) {
    std::vector<size_t> order;
    for (size_t i = 0; i < n; ++i) {
      if (kept[i]) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
    const double target = static_cast<double>(p.top_p) * total;
    double mass = 0.0;
    size_t r = 0;
    while (r < order.size()) {
      mass += w[order[r]];
      ++r;
      if (mass >= target) break;
    }
    for (; r < order.size(); ++r) kept[order[r]] = false;
  }
  Kept out;
  for (size_t i = 0; i < n; ++i) {
    if (kept[i] && w[i] > 0.0f) {
      out.ids.push_back(static_cast<int32_t>(i));
      out.weights.push_back(w[i]);
    }
  }
  return out;
}

// Inverse CDF in id order for the draw `u`.
int32_t ReferenceDraw(const Kept& kept, double u) {
  double total = 0.0;
  for (float w : kept.weights) total += w;
  double mass = 0.0;
  for (size_t i = 0; i < kept.ids.size(); ++i) {
    mass += kept.weights[i];
    if (mass > u * total) return kept.ids[i];
  }
  return kept.ids.back();
}

// Softmax of logits / temperature in double.
std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// Pearson's statistic of `counts` against `expected` probabilities (all > 0).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = n * expected[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<int> Histogram(const SamplingParams& params, const std::vector<float>& logits,
                           int draws) {
  Sampler sampler(params, {});
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(SampleCopy(sampler, logits))];
  return counts;
}

SamplingParams WithTemperature(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// ---- Greedy -------------------------------------------------------------------------------

TEST(SamplerGreedy, ReturnsTheArgmax) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = RandomLogits(97, seed, Shape::kPeaked);
    Sampler sampler(WithTemperature(0.0f, seed), {});
    EXPECT_EQ(static_cast<size_t>(SampleCopy(sampler, logits)), ArgMax(logits));
  }
}

TEST(SamplerGreedy, BreaksTiesTowardTheLowestId) {
  Sampler sampler(WithTemperature(0.0f), {});
  EXPECT_EQ(SampleCopy(sampler, {1.0f, 3.0f, 0.5f, 3.0f, 3.0f}), 1);
  EXPECT_EQ(SampleCopy(sampler, std::vector<float>(kFullVocab, 0.25f)), 0);
}

// The argmax is taken in one pass over chunks of interleaved lanes plus a tail: the maximum at
// every position of arrays around the lane count and the chunk size (1024), with later ties in
// other lanes, chunks and the tail, NaN before it, and a signed zero tying with the other sign.
TEST(SamplerGreedy, FindsTheFirstMaximumWhereverItLies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Sampler sampler(WithTemperature(0.0f), {});
  for (size_t n : {1u, 15u, 16u, 17u, 31u, 32u, 33u, 50u, 257u, 1040u, 2063u}) {
    for (size_t p = 0; p < n; ++p) {
      std::vector<float> logits(n, -1.0f);
      for (size_t q = p; q < n; q += 3) logits[q] = 2.0f;
      if (p > 0) logits[p - 1] = nan;
      EXPECT_EQ(SampleCopy(sampler, logits), static_cast<int32_t>(p)) << n << " " << p;
      std::vector<float> zeros(n, -1.0f);
      for (size_t q = p; q < n; q += 5) zeros[q] = (q - p) % 2 == 0 ? -0.0f : 0.0f;
      EXPECT_EQ(SampleCopy(sampler, zeros), static_cast<int32_t>(p)) << n << " " << p;
    }
  }
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> logits = RandomLogits(kFullVocab, seed, Shape::kTies);
    EXPECT_EQ(static_cast<size_t>(SampleCopy(sampler, logits)), ArgMax(logits)) << seed;
  }
  // Nothing above -inf: the first id, NaN or not.
  std::vector<float> masked(40, kNegInf);
  masked[0] = nan;
  masked[17] = nan;
  EXPECT_EQ(SampleCopy(sampler, masked), 0);
}

TEST(SamplerGreedy, IgnoresTheSeed) {
  const std::vector<float> logits = RandomLogits(1000, 3, Shape::kTies);
  Sampler a(WithTemperature(0.0f, 1), {});
  Sampler b(WithTemperature(0.0f, 999), {});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(SampleCopy(a, logits), SampleCopy(b, logits));
}

TEST(SamplerGreedy, TopKOneIsGreedyAtAnyTemperature) {
  for (uint64_t seed = 0; seed < 10; ++seed) {
    for (Shape shape : {Shape::kPeaked, Shape::kTies, Shape::kFlat}) {
      const std::vector<float> logits = RandomLogits(5000, seed, shape);
      SamplingParams p = WithTemperature(1.7f, seed);
      p.top_k = 1;
      p.top_p = 0.5f;
      Sampler sampler(p, {});
      EXPECT_EQ(static_cast<size_t>(SampleCopy(sampler, logits)), ArgMax(logits));
    }
  }
}

// ---- Determinism --------------------------------------------------------------------------

std::vector<int32_t> Generate(const SamplingParams& params, int steps) {
  Sampler sampler(params, {});
  std::vector<int32_t> tokens;
  for (int step = 0; step < steps; ++step) {
    // The logits change with the step, as a model's would.
    tokens.push_back(SampleCopy(sampler, RandomLogits(3000, 100 + step, Shape::kFlat)));
  }
  return tokens;
}

TEST(SamplerDeterminism, SameSeedGivesTheSameTokens) {
  SamplingParams p = WithTemperature(1.0f, 12345);
  p.top_p = 0.9f;
  EXPECT_EQ(Generate(p, 50), Generate(p, 50));
  p.top_k = 40;
  EXPECT_EQ(Generate(p, 50), Generate(p, 50));
}

TEST(SamplerDeterminism, DifferentSeedsGiveDifferentTokens) {
  SamplingParams a = WithTemperature(1.0f, 1);
  SamplingParams b = WithTemperature(1.0f, 2);
  EXPECT_NE(Generate(a, 50), Generate(b, 50));
}

// Pinned across platforms: computed independently (numpy float32 weights, a Python
// xoshiro256**) with every draw at least 0.018 away from a cumulative boundary, so a libm
// rounding difference cannot move it. A change here changes every seeded request's output.
TEST(SamplerDeterminism, SeedGivesPinnedTokens) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.5f, 2.0f, -1.0f, 1.5f};
  Sampler sampler(WithTemperature(0.8f, 1234), {});
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back(SampleCopy(sampler, logits));
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 3, 3, 5, 1, 5, 1, 1, 2, 3, 1, 1, 1, 3, 1, 3}));
}

// ---- Distributions ------------------------------------------------------------------------

// 99.9th percentiles of the chi-square distribution, by degrees of freedom.
constexpr double kChiSquare999Df2 = 13.816;
constexpr double kChiSquare999Df7 = 24.322;

TEST(SamplerDistribution, TemperatureOneMatchesSoftmax) {
  const std::vector<float> logits = {0.0f, 1.0f, -0.5f, 2.0f, 0.3f, -1.2f, 1.5f, 0.8f};
  const std::vector<int> counts = Histogram(WithTemperature(1.0f, 77), logits, 100000);
  EXPECT_LT(ChiSquare(counts, Softmax(logits, 1.0)), kChiSquare999Df7);
  // The same counts firmly reject near misses, so the bound above has teeth.
  EXPECT_GT(ChiSquare(counts, Softmax(logits, 1.1)), 5 * kChiSquare999Df7);
  std::vector<double> swapped = Softmax(logits, 1.0);
  std::swap(swapped[4], swapped[7]);  // 0.3 vs 0.8: a 5-point swing in probability ratio
  EXPECT_GT(ChiSquare(counts, swapped), 5 * kChiSquare999Df7);
}

TEST(SamplerDistribution, TemperatureScalesLogits) {
  const std::vector<float> logits = {0.0f, 1.0f, -0.5f, 2.0f, 0.3f, -1.2f, 1.5f, 0.8f};
  const std::vector<int> counts = Histogram(WithTemperature(0.5f, 5), logits, 100000);
  EXPECT_LT(ChiSquare(counts, Softmax(logits, 0.5)), kChiSquare999Df7);
  EXPECT_GT(ChiSquare(counts, Softmax(logits, 1.0)), 5 * kChiSquare999Df7);
}

std::vector<float> LogitsOf(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

TEST(SamplerDistribution, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = LogitsOf({0.05, 0.5, 0.1, 0.2, 0.15});
  SamplingParams p = WithTemperature(1.0f, 9);
  struct Case {
    float top_p;
    std::set<int> kept;
  };
  for (const Case& c :
       {Case{0.45f, {1}}, Case{0.69f, {1, 3}}, Case{0.71f, {1, 3, 4}}, Case{0.84f, {1, 3, 4}},
        Case{0.86f, {1, 2, 3, 4}}, Case{0.999f, {0, 1, 2, 3, 4}}}) {
    p.top_p = c.top_p;
    const std::vector<int> counts = Histogram(p, logits, 20000);
    std::set<int> seen;
    for (int i = 0; i < 5; ++i) {
      if (counts[static_cast<size_t>(i)] > 0) seen.insert(i);
    }
    EXPECT_EQ(seen, c.kept) << "top_p " << c.top_p;
  }
  // Within the nucleus, probabilities are renormalised: {0.5, 0.2, 0.15} / 0.85.
  p.top_p = 0.8f;
  const std::vector<int> counts = Histogram(p, logits, 60000);
  EXPECT_LT(ChiSquare({counts[1], counts[3], counts[4]}, {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85}),
            kChiSquare999Df2);
}

TEST(SamplerDistribution, MinPDropsTokensBelowTheThreshold) {
  const std::vector<float> logits = LogitsOf({0.4, 0.3, 0.03, 0.05, 0.22});
  SamplingParams p = WithTemperature(1.0f, 4);
  p.min_p = 0.1f;  // threshold 0.04: drops token 2 only
  const std::vector<int> counts = Histogram(p, logits, 50000);
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[3], 0);
  const double kept = 0.4 + 0.3 + 0.05 + 0.22;
  EXPECT_LT(ChiSquare({counts[0], counts[1], counts[3], counts[4]},
                      {0.4 / kept, 0.3 / kept, 0.05 / kept, 0.22 / kept}),
            16.266);  // df 3
}

TEST(SamplerDistribution, TopKKeepsTheKHighestLogits) {
  const std::vector<float> logits = {0.1f, 0.9f, 0.5f, 0.7f, 0.3f};
  SamplingParams p = WithTemperature(2.0f, 8);
  p.top_k = 3;
  const std::vector<int> counts = Histogram(p, logits, 30000);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[4], 0);
  EXPECT_LT(ChiSquare({counts[1], counts[2], counts[3]}, Softmax({0.9f, 0.5f, 0.7f}, 2.0)),
            kChiSquare999Df2);
}

// ---- Exact agreement with the reference, over a sweep ------------------------------------

using SweepParam = std::tuple<size_t /*vocab*/, int32_t /*top_k*/, float /*top_p*/, float /*min_p*/,
                              float /*temperature*/, Shape>;

class SamplerMatchesReference : public testing::TestWithParam<SweepParam> {};

TEST_P(SamplerMatchesReference, TokenForTokenForTheSameDraw) {
  const auto [vocab, top_k, top_p, min_p, temperature, shape] = GetParam();
  const int seeds = vocab > 10000 ? 2 : 6;
  for (int s = 0; s < seeds; ++s) {
    const uint64_t seed = 1000 + static_cast<uint64_t>(s);
    const std::vector<float> logits = RandomLogits(vocab, seed, shape);
    SamplingParams p = WithTemperature(temperature, seed);
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    Sampler sampler(p, {});
    Xoshiro256 draws(seed);
    const Kept kept = ReferenceKept(logits, p);
    for (int step = 0; step < 3; ++step) {
      const int32_t expected = ReferenceDraw(kept, draws.NextDouble());
      EXPECT_EQ(SampleCopy(sampler, logits), expected) << "seed " << seed << " step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SmallVocabularies, SamplerMatchesReference,
                         testing::Combine(testing::Values(1, 7, 97, 5000),
                                          testing::Values(0, 1, 5, 4500),  // 4500: nth_element
                                          testing::Values(1.0f, 0.9f, 0.3f),
                                          testing::Values(0.0f, 0.05f), testing::Values(0.7f, 1.5f),
                                          testing::Values(Shape::kPeaked, Shape::kTies,
                                                          Shape::kFlat)));

INSTANTIATE_TEST_SUITE_P(FullVocabulary, SamplerMatchesReference,
                         testing::Combine(testing::Values(kFullVocab), testing::Values(0, 40, 5000),
                                          testing::Values(1.0f, 0.9f), testing::Values(0.0f, 0.05f),
                                          testing::Values(1.0f),
                                          testing::Values(Shape::kPeaked, Shape::kTies,
                                                          Shape::kFlat)));

// The nucleus of a flat tail on the full vocabulary: the two strong tokens, then tail tokens
// by ascending id (ties go to the lower id) until the mass reaches top_p. The nucleus ends
// among 262,142 tied candidates, which the selection must resolve by id.
TEST(SamplerTopP, FlatTailOfTheFullVocabularyIsCutByIdOrder) {
  std::vector<float> logits(kFullVocab, 0.0f);
  logits[7] = 10.0f;
  logits[100000] = 9.0f;
  // Masses in units of one tail token's (e^0). top_p * total - strong = 28324.76: its fraction
  // is far from an integer compared with float rounding, so the count below is exact.
  const double strong = std::exp(10.0) + std::exp(9.0);
  const double total = strong + static_cast<double>(kFullVocab - 2);
  SamplingParams p = WithTemperature(1.0f, 31);
  p.top_p = 0.2f;
  // Tail tokens needed (each weighs 1 before normalising); the tail starts at id 0 and skips 7.
  const double needed = std::ceil(static_cast<double>(p.top_p) * total - strong);
  const int32_t last_tail_id = static_cast<int32_t>(needed);  // ids 0..needed minus id 7
  Sampler sampler(p, {});
  int32_t max_tail_id = -1;
  int strong_draws = 0;
  for (int i = 0; i < 400; ++i) {
    const int32_t token = SampleCopy(sampler, logits);
    if (token == 7 || token == 100000) {
      ++strong_draws;
      continue;
    }
    ASSERT_LE(token, last_tail_id);
    max_tail_id = std::max(max_tail_id, token);
  }
  EXPECT_GT(strong_draws, 0);
  EXPECT_GT(max_tail_id, last_tail_id * 9 / 10);  // the cut is not early either
}

TEST(SamplerTopP, TinyTopPKeepsOnlyTheMostLikelyToken) {
  for (Shape shape : {Shape::kPeaked, Shape::kFlat}) {
    const std::vector<float> logits = RandomLogits(kFullVocab, 8, shape);
    SamplingParams p = WithTemperature(1.0f, 8);
    p.top_p = std::numeric_limits<float>::denorm_min();
    Sampler sampler(p, {});
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(static_cast<size_t>(SampleCopy(sampler, logits)), ArgMax(logits));
    }
  }
}

// ---- Penalties ----------------------------------------------------------------------------

TEST(SamplerPenalties, PromptTokensCountAndChangeTheGreedyChoice) {
  SamplingParams p = WithTemperature(0.0f);
  p.repetition_penalty = 1.5f;
  const std::vector<float> logits = {1.0f, 1.2f, 0.2f};
  Sampler plain(WithTemperature(0.0f), std::vector<int32_t>{1});
  EXPECT_EQ(SampleCopy(plain, logits), 1);
  Sampler penalised(p, std::vector<int32_t>{1});  // 1.2 / 1.5 = 0.8 < 1.0
  EXPECT_EQ(SampleCopy(penalised, logits), 0);
}

TEST(SamplerPenalties, OnlyTheLastNPromptTokensCount) {
  SamplingParams p = WithTemperature(0.0f);
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 4;
  const std::vector<int32_t> prompt = {1, 2, 2, 2, 2};  // token 1 is outside the window
  Sampler sampler(p, prompt);
  EXPECT_EQ(sampler.penalty_window().Count(1), 0);
  EXPECT_EQ(sampler.penalty_window().Count(2), 4);
  EXPECT_EQ(SampleCopy(sampler, {0.0f, 0.5f, 0.9f}), 1);  // 2 is pushed to -0.1
}

TEST(SamplerPenalties, AcceptAddsToTheWindowAndSampleDoesNot) {
  SamplingParams p = WithTemperature(0.0f);
  p.frequency_penalty = 0.6f;
  Sampler sampler(p, {});
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_EQ(SampleCopy(sampler, logits), 1);
  EXPECT_EQ(SampleCopy(sampler, logits), 1);  // nothing accepted yet
  sampler.Accept(1);
  EXPECT_EQ(SampleCopy(sampler, logits), 1);  // 1.0 - 0.6 = 0.4 > 0
  sampler.Accept(1);
  EXPECT_EQ(SampleCopy(sampler, logits), 0);  // 1.0 - 1.2 = -0.2 < 0
  EXPECT_EQ(sampler.penalty_window().Count(1), 2);
}

TEST(SamplerPenalties, ApplyBeforeTemperatureAndTruncation) {
  // Token 0 would dominate; a presence penalty of 2 makes tokens 0 and 1 equally likely.
  SamplingParams p = WithTemperature(1.0f, 3);
  p.presence_penalty = 2.0f;
  p.top_k = 2;
  const std::vector<float> logits = {3.0f, 1.0f, -5.0f};
  Sampler sampler(p, std::vector<int32_t>{0});
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 20000; ++i) ++counts[static_cast<size_t>(SampleCopy(sampler, logits))];
  EXPECT_EQ(counts[2], 0);
  EXPECT_LT(ChiSquare({counts[0], counts[1]}, {0.5, 0.5}), 10.83);  // df 1
}

// ---- Log-probabilities --------------------------------------------------------------------

TEST(SamplerLogprobs, AreTheRawLogSoftmaxSortedDescending) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  SamplingParams p = WithTemperature(3.0f, 2);  // temperature must not change them
  p.logprobs = 20;
  p.presence_penalty = 1.5f;  // nor must penalties
  Sampler sampler(p, std::vector<int32_t>{1});
  const int32_t token = SampleCopy(sampler, logits);
  const SampleLogprobs& lp = sampler.last_logprobs();
  const std::vector<double> raw = Softmax(logits, 1.0);

  ASSERT_EQ(lp.top.size(), logits.size());             // min(20, vocab)
  const std::vector<int32_t> order = {1, 3, 4, 0, 2};  // tie 1 vs 3: the lower id first
  double mass = 0.0;
  for (size_t i = 0; i < lp.top.size(); ++i) {
    EXPECT_EQ(lp.top[i].token, order[i]);
    EXPECT_NEAR(lp.top[i].logprob, std::log(raw[static_cast<size_t>(order[i])]), 1e-5);
    mass += std::exp(lp.top[i].logprob);
  }
  EXPECT_NEAR(mass, 1.0, 1e-5);
  EXPECT_EQ(lp.chosen.token, token);
  EXPECT_NEAR(lp.chosen.logprob, std::log(raw[static_cast<size_t>(token)]), 1e-5);
}

TEST(SamplerLogprobs, ChosenIsUnderTheRawDistributionEvenWhenPenaltiesPickAnother) {
  SamplingParams p = WithTemperature(0.0f);
  p.repetition_penalty = 4.0f;
  p.logprobs = 1;
  Sampler sampler(p, std::vector<int32_t>{1});
  const std::vector<float> logits = {1.0f, 2.0f};
  EXPECT_EQ(SampleCopy(sampler, logits), 0);  // 2 / 4 = 0.5 < 1
  const std::vector<double> raw = Softmax(logits, 1.0);
  const SampleLogprobs& lp = sampler.last_logprobs();
  EXPECT_NEAR(lp.chosen.logprob, std::log(raw[0]), 1e-6);
  ASSERT_EQ(lp.top.size(), 1u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_NEAR(lp.top[0].logprob, std::log(raw[1]), 1e-6);
}

TEST(SamplerLogprobs, AreEmptyWhenNotRequested) {
  Sampler sampler(WithTemperature(1.0f), {});
  SampleCopy(sampler, {1.0f, 2.0f});
  EXPECT_TRUE(sampler.last_logprobs().top.empty());
}

// ---- The full vocabulary and odd logits ---------------------------------------------------

TEST(SamplerFullVocabulary, SamplesFromTheStrongTokens) {
  std::vector<float> logits = RandomLogits(kFullVocab, 5, Shape::kPeaked);
  // Plant a clear top 3 far above the N(0, 3) body.
  for (float& x : logits) x = std::min(x, 15.0f);
  logits[3] = 40.0f;
  logits[131072] = 39.5f;
  logits[kFullVocab - 1] = 39.0f;
  const std::set<int32_t> strong = {3, 131072, static_cast<int32_t>(kFullVocab - 1)};

  Sampler greedy(WithTemperature(0.0f), {});
  EXPECT_EQ(SampleCopy(greedy, logits), 3);

  for (int32_t top_k : {0, 40}) {
    SamplingParams p = WithTemperature(1.0f, 17);
    p.top_k = top_k;
    p.top_p = 0.95f;
    p.logprobs = 20;
    Sampler sampler(p, {});
    std::set<int32_t> seen;
    for (int i = 0; i < 200; ++i) seen.insert(SampleCopy(sampler, logits));
    EXPECT_EQ(seen, strong) << "top_k " << top_k;
    const SampleLogprobs& lp = sampler.last_logprobs();
    ASSERT_EQ(lp.top.size(), 20u);
    EXPECT_EQ(lp.top[0].token, 3);
    EXPECT_EQ(lp.top[1].token, 131072);
    EXPECT_EQ(lp.top[2].token, static_cast<int32_t>(kFullVocab - 1));
    for (size_t i = 1; i < lp.top.size(); ++i) EXPECT_LE(lp.top[i].logprob, lp.top[i - 1].logprob);
  }
}

TEST(SamplerOddLogits, NanAndMaskedTokensAreNeverSampled) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, 0.0f, kNegInf, 0.5f, nan, kNegInf};
  for (int32_t top_k : {0, 3}) {
    SamplingParams p = WithTemperature(1.0f, 6);
    p.top_k = top_k;
    p.top_p = top_k == 0 ? 0.99f : 1.0f;
    const std::vector<int> counts = Histogram(p, logits, 2000);
    EXPECT_EQ(counts[1] + counts[3], 2000) << "top_k " << top_k;
  }
  Sampler greedy(WithTemperature(0.0f), {});
  EXPECT_EQ(SampleCopy(greedy, logits), 3);
}

TEST(SamplerOddLogits, WithoutAFiniteMaximumFallsBackToGreedy) {
  SamplingParams p = WithTemperature(1.0f);
  p.logprobs = 2;
  Sampler sampler(p, {});
  EXPECT_EQ(SampleCopy(sampler, std::vector<float>(4, kNegInf)), 0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(SampleCopy(sampler, {1.0f, inf, 2.0f, inf}), 1);
  EXPECT_EQ(sampler.last_logprobs().chosen.logprob, 0.0f);
}

TEST(SamplerOddLogits, TinyTemperatureIsNearlyGreedyWithoutOverflow) {
  const std::vector<float> logits = RandomLogits(1000, 2, Shape::kPeaked);
  Sampler sampler(WithTemperature(1e-6f, 3), {});
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(static_cast<size_t>(SampleCopy(sampler, logits)), ArgMax(logits));
}

}  // namespace
}  // namespace strata::sampling

namespace strata::sampling {
namespace {

// DrawForBackend + SampleWithDraw (what a backend does with the draw) equals Sample() on the
// same logits and seed, step after step, so a request's tokens do not depend on where it was
// sampled; a row with no finite maximum still consumes its draw on both paths.
TEST(SamplerOnBackend, TheBackendPathGivesSampleTokensAndKeepsTheGeneratorInStep) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<SamplingParams> cases(5);
  cases[0].temperature = 0.0f;
  cases[1].temperature = 1.0f;
  cases[2].temperature = 0.8f;
  cases[2].top_k = 9;
  cases[3].temperature = 1.2f;
  cases[3].top_p = 0.7f;
  cases[4].temperature = 0.6f;
  cases[4].min_p = 0.1f;
  cases[4].top_k = 50;
  for (size_t c = 0; c < cases.size(); ++c) {
    SamplingParams p = cases[c];
    p.seed = 1000 + c;
    Sampler host(p, {});
    Sampler backend(p, {});
    for (int step = 0; step < 40; ++step) {
      std::vector<float> logits(997);
      for (float& x : logits) x = normal(gen);
      if (step == 7) std::fill(logits.begin(), logits.end(), -INFINITY);  // no distribution
      std::vector<float> copy = logits;
      const int32_t a = host.Sample(logits);
      const double u = backend.DrawForBackend();
      const int32_t b = Sampler::SampleWithDraw(backend.params(), {}, copy, u, nullptr);
      ASSERT_EQ(a, b) << "case " << c << " step " << step;
      host.Accept(a);
      backend.Accept(b);
    }
  }
}

// Penalties and log-probabilities: the window's counts and a draw given to SampleWithDraw
// (what a backend is given) reproduce Sample() exactly, tokens and logprobs alike.
TEST(SamplerOnBackend, PenaltiesAndLogprobsFromTheWindowsCountsMatchSample) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 40;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = 0.2f;
  p.penalty_last_n = 16;
  p.logprobs = 5;
  p.seed = 77;
  const std::vector<int32_t> prompt = {3, 3, 9, 120, 7};
  Sampler host(p, prompt);
  Sampler backend(p, prompt);
  for (int step = 0; step < 60; ++step) {
    std::vector<float> logits(503);
    for (float& x : logits) x = normal(gen);
    std::vector<float> copy = logits;
    const int32_t a = host.Sample(logits);
    std::vector<TokenCount> counts;
    backend.penalty_window().AppendCounts(&counts);
    const double u = backend.DrawForBackend();
    SampleLogprobs lp;
    const int32_t b = Sampler::SampleWithDraw(backend.params(), counts, copy, u, &lp);
    ASSERT_EQ(a, b) << "step " << step;
    EXPECT_EQ(lp.chosen.token, host.last_logprobs().chosen.token);
    EXPECT_EQ(lp.chosen.logprob, host.last_logprobs().chosen.logprob);
    ASSERT_EQ(lp.top.size(), 5u);
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_EQ(lp.top[i].token, host.last_logprobs().top[i].token);
      EXPECT_EQ(lp.top[i].logprob, host.last_logprobs().top[i].logprob);
    }
    host.Accept(a);
    backend.Accept(b);
  }
  // The penalties were in play: the window holds the recent tokens.
  std::vector<TokenCount> counts;
  backend.penalty_window().AppendCounts(&counts);
  EXPECT_FALSE(counts.empty());
}

}  // namespace
}  // namespace strata::sampling
