// Launch API of the dequantization kernels (kernels/dequantize.cu). Plain C++: callers need
// no CUDA headers. Pointers are device pointers; `stream` is a cudaStream_t (nullptr: the
// default stream). Each returns the cudaError_t of the launch as an int (0 = success); the
// caller (backend/cuda) turns it into a Status.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Q8_0 blocks -> fp32. `src`: [num_elements / 32] blocks of 34 bytes (fp16 scale, 32 int8);
// `dst`: [num_elements] floats. num_elements must be a multiple of 32.
int LaunchDequantizeQ8_0(const void* src, float* dst, int64_t num_elements, void* stream);

// Quantized blocks -> fp16, for the cuBLAS path of large token counts (backend/cuda dequantizes
// each weight matrix once at load into a persistent fp16 copy, or, without copies, into a reused
// fp16 workspace before every GEMM). Each element is first decoded to the
// exact fp32 value model::Dequantize gives (same operations, no contraction), then rounded to
// nearest even fp16 (__float2half_rn; overflow to infinity). Values are the GGUF type numbers:
enum class DequantizeType : uint32_t { kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14 };

// `src`: [num_elements / block_elements] blocks of `type` (a packed row-major matrix is one such
// run, rows never padded), any alignment; `dst`: [num_elements] fp16 (IEEE binary16 bits),
// 2-byte aligned. num_elements must be a non-negative multiple of the block's element count
// (32 for Q8_0, 256 for the K-quants; 0: nothing to do); anything else, or an unknown type,
// returns cudaErrorInvalidValue without launching.
int LaunchDequantizeToF16(const void* src, DequantizeType type, void* dst, int64_t num_elements,
                          void* stream);

// Number of CUDA devices visible to this process; 0 when there is no driver or device.
int CudaDeviceCount();

}  // namespace strata::kernels
