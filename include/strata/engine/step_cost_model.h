// StepCostModel: what a step's wall time is made of, learnt from the engine's recent steps,
//   seconds = fixed + row_seconds * rows + token_seconds * (tokens - rows),
// where `rows` are the tokens whose logits are sampled (decode tokens, a prompt's last token)
// and the other tokens are prompt tokens that only fill the KV cache. The two differ a lot:
// a sampled row also runs the output head, which for a large vocabulary is most of the weights
// (Gemma 3 270M: 168M of its 268M parameters).
//   - fixed and row_seconds: exponentially weighted least squares over decode-only steps (every
//     token sampled); while their sizes do not vary enough to fit a slope, row_seconds is the
//     mean seconds per row, which overstates the marginal cost (safe for the budget below);
//     a fitted slope is kept within [0.1, 2] x that mean.
//   - token_seconds: over steps with prompt tokens, what the step took beyond the decode-only
//     prediction, per prompt token (weighted mean, at most row_seconds). Until such a step is
//     seen it is row_seconds.
// The engine uses it to size background work (batch job lines): what may be added to a step of
// other requests so that it takes at most (1 + max_slowdown) x as long (BackgroundBudgetFor).
//
// Thread rules: engine thread only. Deterministic: the same observations give the same answers.
#pragma once

#include <cstdint>

#include "strata/engine/background_budget.h"

namespace strata::engine {

class StepCostModel {
 public:
  // `decay` in (0, 1): the weight an observation keeps after each newer one; `min_samples`
  // (>= 2): decode-only steps (decayed weight) needed before a slope is fitted.
  explicit StepCostModel(double decay = 0.98, double min_samples = 8);

  // One finished step: the tokens it ran (> 0), how many of them were sampled rows
  // (0..tokens) and its wall time in seconds (>= 0). Others are ignored.
  void Observe(int64_t tokens, int64_t rows, double seconds);

  bool has_data() const { return weight_ > 0; }
  // Seconds of a step apart from its tokens (0 without decode-only data).
  double FixedSeconds() const;
  // Seconds one more sampled row adds (0 before any observation).
  double RowSeconds() const;
  // Seconds one more prompt token that is not sampled adds (0 before any observation).
  double TokenSeconds() const;
  // Predicted seconds of a step of `tokens` tokens of which `rows` are sampled.
  double PredictSeconds(int64_t tokens, int64_t rows) const;

  // What background work may add to a step whose other work is `foreground_rows` decode rows:
  // max_slowdown x PredictSeconds(foreground_rows, foreground_rows) in units of TokenSeconds,
  // with sample_cost = (RowSeconds - TokenSeconds) / TokenSeconds rounded. At least one
  // background decode row (1 + sample_cost) whatever the slowdown, so background work always
  // progresses and frees its memory; the default (no limit) before any observation.
  BackgroundBudget BackgroundBudgetFor(int64_t foreground_rows, double max_slowdown) const;

 private:
  double decay_;
  double min_samples_;
  // All steps: decayed seconds and tokens (the fallback cost per token).
  double weight_ = 0;
  double all_tokens_ = 0;
  double all_seconds_ = 0;
  // Decode-only steps (x = rows, y = seconds).
  double decode_weight_ = 0;
  double sum_x_ = 0;
  double sum_y_ = 0;
  double sum_xx_ = 0;
  double sum_xy_ = 0;
  // Steps with prompt tokens: decayed excess seconds and prompt tokens.
  double prompt_seconds_ = 0;
  double prompt_tokens_ = 0;
};

}  // namespace strata::engine
