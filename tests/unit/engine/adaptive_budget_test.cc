#include "strata/engine/adaptive_budget.h"

#include <gtest/gtest.h>

namespace strata::engine {
namespace {

AdaptiveBudgetOptions Options() {
  AdaptiveBudgetOptions o;
  o.target_itl_seconds = 0.1;
  o.min_budget = 8;
  o.max_budget = 1024;
  o.initial_budget = 256;
  o.increase = 32;
  o.decrease = 0.5;
  o.headroom = 0.8;
  return o;
}

TEST(AdaptiveBudget, GrowsWhileWorkWaitsAndStepsAreFast) {
  AdaptiveBudget b(Options());
  EXPECT_EQ(b.Observe(0.05, /*had_decodes=*/true, /*work_waiting=*/true), 288);
  EXPECT_EQ(b.Observe(0.05, true, true), 320);
}

TEST(AdaptiveBudget, HoldsWithoutWaitingWorkOrInsideTheHeadroomBand) {
  AdaptiveBudget b(Options());
  EXPECT_EQ(b.Observe(0.01, true, /*work_waiting=*/false), 256);
  EXPECT_EQ(b.Observe(0.09, true, true), 256);  // 0.08 < 0.09 <= 0.1: hold
}

TEST(AdaptiveBudget, ShrinksMultiplicativelyOverTheTarget) {
  AdaptiveBudget b(Options());
  EXPECT_EQ(b.Observe(0.2, true, true), 128);
  EXPECT_EQ(b.Observe(0.2, true, false), 64);
}

TEST(AdaptiveBudget, StaysWithinItsBounds) {
  AdaptiveBudgetOptions o = Options();
  AdaptiveBudget b(o);
  for (int i = 0; i < 100; ++i) b.Observe(1.0, true, true);
  EXPECT_EQ(b.budget(), o.min_budget);
  for (int i = 0; i < 100; ++i) b.Observe(0.0, true, true);
  EXPECT_EQ(b.budget(), o.max_budget);
}

TEST(AdaptiveBudget, PrefillOnlyStepsGiveNoLatencySample) {
  AdaptiveBudget b(Options());
  EXPECT_EQ(b.Observe(5.0, /*had_decodes=*/false, true), 256);
  EXPECT_EQ(b.Observe(0.0, false, true), 256);
}

TEST(AdaptiveBudget, FindsTheLargestBudgetThatMeetsTheTarget) {
  // A model machine: a step costs 2 ms fixed + 0.25 ms per token; the target of 100 ms is met
  // up to 392 tokens. From far below and from far above, the budget settles in a band just
  // under that and never stays over it.
  AdaptiveBudgetOptions o = Options();
  o.decrease = 0.9;
  o.increase = 8;
  for (int64_t start : {16, 1024}) {
    o.initial_budget = start;
    AdaptiveBudget b(o);
    int64_t over = 0;
    for (int step = 0; step < 400; ++step) {
      const double seconds = 0.002 + 0.00025 * static_cast<double>(b.budget());
      b.Observe(seconds, true, true);
      if (step >= 200 && seconds > 0.1) ++over;
    }
    EXPECT_GE(b.budget(), 280) << "start " << start;
    EXPECT_LE(b.budget(), 392) << "start " << start;
    EXPECT_LE(over, 200 / 4) << "start " << start;  // at most one step in four over the target
  }
}

}  // namespace
}  // namespace strata::engine

namespace strata::engine {
namespace {

TEST(AdaptiveBudget, NeverDropsBelowTheFloorOfDecodesPlusAPrefillShare) {
  // 64 streams on a machine where even their decodes alone miss the target: the budget keeps
  // one token per running sequence and min_prefill_tokens for the waiting prompts, instead of
  // shrinking to min_budget and starving both.
  AdaptiveBudgetOptions o = Options();
  o.min_prefill_tokens = 48;
  AdaptiveBudget b(o);
  const int64_t floor = b.Floor(/*running_sequences=*/64, /*prompts_waiting=*/true);
  EXPECT_EQ(floor, 64 + 48);
  for (int i = 0; i < 50; ++i) b.Observe(1.0, true, true, floor);
  EXPECT_EQ(b.budget(), floor);
  // Nothing waits: the floor is the decodes alone, and the AIMD rule goes on from there.
  EXPECT_EQ(b.Floor(64, false), 64);
  // From 112 over the target: max(floor(112 * 0.5), floor 64) = 64.
  EXPECT_EQ(b.Observe(1.0, true, false, b.Floor(64, false)), 64);
  // A prefill-only step gives no latency sample but still lifts the budget to the floor.
  AdaptiveBudget c(o);
  for (int i = 0; i < 50; ++i) c.Observe(1.0, true, true);
  ASSERT_EQ(c.budget(), o.min_budget);
  EXPECT_EQ(c.Observe(1.0, /*had_decodes=*/false, true, 100), 100);
  // The floor is capped by max_budget.
  EXPECT_EQ(c.Observe(1.0, true, true, 1 << 20), o.max_budget);
}

TEST(AdaptiveBudget, RejectsANegativePrefillFloor) {
  AdaptiveBudgetOptions o = Options();
  o.min_prefill_tokens = -1;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace strata::engine
