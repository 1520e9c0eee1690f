// Plain float types and the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//
// Block layouts (ggml's block_q* structs, little-endian, packed):
//   Q4_0 (18 B): fp16 d;          uint8 qs[16]   x = d * (q - 8)
//   Q4_1 (20 B): fp16 d, m;       uint8 qs[16]   x = d * q + m
//   Q5_0 (22 B): fp16 d;    uint32 qh; qs[16]    x = d * (q - 16)
//   Q5_1 (24 B): fp16 d, m; uint32 qh; qs[16]    x = d * q + m
//   Q8_0 (34 B): fp16 d;          int8 qs[32]    x = d * q
// Element j < 16 takes the low nibble of qs[j], element j + 16 the high nibble; for the 5-bit
// formats bit i of qh is bit 4 of element i.

// Bit-exactness with numpy needs each product rounded before the add that follows it, so no
// fused multiply-add contraction whatever the target flags. (For these formats every product of
// an fp16 scale and a small integer is exact in float32, so FMA could not change a result
// anyway; this keeps it that way should the arithmetic ever change.)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cstring>

#include "dequantize_internal.h"

namespace strata::model::internal {
namespace {

constexpr int kQK = 32;  // elements per block

// The 32 nibble values of qs[16]: low nibbles first, then high nibbles.
inline void UnpackNibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = qs[j] & 0x0f;
    q[j + kQK / 2] = qs[j] >> 4;
  }
}

// Adds bit 4 from qh (bit i for element i) to the nibbles.
inline void AddHighBits(const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kQK; ++j) q[j] |= static_cast<uint8_t>(((qh >> j) & 1u) << 4);
}

}  // namespace

void DequantizeF32(const uint8_t* src, uint64_t num_blocks, float* dst) {
  std::memcpy(dst, src, num_blocks * sizeof(float));
}

void DequantizeF16(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t i = 0; i < num_blocks; ++i) dst[i] = LoadFp16(src + 2 * i);
}

void DequantizeBF16(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t i = 0; i < num_blocks; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    dst[i] = Bf16ToFloat(bits);
  }
}

void DequantizeQ4_0(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 18, dst += kQK) {
    const float d = LoadFp16(src);
    uint8_t q[kQK];
    UnpackNibbles(src + 2, q);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j] - 8);
  }
}

void DequantizeQ4_1(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 20, dst += kQK) {
    const float d = LoadFp16(src);
    const float m = LoadFp16(src + 2);
    uint8_t q[kQK];
    UnpackNibbles(src + 4, q);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j]) + m;
  }
}

void DequantizeQ5_0(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 22, dst += kQK) {
    const float d = LoadFp16(src);
    uint8_t q[kQK];
    UnpackNibbles(src + 6, q);
    AddHighBits(src + 2, q);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j] - 16);
  }
}

void DequantizeQ5_1(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 24, dst += kQK) {
    const float d = LoadFp16(src);
    const float m = LoadFp16(src + 2);
    uint8_t q[kQK];
    UnpackNibbles(src + 8, q);
    AddHighBits(src + 4, q);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j]) + m;
  }
}

void DequantizeQ8_0(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 34, dst += kQK) {
    const float d = LoadFp16(src);
    const auto* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(qs[j]);
  }
}

}  // namespace strata::model::internal
