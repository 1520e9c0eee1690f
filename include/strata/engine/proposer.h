// Proposer: where speculative decoding's draft tokens come from (engine.h verifies them).
// Implementations: NgramProposer (prompt lookup), DraftModelProposer (a smaller model with the
// same vocabulary). A proposer only guesses: whatever it proposes, the engine's verification
// keeps outputs exactly as plain decoding makes them, so a bad guess costs time, never
// correctness. Drafts must be deterministic (greedy guesses, not samples) for that to hold.
//
// Thread rules: called by the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/kv/kv_cache_manager.h"

namespace strata::engine {

// One sequence's call in ProposeAll.
struct DraftRequest {
  kv::SequenceId id = 0;
  std::span<const int32_t> tokens;        // the sequence's tokens so far, prompt then output
  int32_t max_tokens = 0;                 // draft tokens at most (>= 1)
  std::vector<int32_t>* draft = nullptr;  // appended to
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Every sequence that may get a draft this step at once, so that a proposer running a
  // model can batch them. The default calls Propose for each.
  virtual void ProposeAll(std::span<const DraftRequest> requests) {
    for (const DraftRequest& r : requests) Propose(r.id, r.tokens, r.max_tokens, r.draft);
  }

  // Appends to *draft up to `max_tokens` tokens expected to follow `tokens` (sequence `id`'s
  // tokens so far, prompt then output); appends none when it has no guess.
  virtual void Propose(kv::SequenceId id, std::span<const int32_t> tokens, int32_t max_tokens,
                       std::vector<int32_t>* draft) = 0;

  // Sequence `id` ended (finished, cancelled or failed): drop whatever state is kept for it.
  virtual void Forget(kv::SequenceId /*id*/) {}
};

}  // namespace strata::engine
