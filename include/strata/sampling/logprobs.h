// Log-probabilities of a sampled token and of the most likely alternatives, as the sampler and
// the backends that sample on their device report them.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::sampling {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // natural log
};

// Log-probabilities under the model's raw distribution: log-softmax of the logits as the
// sampler received them (NaN as -inf), before penalties, temperature and truncation -- what
// OpenAI reports. So a token the sampler could never have picked may still carry a finite
// value, and the chosen token's value does not depend on the sampling parameters. Without a
// finite maximum (every logit -inf, or any +inf) the maxima get 0 and the rest -inf.
struct SampleLogprobs {
  TokenLogprob chosen;            // the sampled token
  std::vector<TokenLogprob> top;  // min(params.logprobs, V) most likely, descending
                                  // logprob, ties to the lower id
};

}  // namespace strata::sampling
