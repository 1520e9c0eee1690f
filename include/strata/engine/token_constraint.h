// TokenConstraint: what one request's output may be, token by token (structured output: a JSON
// Schema, a regular expression, a grammar, a list of choices; the server builds them from the
// grammar module). Before it samples the request's next token the engine asks which tokens may
// come next, sets every other token's logit to -inf, samples from what is left with the
// request's own sampler (temperature, top_k/top_p and seed as usual), and hands the chosen
// token back.
//
// The mask goes with the row to wherever the row is sampled: on the CUDA device as a bitmask
// (only the token comes back), on the host otherwise. A request may be decoded speculatively:
// each row of a drafted chunk is masked on the host by the state the kept tokens before it
// reached, so a draft token the format does not allow is simply rejected, and the constraint
// only ever sees the tokens the request keeps (no rollback needed).
//
// Thread rules: the frontend builds it; once the request is submitted the engine uses it from
// one thread at a time (its own, or its mask helper while the request waits for a mask).
#pragma once

#include <cstdint>
#include <span>

namespace strata::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // Sets bit (i % 32) of allowed[i / 32] for each token id i that may come next; `allowed`
  // covers the vocabulary ((vocab_size + 31) / 32 words) and is zeroed by the caller. An
  // end-of-generation token is allowed exactly when the output may end here. Leaving every bit
  // clear means the output cannot go on: the engine ends the request with an error.
  virtual void FillAllowed(std::span<uint32_t> allowed) = 0;

  // The token chosen next, one the last FillAllowed allowed. False (nothing changed) if it was
  // not allowed; the engine then ends the request with an error.
  virtual bool Accept(int32_t token) = 0;

  // Whether FillAllowed would be quick now (cached work, microseconds). When it is not (a
  // grammar position seen for the first time: milliseconds to hundreds of them), the engine
  // runs FillAllowed on a helper thread and does not sample the request until the mask is
  // ready, rather than make every other request's step wait for it.
  virtual bool AllowedIsCheap() { return true; }
};

}  // namespace strata::engine
