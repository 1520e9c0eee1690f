#include "strata/backend/backend_factory.h"

#include <string>

#include "cuda_plugin_loader.h"
#include "strata/backend/cpu/cpu_backend.h"
#include "strata/backend/cuda/cuda_backend.h"

namespace strata::backend {

std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return InvalidArgumentError("backend must be auto, cpu or cuda, got '" + std::string(name) + "'");
}

std::string_view F16WeightCopiesName(cuda::F16WeightCopies copies) {
  switch (copies) {
    case cuda::F16WeightCopies::kAuto:
      return "auto";
    case cuda::F16WeightCopies::kOn:
      return "on";
    case cuda::F16WeightCopies::kOff:
      return "off";
  }
  return "unknown";
}

StatusOr<cuda::F16WeightCopies> ParseF16WeightCopies(std::string_view name) {
  if (name == "auto") return cuda::F16WeightCopies::kAuto;
  if (name == "on") return cuda::F16WeightCopies::kOn;
  if (name == "off") return cuda::F16WeightCopies::kOff;
  return InvalidArgumentError("fp16 weight copies must be auto, on or off, got '" +
                              std::string(name) + "'");
}

bool CudaBackendBuilt() {
#ifdef STRATA_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

bool CudaBackendUsable() {
  return CudaBackendBuilt() && internal::CudaDriverPresent() && internal::LoadCudaPlugin().ok() &&
         internal::CudaPluginDeviceCount() > 0;
}

StatusOr<BackendKind> ResolveBackendKind(BackendKind requested) {
  switch (requested) {
    case BackendKind::kCpu:
      return BackendKind::kCpu;
    case BackendKind::kAuto:
      return CudaBackendUsable() ? BackendKind::kCuda : BackendKind::kCpu;
    case BackendKind::kCuda:
      if (!CudaBackendBuilt()) {
        return FailedPreconditionError(
            "backend cuda: this build of Strata has no CUDA backend (nvcc was not found when it "
            "was configured); use --backend cpu or auto");
      }
      if (!internal::CudaDriverPresent()) {
        return FailedPreconditionError(
            "backend cuda: no CUDA device is visible to this process (the NVIDIA driver's "
            "libcuda.so.1 cannot be loaded); use --backend cpu or auto");
      }
      if (Status loaded = internal::LoadCudaPlugin(); !loaded.ok()) {
        return FailedPreconditionError("backend cuda: " + loaded.message());
      }
      if (!CudaBackendUsable()) {
        return FailedPreconditionError(
            "backend cuda: no CUDA device is visible to this process (no driver, no device, or "
            "CUDA_VISIBLE_DEVICES hides them); use --backend cpu or auto");
      }
      return BackendKind::kCuda;
  }
  return InvalidArgumentError("unknown backend kind");
}

StatusOr<std::unique_ptr<Backend>> CreateBackend(const model::GgufFile& file,
                                                 const BackendSpec& spec) {
  STRATA_ASSIGN_OR_RETURN(BackendKind kind, ResolveBackendKind(spec.kind));
  if (spec.kv_budget_bytes < 0) {
    return InvalidArgumentError("the KV budget must be >= 0 bytes, got " +
                                std::to_string(spec.kv_budget_bytes));
  }
  if (kind == BackendKind::kCpu) {
    cpu::CpuBackendOptions options;
    options.num_threads = spec.threads;
    options.kv_budget_bytes =
        spec.kv_budget_bytes > 0 ? spec.kv_budget_bytes : kDefaultCpuKvBudgetBytes;
    options.kv_dtype = spec.kv_dtype;
    options.block_size = spec.block_size;
    options.matmul_precision = spec.matmul_precision;
    options.max_layers = spec.max_layers;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> b,
                            cpu::CpuBackend::Create(file, options));
    return std::unique_ptr<Backend>(std::move(b));
  }
  if (spec.kv_dtype != cpu::KvDtype::kF16) {
    return InvalidArgumentError(
        std::string("the CUDA backend keeps its KV cache in f16 only, not ") +
        cpu::KvDtypeName(spec.kv_dtype));
  }
  cuda::CudaBackendOptions options;
  options.device = spec.device;
  options.memory_fraction = spec.gpu_memory_fraction;
  options.kv_budget_bytes = spec.kv_budget_bytes;
  options.block_size = spec.block_size;
  options.cuda_graphs = spec.cuda_graphs;
  options.f16_weight_copies = spec.cuda_f16_weights;
  options.max_layers = spec.max_layers;
  return internal::CreateCudaBackendFromPlugin(file, options);
}

}  // namespace strata::backend
