// Token masks, penalties and log-probabilities on the device (contract: include/strata/kernels/
// logit_processing.h). Token masks: a CTA per (row, slice of the vocabulary), a thread per token
// reading its mask word (a warp shares one) and writing only the tokens it cuts. Penalties: one
// CTA per penalized row, a thread per entry (the entries are distinct tokens, so no two threads
// touch one logit). Log-probabilities: one CTA per row; an
// argmax pass, a pass summing the weights in double, then one argmax pass per top token, each
// over the tokens after the previous one in the canonical order (top_n <= 20 passes over a row
// that stays in L2).
#include <cuda_runtime.h>

#include <cstdint>

#include "launch_util.cuh"
#include "sampling_common.cuh"
#include "strata/kernels/logit_processing.h"

namespace strata::kernels {
namespace {

constexpr int kPenaltyThreads = 256;
constexpr int kMaskThreads = 256;
constexpr int kChosenThreads = 128;

__global__ void __launch_bounds__(kPenaltyThreads)
    PenaltyKernel(float* __restrict__ logits, int vocab, int64_t ld,
                  const DevicePenaltyRow* __restrict__ rows, const int32_t* __restrict__ tokens,
                  const int32_t* __restrict__ counts, float* __restrict__ saved) {
  const DevicePenaltyRow p = rows[blockIdx.x];
  float* row = logits + static_cast<int64_t>(p.row) * ld;
  for (int j = static_cast<int>(threadIdx.x); j < p.count; j += kPenaltyThreads) {
    const int32_t e = p.begin + j;
    const int32_t token = tokens[e];
    if (token < 0 || token >= vocab) {
      saved[e] = 0.0f;
      continue;
    }
    float v = row[token];
    saved[e] = v;
    // sampling::ApplyPenalties, each operation rounded on its own.
    v = v > 0.0f ? __fdiv_rn(v, p.repetition) : __fmul_rn(v, p.repetition);
    const float cut = __fadd_rn(__fmul_rn(static_cast<float>(counts[e]), p.frequency), p.presence);
    row[token] = __fsub_rn(v, cut);
  }
}

__global__ void __launch_bounds__(kMaskThreads)
    TokenMaskKernel(float* __restrict__ logits, int64_t vocab, int64_t ld,
                    const int32_t* __restrict__ rows, int32_t num_rows,
                    const uint32_t* __restrict__ words) {
  const int64_t words_per_row = (vocab + 31) / 32;
  for (int64_t i = blockIdx.x; i < num_rows; i += gridDim.x) {
    float* row = logits + static_cast<int64_t>(rows[i]) * ld;
    const uint32_t* mask = words + i * words_per_row;
    const int64_t stride = static_cast<int64_t>(gridDim.y) * kMaskThreads;
    for (int64_t t = static_cast<int64_t>(blockIdx.y) * kMaskThreads + threadIdx.x; t < vocab;
         t += stride) {
      if (((mask[t >> 5] >> (t & 31)) & 1u) == 0u) row[t] = NegInf();
    }
  }
}

// Sampler's logprob(): x - normalizer, or, without a finite maximum, 0 for the maxima and -inf
// for the rest.
__device__ __forceinline__ float Logprob(float x, float max_logit, float log_normalizer) {
  if (isfinite(max_logit)) return __fsub_rn(x, log_normalizer);
  return x == max_logit ? 0.0f : NegInf();
}

__global__ void __launch_bounds__(kThreads)
    LogprobsKernel(const float* __restrict__ logits, int vocab, int64_t ld,
                   const DeviceLogprobRow* __restrict__ rows, DeviceRowLogprobs* __restrict__ out) {
  __shared__ Shared sm;
  __shared__ double warp_sums[kWarps];
  const DeviceLogprobRow p = rows[blockIdx.x];
  const float* row = logits + static_cast<int64_t>(p.row) * ld;
  float max_logit = 0.0f;
  int best = 0;
  BlockArgMax(row, vocab, sm, &max_logit, &best);

  double sum = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) {
    sum += static_cast<double>(DeterministicExp(__fsub_rn(Logit(row, i), max_logit)));
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += warp_sums[w];  // the same order in every thread
  const float log_normalizer = __fadd_rn(max_logit, static_cast<float>(log(total)));

  DeviceRowLogprobs& o = out[blockIdx.x];
  if (threadIdx.x == 0) {
    o.max_logit = max_logit;
    o.log_normalizer = log_normalizer;
  }
  const int n = min(p.top_n, vocab);
  float v = max_logit;
  int id = best;
  for (int k = 0; k < n; ++k) {
    if (k > 0) BlockArgMax(row, vocab, sm, &v, &id, /*after=*/true, v, id);
    if (threadIdx.x == 0) o.top[k] = {id, Logprob(v, max_logit, log_normalizer)};
  }
}

__global__ void __launch_bounds__(kChosenThreads)
    ChosenKernel(const float* __restrict__ logits, int vocab, int64_t ld,
                 const DeviceLogprobRow* __restrict__ rows, int32_t num_rows,
                 const int32_t* __restrict__ sampled,
                 const DevicePenaltyRow* __restrict__ penalty_rows,
                 const int32_t* __restrict__ penalty_tokens, const float* __restrict__ saved,
                 DeviceRowLogprobs* __restrict__ out) {
  const int i = static_cast<int>(blockIdx.x) * kChosenThreads + static_cast<int>(threadIdx.x);
  if (i >= num_rows) return;
  const DeviceLogprobRow p = rows[i];
  int token = sampled[p.row];
  token = token < 0 || token >= vocab ? 0 : token;
  float raw = logits[static_cast<int64_t>(p.row) * ld + token];
  if (p.penalty_row >= 0) {
    const DevicePenaltyRow pr = penalty_rows[p.penalty_row];
    for (int32_t e = pr.begin; e < pr.begin + pr.count; ++e) {
      if (penalty_tokens[e] == token) {
        raw = saved[e];
        break;
      }
    }
  }
  raw = raw != raw ? NegInf() : raw;
  DeviceRowLogprobs& o = out[i];
  o.chosen = {token, Logprob(raw, o.max_logit, o.log_normalizer)};
}

bool BadShape(int64_t vocab, int64_t ld, int32_t num_rows) {
  return vocab < 1 || vocab > 0x7fffffff || ld < vocab || num_rows < 0;
}

constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);

}  // namespace

int LaunchApplyPenalties(float* logits, int64_t vocab, int64_t ld, const DevicePenaltyRow* rows,
                         int32_t num_rows, const int32_t* tokens, const int32_t* counts,
                         float* saved, void* stream) {
  if (BadShape(vocab, ld, num_rows)) return kInvalid;
  if (num_rows == 0) return 0;
  if (logits == nullptr || rows == nullptr || tokens == nullptr || counts == nullptr ||
      saved == nullptr) {
    return kInvalid;
  }
  PenaltyKernel<<<static_cast<unsigned>(num_rows), kPenaltyThreads, 0,
                  static_cast<cudaStream_t>(stream)>>>(logits, static_cast<int>(vocab), ld, rows,
                                                       tokens, counts, saved);
  return static_cast<int>(cudaGetLastError());
}

int LaunchApplyTokenMask(float* logits, int64_t vocab, int64_t ld, const int32_t* rows,
                         int32_t num_rows, const uint32_t* words, void* stream) {
  if (BadShape(vocab, ld, num_rows)) return kInvalid;
  if (num_rows == 0) return 0;
  if (logits == nullptr || rows == nullptr || words == nullptr) return kInvalid;
  TokenMaskKernel<<<detail::RowGrid(num_rows, vocab, kMaskThreads), kMaskThreads, 0,
                    static_cast<cudaStream_t>(stream)>>>(logits, vocab, ld, rows, num_rows, words);
  return static_cast<int>(cudaGetLastError());
}

int LaunchLogprobs(const float* logits, int64_t vocab, int64_t ld, const DeviceLogprobRow* rows,
                   int32_t num_rows, DeviceRowLogprobs* out, void* stream) {
  if (BadShape(vocab, ld, num_rows)) return kInvalid;
  if (num_rows == 0) return 0;
  if (logits == nullptr || rows == nullptr || out == nullptr) return kInvalid;
  LogprobsKernel<<<static_cast<unsigned>(num_rows), kThreads, 0,
                   static_cast<cudaStream_t>(stream)>>>(logits, static_cast<int>(vocab), ld, rows,
                                                        out);
  return static_cast<int>(cudaGetLastError());
}

int LaunchChosenLogprobs(const float* logits, int64_t vocab, int64_t ld,
                         const DeviceLogprobRow* rows, int32_t num_rows, const int32_t* sampled,
                         const DevicePenaltyRow* penalty_rows, const int32_t* penalty_tokens,
                         const float* saved, DeviceRowLogprobs* out, void* stream) {
  if (BadShape(vocab, ld, num_rows)) return kInvalid;
  if (num_rows == 0) return 0;
  if (logits == nullptr || rows == nullptr || sampled == nullptr || out == nullptr) {
    return kInvalid;
  }
  const unsigned blocks = static_cast<unsigned>((num_rows + kChosenThreads - 1) / kChosenThreads);
  ChosenKernel<<<blocks, kChosenThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, static_cast<int>(vocab), ld, rows, num_rows, sampled, penalty_rows, penalty_tokens,
      saved, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
