// Launch API of the weight-only quantized matrix products for small batches (kernels/
// quant_matmul_*.cu): fp32 activations times a weight matrix kept in its GGUF block format.
// Plain C++: callers need no CUDA headers. Pointers are device pointers; `stream` is a
// cudaStream_t (nullptr: the default stream). Each returns the cudaError_t of its launches as
// an int (0 = success); a bad shape, a null or misaligned pointer returns cudaErrorInvalidValue
// (as int) without launching.
//
// Semantics (the CPU contract of include/strata/backend/cpu/matmul.h, with an output stride):
//   y[t * ldy + r] = sum_c W[r, c] * x[t * cols + c]    for t < tokens, r < rows
//   w: [rows, cols / block_elements] blocks, row-major; row r starts at byte
//      r * (cols / block_elements) * block_bytes (no padding between rows);
//   x: [tokens, cols] fp32, row-major, 16-byte aligned (cols is a multiple of 32, so every row
//      is too); y: [tokens, ldy] fp32 with ldy >= rows; columns rows..ldy-1 are left untouched.
// x and y must not overlap. tokens == 0 or rows == 0 does nothing and returns 0.
// cols must be a positive multiple of the block size (32 for Q8_0, 256 for Q4_K and Q6_K).
//
// Numerics: each weight is decoded in registers to exactly the value model::Dequantize gives
// (same operations, no contraction), then y accumulates in fp32 with fused multiply-adds: per
// lane over its share of the row's blocks in column order, then a warp tree reduction (Q4_K:
// see below). So the
// result agrees with a float64 reference to fp32 accumulation error (it is not bit-identical
// to the CPU MatMul, whose summation order differs). A token's output does not depend on the
// other tokens of the call except through which pass width (TokensPerPass) it ran in, and the
// pass width does not change the arithmetic either: results are bit-identical however the
// tokens are batched.
//
// How: tokens run in passes of 1, 2, 4, 8 or 16 (a template parameter; a pass of 4 serves 3
// tokens with the fourth zeroed), weights streaming from memory once per pass. Q4_K with w
// 16-byte aligned (the CUDA backend's case) runs a bandwidth-oriented kernel in passes of at
// most 8: a CTA of 4 warps owns 2 rows (1 for passes of 8) and splits their blocks between its
// warps, each lane loading 16 bytes of codes (32 weights) and the block's 16-byte header per
// row, x read through L1 and shared by the rows; per sub-block it sums q * x and x and applies
// scale and min once (ds * sum q x - dm * sum x, each product rounded on its own, so a one-hot x
// still yields the dequantized weight exactly). The other formats (and unaligned Q4_K): a CTA
// of 8 warps owns 16 rows; x is staged through shared memory in chunks of 8192 / pass columns
// (32 KiB); each warp walks its 2 rows' blocks in the chunk with its lanes on sub-block pieces
// (Q8_0: 4 lanes x 8 codes per block; Q4_K, Q6_K: 16 lanes x 16 codes), decodes them in
// registers and multiplies them with every token of the pass.
// Alignment of w: Q4_K blocks (144 bytes) are read with 8-byte loads, so w must be 8-byte
// aligned; Q8_0 (34 bytes) and Q6_K (210 bytes) blocks are only 2-byte aligned within a row,
// so they are read with 2-byte loads and w must be 2-byte aligned.
#pragma once

#include <cstdint>

namespace strata::kernels {

// W in Q8_0: 34-byte blocks of 32 (fp16 d, int8 q[32]; w = d * q).
//   w: [rows, cols / 32] blocks; x: [tokens, cols] fp32; y: [tokens, ldy] fp32 (overwritten).
int LaunchQuantMatMulQ8_0(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream);

// W in Q4_K: 144-byte super-blocks of 256 (fp16 d, dmin; 12 bytes of 6-bit scales and mins;
// 128 bytes of 4-bit codes; w = d * sc * q - dmin * m).
//   w: [rows, cols / 256] blocks; x: [tokens, cols] fp32; y: [tokens, ldy] fp32 (overwritten).
int LaunchQuantMatMulQ4_K(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream);

// W in Q6_K: 210-byte super-blocks of 256 (ql[128] low 4 bits, qh[64] high 2 bits, int8
// scales[16], fp16 d; w = d * sc * (q - 32)).
//   w: [rows, cols / 256] blocks; x: [tokens, cols] fp32; y: [tokens, ldy] fp32 (overwritten).
int LaunchQuantMatMulQ6_K(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream);

// Host-side plan, exposed for tests: the token width of the next pass when `tokens_left` (>= 1)
// tokens remain: the smallest of 1, 2, 4, 8, 16 that covers them, at most 16.
int QuantMatMulTokensPerPass(int64_t tokens_left);

// Columns of x staged in shared memory per chunk for a pass of `tokens_per_pass` tokens
// (8192 / tokens_per_pass: a multiple of 256, so chunks always end on block boundaries).
int QuantMatMulChunkCols(int tokens_per_pass);

}  // namespace strata::kernels
