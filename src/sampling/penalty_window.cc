#include "strata/sampling/penalty_window.h"

namespace strata::sampling {

void ApplyPenalties(const SamplingParams& params, std::span<const TokenCount> counts,
                    std::span<float> logits) {
  for (const TokenCount& c : counts) {
    if (c.token < 0 || static_cast<size_t>(c.token) >= logits.size()) continue;
    float& logit = logits[static_cast<size_t>(c.token)];
    // CTRL's penalty divides, which would raise a negative logit; llama.cpp multiplies those.
    logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    logit -= static_cast<float>(c.count) * params.frequency_penalty + params.presence_penalty;
  }
}

PenaltyWindow::PenaltyWindow(const SamplingParams& params)
    : enabled_(params.penalty_last_n != 0 &&
               (params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                params.frequency_penalty != 0.0f)),
      last_n_(params.penalty_last_n) {
  STRATA_CHECK(last_n_ >= -1);
  STRATA_CHECK(params.repetition_penalty > 0.0f);
}

void PenaltyWindow::Push(int32_t token) {
  if (!enabled_) return;
  ++counts_[token];
  ++size_;
  if (last_n_ < 0) return;
  window_.push_back(token);
  if (window_.size() > static_cast<size_t>(last_n_)) {
    const int32_t oldest = window_.front();
    window_.pop_front();
    --size_;
    auto it = counts_.find(oldest);
    if (--it->second == 0) counts_.erase(it);
  }
}

void PenaltyWindow::AppendCounts(std::vector<TokenCount>* out) const {
  for (const auto& [token, count] : counts_) out->push_back({token, count});
}

int32_t PenaltyWindow::Count(int32_t token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace strata::sampling
