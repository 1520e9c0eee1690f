// Launch API of the RMSNorm kernel (kernels/rms_norm.cu). Plain C++: callers need no CUDA
// headers. Pointers are device pointers; `stream` is a cudaStream_t (nullptr: the default
// stream). Returns the cudaError_t of the launch as an int (0 = success); a shape it refuses
// returns cudaErrorInvalidValue without launching.
//
// Semantics are those of the CPU backend's RmsNorm (src/backend/cpu/ops.cc), per row:
//   out[i] = x[i] * (1 / sqrt(float(sum(x^2) / n) + eps)) * weight[i]
// with the sum of squares taken in double (in a fixed block-wide order, so results are
// deterministic; they equal the CPU's except where the two summation orders round the double sum
// differently enough to move float(sum / n), about one ulp of the scale at worst). `weight` is
// used as stored: Gemma's "1 + w" is already folded into the GGUF weights by the converter, and
// the CPU backend multiplies by the stored value too. Every product is rounded separately (no FMA
// contraction), in the CPU's order: (x * scale) * weight.
#pragma once

#include <cstdint>

namespace strata::kernels {

// RMSNorm over `rows` rows of `n` contiguous floats, optionally after a fused residual add.
//
// x:        [rows, n] fp32. With `residual`, x += residual is done first and the sum written
//           back to x (so x holds the next layer's residual stream); otherwise x is read only.
// residual: [rows, n] fp32, or nullptr for a plain norm.
// weight:   [n] fp32.
// out:      [rows, n] fp32, the normalised rows; may be x (in place).
// Any two of x, residual and out may be the same pointer (each element is read and written by
// one thread); partially overlapping buffers are not allowed.
//
// The per-head q/k norm is the same call with rows = num_tokens * num_heads and n = head_dim
// over a [num_tokens, num_heads, head_dim] tensor. The CPU's fused pattern "x += o; h = norm(x)"
// (end of one block, start of the next) is one call with residual = o, out = h.
//
// n must be in [1, 2^31); rows in [0, 2^31) (0: nothing to do, returns 0).
int LaunchRmsNorm(float* x, const float* residual, const float* weight, float* out, int64_t rows,
                  int64_t n, float eps, void* stream);

// Threads per block the kernel uses for rows of n elements: about four elements per thread,
// a multiple of 32 in [32, 1024]. Pure host arithmetic (exposed for tests).
int RmsNormThreads(int64_t n);

}  // namespace strata::kernels
