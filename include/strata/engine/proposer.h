// Proposer: where speculative decoding's draft tokens will come from (prompt lookup, a draft
// model, the target's own first layers: issue 18). This is the seam only: no proposer exists
// yet and the engine calls none. What the engine already has for one: ModelRunner rows that
// can carry several tokens per sequence (LogitsWanted::kAll), OutputProcessor::Append of a run
// of accepted tokens, Scheduler::AppendTokens and Scheduler::Rollback, and
// KvCacheManager::Truncate for the KV of rejected tokens.
//
// Thread rules: called by the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/kv/kv_cache_manager.h"

namespace strata::engine {

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Appends to *draft up to `max_tokens` tokens expected to follow `tokens` (sequence `id`'s
  // tokens so far, prompt then output); appends none when it has no guess.
  virtual void Propose(kv::SequenceId id, std::span<const int32_t> tokens, int32_t max_tokens,
                       std::vector<int32_t>* draft) = 0;

  // Sequence `id` finished, was cancelled or preempted: drop whatever state is kept for it.
  virtual void Forget(kv::SequenceId /*id*/) {}
};

}  // namespace strata::engine
