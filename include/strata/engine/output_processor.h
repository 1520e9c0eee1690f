// OutputProcessor: what becomes of one request's tokens once they are chosen, the same for
// every caller (the Engine's requests and the single-request Generator): each kept token enters
// the sampler's penalty window, is detokenized incrementally and goes through the stop
// conditions (FinishChecker: stop ids and end-of-generation, stop strings, max_tokens). Tokens
// come one per step today and several at once once speculative tokens are verified; the first
// token that finishes the request is the last one kept, and the text held back for a possible
// stop string is released when the request finishes.
//
// Thread rules: one per request, used by one thread at a time (the engine loop).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/sampling/finish_checker.h"
#include "strata/sampling/finish_reason.h"
#include "strata/sampling/sampler.h"
#include "strata/sampling/sampling_params.h"
#include "strata/tokenizer/incremental_detokenizer.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::engine {

class OutputProcessor {
 public:
  struct Output {
    std::vector<int32_t> token_ids;  // the tokens kept, in order (the finishing one included)
    std::vector<sampling::SampleLogprobs> logprobs;       // one per kept token, when given
    std::string text;                                     // text they made safe to show
    std::optional<sampling::FinishReason> finish_reason;  // set on the request's last output
  };

  // `params` must have passed Validate(); `tokenizer` must outlive the processor.
  OutputProcessor(const sampling::SamplingParams& params, const tokenizer::Tokenizer& tokenizer,
                  std::span<const int32_t> end_of_generation_ids);

  // Keeps `tokens` in order until one finishes the request (those after it are dropped).
  // `logprobs` is empty or has one entry per token. Each kept token is Accept()ed by `sampler`
  // (may be null). Must not be called once finished().
  Output Append(std::span<const int32_t> tokens, std::span<const sampling::SampleLogprobs> logprobs,
                sampling::Sampler* sampler);

  // Ends the request now for `reason` (cancelled, failed, stopped by the engine): releases the
  // text held back. Must not be called once finished().
  Output Finish(sampling::FinishReason reason);

  bool finished() const { return finished_; }

 private:
  sampling::FinishChecker checker_;
  tokenizer::IncrementalDetokenizer detokenizer_;
  bool finished_ = false;
};

}  // namespace strata::engine
