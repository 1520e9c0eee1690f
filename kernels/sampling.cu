// Device sampling: argmax and temperature / top-k / min-p / top-p sampling, one CTA per row
// (contract and CPU-equivalence notes: include/strata/kernels/sampling.h).
//
// No sorting and no workspace: every step is a pass over the row's logits (which stay in L2),
// recomputing each token's weight where needed.
// - Selections (the top_k-th logit, the top_p cut) are radix selects, most significant byte
//   first (4 levels of 256 buckets), on an unsigned key in the value's order; the bucket walk
//   is the CPU sampler's RadixCut. Ties at the selected key are resolved by id with a block scan
//   in id order (FindFirstExceeding).
// - Sums are of weights rounded to fixed point (w * 2^45), in 64-bit integers: exact, so the
//   result does not depend on the order threads add in (deterministic, unlike float atomics).
// - The draw is FindFirstExceeding in id order: each thread sums a contiguous id range, a block
//   exclusive scan gives each range's start, and the one range holding the target is rescanned.
#include <cuda_runtime.h>

#include <cstdint>

#include "sampling_common.cuh"
#include "strata/kernels/sampling.h"

namespace strata::kernels {
namespace {

// Exclusive prefix sum of one value per thread, in thread order; *total gets the sum of all.
__device__ u64 BlockExclusiveScan(u64 v, Shared& sm, u64* total) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  u64 inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const u64 other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) sm.warp_total[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    u64 w = sm.warp_total[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const u64 other = __shfl_up_sync(0xffffffffu, w, offset);
      if (lane >= offset) w += other;
    }
    sm.warp_total[lane] = w;  // now inclusive over warps
  }
  __syncthreads();
  const u64 before_warp = warp > 0 ? sm.warp_total[warp - 1] : 0;
  *total = sm.warp_total[kWarps - 1];
  __syncthreads();  // the slots are free again
  return before_warp + inclusive - v;
}

// Radix select by weight: the key K such that the items with keys above K weigh less than
// `target` and those at or above K weigh at least `target` (the first key, from the largest
// down, where the running weight reaches the target: sampler.cc's RadixCut). item(i, &key,
// &weight) returns false for items that do not take part. *above gets the weight above K.
// Returns false (and leaves the outputs alone) when all items together weigh less than target.
template <class Item>
__device__ bool RadixSelect(int vocab, u64 target, Item item, Shared& sm, uint32_t* key_out,
                            u64* above_out) {
  uint32_t prefix = 0;
  u64 above = 0;
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) sm.bins[b] = 0;
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) {
      uint32_t key = 0;
      u64 weight = 0;
      if (!item(i, &key, &weight) || weight == 0) continue;
      if (level > 0 && (key >> (shift + 8)) != prefix) continue;
      atomicAdd(&sm.bins[(key >> shift) & 0xffu], weight);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int boundary = -1;
      for (int b = kBins - 1; b >= 0; --b) {
        if (above + sm.bins[b] >= target) {
          boundary = b;
          break;
        }
        above += sm.bins[b];
      }
      sm.boundary = boundary;
      sm.prefix = (prefix << 8) | static_cast<uint32_t>(boundary & 0xff);
      sm.above = above;
    }
    __syncthreads();
    const bool found = sm.boundary >= 0;
    prefix = sm.prefix;
    above = sm.above;
    __syncthreads();  // everyone has read the results before they are written again
    if (!found) return false;
  }
  *key_out = prefix;
  *above_out = above;
  return true;
}

// The smallest id i whose running weight sum_{j <= i} f(j) exceeds target_of(total), where
// total is the weight of the whole row; -1 when none does (target >= total). Threads own
// contiguous id ranges so that a block scan orders the ranges by id.
template <class F, class TargetOf>
__device__ int FindFirstExceeding(int vocab, F f, TargetOf target_of, Shared& sm) {
  const int span = (vocab + kThreads - 1) / kThreads;
  const int begin = min(static_cast<int>(threadIdx.x) * span, vocab);
  const int end = min(begin + span, vocab);
  u64 mine = 0;
  for (int i = begin; i < end; ++i) mine += f(i);
  if (threadIdx.x == 0) sm.found_id = -1;
  u64 total = 0;
  const u64 start = BlockExclusiveScan(mine, sm, &total);  // its barriers publish found_id
  const u64 target = target_of(total);
  if (mine > 0 && start <= target && target - start < mine) {
    u64 acc = start;
    for (int i = begin; i < end; ++i) {
      acc += f(i);
      if (acc > target) {
        sm.found_id = i;  // exactly one thread gets here
        break;
      }
    }
  }
  __syncthreads();
  const int id = sm.found_id;
  __syncthreads();
  return id;
}

__global__ void __launch_bounds__(kThreads)
    ArgMaxKernel(const float* __restrict__ logits, int vocab, int64_t ld,
                 int32_t* __restrict__ tokens) {
  __shared__ Shared sm;
  const int64_t r = blockIdx.x;
  float value = 0.0f;
  int id = 0;
  BlockArgMax(logits + r * ld, vocab, sm, &value, &id);
  if (threadIdx.x == 0) tokens[r] = id;
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* __restrict__ logits, int vocab, int64_t ld,
                 const DeviceSamplingParams* __restrict__ params, int32_t* __restrict__ tokens) {
  __shared__ Shared sm;
  const int64_t r = blockIdx.x;
  const float* row = logits + r * ld;
  float max_logit = 0.0f;
  int best = 0;
  BlockArgMax(row, vocab, sm, &max_logit, &best);
  const DeviceSamplingParams p = params[r];
  // Greedy, or no distribution (all -inf, or +inf present): the argmax, no draw.
  if (!(p.temperature > 0.0f) || !isfinite(max_logit)) {
    if (threadIdx.x == 0) tokens[r] = best;
    return;
  }
  const float inv_temperature = __fdiv_rn(1.0f, p.temperature);
  auto weight = [&](int i) {
    return DeterministicExp(__fmul_rn(__fsub_rn(Logit(row, i), max_logit), inv_temperature));
  };

  // top_k: the k-th logit's key and, among the logits with that key, the last id kept.
  const bool use_top_k = p.top_k > 0 && p.top_k < vocab;
  uint32_t k_key = 0;
  int k_last_id = vocab;
  if (use_top_k) {
    u64 above = 0;
    RadixSelect(
        vocab, static_cast<u64>(p.top_k),
        [&](int i, uint32_t* key, u64* w) {
          *key = OrderKey(Logit(row, i));
          *w = 1;
          return true;
        },
        sm, &k_key, &above);
    const u64 ties_needed = static_cast<u64>(p.top_k) - above;  // >= 1
    k_last_id = FindFirstExceeding(
        vocab, [&](int i) -> u64 { return OrderKey(Logit(row, i)) == k_key ? 1 : 0; },
        [&](u64) { return ties_needed - 1; }, sm);
  }
  auto in_top_k = [&](int i) {
    if (!use_top_k) return true;
    const uint32_t key = OrderKey(Logit(row, i));
    return key > k_key || (key == k_key && i <= k_last_id);
  };

  // The mass top_k keeps (top_p's reference, before min_p).
  u64 mine = 0;
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) {
    if (in_top_k(i)) mine += Fixed(weight(i));
  }
  u64 top_k_total = 0;
  BlockExclusiveScan(mine, sm, &top_k_total);

  // min_p on the weights (the best token weighs exactly 1).
  auto kept_min_p = [&](int i, float* w) {
    if (!in_top_k(i)) return false;
    *w = weight(i);
    return *w >= p.min_p;
  };

  // top_p: the cut's weight key and, among the weights with that key, the last id kept.
  bool use_top_p = false;
  uint32_t p_key = 0;
  int p_last_id = vocab;
  if (p.top_p < 1.0f) {
    const double target_real =
        ceil(static_cast<double>(p.top_p) * static_cast<double>(top_k_total));
    const u64 target = target_real < 1.0 ? 1 : static_cast<u64>(target_real);
    u64 above = 0;
    use_top_p = RadixSelect(
        vocab, target,
        [&](int i, uint32_t* key, u64* wt) {
          float w = 0.0f;
          if (!kept_min_p(i, &w)) return false;
          *key = __float_as_uint(w);  // w >= +0: the bits are in the value's order
          *wt = Fixed(w);
          return true;
        },
        sm, &p_key, &above);
    if (use_top_p) {
      p_last_id = FindFirstExceeding(
          vocab,
          [&](int i) -> u64 {
            float w = 0.0f;
            if (!kept_min_p(i, &w) || __float_as_uint(w) != p_key) return 0;
            return Fixed(w);
          },
          [&](u64) { return target - above - 1; }, sm);
    }
  }
  auto kept_weight = [&](int i) -> u64 {
    float w = 0.0f;
    if (!kept_min_p(i, &w)) return 0;
    if (use_top_p) {
      const uint32_t key = __float_as_uint(w);
      if (key < p_key || (key == p_key && i > p_last_id)) return 0;
    }
    return Fixed(w);
  };

  // The draw: inverse CDF in id order over the kept tokens.
  const double u = p.u >= 0.0 ? p.u : 0.0;  // NaN too
  const int chosen = FindFirstExceeding(
      vocab, kept_weight,
      [&](u64 total) -> u64 {
        if (total == 0) return 0;
        const double t = floor(u * static_cast<double>(total));
        if (!(t < static_cast<double>(total))) return total - 1;
        const u64 target = static_cast<u64>(t);
        return target < total ? target : total - 1;
      },
      sm);
  if (threadIdx.x == 0) tokens[r] = chosen >= 0 ? chosen : best;
}

int CheckShape(const float* logits, int64_t rows, int64_t vocab, int64_t ld, const void* a,
               const void* b) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (rows < 0 || rows > 0x7fffffff || vocab < 1 || vocab > kMaxSamplingVocab || ld < vocab) {
    return kInvalid;
  }
  if (rows > 0 && (logits == nullptr || a == nullptr || b == nullptr)) return kInvalid;
  return 0;
}

}  // namespace

int LaunchArgMax(const float* logits, int64_t rows, int64_t vocab, int64_t ld, int32_t* tokens,
                 void* stream) {
  if (const int err = CheckShape(logits, rows, vocab, ld, tokens, tokens); err != 0) return err;
  if (rows == 0) return 0;
  ArgMaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, static_cast<int>(vocab), ld, tokens);
  return static_cast<int>(cudaGetLastError());
}

int LaunchSample(const float* logits, int64_t rows, int64_t vocab, int64_t ld,
                 const DeviceSamplingParams* params, int32_t* tokens, void* stream) {
  if (const int err = CheckShape(logits, rows, vocab, ld, params, tokens); err != 0) return err;
  if (rows == 0) return 0;
  SampleKernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, static_cast<int>(vocab), ld, params, tokens);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
