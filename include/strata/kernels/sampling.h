// Launch API of the device sampling kernels (kernels/sampling.cu): greedy argmax and
// temperature / top-k / min-p / top-p sampling per row of logits, one CTA per row. Plain C++:
// callers need no CUDA headers. Pointers are device pointers; `stream` is a cudaStream_t
// (nullptr: the default stream). Each returns the cudaError_t of the launch as an int
// (0 = success); a bad shape or null pointer returns cudaErrorInvalidValue (as int) without
// launching. The logits are only read. Penalties are not applied here: the caller applies them
// to the logits first (as Sampler::Sample does before everything below).
//
// Semantics are those of strata::sampling::Sampler (include/strata/sampling/sampler.h), with the
// random draw supplied by the host (`u`, so the host's seeded Xoshiro256 stays the only source of
// randomness; pass Xoshiro256::NextDouble() to reproduce the CPU sampler's draw):
//   - NaN counts as -inf. The maximum and its lowest id are found first; temperature <= 0, or no
//     finite maximum (every logit -inf, or any +inf), returns that argmax with no draw.
//   - weights w = DeterministicExp((logit - max) * (1 / temperature)), the same IEEE operations
//     in the same order as the CPU (so the weights are bit-identical; the best token weighs 1).
//   - top_k (0 < top_k < vocab): keep the top_k highest logits, ties to the lower id.
//   - min_p (> 0): of those, drop tokens with w < min_p.
//   - top_p (< 1): of those, keep the smallest set of the heaviest (ties to the lower id) whose
//     weight reaches top_p times the weight top_k kept (before min_p); all of them if they fall
//     short.
//   - draw: the first kept token in ascending id order whose running weight exceeds u times
//     the kept total (inverse CDF in id order, as the CPU sampler; not descending probability).
//
// What is and is not bit-identical to the CPU Sampler given the same u:
//   identical: the NaN rule, greedy/argmax (always), the weights, the top_k set (exact radix
//   select on the logits' order keys) and the min_p set.
//   not identical: sums. The CPU sums float weights in double in a fixed order; here every
//   weight is rounded to a 64-bit fixed-point integer w * 2^45 (to nearest) and summed exactly,
//   so sums are deterministic (independent of thread scheduling) and differ from the CPU's by
//   at most vocab * 2^-46 (<= 4e-9 at vocab 262,144; the total is >= 1). Hence the top_p cut
//   and the drawn token can differ from the CPU only when top_p * total or u * kept_total
//   falls within that distance of a cumulative boundary; and a token whose weight is below
//   2^-46 (probability < 1.5e-14 of the best token's) rounds to 0 and is never drawn.
// Cost per row: up to ~13 passes over the row's logits (argmax; 4 radix-histogram passes and a
// tie pass for top_k; a sum; 4 + 1 for top_p; the draw), each cheap and L2-resident; a
// plain temperature draw needs 2 passes after the argmax.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Per-row sampling parameters (validated by the caller as SamplingParams::Validate does).
struct DeviceSamplingParams {
  float temperature = 1.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0 or >= vocab: keep all
  float top_p = 1.0f;        // in (0, 1]; 1 keeps all
  float min_p = 0.0f;        // in [0, 1]; 0 keeps all
  double u = 0.0;            // the row's uniform draw in [0, 1) (clamped into it)
};

// The largest vocab the sampling kernels accept (fixed-point sums must fit 64 bits).
inline constexpr int64_t kMaxSamplingVocab = (int64_t{1} << 19) - 1;

// tokens[r] = the id of the highest logits[r * ld + i] for i < vocab, ties to the lowest id,
// NaN as -inf (so a row of NaN/-inf gives 0). Sampler's greedy rule.
//   logits: [rows, ld] fp32 (first vocab columns used); tokens: [rows] int32.
// 1 <= vocab <= kMaxSamplingVocab, ld >= vocab; rows == 0 does nothing.
int LaunchArgMax(const float* logits, int64_t rows, int64_t vocab, int64_t ld, int32_t* tokens,
                 void* stream);

// tokens[r] = the token sampled from row r under params[r] (see the top of this file).
//   logits: [rows, ld] fp32; params: [rows] DeviceSamplingParams (device memory);
//   tokens: [rows] int32. Same shape limits as LaunchArgMax.
int LaunchSample(const float* logits, int64_t rows, int64_t vocab, int64_t ld,
                 const DeviceSamplingParams* params, int32_t* tokens, void* stream);

}  // namespace strata::kernels
