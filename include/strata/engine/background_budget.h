// BackgroundBudget: how much background work (batch job lines) one engine step may carry while
// other requests are held, in prompt-token units: a background chunk of n tokens costs n, plus
// `sample_cost` when it ends in a sampled row (its share of the output head). Sized by
// StepCostModel, enforced by Scheduler.
#pragma once

#include <cstdint>
#include <limits>

namespace strata::engine {

struct BackgroundBudget {
  int64_t tokens = std::numeric_limits<int64_t>::max();  // no limit
  int64_t sample_cost = 0;
};

}  // namespace strata::engine
