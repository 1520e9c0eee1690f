// CudaBackend's state (backend/cuda internal): the stream, cuBLAS, the weights, the KV pool, the
// activation buffers of eager steps and of CUDA-graph steps, and the captured graphs.
//
// Two sets of step buffers: the graph set is allocated once at Create for the largest bucket
// (128 one-token sequences) and never moves, because captured kernels hold its addresses; the
// eager set grows with the largest batch seen. Weights (with their fp16 copies, when planned),
// the KV pool and the fp16 dequantization workspace are shared (fixed for the backend's life). All
// work runs on `stream`, in order, so the shared workspaces need no other synchronization.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "device_matmul.h"
#include "device_memory.h"
#include "device_weights.h"
#include "step_inputs.h"
#include "strata/backend/cuda/cuda_backend.h"
#include "strata/backend/cuda/memory_plan.h"
#include "strata/kernels/paged_attention.h"

namespace strata::backend::cuda {

// Activations of one step, for up to `capacity` tokens.
struct Activations {
  int64_t capacity = 0;
  DeviceBuffer x;      // [capacity, n_embd] residual stream
  DeviceBuffer h;      // [capacity, n_embd] normed input of a block (and of the output)
  DeviceBuffer q;      // [capacity, n_heads * head_dim_k]
  DeviceBuffer k;      // [capacity, n_kv_heads * head_dim_k]
  DeviceBuffer v;      // [capacity, n_kv_heads * head_dim_v]
  DeviceBuffer attn;   // [capacity, n_heads * head_dim_v]
  DeviceBuffer o;      // [capacity, n_embd]
  DeviceBuffer gate;   // [capacity, n_ff]
  DeviceBuffer up;     // [capacity, n_ff]
  DeviceBuffer x_f16;  // [2 * capacity * max_cols + 128] fp16 (MatMul's activation scratch)

  static int64_t BytesFor(const model::ModelConfig& c, int64_t max_cols, int64_t tokens);
  static StatusOr<Activations> Allocate(const model::ModelConfig& c, int64_t max_cols,
                                        int64_t tokens);
};

// Attention of one step: decode (one query per sequence, split-K plan) or prefill (ragged).
struct AttentionPlan {
  // The step's leading one-token sequences that the decode kernel takes (the plans are for
  // them); the prefill kernel takes the rest.
  int32_t decode_seqs = 0;
  kernels::PagedAttentionDecodePlan global;   // full-attention layers
  kernels::PagedAttentionDecodePlan sliding;  // sliding-window layers
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// Everything one pass over the model needs.
struct StepRun {
  const Activations* act = nullptr;
  StepInputs in;
  int64_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_query_len = 0;
  AttentionPlan attention;
  std::span<const RowRun> runs;  // rows whose logits are wanted
  int64_t num_rows = 0;
  float* logits = nullptr;  // [num_rows, vocab] fp32
};

struct CudaBackend::Impl {
  CudaBackendOptions options;
  std::string description;  // Describe()'s line
  model::ModelConfig config;

  Stream stream;  // declared first: destroyed last
  DeviceBuffer cublas_workspace;
  CublasHandle cublas;
  DeviceWeights weights;
  // [max_quantized_elements] fp16; empty when the weights have their fp16 copies.
  DeviceBuffer dequant_f16;

  // KV pool: per layer, K [num_blocks, block_size, n_kv_heads, head_dim_k] then V (fp16).
  DeviceBuffer kv;
  int32_t num_blocks = 0;
  int64_t bytes_per_block = 0;

  // Eager steps (grown on demand).
  Activations eager_act;
  DeviceBuffer eager_inputs;
  PinnedBuffer eager_host;
  DeviceBuffer eager_logits;
  DeviceBuffer eager_attention_ws;

  // CUDA-graph steps (fixed).
  Activations graph_act;
  StepLayout graph_layout;
  DeviceBuffer graph_inputs;
  PinnedBuffer graph_host;
  DeviceBuffer graph_logits;  // [128, vocab]
  DeviceBuffer graph_attention_ws;
  std::array<AttentionPlan, kGraphBuckets.size()> graph_plans;
  // Buckets whose capture failed: their steps run eagerly (one warning per bucket).
  std::array<bool, kGraphBuckets.size()> graph_failed{};

  // Device sampling (device_sampling.cc), grown on demand: the step's sampling inputs (one
  // upload), the raw logits the penalties replaced, and the outputs (one download).
  DeviceBuffer sample_in;
  PinnedBuffer sample_in_host;
  DeviceBuffer sample_saved;  // [penalty entries] fp32
  DeviceBuffer sample_out;
  PinnedBuffer sample_out_host;

  std::array<GraphExec, kGraphBuckets.size()> graphs;  // destroyed first

  const void* KLayer(int64_t layer) const;
  const void* VLayer(int64_t layer) const;
  MatMulContext MatMulFor(const Activations& act) const;

  Status Validate(const Batch& batch) const;
  // Enqueues the whole model for one step (no synchronization, no allocation).
  Status RunModel(const StepRun& run);
  // Enqueue one step; on success *logits points at its [shape.num_rows, vocab] fp32 logits on
  // the device (valid until the next step) and the work may still be running: the caller
  // finishes with FinishWithLogits or FinishSampled, which synchronize. On an error the stream
  // has been synchronized.
  Status RunStep(const Batch& batch, const StepShape& shape, float** logits);
  Status RunEager(const Batch& batch, const StepShape& shape, float** logits);
  Status RunGraph(const Batch& batch, const StepShape& shape, int bucket, float** logits);
  // Copies every row's logits to *out and synchronizes.
  Status FinishWithLogits(const float* logits, int64_t rows, std::vector<float>* out);
  // Samples the on_backend rows on the device (penalties change `logits`, the step's own
  // buffer, in place), copies their tokens and the other rows' logits
  // to *out, and synchronizes.
  Status FinishSampled(float* logits, std::span<const RowSampling> rows, SampledStep* out);
  Status EnsureSamplingCapacity(int64_t in_bytes, int64_t saved_bytes, int64_t out_bytes);
  // Captures `run` (enqueued as RunModel does) into an instantiated graph.
  Status CaptureGraph(const StepRun& run, GraphExec* exec);
  Status EnsureEagerCapacity(const StepShape& shape, int64_t input_bytes, int64_t ws_bytes);
};

}  // namespace strata::backend::cuda
