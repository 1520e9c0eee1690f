// CreateBackend: the one place that turns a BackendSpec into a running Backend. The server,
// every tool and every benchmark create their backend here; none names a concrete backend.
//
// Kinds: "cpu" (always built), "cuda" (built where nvcc was found, runs where a device is
// visible) and "auto" (cuda when built and a device is visible, cpu otherwise). Settings that
// belong to one kind are ignored by the other, except where the other cannot honour them
// (INVALID_ARGUMENT: an f32 KV cache on CUDA).
//
// Ownership: the GgufFile passed to CreateBackend must outlive the backend (the CPU backend
// reads its weights from the mapped file). Thread rules: the functions here may be called from
// any thread; the Backend returned follows backend.h's rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "strata/backend/backend.h"
#include "strata/backend/cpu/kv_storage.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/backend/cpu/matmul_plan.h"
#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/status.h"
#include "strata/model/gguf_file.h"

namespace strata::backend {

enum class BackendKind { kAuto, kCpu, kCuda };

// "auto", "cpu", "cuda".
std::string_view BackendKindName(BackendKind kind);

// INVALID_ARGUMENT naming the choices for anything but "auto", "cpu" or "cuda".
StatusOr<BackendKind> ParseBackendKind(std::string_view name);

// "auto", "on", "off" (--cuda-f16-weights).
std::string_view F16WeightCopiesName(cuda::F16WeightCopies copies);

// INVALID_ARGUMENT naming the choices for anything but "auto", "on" or "off".
StatusOr<cuda::F16WeightCopies> ParseF16WeightCopies(std::string_view name);

// Whether this binary was built with the CUDA backend.
bool CudaBackendBuilt();

// Whether the CUDA backend is built and a CUDA device is visible to this process.
bool CudaBackendUsable();

// The kind that `requested` runs as: kAuto becomes kCuda or kCpu (see above). kCuda in a build
// without CUDA, or with no device visible, is FAILED_PRECONDITION with one line that says which.
StatusOr<BackendKind> ResolveBackendKind(BackendKind requested);

struct BackendSpec {
  BackendKind kind = BackendKind::kAuto;
  int32_t block_size = 16;  // tokens per KV block
  // Memory for the KV cache in bytes; 0: the kind's default (CPU: 256 MiB; CUDA: what
  // gpu_memory_fraction leaves of the device's free memory after the weights and workspaces).
  int64_t kv_budget_bytes = 0;

  // CPU only.
  int32_t threads = 0;  // 0: one per core
  cpu::KvDtype kv_dtype = cpu::KvDtype::kF16;
  cpu::MatMulPrecisionSetting matmul_precision = cpu::MatMulPrecisionSetting::kFp32;
  // > 0: only the first max_layers layers, then the output head (self-speculation's draft).
  int32_t max_layers = 0;

  // CUDA only.
  int32_t device = 0;                // CUDA device ordinal
  double gpu_memory_fraction = 0.9;  // share of free device memory, in (0, 1]
  bool cuda_graphs = true;           // capture decode steps as CUDA graphs
  // fp16 copies of the quantized weights for calls of more than 16 tokens (cuda_backend.h).
  cuda::F16WeightCopies cuda_f16_weights = cuda::F16WeightCopies::kAuto;
};

// The CPU backend's KV budget when the spec leaves it at 0.
inline constexpr int64_t kDefaultCpuKvBudgetBytes = int64_t{256} << 20;

// Resolves spec.kind and creates that backend. Errors are the resolution's (above) and the
// backend's own (a model it cannot run, memory that holds no KV block, bad options).
StatusOr<std::unique_ptr<Backend>> CreateBackend(const model::GgufFile& file,
                                                 const BackendSpec& spec);

}  // namespace strata::backend
