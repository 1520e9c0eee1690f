// Finds and loads libstrata_cuda_backend.so once per process (see cuda_backend_plugin.h).
// Where it looks, in order: $STRATA_CUDA_BACKEND_LIBRARY; beside the running executable;
// ../lib beside it; the build tree's copy (a path fixed at build time).
//
// Thread rules: safe from any thread; the library stays loaded until the process exits.
#pragma once

#include <memory>
#include <string>

#include "strata/backend/backend.h"
#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/status.h"
#include "strata/model/gguf_file.h"

namespace strata::backend::internal {

// OK once the library is loaded and its ABI matches; FAILED_PRECONDITION naming the paths
// tried and the loader's reason otherwise.
[[nodiscard]] Status LoadCudaPlugin();

// Whether the NVIDIA driver's library (libcuda.so.1) can be loaded: without it no device can
// be visible, and CPU-only machines need not load the CUDA libraries at all to learn that.
bool CudaDriverPresent();

// CUDA devices visible through the library; 0 when it cannot be loaded.
int CudaPluginDeviceCount();

// CudaBackend::Create through the library.
StatusOr<std::unique_ptr<Backend>> CreateCudaBackendFromPlugin(
    const model::GgufFile& file, const cuda::CudaBackendOptions& options);

}  // namespace strata::backend::internal
