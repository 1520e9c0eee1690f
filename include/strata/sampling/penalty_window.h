// PenaltyWindow: the recent tokens a sequence's repetition, frequency and presence penalties
// look at, and the penalties themselves (the formulas are on SamplingParams).
//
// Semantics follow llama.cpp's penalties sampler: a window of the last `penalty_last_n` tokens
// (-1: unbounded, 0: disabled), one count per token id over the window, and for each id with
// count c > 0:
//   logit = logit > 0 ? logit / repetition_penalty : logit * repetition_penalty
//   logit -= c * frequency_penalty + presence_penalty
//
// Not thread-safe; owned by one Sampler.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "strata/sampling/sampling_params.h"

namespace strata::sampling {

// A token and its occurrences in a penalty window.
struct TokenCount {
  int32_t token = 0;
  int32_t count = 0;
};

// The penalties (formula above) of `params` applied in place to logits[token] for each entry
// of `counts` (distinct tokens); tokens outside [0, logits.size()) are skipped.
void ApplyPenalties(const SamplingParams& params, std::span<const TokenCount> counts,
                    std::span<float> logits);

class PenaltyWindow {
 public:
  // Takes penalty_last_n and the three coefficients from `params` (assumed validated).
  explicit PenaltyWindow(const SamplingParams& params);

  // Appends `token` to the window, dropping the oldest token when it is full. Ignored when the
  // penalties are disabled (penalty_last_n = 0 or all three coefficients neutral).
  void Push(int32_t token);

  // Appends one entry per distinct token in the window (in no particular order); nothing when
  // the penalties are disabled.
  void AppendCounts(std::vector<TokenCount>* out) const;

  // Occurrences of `token` in the window.
  int32_t Count(int32_t token) const;
  // Tokens in the window (at most penalty_last_n unless unbounded).
  size_t size() const { return size_; }
  // False when the penalties can never change a logit.
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  int32_t last_n_;  // -1: unbounded
  size_t size_ = 0;
  std::deque<int32_t> window_;  // oldest first; empty when unbounded (only counts are needed)
  std::unordered_map<int32_t, int32_t> counts_;  // id -> count > 0
};

}  // namespace strata::sampling
