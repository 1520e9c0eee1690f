// Exact conversions between IEEE binary16 (fp16), bfloat16 and float32, by bit manipulation.
//
// Fp16ToFloat and Bf16ToFloat are exact (every fp16/bf16 value is a float32 value) and agree bit
// for bit with numpy's float16 -> float32 cast and ggml's bf16 -> fp32 conversion, including
// subnormals, signed zeros, infinities and NaN payloads (a NaN keeps its sign and payload,
// shifted into the top of the float32 mantissa; it is not quieted).
//
// FloatToFp16 and FloatToBf16 round to nearest, ties to even. FloatToFp16 matches numpy's
// float32 -> float16 cast (overflow to infinity, NaN payload truncated but kept non-zero);
// FloatToBf16 matches ggml_compute_fp32_to_bf16 (NaN forced quiet).
//
// Pure functions; any thread. Values are passed as raw bit patterns (uint16_t).
#pragma once

#include <bit>
#include <cstdint>

namespace strata::model {

inline float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    // Infinity or NaN: the payload moves to the top of the float32 mantissa.
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    // Normal: rebias the exponent from 15 to 127.
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // +0 or -0
  } else {
    // Subnormal (mantissa * 2^-24): normal in float32; shift the leading one into the implicit
    // bit position and lower the exponent once per shift.
    uint32_t biased = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --biased;
    }
    bits = sign | (biased << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline float Bf16ToFloat(uint16_t b) {
  // bf16 is the top half of a float32.
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToFp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    // NaN: keep the top 10 payload bits; a payload that truncates to zero would read as
    // infinity, so it becomes 1 (numpy's rule).
    uint32_t payload = (abs >> 13) & 0x3ffu;
    if (payload == 0) payload = 1;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  if (abs >= 0x477ff000u) {
    // 65520 (halfway between 65504 and 2^16) and above round to infinity; so does infinity.
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs >= 0x38800000u) {
    // Normal fp16 range [2^-14, 65520): rebias, then round the 13 dropped bits to nearest even.
    // A carry out of the mantissa correctly bumps the exponent.
    const uint32_t odd = (abs >> 13) & 1u;
    const uint32_t rebiased = abs - ((127u - 15u) << 23);
    return static_cast<uint16_t>(sign | ((rebiased + 0xfffu + odd) >> 13));
  }
  if (abs <= 0x33000000u) {
    // At most 2^-25 (half the smallest subnormal): rounds to zero (2^-25 ties to even zero).
    return sign;
  }
  // Subnormal fp16: the result is round(value / 2^-24). The value is m * 2^(e - 150) with
  // m the 24-bit significand, so the result is m >> (126 - e), rounded to nearest even.
  const uint32_t e = abs >> 23;  // 102..112 here
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  uint32_t q = m >> shift;
  if (rest > half || (rest == half && (q & 1u) != 0)) ++q;  // may carry into 0x400: 2^-14
  return static_cast<uint16_t>(sign | q);
}

inline uint16_t FloatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN: keep sign and payload, force quiet
  }
  // Round to nearest even on the 16 dropped bits. No overflow: NaNs were handled above, and
  // the largest remaining pattern (0xff800000, -inf) plus 0x8000 still fits.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace strata::model
