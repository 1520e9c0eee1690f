// Internal interface between the int8 MatMul driver (matmul_int8.cc) and its kernels
// (matmul_int8_avx512.cc). Not part of the public API; the numerics are documented in
// include/strata/backend/cpu/matmul.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
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

// Quantized activations, token after token. nb = cols / 32. Token t:
//   q     [cols] int8 at q + t * cols
//   d     [nb] fp32 block scales at d + t * nb
//   c32   [nb] int32, -128 * sum of q over the 32-column block, at c32 + t * nb
//   c16   [2 nb] int32, -128 * sum of q over each 16-column half block, at c16 + 2 * t * nb
//   dsum  [nb] fp32, d * float(sum of q over the block), at dsum + t * nb
struct Int8Tokens {
  const int8_t* q;
  const float* d;
  const int32_t* c32;
  const int32_t* c16;
  const float* dsum;
  int64_t cols;
};

// y[t * ldy + r] = W[r, :] . x_t for r < rows and t < n_tokens; w points at row 0 (row stride
// row_bytes). Runs on the calling thread (per-thread stage buffer inside).
using Int8KernelFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t rows,
                              const Int8Tokens& x, int64_t n_tokens, float* y, int64_t ldy);

// One row of QuantizeRowInt8 (see matmul.h).
using QuantizeRowFn = void (*)(const float* x, int64_t cols, int8_t* q, float* scales,
                               int32_t* sums16);

struct Int8Family {
  std::string_view name;
  // The kernel for `type`, or nullptr where there is none (the caller falls back to fp32).
  Int8KernelFn (*kernel_for)(model::GgmlType type);
  QuantizeRowFn quantize_row;
};

// The AVX-512 VNNI family; nullptr when not built for this architecture or this CPU lacks the
// features (checked here, once).
const Int8Family* Avx512VnniInt8Family();

// The portable quantizer (the reference the SIMD one matches bit for bit).
void QuantizeRowInt8Scalar(const float* x, int64_t cols, int8_t* q, float* scales, int32_t* sums16);

// One matrix of an int8 product: y = W x, W [rows, cols] at w (row stride row_bytes), y
// [n_tokens, rows].
struct Int8Job {
  Int8KernelFn kernel;
  const uint8_t* w;
  int64_t row_bytes;
  int64_t rows;
  float* y;
};

// The most jobs one MatMulInt8 call takes (a layer's Q, K and V).
inline constexpr size_t kMaxInt8Jobs = 4;

// The int8 driver: quantizes x ([n_tokens, cols]) once and splits every job's rows (and, where a
// job's rows are few for the pool, its tokens) over the pool in one parallel region. 1 to
// kMaxInt8Jobs jobs, each with rows >= 1; n_tokens >= 1.
void MatMulInt8(const Int8Family& family, std::span<const Int8Job> jobs, int64_t cols,
                const float* x, int64_t n_tokens, ThreadPool* pool);

}  // namespace strata::backend::cpu::internal
