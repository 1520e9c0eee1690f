// Launch API of the fp32 -> fp16 activation conversion (kernels/f16_convert.cu) that feeds
// cuBLAS's fp16 GEMMs. Plain C++: callers need no CUDA headers. Pointers are device pointers;
// `stream` is a cudaStream_t (nullptr: the default stream). Returns the cudaError_t of the launch
// as an int (0 = success); a shape it refuses returns cudaErrorInvalidValue without launching.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Splits fp32 values into a high and a low fp16 part, so that an fp16 GEMM run on both (and
// summed in fp32) sees the activations with about 22 significant bits instead of 11:
//   hi[i] = fp16(x[i]),  lo[i] = fp16(x[i] - float(hi[i]))     (round to nearest even)
// x - float(hi) is exact in fp32 (Sterbenz), so hi + lo differs from x by at most 2^-11 ulp of
// hi's fp16 rounding error, i.e. about 2^-22 |x| (less precise only where lo falls into fp16's
// subnormal range, |x - hi| < 2^-14, an absolute error below 2^-25). |x| >= 65520 overflows:
// hi = +-inf and lo = -+inf (a GEMM over them gives NaN), so this suits activations only.
//
// x: [n] fp32; hi: [n] fp16 (IEEE binary16 bits), 2-byte aligned; lo: [n] fp16 or nullptr (only
// hi is written: a plain conversion). n >= 0 (0: nothing to do).
int LaunchSplitToF16(const float* x, int64_t n, void* hi, void* lo, void* stream);

}  // namespace strata::kernels
