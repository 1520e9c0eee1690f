// libstrata_cuda_backend.so's exported entry points (cuda_backend_plugin.h). Everything else in
// the library is hidden (-fvisibility=hidden, --exclude-libs,ALL).
#include "strata/backend/cuda/cuda_backend_plugin.h"

#include <memory>

#include "strata/kernels/dequantize.h"

#define STRATA_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

STRATA_PLUGIN_EXPORT int64_t strata_cuda_plugin_abi() {
  return strata::backend::cuda::kCudaPluginAbi;
}

STRATA_PLUGIN_EXPORT int strata_cuda_plugin_device_count() {
  return strata::kernels::CudaDeviceCount();
}

STRATA_PLUGIN_EXPORT strata::backend::Backend* strata_cuda_plugin_create(
    const strata::model::GgufFile* file, const strata::backend::cuda::CudaBackendOptions* options,
    strata::Status* status) {
  auto created = strata::backend::cuda::CudaBackend::Create(*file, *options);
  if (!created.ok()) {
    *status = created.status();
    return nullptr;
  }
  *status = strata::OkStatus();
  return created->release();
}
