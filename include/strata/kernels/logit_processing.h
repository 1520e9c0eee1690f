// Launch API of the kernels that prepare a row of logits for sampling and report its
// log-probabilities (kernels/logit_processing.cu): structured output's token masks and
// repetition/frequency/presence penalties in place, and the log-softmax of the chosen token and
// of the most likely ones. Plain C++ like
// sampling.h: device pointers, `stream` a cudaStream_t, each returns the launch's cudaError_t as
// an int (0 = success), cudaErrorInvalidValue (as int) for a bad shape without launching.
//
// Semantics are strata::sampling's, operation for operation where it matters:
//   - penalties: sampling::ApplyPenalties, each operation rounded on its own (no FMA), so the
//     penalized logits are bit-identical to the CPU's;
//   - log-probabilities: Sampler's (include/strata/sampling/logprobs.h), of the logits before
//     penalties. The maximum, the top tokens (canonical order: larger first, ties to the lower
//     id, NaN as -inf) and the chosen token's raw logit are exact; the normalizer's sum of
//     DeterministicExp weights runs in double in another order than the CPU's, so a reported
//     value can differ from the CPU's in the last float bit.
//   - token masks: sampling::ApplyTokenMask (exact: a cleared bit's logit becomes -inf).
// Order on a step: LaunchApplyTokenMask (structured output's rows), LaunchLogprobs (the masked
// logits), LaunchApplyPenalties, the sampling kernels, then LaunchChosenLogprobs (which reads
// the values the penalties saved).
#pragma once

#include <cstdint>

namespace strata::kernels {

inline constexpr int32_t kMaxTopLogprobs = 20;

// Row `row` of the logits gets the penalties of entries [begin, begin + count) of the token and
// count arrays (distinct tokens; ids outside [0, vocab) are skipped).
struct DevicePenaltyRow {
  int32_t row = 0;
  int32_t begin = 0;
  int32_t count = 0;
  float repetition = 1.0f;
  float frequency = 0.0f;
  float presence = 0.0f;
};

// Row `row` reports its chosen token and its top_n (1..kMaxTopLogprobs) most likely tokens;
// penalty_row is the index of the row's DevicePenaltyRow, or -1 when it has none.
struct DeviceLogprobRow {
  int32_t row = 0;
  int32_t top_n = 1;
  int32_t penalty_row = -1;
};

struct DeviceTokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct DeviceRowLogprobs {
  float max_logit = 0.0f;       // NaN as -inf
  float log_normalizer = 0.0f;  // max + log(sum exp(x - max))
  DeviceTokenLogprob chosen;
  DeviceTokenLogprob top[kMaxTopLogprobs];  // the first min(top_n, vocab) entries are set
};

// logits: [rows, ld] fp32, changed in place at the penalized tokens; tokens, counts: the
// entries; saved: [entries] fp32, gets each entry's logit before its penalty.
int LaunchApplyPenalties(float* logits, int64_t vocab, int64_t ld, const DevicePenaltyRow* rows,
                         int32_t num_rows, const int32_t* tokens, const int32_t* counts,
                         float* saved, void* stream);

// Row rows[i] of the logits keeps only the tokens whose bit is set in mask i, words
// [i * W, (i + 1) * W) of `words` with W = (vocab + 31) / 32 (bit t % 32 of word t / 32, as in
// include/strata/sampling/token_mask.h); every other logit of the row becomes -inf.
int LaunchApplyTokenMask(float* logits, int64_t vocab, int64_t ld, const int32_t* rows,
                         int32_t num_rows, const uint32_t* words, void* stream);

// out[i]: row rows[i]'s maximum, normalizer and top tokens (chosen is left alone).
int LaunchLogprobs(const float* logits, int64_t vocab, int64_t ld, const DeviceLogprobRow* rows,
                   int32_t num_rows, DeviceRowLogprobs* out, void* stream);

// out[i].chosen: the log-probability of sampled[rows[i].row] under row rows[i].row's raw
// logits (its saved value where a penalty changed it), after LaunchLogprobs filled out[i].
int LaunchChosenLogprobs(const float* logits, int64_t vocab, int64_t ld,
                         const DeviceLogprobRow* rows, int32_t num_rows, const int32_t* sampled,
                         const DevicePenaltyRow* penalty_rows, const int32_t* penalty_tokens,
                         const float* saved, DeviceRowLogprobs* out, void* stream);

}  // namespace strata::kernels
