// Device helpers shared by the sampling kernels (sampling.cu) and the logit processing kernels
// (logit_processing.cu): one CTA of kThreads per row, the CPU sampler's NaN rule and canonical
// order, DeterministicExp bit for bit, and a block argmax. Included by .cu files only; internal
// linkage, so each file gets its own copy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace strata::kernels {
namespace {

using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr double kFixedScale = 35184372088832.0;  // 2^45: kMaxSamplingVocab * 2^45 < 2^64

struct Shared {
  u64 bins[kBins];
  u64 warp_total[kWarps];
  float best_value[kWarps];
  int best_id[kWarps];
  u64 above;
  uint32_t prefix;
  int boundary;
  int found_id;
};

__device__ __forceinline__ float NegInf() { return __uint_as_float(0xff800000u); }

// The logit with NaN as -inf (the CPU sampler's rule).
__device__ __forceinline__ float Logit(const float* row, int i) {
  const float v = row[i];
  return v != v ? NegInf() : v;
}

// An unsigned key in the float's order (no NaN; -0 and +0 equal), as sampler.cc's OrderKey.
__device__ __forceinline__ uint32_t OrderKey(float x) {
  const uint32_t bits = __float_as_uint(__fadd_rn(x, 0.0f));  // -0 + 0 = +0
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
  return bits ^ flip;
}

// strata::sampling::DeterministicExp (include/strata/sampling/deterministic_exp.h), operation
// for operation, each rounded on its own (the _rn intrinsics are never contracted into FMAs),
// so the result is bit-identical to the CPU's. x <= 0 or -inf.
__device__ __forceinline__ float DeterministicExp(float x) {
  constexpr float kMin = -87.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860676533018e-06f;
  constexpr float kRound = 12582912.0f;
  constexpr float kC7 = 1.0f / 5040.0f;
  constexpr float kC6 = 1.0f / 720.0f;
  constexpr float kC5 = 1.0f / 120.0f;
  constexpr float kC4 = 1.0f / 24.0f;
  constexpr float kC3 = 1.0f / 6.0f;
  const uint32_t min_bits = __float_as_uint(kMin);
  const uint32_t x_bits = __float_as_uint(x);
  const uint32_t keep = x_bits > min_bits ? 0u : ~0u;  // 0: below kMin (or -inf)
  const float clamped = __uint_as_float((x_bits & keep) | (min_bits & ~keep));
  float t = __fmul_rn(clamped, kLog2e);
  t = __fadd_rn(t, kRound);
  const float n = __fsub_rn(t, kRound);
  const int32_t n_int = __float_as_int(t) - __float_as_int(kRound);
  const float hi = __fmul_rn(n, kLn2Hi);
  const float lo = __fmul_rn(n, kLn2Lo);
  float r = __fsub_rn(clamped, hi);
  r = __fsub_rn(r, lo);
  float p = kC7;
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, kC6);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, kC5);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, kC4);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, kC3);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, 0.5f);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, 1.0f);
  p = __fmul_rn(p, r);
  p = __fadd_rn(p, 1.0f);
  const float scale = __uint_as_float(static_cast<uint32_t>(n_int + 127) << 23);
  const float result = __fmul_rn(p, scale);
  return __uint_as_float(__float_as_uint(result) & keep);
}

// A weight (in [0, 1]) as a fixed-point integer, rounded to nearest (exact in double first).
__device__ __forceinline__ u64 Fixed(float w) {
  return __double2ull_rn(static_cast<double>(w) * kFixedScale);
}

// The canonical order: larger value first, ties to the lower id.
__device__ __forceinline__ bool Before(float v, int id, float best_v, int best_id) {
  return v > best_v || (v == best_v && id < best_id);
}

// The highest logit of the row (NaN as -inf) and the lowest id holding it; every thread gets
// both. A row of -inf gives (-inf, 0). With `after`, only the logits that come after
// (after_value, after_id) in the canonical order take part (the next one in that order; none
// left gives (-inf, 0x7fffffff)).
__device__ void BlockArgMax(const float* row, int vocab, Shared& sm, float* value, int* id,
                            bool after = false, float after_value = 0.0f, int after_id = 0) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  float bv = NegInf();
  int bid = 0x7fffffff;
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) {
    const float v = Logit(row, i);
    if (after && !Before(after_value, after_id, v, i)) continue;
    if (Before(v, i, bv, bid)) {
      bv = v;
      bid = i;
    }
  }
  for (int round = 0; round < 2; ++round) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, offset);
      const int oid = __shfl_xor_sync(0xffffffffu, bid, offset);
      if (Before(ov, oid, bv, bid)) {
        bv = ov;
        bid = oid;
      }
    }
    if (round == 0) {
      if (lane == 0) {
        sm.best_value[warp] = bv;
        sm.best_id[warp] = bid;
      }
      __syncthreads();
      bv = sm.best_value[lane];  // kWarps == 32: one slot per lane
      bid = sm.best_id[lane];
    }
  }
  // Every warp reduced the same 32 slots to the same answer.
  *value = bv;
  *id = bid;
  __syncthreads();  // the slots are free again
}

}  // namespace
}  // namespace strata::kernels
