// Internal interface between the int8 MatMul driver (matmul_int8.cc) and its kernels
// (matmul_int8_avx512.cc). Not part of the public API; the numerics are documented in
// include/strata/backend/cpu/matmul.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/ggml_type.h"

namespace strata::backend::cpu::internal {

// How a format's blocks enter the integer dot product (see matmul_int8_avx512.cc).
enum class Int8BlockKind {
  kSigned32,  // value = d * q, q signed, one d per 32 columns (Q8_0, Q4_0, Q5_0)
  kMin32,     // value = d * q + m, q unsigned, d and m per 32 columns (Q4_1, Q5_1, Q4_K, Q5_K)
  kSigned16,  // value = d * q, q signed, one d per 16 columns (Q6_K)
};

// Tokens per group: one zmm lane per token, so one vpdpbusd multiplies 4 columns of a weight
// row (broadcast) with the same 4 columns of 16 tokens.
constexpr int64_t kInt8Lanes = 16;

// Quantized activations, packed for the kernels in groups of kInt8Lanes tokens (the last group
// padded with zero tokens: q = 0, d = 0, sums 0). nb = cols / 32. Per group g:
//   q     [cols / 4][16 lanes][4]  int8: columns 4k .. 4k+3 of each token, lane after lane
//   d     [nb][16]                 fp32 block scales
//   c32   [nb][16]                 int32, -128 * sum of q over the 32-column block
//   c16   [2 nb][16]               int32, -128 * sum of q over each 16-column half block
//   dsum  [nb][16]                 fp32, d * float(sum of q over the block)
// Arrays are 64-byte aligned; group strides are in elements of the array's type.
struct Int8Activations {
  const int8_t* q;
  const float* d;
  const int32_t* c32;
  const int32_t* c16;
  const float* dsum;
  int64_t cols;
  int64_t q_stride;    // cols * 16
  int64_t blk_stride;  // nb * 16 (d, c32, dsum); c16 uses 2 * blk_stride
};

// y[t * ldy + r] = W[r, :] . x_t for r < rows and the tokens t of groups [g0, g1) that are below
// n_tokens; w points at row 0 (row stride row_bytes). Runs on the calling thread (per-thread
// tile buffer inside).
using Int8RowsFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t rows,
                            const Int8Activations& a, int64_t g0, int64_t g1, int64_t n_tokens,
                            float* y, int64_t ldy);

// Quantized activations of a few tokens, token after token (the small-token kernels'
// layout). nb = cols / 32. Token t:
//   q     [cols] int8 at q + t * cols
//   d     [nb] fp32 block scales at d + t * nb
//   c32   [nb] int32, -128 * sum of q over the 32-column block, at c32 + t * nb
//   c16   [2 nb] int32, -128 * sum of q over each 16-column half block, at c16 + 2 * t * nb
//   dsum  [nb] fp32, d * float(sum of q over the block), at dsum + t * nb
// The same values as Int8Activations, so both layouts give the same bits.
struct Int8Tokens {
  const int8_t* q;
  const float* d;
  const int32_t* c32;
  const int32_t* c16;
  const float* dsum;
  int64_t cols;
};

// Few tokens, rows in the lanes: y[t * ldy + r] = W[r, :] . x_t for r < rows and t < n_tokens,
// bit-identical to an Int8RowsFn's result for the same element. w points at row 0 (row stride
// row_bytes). Runs on the calling thread.
using Int8FewFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t rows, const Int8Tokens& x,
                           int64_t n_tokens, float* y, int64_t ldy);

// One row of QuantizeRowInt8 (see matmul.h).
using QuantizeRowFn = void (*)(const float* x, int64_t cols, int8_t* q, float* scales,
                               int32_t* sums16);

struct Int8Family {
  std::string_view name;
  // The kernel for `type`, or nullptr where there is none (the caller falls back to fp32).
  Int8RowsFn (*rows_for)(model::GgmlType type);
  // The small-token kernel for `type`, or nullptr (the tile kernel then runs for every count).
  Int8FewFn (*few_for)(model::GgmlType type);
  QuantizeRowFn quantize_row;
};

// The AVX-512 VNNI family; nullptr when not built for this architecture or this CPU lacks the
// features (checked here, once).
const Int8Family* Avx512VnniInt8Family();

// The AVX-512 VNNI small-token kernels (matmul_int8_lanes_avx512.cc); nullptr for a type
// without one. Only for Avx512VnniInt8Family (it checks the CPU).
Int8FewFn Avx512VnniInt8FewFor(model::GgmlType type);

// The portable quantizer (the reference the SIMD one matches bit for bit).
void QuantizeRowInt8Scalar(const float* x, int64_t cols, int8_t* q, float* scales, int32_t* sums16);

// The int8 driver: quantizes x; for at most kInt8FewTokens tokens with a `few_fn` (may be
// nullptr) splits the rows over the pool and runs it, otherwise packs x, splits rows (and
// tokens) over the pool and runs `rows_fn`. w: [rows, cols] (row stride row_bytes); as MatMul
// otherwise.
void MatMulInt8(const Int8Family& family, Int8RowsFn rows_fn, Int8FewFn few_fn, const uint8_t* w,
                int64_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n_tokens,
                float* y, ThreadPool* pool);

// Up to this many tokens the driver runs the small-token kernel (where there is one): with the
// tokens in the lanes a few tokens leave most of each vpdpbusd idle, and decoding the weights
// into a tile costs more than the products. Measured: see matmul.h.
constexpr int64_t kInt8FewTokens = 16;

}  // namespace strata::backend::cpu::internal
