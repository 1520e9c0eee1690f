// Launch API of the fp32 -> fp16 activation conversion (kernels/f16_convert.cu) that feeds
// cuBLAS's fp16 GEMMs. Plain C++: callers need no CUDA headers. Pointers are device pointers;
// `stream` is a cudaStream_t (nullptr: the default stream). Returns the cudaError_t of the launch
// as an int (0 = success); a shape it refuses returns cudaErrorInvalidValue without launching.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Splits scaled fp32 values into a high and a low fp16 part, so that an fp16 GEMM run on both
// (and summed in fp32) sees the activations with about 22 significant bits instead of 11:
//   v = x[i] * scale,  hi[i] = fp16(v),  lo[i] = fp16(v - float(hi[i]))   (round to nearest even)
// `scale` must be a power of two (so v is exact unless it underflows); the GEMM multiplies by
// 1 / scale (alpha) to undo it. A scale below 1 widens the range: fp16 overflows at 65520, so
// |x| up to 65504 / scale converts finitely, while where hi or lo falls below 2^-14 (fp16's
// subnormals) the error in x is absolute, at most 2^-25 / scale. Otherwise v - float(hi) is
// exact in fp32 (Sterbenz) and hi + lo differs from v by at most 2^-22 |v| (hi alone: 2^-11).
// |v| >= 65520 overflows: hi = +-inf and lo = -+inf (a GEMM over them gives NaN).
//
// x: [n] fp32; hi: [n] fp16 (IEEE binary16 bits), 2-byte aligned; lo: [n] fp16 or nullptr (only
// hi is written: a plain conversion). n >= 0 (0: nothing to do); scale > 0 and finite.
int LaunchSplitToF16(const float* x, int64_t n, float scale, void* hi, void* lo, void* stream);

}  // namespace strata::kernels
