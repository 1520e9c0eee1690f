// DeterministicExp: exp(x) for x <= 0 built from IEEE-754 +, -, * on float only.
//
// Why not std::exp: libm implementations (glibc, musl, Apple, and glibc's own versions) may
// round differently, and a one-ulp difference in a token's weight can move a seeded draw across
// a cumulative boundary. Basic operations round the same way on every IEEE-754 machine, so
// these weights -- and with them a seed's tokens -- are bit-identical everywhere, provided no
// multiply and add are fused into an FMA: clang fuses only within one expression (so each step
// here is its own statement), but GCC fuses across statements whenever the target has FMA
// (-march=haswell and later, every aarch64), so code including this must be built with
// -ffp-contract=off. The loop over a vocabulary also vectorises, which std::exp does not
// without -ffast-math.
//
// Method: Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, then a degree-7 Taylor polynomial
// for exp(r) (truncation error below 6e-9 relative) scaled by 2^n. Relative error within a few
// ulp for -87 <= x <= 0; inputs below -87 (including -inf) give 0 rather than a denormal.
// x = 0 gives exactly 1. Positive x and NaN are not allowed (the result is unspecified).
#pragma once

#include <bit>
#include <cstdint>

namespace strata::sampling {

inline float DeterministicExp(float x) {
  constexpr float kMin = -87.0f;                   // exp(-87) is still a normal float
  constexpr float kLog2e = 1.44269504088896341f;   // 1 / ln 2
  constexpr float kLn2Hi = 0.693145751953125f;     // ln 2 with its low bits cleared, so n * kLn2Hi
  constexpr float kLn2Lo = 1.42860676533018e-06f;  // is exact; kLn2Hi + kLn2Lo = ln 2
  constexpr float kRound = 12582912.0f;            // 1.5 * 2^23: adding it rounds to an integer
  // x < kMin, decided on the bits: for x <= 0 a larger pattern is a more negative float (-inf
  // included). The selects are bit masks rather than branches on a float compare, which the
  // compiler (honouring floating-point traps) would not turn into vector code.
  const uint32_t x_bits = std::bit_cast<uint32_t>(x);
  const uint32_t keep = x_bits > std::bit_cast<uint32_t>(kMin) ? 0u : ~0u;  // 0: below kMin
  const float clamped =
      std::bit_cast<float>((x_bits & keep) | (std::bit_cast<uint32_t>(kMin) & ~keep));
  float t = clamped * kLog2e;
  t = t + kRound;
  const float n = t - kRound;  // round(x / ln 2), in [-126, 0]
  const int32_t n_int = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const float hi = n * kLn2Hi;
  const float lo = n * kLn2Lo;
  float r = clamped - hi;
  r = r - lo;
  float p = 1.0f / 5040.0f;
  p = p * r;
  p = p + 1.0f / 720.0f;
  p = p * r;
  p = p + 1.0f / 120.0f;
  p = p * r;
  p = p + 1.0f / 24.0f;
  p = p * r;
  p = p + 1.0f / 6.0f;
  p = p * r;
  p = p + 0.5f;
  p = p * r;
  p = p + 1.0f;
  p = p * r;
  p = p + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(n_int + 127) << 23);
  const float result = p * scale;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(result) & keep);
}

}  // namespace strata::sampling
