// AdaptiveBudget: picks the per-step token budget from load and an inter-token latency target
// (`--batching adaptive --target-itl-ms`).
//
// Every step that carried decodes is an inter-token gap for each decoding sequence, so its
// duration is what clients see between tokens. The controller is additive-increase /
// multiplicative-decrease (the TCP congestion rule, Chiu & Jain 1989) on that signal:
//   - step time above the target: budget *= decrease (the batch is too big for the target);
//   - step time below `headroom` x target while work waits (queued requests, or prefill
//     tokens left over because the budget ran out): budget += increase;
//   - otherwise it holds.
// The budget stays within [min_budget, max_budget] and never below the floor the engine passes
// with each step: one token per running sequence plus min_prefill_tokens while prompts wait, so
// neither side starves when the target cannot be met (many streams on a slow machine): every
// decode still gets its token each step and arrivals still make progress, which bounds TTFT.
// Steps without decodes (pure prefill) give no ITL sample and leave the budget alone.
//
// Thread rules: engine thread only. Deterministic: the same observations give the same budgets.
#pragma once

#include <cstdint>

#include "strata/common/status.h"

namespace strata::engine {

struct AdaptiveBudgetOptions {
  double target_itl_seconds = 0.1;
  int64_t min_budget = 16;
  int64_t max_budget = 8192;
  int64_t initial_budget = 256;
  int64_t increase = 32;   // tokens added per step with headroom
  double decrease = 0.75;  // factor applied per step over the target
  double headroom = 0.8;   // grow only below this fraction of the target
  // Prompt tokens a step keeps for waiting prompts whatever the target (see the floor above).
  int64_t min_prefill_tokens = 64;

  // INVALID_ARGUMENT naming the first bad field (they come from flags).
  Status Validate() const;
};

class AdaptiveBudget {
 public:
  // `options` must be valid (Validate).
  explicit AdaptiveBudget(const AdaptiveBudgetOptions& options);

  // Reports one finished step: its wall time, whether it carried at least one decode, and
  // whether work was left waiting (queued requests or unscheduled prompt tokens). Returns the
  // budget for the next step, at least min(floor, max_budget); the engine's floor is
  // Floor(running sequences, work_waiting).
  int64_t Observe(double step_seconds, bool had_decodes, bool work_waiting, int64_t floor = 0);

  // One token per running sequence, plus min_prefill_tokens while prompts wait.
  int64_t Floor(int64_t running_sequences, bool prompts_waiting) const;

  int64_t budget() const { return budget_; }

 private:
  AdaptiveBudgetOptions options_;
  int64_t budget_;
};

}  // namespace strata::engine
