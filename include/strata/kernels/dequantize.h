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

// Number of CUDA devices visible to this process; 0 when there is no driver or device.
int CudaDeviceCount();

}  // namespace strata::kernels
