#include "strata/engine/adaptive_budget.h"

#include <algorithm>
#include <cmath>

#include "strata/common/check.h"

namespace strata::engine {

AdaptiveBudget::AdaptiveBudget(const AdaptiveBudgetOptions& options) : options_(options) {
  STRATA_CHECK(options.target_itl_seconds > 0);
  STRATA_CHECK(options.min_budget >= 1 && options.min_budget <= options.max_budget);
  STRATA_CHECK(options.increase >= 1);
  STRATA_CHECK(options.decrease > 0 && options.decrease < 1);
  STRATA_CHECK(options.headroom > 0 && options.headroom <= 1);
  budget_ = std::clamp(options.initial_budget, options.min_budget, options.max_budget);
}

int64_t AdaptiveBudget::Observe(double step_seconds, bool had_decodes, bool work_waiting) {
  if (!had_decodes) return budget_;
  if (step_seconds > options_.target_itl_seconds) {
    const auto shrunk = static_cast<int64_t>(std::floor(budget_ * options_.decrease));
    budget_ = std::max(options_.min_budget, std::min(shrunk, budget_ - 1));
  } else if (work_waiting && step_seconds < options_.headroom * options_.target_itl_seconds) {
    budget_ = std::min(options_.max_budget, budget_ + options_.increase);
  }
  return budget_;
}

}  // namespace strata::engine
