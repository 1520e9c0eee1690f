// NgramProposer: prompt-lookup decoding (Saxena, "Prompt Lookup Decoding", 2023; vLLM's and
// TGI's n-gram speculation). No model: the last n tokens of the sequence are looked up among
// its earlier tokens (prompt and output), and the tokens that followed their most recent
// earlier occurrence are the draft. n runs from max_ngram down to min_ngram; the longest
// suffix that occurred before wins. Pays off when the output copies its input (summaries,
// quotes, edits, code changes) and costs nothing to propose.
//
// Stateless: a scan of the sequence's tokens per call, O(tokens * max_ngram) at worst (a few
// microseconds for thousands of tokens). Thread rules: the engine thread only, like every
// Proposer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/common/status.h"
#include "strata/engine/proposer.h"

namespace strata::engine {

struct NgramProposerOptions {
  int32_t min_ngram = 2;  // shortest suffix looked up (>= 1)
  int32_t max_ngram = 4;  // longest (>= min_ngram, <= kMaxNgram)

  static constexpr int32_t kMaxNgram = 64;

  // INVALID_ARGUMENT naming the field (these come from flags).
  Status Validate() const;
};

class NgramProposer final : public Proposer {
 public:
  explicit NgramProposer(const NgramProposerOptions& options);

  void Propose(kv::SequenceId id, std::span<const int32_t> tokens, int32_t max_tokens,
               std::vector<int32_t>* draft) override;

 private:
  NgramProposerOptions options_;
};

}  // namespace strata::engine
