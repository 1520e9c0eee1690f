// Device decoders of one element of a GGUF quantized row, exactly as strata::model::Dequantize
// computes it (the same products in the same order, each rounded, no FMA contraction). Shared by
// the embedding gather and the dequantization kernels. Included by .cu files only.
#pragma once

#include <cstdint>

#include "launch_util.cuh"

namespace strata::kernels::detail {

// x = d * q (dequantize_legacy.cc DequantizeQ8_0).
__device__ __forceinline__ float DecodeQ8_0(const uint8_t* row, int64_t c) {
  const uint8_t* block = row + (c / 32) * 34;
  const float d = LoadFp16(block);
  const auto q = static_cast<int8_t>(block[2 + c % 32]);
  return __fmul_rn(d, static_cast<float>(q));
}

// x = (d * sc) * q - dmin * m (dequantize_kquants.cc DequantizeQ4_K and its UnpackScaleMin).
__device__ __forceinline__ float DecodeQ4_K(const uint8_t* row, int64_t c) {
  const uint8_t* block = row + (c / 256) * 144;
  const int e = static_cast<int>(c % 256);
  const float d = LoadFp16(block);
  const float dmin = LoadFp16(block + 2);
  const uint8_t* s = block + 4;
  const int sub = e / 32;
  int sc = 0;
  int mn = 0;
  if (sub < 4) {
    sc = s[sub] & 0x3f;
    mn = s[sub + 4] & 0x3f;
  } else {
    const int j = sub - 4;
    sc = (s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30);
    mn = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
  }
  const uint8_t* qs = block + 16 + 32 * (sub / 2);
  const int q = (qs[e % 32] >> (4 * (sub % 2))) & 0x0f;
  const float ds = __fmul_rn(d, static_cast<float>(sc));
  const float dm = __fmul_rn(dmin, static_cast<float>(mn));
  return __fsub_rn(__fmul_rn(ds, static_cast<float>(q)), dm);
}

// x = (d * sc) * (q - 32) (dequantize_kquants.cc DequantizeQ6_K).
__device__ __forceinline__ float DecodeQ6_K(const uint8_t* row, int64_t c) {
  const uint8_t* block = row + (c / 256) * 210;
  const int e = static_cast<int>(c % 256);
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto scale = static_cast<int8_t>(block[192 + e / 16]);
  const float d = LoadFp16(block + 208);
  const int h = e / 128;
  const int r = e % 128;
  const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
  const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
  const float ds = __fmul_rn(d, static_cast<float>(scale));
  return __fmul_rn(ds, static_cast<float>((low | (high << 4)) - 32));
}

}  // namespace strata::kernels::detail
