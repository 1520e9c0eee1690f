#include "strata/sampling/penalty_window.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata::sampling {
namespace {

SamplingParams Penalties(float repetition, float frequency, float presence, int32_t last_n) {
  SamplingParams p;
  p.repetition_penalty = repetition;
  p.frequency_penalty = frequency;
  p.presence_penalty = presence;
  p.penalty_last_n = last_n;
  return p;
}

// What the sampler does with a window: take its counts, apply the penalties; whether any
// token was penalized.
bool Apply(const PenaltyWindow& window, const SamplingParams& p, std::vector<float>& logits) {
  std::vector<TokenCount> counts;
  window.AppendCounts(&counts);
  ApplyPenalties(p, counts, logits);
  return !counts.empty();
}

TEST(PenaltyWindow, AppliesTheLlamaCppFormulasByHand) {
  const SamplingParams p =
      Penalties(/*repetition=*/2.0f, /*frequency=*/0.5f, /*presence=*/0.25f, 64);
  PenaltyWindow window(p);
  for (int32_t t : {0, 1, 1, 3}) window.Push(t);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  EXPECT_TRUE(Apply(window, p, logits));
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f - (1 * 0.5f + 0.25f));   // positive: divided
  EXPECT_FLOAT_EQ(logits[1], -1.0f * 2.0f - (2 * 0.5f + 0.25f));  // negative: multiplied
  EXPECT_FLOAT_EQ(logits[2], 0.5f);                               // not in the window
  EXPECT_FLOAT_EQ(logits[3], 3.0f / 2.0f - (1 * 0.5f + 0.25f));
  EXPECT_FLOAT_EQ(logits[4], 0.0f);
  EXPECT_FLOAT_EQ(logits[0], 0.25f);
  EXPECT_FLOAT_EQ(logits[1], -3.25f);
  EXPECT_FLOAT_EQ(logits[3], 0.75f);
}

TEST(PenaltyWindow, NegativePresencePenaltyRaisesLogits) {
  const SamplingParams p = Penalties(1.0f, 0.0f, -1.5f, 64);
  PenaltyWindow window(p);
  window.Push(1);
  std::vector<float> logits = {0.0f, 0.0f};
  Apply(window, p, logits);
  EXPECT_FLOAT_EQ(logits[1], 1.5f);
  EXPECT_FLOAT_EQ(logits[0], 0.0f);
}

TEST(PenaltyWindow, ForgetsTokensOlderThanLastN) {
  const SamplingParams p = Penalties(1.0f, 1.0f, 0.0f, 3);
  PenaltyWindow window(p);
  for (int32_t t : {5, 5, 6, 7, 5}) window.Push(t);  // window: 6 7 5
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window.Count(5), 1);
  EXPECT_EQ(window.Count(6), 1);
  EXPECT_EQ(window.Count(7), 1);
  window.Push(8);  // window: 7 5 8
  EXPECT_EQ(window.Count(6), 0);
  std::vector<float> logits(10, 0.0f);
  Apply(window, p, logits);
  EXPECT_FLOAT_EQ(logits[6], 0.0f);
  EXPECT_FLOAT_EQ(logits[5], -1.0f);
  EXPECT_FLOAT_EQ(logits[8], -1.0f);
}

TEST(PenaltyWindow, MinusOneKeepsEveryToken) {
  const SamplingParams p = Penalties(1.0f, 1.0f, 0.0f, -1);
  PenaltyWindow window(p);
  for (int i = 0; i < 1000; ++i) window.Push(4);
  EXPECT_EQ(window.Count(4), 1000);
  EXPECT_EQ(window.size(), 1000u);
}

TEST(PenaltyWindow, ZeroLastNOrNeutralCoefficientsChangeNothing) {
  for (const SamplingParams& p :
       {Penalties(1.3f, 0.5f, 0.5f, 0), Penalties(1.0f, 0.0f, 0.0f, 64)}) {
    PenaltyWindow window(p);
    window.Push(0);
    std::vector<float> logits = {1.0f, 2.0f};
    EXPECT_FALSE(window.enabled());
    EXPECT_FALSE(Apply(window, p, logits));
    EXPECT_EQ(logits, (std::vector<float>{1.0f, 2.0f}));
  }
}

TEST(PenaltyWindow, SkipsIdsOutsideTheLogits) {
  const SamplingParams p = Penalties(2.0f, 0.0f, 0.0f, 64);
  PenaltyWindow window(p);
  window.Push(-3);
  window.Push(99);
  window.Push(1);
  std::vector<float> logits = {4.0f, 4.0f};
  Apply(window, p, logits);
  EXPECT_EQ(logits, (std::vector<float>{4.0f, 2.0f}));
}

}  // namespace
}  // namespace strata::sampling
