// DraftModelProposer: a second, smaller model with the target's vocabulary guesses the next
// tokens greedily (Leviathan et al., "Fast Inference from Transformers via Speculative
// Decoding", 2023; llama.cpp's and vLLM's draft-model speculation).
//
// The draft model runs on its own backend with its own KV blocks. Per sequence it remembers
// which tokens its KV holds; each step it rolls that back to the longest prefix the sequence
// still shares (the accepted drafts stay, the rejected ones go), catches up on the tokens it
// has not seen (the whole prompt the first time), then decodes the draft one token a pass. All
// sequences of a step share each pass (ProposeAll): 1 + max_tokens - 1 batched forwards.
//
// When the draft's KV pool runs short it drops the state of sequences outside the current
// step, then gives up on the sequences that still do not fit (they get no draft this step). A
// failed draft forward (which a well-formed batch never gives) costs the step's drafts only.
//
// Thread rules: the engine thread only; the draft backend is driven by it alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/engine/proposer.h"
#include "strata/kv/block_pool.h"
#include "strata/kv/block_table.h"

namespace strata::engine {

class DraftModelProposer final : public Proposer {
 public:
  // `draft` must outlive the proposer. INVALID_ARGUMENT when its vocabulary size is not
  // `target_vocab_size` (its token ids would mean other tokens).
  static StatusOr<std::unique_ptr<DraftModelProposer>> Create(backend::Backend* draft,
                                                              int64_t target_vocab_size);

  void ProposeAll(std::span<const DraftRequest> requests) override;
  void Propose(kv::SequenceId id, std::span<const int32_t> tokens, int32_t max_tokens,
               std::vector<int32_t>* draft) override;
  void Forget(kv::SequenceId id) override;

  // Draft forwards run and tokens they computed, since construction.
  int64_t forward_passes() const { return forward_passes_; }
  int64_t forward_tokens() const { return forward_tokens_; }
  // Sequences whose draft KV is kept.
  size_t tracked_sequences() const { return states_.size(); }

 private:
  struct State {
    explicit State(int32_t block_size) : table(block_size) {}
    kv::BlockTable table;
    std::vector<int32_t> cached;  // the tokens whose KV the table holds, in order
  };
  // One sequence's part of this step.
  struct Job {
    const DraftRequest* request;
    State* state;
    std::vector<int32_t> slice;  // what the next pass runs for it
    int64_t start = 0;
  };

  explicit DraftModelProposer(backend::Backend* draft);
  // Makes `state` hold room for `tokens` positions, dropping idle sequences' states when the
  // pool is short. False when it cannot.
  bool Reserve(State* state, int64_t tokens, std::span<const DraftRequest> step);
  // One batched forward of every job's slice; the greedy next token of each. False on error.
  bool Run(std::vector<Job>& jobs, std::vector<int32_t>* next);

  backend::Backend* draft_;
  kv::BlockPool pool_;
  std::unordered_map<kv::SequenceId, State> states_;
  std::vector<float> logits_;
  int64_t forward_passes_ = 0;
  int64_t forward_tokens_ = 0;
};

}  // namespace strata::engine
