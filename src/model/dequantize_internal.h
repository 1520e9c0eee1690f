// Per-format dequantization kernels behind strata::model::Dequantize (dequantize.h).
//
// Each reads `num_blocks` consecutive blocks of its format from `src` (num_blocks * type_size
// bytes, no alignment required) and writes num_blocks * block_size floats to `dst`. Callers have
// validated the sizes. The operation order inside each kernel follows gguf-py's
// gguf/quants.py (package gguf 0.19.0) step for step, so results match it bit for bit.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "strata/model/fp16.h"

namespace strata::model::internal {

static_assert(std::endian::native == std::endian::little,
              "ggml blocks are little-endian; a big-endian host needs byte swaps here");

// An unaligned little-endian fp16 read, widened to float32.
inline float LoadFp16(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return Fp16ToFloat(bits);
}

// Plain floating-point types (block size 1).
void DequantizeF32(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeF16(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeBF16(const uint8_t* src, uint64_t num_blocks, float* dst);

// 32-element formats (dequantize_legacy.cc).
void DequantizeQ4_0(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ4_1(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ5_0(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ5_1(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ8_0(const uint8_t* src, uint64_t num_blocks, float* dst);

// 256-element K-quant super-blocks (dequantize_kquants.cc).
void DequantizeQ2_K(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ3_K(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ4_K(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ5_K(const uint8_t* src, uint64_t num_blocks, float* dst);
void DequantizeQ6_K(const uint8_t* src, uint64_t num_blocks, float* dst);

}  // namespace strata::model::internal
