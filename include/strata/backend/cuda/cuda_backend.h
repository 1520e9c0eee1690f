// CudaBackend: the transformer forward pass on one CUDA device, over the device kernels of
// kernels/ (launch API in include/strata/kernels/) and cuBLAS(Lt), with the paged KV cache in
// device memory. Built only where nvcc is found (STRATA_HAVE_CUDA); everything here reports
// failures as Status, never aborts.
//
// Thread rules: one driving thread calls Forward (see Backend). The GgufFile passed to Create
// may be closed once Create returns (the weights are copied to the device). Forward makes
// options.device current on the calling thread.
//
// Semantics are CpuBackend's (same batches accepted and refused, same KV layout per block id,
// fp16 KV). Numerics: weights kept exact (F32, F16, and Q8_0/Q4_K/Q6_K through the quantized
// matmul for up to 16 tokens per call) give logits within ~1e-5 relative of the CPU's;
// quantized weights in larger calls are multiplied in fp16 by cuBLAS (~1e-3 relative), from
// their fp16 copies or dequantized per call, with identical results either way. Other GGUF
// formats are dequantized on the host at load and kept as F16 (BF16 as F32).
//
// Memory: the weights, then either persistent fp16 copies of the quantized matrices or one
// fp16 dequantization workspace (f16_weight_copies), then the other workspaces (cuBLAS,
// activations of eager and graph steps), then the KV pool: kv_budget_bytes, or free memory
// after the weights times memory_fraction minus the copies and workspaces (memory_plan.h holds
// the arithmetic). Eager activation buffers grow past their initial 256 tokens on demand, out of
// the memory the fraction leaves.
//
// CUDA graphs: a step whose every slice is one token wanting its logits, with at most 128
// sequences, runs in the smallest bucket of memory_plan.h's kGraphBuckets that holds it, padded
// with dummy sequences that write no KV (slot -1) and attend to nothing (context 0); their rows
// are dropped. A bucket's first step runs eagerly and is then captured; later steps replay it.
// A capture that fails leaves that step's (eager) result intact and sends the bucket's later
// steps down the eager path, with one warning. Attention in a graph uses a split-K plan fixed
// per bucket for the model's whole context.
//
// Sampling: ForwardSampled samples the rows the engine marks on_backend with the device kernels
// of kernels/sampling.h after the step (outside any graph) and copies back only their tokens
// (4 bytes a row instead of 4 x vocab) and the logits of the rows the host samples.
#pragma once

#include <cstdint>
#include <memory>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"

namespace strata::backend::cuda {

// Whether quantized matrices (Q8_0/Q4_K/Q6_K) also get a persistent fp16 copy at load, which
// calls of more than 16 tokens multiply directly instead of dequantizing the matrix into a
// workspace on every call (the same fp16 values, so the same logits; a copy takes 2 bytes a
// weight, ~3.5x a Q4_K matrix). memory_plan.h's PlanF16WeightCopies decides.
enum class F16WeightCopies {
  kAuto,  // make them when the KV pool keeps at least half of what it would get without them
  kOn,    // make them; FAILED_PRECONDITION at Create when they do not fit
  kOff,   // never: dequantize per call
};

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
  // Share of the device's free memory (after the weights) that the KV pool and the workspaces
  // may take, in (0, 1].
  double memory_fraction = 0.9;
  // KV pool size in bytes; 0: sized from free memory and memory_fraction.
  int64_t kv_budget_bytes = 0;
  int32_t block_size = 16;  // tokens per KV block
  // Capture decode steps (one token per sequence) as CUDA graphs at bucketed batch sizes
  // (1, 2, 4, 8, 16, 32, 64, 128) and replay them.
  bool cuda_graphs = true;
  F16WeightCopies f16_weight_copies = F16WeightCopies::kAuto;
  // > 0: upload and run only the model's first `max_layers` layers, then its output norm and
  // head (self-speculation's draft). 0 or >= the model's: all.
  int32_t max_layers = 0;
};

// Whether a CUDA device can be used by this process (false without a driver or device).
bool CudaDeviceAvailable();

class CudaBackend final : public Backend {
 public:
  // Reads the config, uploads the weights (and their fp16 copies when planned) and allocates
  // the KV pool. UNAVAILABLE without a usable device, FAILED_PRECONDITION when the memory left
  // holds no KV block or f16_weight_copies is kOn and the copies do not fit, INVALID_ARGUMENT
  // for bad options, UNIMPLEMENTED for an architecture or weight type it cannot run.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(const model::GgufFile& file,
                                                       const CudaBackendOptions& options);

  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Status Forward(const Batch& batch, std::vector<float>* logits) override;
  // Samples on the device (kernels/sampling.h) whenever the vocabulary fits the kernels; only
  // the sampled tokens and the rows the caller samples itself come back to the host.
  bool samples_on_backend() const override;
  Status ForwardSampled(const Batch& batch, std::span<const RowSampling> rows,
                        SampledStep* out) override;
  const model::ModelConfig& config() const override;
  KvGeometry kv_geometry() const override;
  std::string_view name() const override { return "cuda"; }
  std::string Describe() const override;

  // Device memory taken by the weights (their fp16 copies included), by the fp16 copies alone
  // (0 without them), and by the KV pool, in bytes.
  int64_t weight_bytes() const;
  int64_t f16_copy_bytes() const;
  int64_t kv_bytes() const;

  struct Impl;

 private:
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::backend::cuda
