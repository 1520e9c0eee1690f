// Launch API of the small element-wise ops of the forward pass (kernels/elementwise.cu). Plain
// C++: callers need no CUDA headers. Pointers are device pointers; `stream` is a cudaStream_t
// (nullptr: the default stream). Each returns the cudaError_t of the launch as an int
// (0 = success); a shape it refuses returns cudaErrorInvalidValue without launching. n = 0 (or
// rows = 0) is a no-op that returns 0.
//
// Semantics are those of the CPU backend's AddInPlace / ScaleInPlace / SoftCapInPlace
// (src/backend/cpu/ops.cc), in fp32 with each operation rounded once (no FMA).
#pragma once

#include <cstdint>

namespace strata::kernels {

// x[i] += y[i].  x: [n] fp32 in place; y: [n] fp32 (may be x).
int LaunchAddInPlace(float* x, const float* y, int64_t n, void* stream);

// x[r, i] += bias[i]: the per-row bias of q/k/v (qwen2).
// x: [rows, n] fp32 in place, contiguous; bias: [n] fp32.
int LaunchAddBiasInPlace(float* x, const float* bias, int64_t rows, int64_t n, void* stream);

// x[i] *= s.  x: [n] fp32 in place.
int LaunchScaleInPlace(float* x, float s, int64_t n, void* stream);

// x[i] = cap * tanh(x[i] / cap) (Gemma's logit soft-cap). x: [n] fp32 in place; cap > 0 and
// finite. tanh is evaluated in double and rounded to float, so the result is within ~1.5 ulp of
// the exact value; the CPU's (through glibc's tanhf) can differ from it by up to 2 ulp.
int LaunchSoftCapInPlace(float* x, float cap, int64_t n, void* stream);

}  // namespace strata::kernels
