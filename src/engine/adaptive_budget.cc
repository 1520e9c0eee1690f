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
  if (min_prefill_tokens < 0) {
    return InvalidArgumentError("the adaptive budget's prefill floor must be >= 0");
  }
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

int64_t AdaptiveBudget::Observe(double step_seconds, bool had_decodes, bool work_waiting,
                                int64_t floor) {
  if (had_decodes) {
    if (step_seconds > options_.target_itl_seconds) {
      const auto shrunk = static_cast<int64_t>(std::floor(budget_ * options_.decrease));
      budget_ = std::max(options_.min_budget, std::min(shrunk, budget_ - 1));
    } else if (work_waiting && step_seconds < options_.headroom * options_.target_itl_seconds) {
      budget_ = std::min(options_.max_budget, budget_ + options_.increase);
    }
  }
  // Below the floor the controller would only starve someone: it restarts from there.
  budget_ = std::max(budget_, std::min(floor, options_.max_budget));
  return budget_;
}

int64_t AdaptiveBudget::Floor(int64_t running_sequences, bool prompts_waiting) const {
  return running_sequences + (prompts_waiting ? options_.min_prefill_tokens : 0);
}

}  // namespace strata::engine
