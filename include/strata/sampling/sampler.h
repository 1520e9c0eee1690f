// Sampler: turns one sequence's logits into its next token.
//
// Owned by the engine thread, one per sequence; not thread-safe. Sample() uses O(vocab)
// scratch memory held per calling thread (not per Sampler, about 4 MB at V = 262,144), so a
// Sampler itself holds only its parameters, its generator and its penalty window.
//
// Order of operations on the logits (the OpenAI/vLLM order, which applies temperature before
// the truncations; llama.cpp applies it last):
//   1. penalties over the penalty window (see SamplingParams and PenaltyWindow);
//   2. temperature = 0: greedy, the highest logit, ties to the lowest id; done, no draw;
//   3. top_k: the k highest logits (ties to the lower id);
//   4. weights w = exp((logit - max) / temperature) over those (the softmax numerators, in
//      float with the maximum subtracted, by DeterministicExp);
//   5. min_p: drop tokens with w < min_p (the best token has w = 1);
//   6. top_p: keep the smallest set of the heaviest tokens (ties to the lower id) whose weight
//      reaches top_p of the total that top_k left. After 5 this keeps the intersection of the
//      min_p and top_p sets (both are prefixes of the same order), so their order is moot;
//   7. one draw u in [0, 1) from Xoshiro256, and the first kept token in ascending id order
//      whose running weight exceeds u times the kept total (inverse CDF).
// Every selection is unique (a strict total order) and every sum runs in an order this code
// fixes, none chosen by a standard library, and the weights use only IEEE basic operations:
// the same seed, params and logits give the same tokens on every platform (built with
// -ffp-contract=off; see deterministic_exp.h).
//
// Cost for a vocabulary of V (no full sort anywhere): greedy is a vectorised max pass (a
// second pass with penalties). Sampling adds one vectorised weight pass and a block-sum pass.
// top_k = k finds the k-th logit by radix select (three histogram passes over shrinking sets),
// after a bound from block maxima narrows small k to a few candidates. top_p (without top_k)
// first drops every token lighter than (1 - top_p) * total / V, whose combined weight is
// provably below 1 - top_p of the total, then radix-selects the nucleus's end over the rest;
// only a near-uniform distribution leaves most of V to that step. The passes over all of V
// (weights, block sums, the floor) are built per vector width and picked at load time
// (baseline, AVX2, AVX-512F; the same bits on each). Roughly, at V = 262,144 on one AMD EPYC
// (Zen 4) core (bench/sampler_bench.cc): greedy 0.07 ms; temperature alone 0.22 ms; top_k =
// 40 + top_p 0.35 ms; top_p = 0.95 on a peaked distribution 0.3 ms, on a normal one 0.8 ms.
//
// Logits: finite values or -inf (a masked token). NaN counts as -inf. Were every logit -inf,
// or any +inf, no distribution exists and Sample() returns the greedy choice. Tokens less
// likely than e^-87 times the best one get weight 0 and are never sampled.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "strata/sampling/logprobs.h"
#include "strata/sampling/penalty_window.h"
#include "strata/sampling/sampling_params.h"
#include "strata/sampling/xoshiro256.h"

namespace strata::sampling {

class Sampler {
 public:
  // `params` must have passed Validate(). The prompt's tokens enter the penalty window as
  // llama.cpp's server does (only the last penalty_last_n of them matter).
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt_tokens);

  // Picks the next token from `logits` ([vocab_size], non-empty); may overwrite `logits` with
  // unspecified values. Consumes exactly one draw of the generator when temperature > 0 (even
  // when no finite maximum leaves nothing to draw from), none at temperature 0, so replaying the
  // same calls in the same order gives the same tokens. Does not add the token to the penalty
  // window: call Accept() for each token the sequence actually keeps (a speculative draft may be
  // rejected).
  int32_t Sample(std::span<float> logits);

  // Appends a kept token to the penalty window.
  void Accept(int32_t token);

  // Sampling on a backend (Backend::ForwardSampled, the device kernels of kernels/sampling.h):
  // DrawForBackend consumes the draw Sample() would have (u in [0, 1) when temperature > 0,
  // else 0 and no draw) and the backend is given the penalty window's counts
  // (penalty_window().AppendCounts); the token it returns is SampleWithDraw(params(), counts,
  // logits, u, ...), and is then passed to Accept() as usual. SetLogprobs records the
  // log-probabilities the backend computed for it.
  double DrawForBackend();
  void SetLogprobs(SampleLogprobs logprobs) { logprobs_ = std::move(logprobs); }

  // What Sample() computes, with everything it takes from the sampler given instead: the
  // penalty window's counts (penalties with params' coefficients; empty: none) and the draw u
  // (unused at temperature 0). Sample() is this with its own window and draw; it is also the
  // reference backend sampling is tested against. With params.logprobs > 0 and `logprobs` not
  // null, *logprobs receives the log-probabilities. May overwrite `logits`.
  static int32_t SampleWithDraw(const SamplingParams& params, std::span<const TokenCount> counts,
                                std::span<float> logits, double u, SampleLogprobs* logprobs);

  // Log-probabilities of the last Sample(); empty `top` and chosen = {} unless
  // params.logprobs > 0.
  const SampleLogprobs& last_logprobs() const { return logprobs_; }

  const SamplingParams& params() const { return params_; }
  const PenaltyWindow& penalty_window() const { return penalties_; }

 private:
  static int32_t SampleStochastic(const SamplingParams& params, std::span<float> logits,
                                  float max_logit, double u);
  static void FillLogprobs(int32_t n, std::span<const float> raw_logits, float raw_max,
                           int32_t chosen, SampleLogprobs* out);

  SamplingParams params_;
  Xoshiro256 rng_;
  PenaltyWindow penalties_;
  SampleLogprobs logprobs_;
};

}  // namespace strata::sampling
