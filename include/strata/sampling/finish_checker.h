// FinishChecker: decides, token by token, when a sequence is finished and which of its text
// may be streamed, applying the stop conditions of its SamplingParams in a fixed order.
//
// For each generated token, in this order:
//   1. stop token: the token is in stop_token_ids, or is an end-of-generation id (from the
//      caller, e.g. Vocab::EndOfGenerationIds()) and ignore_eos is false -> kStop. The token's
//      text is neither emitted nor matched against stop strings; text held back before it is
//      released by Finish().
//   2. stop string: the token's text completes a stop string -> kStop. The text before the
//      stop string is emitted; the stop string and anything after it never are.
//   3. length: the token is the max_tokens-th -> kLength. Its text is emitted (what a stop
//      string might still have claimed is released by Finish()).
// Every generated token counts toward max_tokens, the stopping one included. With ignore_eos,
// an end-of-generation token is an ordinary token: its text (usually "" unless special tokens
// are rendered) goes through the stop strings like any other.
//
// Use (engine thread; one per sequence; not thread-safe):
//   FinishChecker::Step step = checker.Append(token, detokenizer.Push(token));
//   Send(step.text);
//   if (step.finish_reason) {
//     FinishChecker::Step last = checker.Finish(detokenizer.Flush(), *step.finish_reason);
//     Send(last.text);  then report *last.finish_reason
//   }
// and, when the engine ends the sequence itself (context full: kLength; cancelled; error),
// Finish(detokenizer.Flush(), reason).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/sampling/finish_reason.h"
#include "strata/sampling/sampling_params.h"
#include "strata/sampling/stop_checker.h"

namespace strata::sampling {

class FinishChecker {
 public:
  struct Step {
    std::string text;                           // safe to send now (may be "")
    std::optional<FinishReason> finish_reason;  // set once the sequence is finished
  };

  // `params` must have passed Validate(). `end_of_generation_ids`: the model's EOS/EOT ids.
  FinishChecker(const SamplingParams& params, std::span<const int32_t> end_of_generation_ids);

  // Records one generated token and `text`, the text it added (the detokenizer's delta).
  // Must not be called once finished().
  Step Append(int32_t token, std::string_view text);

  // Ends the sequence and returns the last text to send with the final reason. `tail` is text
  // not yet given to Append() (the detokenizer's flush: an unfinished UTF-8 sequence); it is
  // still checked against the stop strings unless one already matched. `reason` applies when
  // Append() has not returned one; otherwise Append()'s reason stands. Either way, a stop
  // string completed by `tail` turns a kLength into kStop. Call once.
  Step Finish(std::string_view tail, FinishReason reason);

  bool finished() const { return finish_reason_.has_value(); }
  std::optional<FinishReason> finish_reason() const { return finish_reason_; }
  // Tokens given to Append().
  int32_t num_tokens() const { return num_tokens_; }
  // What stopped the sequence, for clients that ask (vLLM's `stop_reason`): the token id of
  // step 1, or the index into params.stop of step 2. Otherwise empty.
  std::optional<int32_t> stop_token() const { return stop_token_; }
  std::optional<int> stop_string_index() const;

 private:
  bool IsStopToken(int32_t token) const;

  int32_t max_tokens_;
  std::vector<int32_t> stop_tokens_;  // sorted: stop_token_ids plus, unless ignore_eos, EOG ids
  StopChecker stop_strings_;
  int32_t num_tokens_ = 0;
  std::optional<FinishReason> finish_reason_;
  std::optional<int32_t> stop_token_;
  bool finish_called_ = false;
};

}  // namespace strata::sampling
