#include "strata/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_status.h"
#include "strata/kernels/dequantize.h"
#include "strata/kernels/logit_processing.h"
#include "strata/kernels/sampling.h"
#include "strata/model/model_weights.h"
#include "strata/sampling/token_mask.h"

namespace strata::backend::cuda {
namespace {

// cuBLAS's user workspace (its recommendation for Hopper is 32 MiB).
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;
// Tokens the eager activation buffers hold from the start (they grow for larger batches).
constexpr int64_t kInitialEagerTokens = 256;

Status ValidateOptions(const CudaBackendOptions& o) {
  if (o.device < 0) {
    return InvalidArgumentError("CUDA device ordinal must be >= 0, got " +
                                std::to_string(o.device));
  }
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0)) {
    return InvalidArgumentError("memory_fraction must be in (0, 1], got " +
                                std::to_string(o.memory_fraction));
  }
  if (o.kv_budget_bytes < 0) {
    return InvalidArgumentError("kv_budget_bytes must be >= 0, got " +
                                std::to_string(o.kv_budget_bytes));
  }
  if (o.block_size < 1 || o.block_size > 1024) {
    return InvalidArgumentError("block size must be between 1 and 1024 tokens, got " +
                                std::to_string(o.block_size));
  }
  return OkStatus();
}

// "14.9 GiB", "2.3 MiB": one decimal in the larger unit that gives at least 1.
std::string FormatBytes(int64_t bytes) {
  const bool gib = bytes >= (int64_t{1} << 30);
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s",
                static_cast<double>(bytes) / static_cast<double>(int64_t{1} << (gib ? 30 : 20)),
                gib ? "GiB" : "MiB");
  return text;
}

// Describe()'s words on the fp16 weight copies, with a leading ", "; empty when no matrix is
// quantized (nothing to copy).
std::string DescribeF16Copies(F16WeightCopies mode, int64_t wanted_bytes, int64_t made_bytes) {
  if (made_bytes > 0) return ", fp16 weight copies " + FormatBytes(made_bytes);
  if (wanted_bytes <= 0) return "";
  return mode == F16WeightCopies::kOff ? ", no fp16 weight copies (off)"
                                       : ", no fp16 weight copies (memory)";
}

}  // namespace

bool CudaDeviceAvailable() { return kernels::CudaDeviceCount() > 0; }

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaBackend::~CudaBackend() {
  if (impl_ != nullptr && impl_->stream.get() != nullptr) {
    // Nothing may be freed while the device still uses it; errors cannot be reported here.
    cudaSetDevice(impl_->options.device);
    cudaStreamSynchronize(impl_->stream.get());
  }
}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const model::GgufFile& file,
                                                           const CudaBackendOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  STRATA_ASSIGN_OR_RETURN(impl->config, model::ModelConfig::FromGguf(file));
  model::ModelConfig& c = impl->config;
  if (options.max_layers > 0 && options.max_layers < c.n_layers) {
    c.n_layers = options.max_layers;
    c.layer_is_sliding.resize(static_cast<size_t>(options.max_layers));
  }
  STRATA_ASSIGN_OR_RETURN(model::ModelWeights host_weights,
                          model::ModelWeights::FromGguf(file, &c));
  if (c.head_dim_k > kernels::kPagedAttentionMaxHeadDim ||
      c.head_dim_v > kernels::kPagedAttentionMaxHeadDim) {
    return UnimplementedError("head dimensions of " + std::to_string(c.head_dim_k) + "/" +
                              std::to_string(c.head_dim_v) +
                              " exceed the CUDA attention kernels' limit of " +
                              std::to_string(kernels::kPagedAttentionMaxHeadDim));
  }
  if (c.context_length > INT32_MAX / 2) {
    return UnimplementedError("a context of " + std::to_string(c.context_length) +
                              " positions exceeds the CUDA backend's int32 positions");
  }

  const int devices = kernels::CudaDeviceCount();
  if (devices == 0) return UnavailableError("no CUDA device is available");
  if (options.device >= devices) {
    return InvalidArgumentError("CUDA device " + std::to_string(options.device) +
                                " does not exist; this process sees " + std::to_string(devices));
  }
  STRATA_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  STRATA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  impl->description =
      "cuda (" + std::string(prop.name) + ", sm_" + std::to_string(prop.major) +
      std::to_string(prop.minor) + ", " +
      std::to_string(static_cast<int64_t>(prop.totalGlobalMem >> 30)) + " GiB, " +
      (options.cuda_graphs ? "graphs on" : "graphs off") + ", " +
      (c.vocab_size <= kernels::kMaxSamplingVocab ? "device sampling" : "host sampling");
  STRATA_ASSIGN_OR_RETURN(impl->stream, Stream::Create());
  cudaStream_t stream = impl->stream.get();
  STRATA_ASSIGN_OR_RETURN(impl->weights, UploadWeights(host_weights, c, stream));

  size_t free_bytes = 0;
  size_t total_bytes = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));

  // Workspaces, sized before the KV pool takes the rest (the fp16 dequantization workspace, or
  // the fp16 weight copies instead, are added once planned below).
  const int64_t max_cols = impl->weights.max_cols;
  const int64_t max_bucket = kGraphBuckets.back();
  const int64_t max_blocks_per_seq =
      (c.context_length + options.block_size - 1) / options.block_size;
  int64_t workspace_bytes =
      kCublasWorkspaceBytes + Activations::BytesFor(c, max_cols, kInitialEagerTokens);
  if (options.cuda_graphs) {
    impl->graph_layout = StepLayout::For(max_bucket, max_bucket, max_bucket * max_blocks_per_seq);
    int64_t attention_ws = 0;
    const bool any_sliding =
        std::any_of(c.layer_is_sliding.begin(), c.layer_is_sliding.end(), [](bool b) { return b; });
    for (size_t i = 0; i < kGraphBuckets.size(); ++i) {
      // A fixed plan per bucket, made for the model's whole context: captured kernels cannot
      // take a per-step plan, and the decode kernel covers any shorter context with it (its
      // partitions stride over the chunks that exist; idle ones exit at once).
      AttentionPlan& p = impl->graph_plans[i];
      p.decode_seqs = static_cast<int32_t>(kGraphBuckets[i]);
      p.global = kernels::PlanPagedAttentionDecode(
          kGraphBuckets[i], static_cast<int32_t>(c.n_heads), static_cast<int32_t>(c.n_kv_heads),
          static_cast<int32_t>(c.head_dim_v), c.context_length, 0);
      p.sliding = any_sliding
                      ? kernels::PlanPagedAttentionDecode(
                            kGraphBuckets[i], static_cast<int32_t>(c.n_heads),
                            static_cast<int32_t>(c.n_kv_heads), static_cast<int32_t>(c.head_dim_v),
                            c.context_length, c.sliding_window)
                      : p.global;
      attention_ws = std::max({attention_ws, p.global.workspace_bytes, p.sliding.workspace_bytes});
    }
    workspace_bytes += Activations::BytesFor(c, max_cols, max_bucket) +
                       2 * impl->graph_layout.total_bytes + max_bucket * c.vocab_size * 4 +
                       attention_ws;
    STRATA_ASSIGN_OR_RETURN(impl->graph_act, Activations::Allocate(c, max_cols, max_bucket));
    STRATA_ASSIGN_OR_RETURN(
        impl->graph_inputs,
        DeviceBuffer::Allocate(impl->graph_layout.total_bytes, "graph step inputs"));
    STRATA_ASSIGN_OR_RETURN(impl->graph_host, PinnedBuffer::Allocate(impl->graph_layout.total_bytes,
                                                                     "graph step inputs"));
    STRATA_ASSIGN_OR_RETURN(impl->graph_logits,
                            DeviceBuffer::Allocate(max_bucket * c.vocab_size * 4, "graph logits"));
    STRATA_ASSIGN_OR_RETURN(impl->graph_attention_ws,
                            DeviceBuffer::Allocate(attention_ws, "attention workspace"));
    for (AttentionPlan& p : impl->graph_plans) {
      p.workspace = impl->graph_attention_ws.get();
      p.workspace_bytes = impl->graph_attention_ws.bytes();
    }
  }
  STRATA_ASSIGN_OR_RETURN(impl->cublas_workspace,
                          DeviceBuffer::Allocate(kCublasWorkspaceBytes, "cuBLAS workspace"));
  STRATA_ASSIGN_OR_RETURN(impl->cublas, CublasHandle::Create(stream, impl->cublas_workspace.get(),
                                                             kCublasWorkspaceBytes));
  STRATA_ASSIGN_OR_RETURN(impl->eager_act, Activations::Allocate(c, max_cols, kInitialEagerTokens));
  impl->bytes_per_block =
      KvBytesPerBlock(c.n_layers, c.n_kv_heads, c.head_dim_k, c.head_dim_v, options.block_size);

  // fp16 weight copies, made once here, or the workspace that calls dequantize into instead.
  F16CopyInputs plan;
  plan.free_bytes = static_cast<int64_t>(free_bytes);
  plan.memory_fraction = options.memory_fraction;
  plan.kv_budget_bytes = options.kv_budget_bytes;
  plan.workspace_bytes = workspace_bytes;
  plan.dequant_bytes = impl->weights.max_quantized_elements * 2;
  plan.copy_bytes = F16CopyBytes(impl->weights);
  plan.bytes_per_block = impl->bytes_per_block;
  STRATA_ASSIGN_OR_RETURN(const bool copies, PlanF16WeightCopies(options.f16_weight_copies, plan));
  if (copies) {
    STRATA_RETURN_IF_ERROR(MakeF16Copies(&impl->weights, stream));
    workspace_bytes += impl->weights.f16_copy_bytes;
  } else {
    STRATA_ASSIGN_OR_RETURN(
        impl->dequant_f16,
        DeviceBuffer::Allocate(plan.dequant_bytes, "fp16 dequantization workspace"));
    workspace_bytes += plan.dequant_bytes;
  }
  impl->description +=
      DescribeF16Copies(options.f16_weight_copies, plan.copy_bytes, impl->weights.f16_copy_bytes) +
      ")";

  impl->num_blocks = KvPoolBlocks(static_cast<int64_t>(free_bytes), options.memory_fraction,
                                  workspace_bytes, options.kv_budget_bytes, impl->bytes_per_block);
  if (impl->num_blocks < 1) {
    return FailedPreconditionError(
        "the device memory left after the weights (" + std::to_string(free_bytes) +
        " bytes free, " + std::to_string(impl->weights.bytes - impl->weights.f16_copy_bytes) +
        " bytes of weights, " + std::to_string(workspace_bytes) + " bytes of workspaces" +
        (copies ? " and fp16 weight copies" : "") + ") holds no KV block of " +
        std::to_string(impl->bytes_per_block) +
        " bytes; lower block_size or raise memory_fraction");
  }
  STRATA_ASSIGN_OR_RETURN(
      impl->kv, DeviceBuffer::Allocate(impl->bytes_per_block * impl->num_blocks, "the KV pool"));
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(impl->kv.get(), 0, static_cast<size_t>(impl->kv.bytes()), stream));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

const model::ModelConfig& CudaBackend::config() const { return impl_->config; }

KvGeometry CudaBackend::kv_geometry() const {
  KvGeometry g;
  g.block_size = impl_->options.block_size;
  g.num_blocks = impl_->num_blocks;
  g.bytes_per_block = impl_->bytes_per_block;
  return g;
}

std::string CudaBackend::Describe() const { return impl_->description; }

int64_t CudaBackend::weight_bytes() const { return impl_->weights.bytes; }
int64_t CudaBackend::f16_copy_bytes() const { return impl_->weights.f16_copy_bytes; }
int64_t CudaBackend::kv_bytes() const { return impl_->kv.bytes(); }

Status CudaBackend::Forward(const Batch& batch, std::vector<float>* logits) {
  Impl& m = *impl_;
  STRATA_RETURN_IF_ERROR(m.Validate(batch));
  STRATA_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.options.device));
  const StepShape shape = ShapeOfBatch(batch, m.options.block_size);
  float* device_logits = nullptr;
  STRATA_RETURN_IF_ERROR(m.RunStep(batch, shape, &device_logits));
  return m.FinishWithLogits(device_logits, shape.num_rows, logits);
}

bool CudaBackend::samples_on_backend() const {
  return impl_->config.vocab_size <= kernels::kMaxSamplingVocab;
}

Status CudaBackend::ForwardSampled(const Batch& batch, std::span<const RowSampling> rows,
                                   SampledStep* out) {
  Impl& m = *impl_;
  STRATA_RETURN_IF_ERROR(m.Validate(batch));
  const StepShape shape = ShapeOfBatch(batch, m.options.block_size);
  if (static_cast<int64_t>(rows.size()) != shape.num_rows) {
    return InvalidArgumentError("the batch has " + std::to_string(shape.num_rows) +
                                " logits rows but " + std::to_string(rows.size()) +
                                " sampling rows were given");
  }
  for (const RowSampling& r : rows) {
    if (r.on_backend && (r.logprobs < 0 || r.logprobs > kernels::kMaxTopLogprobs)) {
      return InvalidArgumentError("a row asks for " + std::to_string(r.logprobs) +
                                  " top log-probabilities; the device reports 0 to " +
                                  std::to_string(kernels::kMaxTopLogprobs));
    }
    if (r.penalties.size() > static_cast<size_t>(1) << 30) {
      return InvalidArgumentError("a row's penalty window is too large");
    }
    if (!r.allowed.empty() && r.allowed.size() != sampling::TokenMaskWords(m.config.vocab_size)) {
      return InvalidArgumentError("a token mask of " + std::to_string(r.allowed.size()) +
                                  " words for a vocabulary of " +
                                  std::to_string(m.config.vocab_size) + " tokens");
    }
  }
  if (!samples_on_backend()) return Backend::ForwardSampled(batch, rows, out);
  STRATA_CUDA_RETURN_IF_ERROR(cudaSetDevice(m.options.device));
  float* device_logits = nullptr;
  STRATA_RETURN_IF_ERROR(m.RunStep(batch, shape, &device_logits));
  return m.FinishSampled(device_logits, rows, out);
}

}  // namespace strata::backend::cuda
