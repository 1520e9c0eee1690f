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
// With MatMulPrecision::kFp32 (the default) activations stay fp32 (no int8 rounding of x), and
// the decoders reproduce model::Dequantize bit for bit, so every path agrees with a float64
// reference to fp32 accumulation error.
//
// Precision (MatMulOptions::precision):
// - kFp32 (the default): as above; activations stay fp32.
// - kInt8 (opt-in here; strata-server's default runs it for each weight type it measures faster,
//   matmul_plan.h): each token's activations are quantized per 32-column block to int8 with one
//   fp32 scale (QuantizeRowInt8: d = amax / 127, q = round-to-nearest-even(x * (1 / d)),
//   clamped to [-127, 127]; an all-zero block gets d = 0 and q = 0, as llama.cpp's q8_0
//   activations but with the scale kept in fp32), and the products run in integers with
//   AVX-512 VNNI (vpdpbusd) on unsigned 8-bit weight codes (signed formats shifted by 128, the
//   shift taken back with the activation block sums; formats with a min keep their codes and
//   add min * d_x * sum(q_x) per block). Rows sit in the lanes: each group of 16 rows is
//   decoded once per call as it streams from memory (prefetched one group ahead), transposed in
//   registers, and each vpdpbusd adds 4 products to the 16 rows for one token's broadcast
//   activations; tokens run in passes of up to 16 over the decoded group (kept in L1/L2 when
//   there is more than one pass), so the weights are read and decoded once whatever the batch.
//   Each (row, token) accumulates,
//     acc = fma(float(isum_b), d_w,b * d_x,b, acc)    [+ fma(m_w,b, d_x,b * sum_b(q_x), acc)]
//   where isum_b is the exact integer dot product of the block (Q6_K: per 16-column half, with
//   the half's own weight scale). That chain is the only floating-point rounding, and it is the
//   same whatever n_tokens is, however rows and tokens are split over threads and whichever
//   pass or lane computes the element: a token's output row is bit-identical
//   alone or in any batch. Versus kFp32 the result differs by the activation rounding (relative
//   error up to 1/254 of each block's largest element), not by summation order. Integer kernels
//   exist for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K on CPUs with AVX-512 F/BW/VL/DQ +
//   VNNI (MatMulInt8Supports); every other type, and every type on other CPUs, runs the kFp32 path
//   unchanged. Weights are still read in place (no repacking, no extra resident memory beyond a
//   per-thread stage of a few tens of KiB). Measured (2 threads, 2-core AVX-512 VNNI VM,
//   gemma-3-270m's matrices): 1 token as fast as kFp32's fused kernel or faster, 16 tokens
//   2-3x kFp32 (output projection Q8_0 262144 x 640: 14 vs 41 ms), 32 tokens 28 ms (2.4x).
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

#include <cstddef>
#include <cstdint>
#include <span>
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
// error (checked). n_tokens == 0 does nothing. options.precision picks the activation precision
// (see "Precision" above); the default keeps the fp32 behaviour.
enum class MatMulPrecision {
  kFp32,  // fp32 activations, fp32 accumulation (the default)
  kInt8,  // int8 activations per 32-column block, integer dot products (see the top of the file)
};

struct MatMulOptions {
  MatMulPrecision precision = MatMulPrecision::kFp32;
};

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            const MatMulOptions& options = {});

// Several matrices over one input: for each target, target.y = the product MatMul gives for
// (target.w, x, n_tokens, target.options), bit for bit. The targets that run int8 kernels share
// one quantization of x and one parallel region (a layer's Q, K and V projections: one pool
// wake-up and one wait for the slowest thread instead of three); the others run as MatMul, one
// after another. At most kMaxMatMulTargets targets; every target's cols must equal the first's;
// no y may overlap x or another y.
struct MatMulTarget {
  WeightMatrix w;
  float* y;
  MatMulOptions options;
};
inline constexpr size_t kMaxMatMulTargets = 4;

void MatMulSameInput(std::span<const MatMulTarget> targets, const float* x, int64_t n_tokens,
                     ThreadPool* pool);

bool MatMulSupports(model::GgmlType type);

// Whether MatMulPrecision::kInt8 runs integer kernels for `type` on this CPU (false: it runs the
// fp32 path, with kFp32's numerics).
bool MatMulInt8Supports(model::GgmlType type);

// "fp32" / "int8", for flags and logs. Parse returns false (and changes nothing) for any other
// name.
std::string_view MatMulPrecisionName(MatMulPrecision precision);
bool ParseMatMulPrecision(std::string_view name, MatMulPrecision* precision);

// kInt8's activation quantizer, for one token row (exposed for tests and references):
//   x: [cols] fp32, cols a multiple of 32; q: [cols] int8; scales: [cols / 32] fp32 (d per
//   block); sums16: [cols / 16] int32, the sum of q over each 16-column half block.
// d = amax / 127 (fp32 division), q = nearbyint(x * (1.0f / d)) clamped to [-127, 127]; an
// all-zero block gives d = 0 and q = 0. Uses AVX-512 when present, bit-identical to the scalar
// code. Inputs must be finite.
void QuantizeRowInt8(const float* x, int64_t cols, int8_t* q, float* scales, int32_t* sums16);

// Which kernel family runs on this machine ("avx512", "avx2", "scalar"), for logs/benchmarks.
std::string_view MatMulIsa();

// For tests/benchmarks: force the portable scalar path (true) or return to the best family this
// CPU supports (false).
void SetMatMulForceScalar(bool force);

// For tests/benchmarks: use the kernel family `isa` ("avx512", "avx2" or "scalar"). Returns
// false (and changes nothing) when the name is unknown or this CPU lacks the features.
bool SetMatMulIsa(std::string_view isa);

}  // namespace strata::backend::cpu
