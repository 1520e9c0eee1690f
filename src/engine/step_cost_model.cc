#include "strata/engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

#include "strata/common/check.h"

namespace strata::engine {

StepCostModel::StepCostModel(double decay, double min_samples)
    : decay_(decay), min_samples_(min_samples) {
  STRATA_CHECK(decay > 0 && decay < 1);
  STRATA_CHECK(min_samples >= 2);
}

void StepCostModel::Observe(int64_t tokens, int64_t rows, double seconds) {
  if (tokens <= 0 || rows < 0 || rows > tokens || !std::isfinite(seconds) || seconds < 0) return;
  const auto t = static_cast<double>(tokens);
  const auto r = static_cast<double>(rows);
  weight_ = decay_ * weight_ + 1;
  all_tokens_ = decay_ * all_tokens_ + t;
  all_seconds_ = decay_ * all_seconds_ + seconds;
  if (rows == tokens) {
    decode_weight_ = decay_ * decode_weight_ + 1;
    sum_x_ = decay_ * sum_x_ + r;
    sum_y_ = decay_ * sum_y_ + seconds;
    sum_xx_ = decay_ * sum_xx_ + r * r;
    sum_xy_ = decay_ * sum_xy_ + r * seconds;
    return;
  }
  // What the prompt tokens took: the step beyond its decode-only prediction.
  const double excess = seconds - FixedSeconds() - RowSeconds() * r;
  prompt_seconds_ = decay_ * prompt_seconds_ + std::max(0.0, excess);
  prompt_tokens_ = decay_ * prompt_tokens_ + (t - r);
}

double StepCostModel::RowSeconds() const {
  if (decode_weight_ <= 0) return all_tokens_ > 0 ? all_seconds_ / all_tokens_ : 0;
  const double mean = sum_x_ > 0 ? sum_y_ / sum_x_ : 0;
  if (decode_weight_ < min_samples_) return mean;
  const double mean_x = sum_x_ / decode_weight_;
  const double mean_y = sum_y_ / decode_weight_;
  const double var_x = sum_xx_ / decode_weight_ - mean_x * mean_x;
  // Steps all (nearly) the same size: no slope to fit.
  if (!(var_x > 0.25)) return mean;
  const double slope = (sum_xy_ / decode_weight_ - mean_x * mean_y) / var_x;
  return std::clamp(slope, 0.1 * mean, 2 * mean);
}

double StepCostModel::FixedSeconds() const {
  if (decode_weight_ <= 0) return 0;
  return std::max(0.0, (sum_y_ - RowSeconds() * sum_x_) / decode_weight_);
}

double StepCostModel::TokenSeconds() const {
  const double row = RowSeconds();
  if (prompt_tokens_ <= 0) return row;
  return std::min(row, prompt_seconds_ / prompt_tokens_);
}

double StepCostModel::PredictSeconds(int64_t tokens, int64_t rows) const {
  if (!has_data()) return 0;
  rows = std::clamp<int64_t>(rows, 0, std::max<int64_t>(tokens, 0));
  return FixedSeconds() + RowSeconds() * static_cast<double>(rows) +
         TokenSeconds() * static_cast<double>(std::max<int64_t>(tokens, 0) - rows);
}

BackgroundBudget StepCostModel::BackgroundBudgetFor(int64_t foreground_rows,
                                                    double max_slowdown) const {
  const double row = RowSeconds();
  if (!(row > 0)) return {};
  // A prompt token that costs (nearly) nothing is priced at 1% of a row, so the units stay
  // finite.
  const double token = std::max(TokenSeconds(), 0.01 * row);
  constexpr double kMaxUnits = 1e9;
  BackgroundBudget budget;
  budget.sample_cost = std::lround(std::min((row - token) / token, 1e6));
  const double units = max_slowdown * PredictSeconds(foreground_rows, foreground_rows) / token;
  budget.tokens = static_cast<int64_t>(std::floor(std::clamp(units, 0.0, kMaxUnits)));
  budget.tokens = std::max(budget.tokens, 1 + budget.sample_cost);
  return budget;
}

}  // namespace strata::engine
