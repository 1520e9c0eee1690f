#include "strata/engine/adaptive_budget.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "strata/common/check.h"

namespace strata::engine {

Status AdaptiveBudgetOptions::Validate() const {
  if (!(target_itl_seconds > 0) || !std::isfinite(target_itl_seconds)) {
    return InvalidArgumentError("target_itl_ms must be a finite number greater than 0");
  }
  if (min_budget < 1 || min_budget > max_budget) {
    return InvalidArgumentError("the adaptive token budget needs 1 <= min <= max, got min " +
                                std::to_string(min_budget) + ", max " + std::to_string(max_budget));
  }
  if (increase < 1) return InvalidArgumentError("the adaptive budget increase must be >= 1");
  if (!(decrease > 0 && decrease < 1)) {
    return InvalidArgumentError("the adaptive budget decrease must be in (0, 1)");
  }
  if (!(headroom > 0 && headroom <= 1)) {
    return InvalidArgumentError("the adaptive budget headroom must be in (0, 1]");
  }
  return OkStatus();
}

AdaptiveBudget::AdaptiveBudget(const AdaptiveBudgetOptions& options) : options_(options) {
  STRATA_CHECK(options.Validate().ok());
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
