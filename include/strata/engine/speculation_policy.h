// SpeculationPolicy: how many draft tokens a sequence gets this step, from two measurements
// the engine feeds it.
//
//   * Acceptance: per proposer and per sequence, the chance `a` that a draft token is accepted
//     given that the ones before it were (decayed counts; a new sequence starts from the
//     proposer's running figure). The i-th draft token then adds a^i expected tokens.
//   * Cost: the time of decode steps against the tokens they ran, fitted online as
//     t(n) = fixed + per_token * n (exponentially weighted least squares, starting from a
//     prior so that the first steps already have an answer). One more token in a step of n
//     decode tokens costs per_token / (t(n) / n) tokens' worth of time: ~0.1 when one stream
//     decodes on a CPU (reading the weights dominates), approaching 1 when the batch is large
//     enough that the step is compute-bound. A proposer that runs a model adds the time it
//     takes per draft token (measured too), in the same units: a draft model a fifth the
//     target's size costs ~0.2 a token on its own.
//
// A draft token is worth running while its expected tokens exceed its cost, so the draft
// length is the largest k <= max_draft_tokens with a^k > cost: long drafts for one stream
// copying its input, short ones when guesses miss, none once the batch makes verification as
// dear as decoding (the engine measures where that is on its own hardware and load).
//
// Thread rules: engine thread only.
#pragma once

#include <cstdint>

#include "strata/common/status.h"

namespace strata::engine {

struct SpeculationPolicyOptions {
  int32_t max_draft_tokens = 6;  // 1..kMaxDraftTokens
  // false: every sequence gets max_draft_tokens whenever the proposer has that many (for
  // tests and for measuring the proposer alone).
  bool adaptive = true;
  double prior_acceptance = 0.5;  // a proposer's acceptance before any verification
  double prior_token_cost = 0.1;  // per_token / fixed before any measured variation
  double acceptance_decay = 0.9;  // per verification, for a sequence's counts
  double timing_decay = 0.995;    // per observed step, for the cost fit

  static constexpr int32_t kMaxDraftTokens = 16;

  Status Validate() const;
};

// A sequence's acceptance counts (decayed).
struct SequenceAcceptance {
  double accepted = 0.0;
  double trials = 0.0;
};

class SpeculationPolicy {
 public:
  explicit SpeculationPolicy(const SpeculationPolicyOptions& options);

  // A step that ran only decode and verification chunks: `tokens` in `seconds`.
  void ObserveStep(int64_t tokens, double seconds);

  // The proposer took `seconds` to propose `tokens` draft tokens (> 0).
  void ObserveProposal(int64_t tokens, double seconds);

  // A verification of `proposed` draft tokens of which the first `accepted` were accepted;
  // `rejected` when a draft token was rejected (false when the request finished first or every
  // draft token was accepted).
  void ObserveVerification(SequenceAcceptance* sequence, int64_t proposed, int64_t accepted,
                           bool rejected);

  // Draft tokens for a sequence in a step where `decode_tokens` sequences decode.
  int32_t DraftLength(const SequenceAcceptance& sequence, int64_t decode_tokens) const;

  // The current estimates (for tests, logs and metrics).
  double Acceptance(const SequenceAcceptance& sequence) const;
  double TokenCost(int64_t decode_tokens) const;
  double proposer_acceptance() const;

 private:
  SpeculationPolicyOptions options_;
  // The proposer's acceptance, decayed per verification.
  double accepted_ = 0.0;
  double trials_ = 0.0;
  // Weighted sums for the least-squares fit of seconds against tokens.
  double sw_ = 0.0, sx_ = 0.0, sy_ = 0.0, sxx_ = 0.0, sxy_ = 0.0;
  bool seeded_ = false;
  // The proposer's seconds per draft token (decayed sums).
  double proposal_seconds_ = 0.0, proposal_tokens_ = 0.0;
};

}  // namespace strata::engine
