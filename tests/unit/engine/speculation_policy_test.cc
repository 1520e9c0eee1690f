#include "strata/engine/speculation_policy.h"

#include <gtest/gtest.h>

namespace strata::engine {
namespace {

SpeculationPolicyOptions Options(int32_t max_draft = 8) {
  SpeculationPolicyOptions o;
  o.max_draft_tokens = max_draft;
  return o;
}

// Feeds steps timed as fixed + per_token * tokens, over a spread of token counts.
void FeedLinearSteps(SpeculationPolicy* policy, double fixed, double per_token) {
  for (int round = 0; round < 50; ++round) {
    for (int64_t tokens : {1, 2, 4, 6, 9, 16, 24, 40}) {
      policy->ObserveStep(tokens, fixed + per_token * static_cast<double>(tokens));
    }
  }
}

TEST(SpeculationPolicy, TheCostFitRecoversALinearStepTime) {
  SpeculationPolicy policy(Options());
  FeedLinearSteps(&policy, 0.010, 0.001);
  // One more token at n decode tokens: per_token * n / (fixed + per_token * n).
  EXPECT_NEAR(policy.TokenCost(1), 0.001 / 0.011, 1e-3);
  EXPECT_NEAR(policy.TokenCost(16), 0.016 / 0.026, 1e-3);
  EXPECT_NEAR(policy.TokenCost(200), 0.2 / 0.21, 1e-3);
}

TEST(SpeculationPolicy, BeforeAnyVariationThePriorCostHolds) {
  SpeculationPolicyOptions o = Options();
  o.prior_token_cost = 0.1;
  SpeculationPolicy policy(o);
  EXPECT_DOUBLE_EQ(policy.TokenCost(1), 0.1);
  // One step of 1 token in 11 ms: split 10 ms fixed + 1 ms a token by the prior.
  policy.ObserveStep(1, 0.011);
  EXPECT_NEAR(policy.TokenCost(1), 0.001 / 0.011, 1e-3);
}

TEST(SpeculationPolicy, DraftsGrowWithAcceptanceAndShrinkWithCost) {
  SpeculationPolicy policy(Options(8));
  FeedLinearSteps(&policy, 0.010, 0.001);
  SequenceAcceptance good, bad;
  for (int i = 0; i < 30; ++i) {
    policy.ObserveVerification(&good, 4, 4, /*rejected=*/false);
    policy.ObserveVerification(&bad, 4, 0, /*rejected=*/true);
  }
  EXPECT_GT(policy.Acceptance(good), 0.9);
  EXPECT_LT(policy.Acceptance(bad), 0.25);
  // One stream: tokens are cheap (cost 0.09): a good sequence drafts long, a bad one short.
  EXPECT_EQ(policy.DraftLength(good, 1), 8);
  const int32_t bad_alone = policy.DraftLength(bad, 1);
  EXPECT_GE(bad_alone, 1);
  EXPECT_LT(bad_alone, 3);
  // A big batch (cost 0.95): only a near-certain guess is worth a token, a bad one none.
  EXPECT_EQ(policy.DraftLength(bad, 200), 0);
  EXPECT_LT(policy.DraftLength(good, 200), policy.DraftLength(good, 1));
  EXPECT_GE(policy.DraftLength(good, 16), policy.DraftLength(good, 64));
}

TEST(SpeculationPolicy, ANewSequenceStartsFromTheProposersRecord) {
  SpeculationPolicy policy(Options());
  const double before = policy.Acceptance(SequenceAcceptance{});
  SequenceAcceptance s;
  for (int i = 0; i < 50; ++i) policy.ObserveVerification(&s, 6, 6, false);
  EXPECT_GT(policy.proposer_acceptance(), before);
  EXPECT_GT(policy.Acceptance(SequenceAcceptance{}), before);
}

// A proposer that runs a model pays for its own passes: at half a decode step's time per draft
// token, a sequence whose guesses are right two times in three drafts one token, not five.
TEST(SpeculationPolicy, AProposersOwnTimeCountsAsCost) {
  SpeculationPolicy policy(Options(8));
  FeedLinearSteps(&policy, 0.010, 0.001);
  const double verify_only = policy.TokenCost(1);
  SequenceAcceptance decent;
  for (int i = 0; i < 30; ++i) policy.ObserveVerification(&decent, 4, 2, /*rejected=*/true);
  EXPECT_NEAR(policy.Acceptance(decent), 2.0 / 3.0, 0.03);
  EXPECT_GE(policy.DraftLength(decent, 1), 4);  // 0.67^k > 0.09 up to k = 5
  policy.ObserveProposal(10, 0.055);            // 5.5 ms a draft token; a 1-token step is 11 ms
  EXPECT_NEAR(policy.TokenCost(1), verify_only + 0.5, 1e-3);
  EXPECT_EQ(policy.DraftLength(decent, 1), 1);  // 0.67 > 0.59 > 0.44
}

TEST(SpeculationPolicy, WithoutAdaptationEveryDraftIsFullLength) {
  SpeculationPolicyOptions o = Options(5);
  o.adaptive = false;
  SpeculationPolicy policy(o);
  SequenceAcceptance bad;
  for (int i = 0; i < 30; ++i) policy.ObserveVerification(&bad, 4, 0, true);
  EXPECT_EQ(policy.DraftLength(bad, 1000), 5);
}

TEST(SpeculationPolicy, IgnoresMeaninglessSteps) {
  SpeculationPolicy policy(Options());
  policy.ObserveStep(0, 1.0);
  policy.ObserveStep(4, -1.0);
  policy.ObserveStep(4, 0.0);
  EXPECT_DOUBLE_EQ(policy.TokenCost(1), Options().prior_token_cost);
}

TEST(SpeculationPolicyOptions, ValidateRefusesOutOfRangeValues) {
  EXPECT_TRUE(Options().Validate().ok());
  EXPECT_FALSE(Options(0).Validate().ok());
  EXPECT_FALSE(Options(17).Validate().ok());
  SpeculationPolicyOptions o = Options();
  o.prior_acceptance = 1.5;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace strata::engine
