// Matrix products of fp32 activations with weight matrices stored in ggml formats, read in place
// (usually straight from the model's mmap; weights are never copied or repacked).
//
// How (src/backend/cpu/matmul.cc):
// - Few tokens (decode; up to 4 on AVX-512, 2 on AVX2): a fused kernel decodes each weight block
//   in registers and multiplies it with every token, so the weights stream from memory once,
//   with software prefetch ahead of them, and nothing is written back.
// - More tokens (prefill, batches): each thread dequantizes a tile of weight rows (64 rows x up
//   to 1024 columns) into a thread-local fp32 buffer that stays in L2, and runs a register-blocked
//   FMA micro-kernel (4 rows x 6 tokens on AVX-512, 3 x 4 on AVX2) over it for all tokens, so
//   each weight byte is decoded once per call.
// Activations stay fp32 (no int8 rounding of x), and the decoders reproduce model::Dequantize
// bit for bit, so every path agrees with a float64 reference to fp32 accumulation error.
//
// Kernel families are chosen at run time from the CPU's features ("avx512", "avx2", "scalar");
// the binary needs no -march flags.
//
// Performance notes: x rows that start on 64-byte boundaries (x itself 64-byte aligned and cols
// a multiple of 16) avoid a per-call copy of x. Per-thread buffers grow on first use and are
// reused afterwards; the steady state allocates nothing.
//
// Thread rules: MatMul may be called from any thread, also from inside a region of the same pool
// (it then runs on the calling thread alone), and concurrently from several threads as long as
// they use different pools. SetMatMulForceScalar and SetMatMulIsa must not run concurrently
// with MatMul (they are for tests and benchmarks).
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/ggml_type.h"

namespace strata::backend::cpu {

// A row-major [rows, cols] weight matrix in a ggml format (usually pointing into the mmap).
// Row r starts at data + r * (cols / block_size * type_size) bytes; cols is a multiple of the
// type's block size. No alignment is required, except 4 bytes for F32 (GGUF aligns every tensor
// to 32).
struct WeightMatrix {
  model::GgmlType type;
  const uint8_t* data;
  int64_t rows;
  int64_t cols;
};

// y[t * rows + r] = sum_c x[t * cols + c] * W[r, c], for t < n_tokens and r < rows.
//   x: [n_tokens, cols] fp32, row-major; y: [n_tokens, rows] fp32, row-major (overwritten).
// x and y must not overlap. Supported types: see MatMulSupports (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). Splits the rows (and, when rows are few for
// the pool, the tokens) across `pool`; pool == nullptr runs on the calling thread. An
// unsupported type or a cols value that is not a multiple of the block size is a programmer
// error (checked). n_tokens == 0 does nothing.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

bool MatMulSupports(model::GgmlType type);

// Which kernel family runs on this machine ("avx512", "avx2", "scalar"), for logs/benchmarks.
std::string_view MatMulIsa();

// For tests/benchmarks: force the portable scalar path (true) or return to the best family this
// CPU supports (false).
void SetMatMulForceScalar(bool force);

// For tests/benchmarks: use the kernel family `isa` ("avx512", "avx2" or "scalar"). Returns
// false (and changes nothing) when the name is unknown or this CPU lacks the features.
bool SetMatMulIsa(std::string_view isa);

}  // namespace strata::backend::cpu
