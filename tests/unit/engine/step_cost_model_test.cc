#include "strata/engine/step_cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace strata::engine {
namespace {

// A machine whose steps take 15 ms + 2 ms per sampled row + 0.5 ms per prompt token.
double Seconds(int64_t tokens, int64_t rows) {
  return 0.015 + 0.002 * static_cast<double>(rows) + 0.0005 * static_cast<double>(tokens - rows);
}

TEST(StepCostModel, KnowsNothingBeforeAnObservation) {
  const StepCostModel model;
  EXPECT_FALSE(model.has_data());
  EXPECT_EQ(model.RowSeconds(), 0);
  EXPECT_EQ(model.PredictSeconds(10, 10), 0);
  const BackgroundBudget budget = model.BackgroundBudgetFor(16, 0.1);
  EXPECT_EQ(budget.tokens, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(budget.sample_cost, 0);
}

TEST(StepCostModel, SeparatesFixedRowAndPromptTokenCosts) {
  StepCostModel model;
  for (int i = 0; i < 300; ++i) {
    const int64_t rows = 8 + i % 9;
    model.Observe(rows, rows, Seconds(rows, rows));  // decode-only
    // Steps with prompts, once the decode steps have been seen a while (the prompt cost is
    // what a step takes beyond the decode prediction, so it is only as good as that).
    if (i >= 50 && i % 3 == 0) model.Observe(rows + 40, rows + 1, Seconds(rows + 40, rows + 1));
  }
  EXPECT_NEAR(model.FixedSeconds(), 0.015, 1e-9);
  EXPECT_NEAR(model.RowSeconds(), 0.002, 1e-9);
  EXPECT_NEAR(model.TokenSeconds(), 0.0005, 1e-6);
  EXPECT_NEAR(model.PredictSeconds(56, 17), Seconds(56, 17), 1e-4);
  // 10% of a 16-row step (47 ms) is 4.7 ms: 9 prompt tokens of 0.5 ms; a sampled row costs 3
  // more.
  BackgroundBudget budget = model.BackgroundBudgetFor(16, 0.1);
  EXPECT_EQ(budget.tokens, 9);
  EXPECT_EQ(budget.sample_cost, 3);
  // No slowdown allowed: still one background decode row (1 + 3) a step.
  budget = model.BackgroundBudgetFor(16, 0.0);
  EXPECT_EQ(budget.tokens, 4);
}

TEST(StepCostModel, UsesTheMeanCostPerRowWhenDecodeStepsDoNotVary) {
  StepCostModel model;
  for (int i = 0; i < 20; ++i) model.Observe(16, 16, 0.048);
  // No slope to fit: 3 ms a row, which overstates the marginal cost (the safe side), and no
  // prompt steps yet, so a prompt token is priced as a row.
  EXPECT_NEAR(model.RowSeconds(), 0.003, 1e-12);
  EXPECT_NEAR(model.TokenSeconds(), 0.003, 1e-12);
  EXPECT_NEAR(model.PredictSeconds(16, 16), 0.048, 1e-12);
  const BackgroundBudget budget = model.BackgroundBudgetFor(16, 0.1);
  EXPECT_EQ(budget.sample_cost, 0);
  EXPECT_EQ(budget.tokens, 1);
}

TEST(StepCostModel, UsesTheMeanUntilEnoughDecodeSteps) {
  StepCostModel model(0.98, /*min_samples=*/8);
  model.Observe(2, 2, 0.010);
  model.Observe(40, 40, 0.040);
  // Two points would fit 0.79 ms a row; too few yet: the mean (the first point decayed once).
  EXPECT_NEAR(model.RowSeconds(), (0.98 * 0.010 + 0.040) / (0.98 * 2 + 40), 1e-12);
}

TEST(StepCostModel, PricesRowsByTheMeanOfAllStepsBeforeADecodeOnlyStep) {
  StepCostModel model;
  model.Observe(100, 1, 0.050);
  EXPECT_NEAR(model.RowSeconds(), 0.0005, 1e-12);
  EXPECT_EQ(model.FixedSeconds(), 0);
}

TEST(StepCostModel, FollowsAChangeOfSpeed) {
  StepCostModel model(0.9);
  for (int i = 0; i < 100; ++i) {
    const int64_t rows = 4 + (i * 5) % 30;
    model.Observe(rows, rows, 0.001 * static_cast<double>(rows));
  }
  for (int i = 0; i < 200; ++i) {
    const int64_t rows = 4 + (i * 5) % 30;
    model.Observe(rows, rows, 0.004 * static_cast<double>(rows));
  }
  EXPECT_NEAR(model.RowSeconds(), 0.004, 1e-6);
}

TEST(StepCostModel, KeepsANoisySlopeWithinBoundsOfTheMean) {
  StepCostModel model;
  // Bigger steps faster than small ones (noise): the slope would be negative.
  double seconds = 0;
  double rows = 0;
  for (int i = 0; i < 30; ++i) {
    const int64_t x = i % 2 == 0 ? 4 : 40;
    const double y = i % 2 == 0 ? 0.040 : 0.030;
    model.Observe(x, x, y);
    seconds = 0.98 * seconds + y;
    rows = 0.98 * rows + static_cast<double>(x);
  }
  EXPECT_NEAR(model.RowSeconds(), 0.1 * seconds / rows, 1e-12);
}

TEST(StepCostModel, IgnoresEmptyStepsAndBadInput) {
  StepCostModel model;
  model.Observe(0, 0, 1.0);
  model.Observe(5, 5, -1.0);
  model.Observe(5, 6, 1.0);
  model.Observe(5, 5, std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(model.has_data());
}

}  // namespace
}  // namespace strata::engine
