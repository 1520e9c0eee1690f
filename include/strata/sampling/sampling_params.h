// SamplingParams: how one request turns logits into tokens and when it stops, with the
// OpenAI-style field names the frontends map one-to-one.
//
// A plain value: the frontend fills it from the request, calls Validate() (which turns every
// bad field into INVALID_ARGUMENT naming the field and its allowed range), and hands a copy to
// the engine. The engine builds a Sampler and a FinishChecker from it and never looks at an
// unvalidated SamplingParams; their constructors assume Validate() returned OK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"

namespace strata::sampling {

// Allowed ranges, shared by Validate() and its messages.
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr float kMaxAbsPresencePenalty = 2.0f;   // OpenAI's range
inline constexpr float kMaxAbsFrequencyPenalty = 2.0f;  // OpenAI's range
inline constexpr int32_t kMaxPenaltyLastN = 1 << 20;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr size_t kMaxStopTokenIds = 256;
inline constexpr int32_t kMaxLogprobs = 20;

struct SamplingParams {
  // Logits are divided by `temperature` before softmax. 0 means greedy: the highest (penalized)
  // logit, ties to the lowest token id, no random draw; top_k/top_p/min_p then do not matter.
  float temperature = 1.0f;
  // Keep only the `top_k` highest logits; 0 (or >= the vocabulary size) keeps all.
  int32_t top_k = 0;
  // Nucleus sampling (Holtzman et al. 2019): keep the smallest set of most likely tokens whose
  // probability (after temperature and top_k) sums to at least `top_p`. 1 keeps all.
  float top_p = 1.0f;
  // Keep tokens whose probability is at least `min_p` times the most likely token's. 0 keeps all.
  float min_p = 0.0f;

  // Penalties over a window of recent tokens: the last `penalty_last_n` tokens of the
  // sequence, *prompt included* (what llama.cpp's server does: it feeds the prompt to its
  // sampler before generating), -1 for the whole sequence, 0 to disable all three penalties.
  // For a token that occurs c > 0 times in the window (llama.cpp's penalties sampler):
  //   logit = logit > 0 ? logit / repetition_penalty : logit * repetition_penalty   (CTRL,
  //           Keskar et al. 2019, with llama.cpp's sign fix; 1 = off)
  //   logit -= c * frequency_penalty + presence_penalty                 (OpenAI; 0 = off)
  // Note this differs from OpenAI/vLLM, whose presence/frequency penalties count generated
  // tokens only; with the default window of 64 the two agree once 64 tokens are generated.
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;

  // Seeds the sampler's generator: the same seed, params and logits give the same tokens on
  // every platform. A request without a seed gets one drawn by the caller (and may report it).
  uint64_t seed = 0;

  // Generation stops when the output text contains one of these (bytes, matched across token
  // boundaries); the stop string and everything after it are not returned.
  std::vector<std::string> stop;
  // Generation stops when one of these tokens is sampled; its text is not returned.
  std::vector<int32_t> stop_token_ids;
  // When true, the model's end-of-generation tokens do not stop generation (stop_token_ids
  // still do).
  bool ignore_eos = false;
  // At most this many tokens are generated (the stopping token included). The engine further
  // limits it to the context the prompt leaves free.
  int32_t max_tokens = 256;

  // Number of most likely alternatives to report per generated token, with the chosen token's
  // log-probability, under the model's raw distribution. 0 = no log-probabilities.
  int32_t logprobs = 0;
};

// OK, or INVALID_ARGUMENT for the first field out of range; the message names the field, the
// allowed range and the value received ("top_p must be greater than 0 and at most 1, got 0").
// `vocab_size` (> 0) bounds stop_token_ids.
Status Validate(const SamplingParams& params, int vocab_size);

}  // namespace strata::sampling
