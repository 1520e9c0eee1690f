// Self-speculation's choice of draft: the target's first k layers and its output head, with k
// picked by measurement (Zhang et al., "Draft & Verify: Lossless LLM acceleration via
// self-speculative decoding", 2024; LayerSkip's early exit without its training).
//
// For each candidate k, on a calibration text and the target's own greedy continuation of it:
//   agreement  how often the truncated model's greedy token equals the full model's at the
//              continuation's positions (teacher-forced: one forward each);
//   cost       the truncated model's one-token forward time over the full model's.
// A draft of n tokens then yields (1 - a^(n+1)) / (1 - a) tokens for 1 + n * cost steps'
// worth of time (verification's own extra ignored: it is the same for every k), and the k
// with the best ratio wins. On a model whose output head is most of its weights (Gemma 3
// 270M: 168M of 270M parameters in the tied embedding) every k costs most of a step, and the
// table says so.
//
// Thread rules: runs on the caller's thread at start-up, driving both backends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"

namespace strata::engine {

struct SelfDraftCandidate {
  int32_t layers = 0;
  double agreement = 0.0;  // in [0, 1]
  double cost = 0.0;       // one-token forward time relative to the full model's
  double speedup = 0.0;    // expected tokens per unit of time against plain decoding
};

// Makes the truncated backend of `layers` layers (its own KV), for the candidates.
using TruncatedBackendFactory =
    std::function<StatusOr<std::unique_ptr<backend::Backend>>(int32_t layers)>;

// Measures every candidate in `layers` (each in [1, the model's layers)) on `calibration`
// (token ids: a prompt; the full model continues it greedily for `continuation` tokens) with
// drafts of `draft_tokens`. Returns the candidates in the order given. `full` must hold
// calibration.size() + continuation tokens of KV in its first blocks (they are overwritten:
// call before serving).
StatusOr<std::vector<SelfDraftCandidate>> MeasureSelfDrafts(
    backend::Backend& full, const TruncatedBackendFactory& make_truncated,
    std::span<const int32_t> layers, std::span<const int32_t> calibration, int32_t continuation,
    int32_t draft_tokens);

// The candidate with the highest expected speedup (the first on ties).
const SelfDraftCandidate& BestSelfDraft(std::span<const SelfDraftCandidate> candidates);

}  // namespace strata::engine
