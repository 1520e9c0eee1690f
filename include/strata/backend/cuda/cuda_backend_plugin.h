// The C entry points of libstrata_cuda_backend.so, the CUDA backend as a shared library that
// CreateBackend loads with dlopen when `--backend cuda` (or auto on a machine with a device)
// asks for it.
//
// Why a separate library: cuBLAS(Lt) carries ~110 KiB of initial-exec thread-local storage,
// and a program that links it at start gives every thread that much less stack. Threads
// started with small stacks (the Prometheus exporter's HTTP workers, 100 KiB) then cannot be
// created at all. Loaded on demand, the CUDA libraries' TLS is allocated per thread when
// first used, and a CPU-only machine runs the same server binary without any CUDA library.
//
// Both sides are built from the same tree by the same compiler; kCudaPluginAbi (and the sizes
// of the types that cross) guards against loading a library from another build.
#pragma once

#include <cstdint>

#include "strata/backend/backend.h"
#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/status.h"
#include "strata/model/gguf_file.h"

namespace strata::backend::cuda {

inline constexpr char kCudaPluginFile[] = "libstrata_cuda_backend.so";

// Changes whenever a signature below or a type that crosses changes.
inline constexpr int64_t kCudaPluginAbi =
    (int64_t{2} << 48) ^ (int64_t{sizeof(CudaBackendOptions)} << 32) ^
    (int64_t{sizeof(Status)} << 16) ^ int64_t { sizeof(model::GgufFile) };

}  // namespace strata::backend::cuda

extern "C" {
// kCudaPluginAbi of the library's build.
using StrataCudaPluginAbiFn = int64_t (*)();
// CUDA devices this process sees (0 without a driver or device).
using StrataCudaPluginDeviceCountFn = int (*)();
// CudaBackend::Create; on failure returns null and sets *status. The caller owns the result
// and deletes it through Backend's virtual destructor (which runs in the library).
using StrataCudaPluginCreateFn =
    strata::backend::Backend* (*)(const strata::model::GgufFile* file,
                                  const strata::backend::cuda::CudaBackendOptions* options,
                                  strata::Status* status);
}
