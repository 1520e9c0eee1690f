#include "strata/sampling/penalty_window.h"

namespace strata::sampling {

PenaltyWindow::PenaltyWindow(const SamplingParams& params)
    : enabled_(params.penalty_last_n != 0 &&
               (params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                params.frequency_penalty != 0.0f)),
      last_n_(params.penalty_last_n),
      repetition_penalty_(params.repetition_penalty),
      presence_penalty_(params.presence_penalty),
      frequency_penalty_(params.frequency_penalty) {
  STRATA_CHECK(last_n_ >= -1);
  STRATA_CHECK(repetition_penalty_ > 0.0f);
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

bool PenaltyWindow::Apply(std::span<float> logits) const {
  if (!enabled_ || counts_.empty()) return false;
  for (const auto& [token, count] : counts_) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    float& logit = logits[static_cast<size_t>(token)];
    // CTRL's penalty divides, which would raise a negative logit; llama.cpp multiplies those.
    logit = logit > 0.0f ? logit / repetition_penalty_ : logit * repetition_penalty_;
    logit -= static_cast<float>(count) * frequency_penalty_ + presence_penalty_;
  }
  return true;
}

int32_t PenaltyWindow::Count(int32_t token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace strata::sampling
