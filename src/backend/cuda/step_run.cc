// One Forward step: validation, the upload of the step's inputs, and the model run, either
// eagerly or as the replay of a CUDA graph captured for the step's bucket; then the logits come
// back to the host (or the rows are sampled on the device: device_sampling.cc).
#include <algorithm>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_status.h"
#include "strata/common/logging.h"

namespace strata::backend::cuda {

// The checks and messages every backend makes (backend::ValidateBatch).
Status CudaBackend::Impl::Validate(const Batch& batch) const {
  return ValidateBatch(batch, config, options.block_size, num_blocks);
}

Status CudaBackend::Impl::EnsureEagerCapacity(const StepShape& shape, int64_t input_bytes,
                                              int64_t ws_bytes) {
  const model::ModelConfig& c = config;
  if (eager_act.capacity < shape.num_tokens) {
    const int64_t tokens = std::max<int64_t>(shape.num_tokens, 2 * eager_act.capacity);
    eager_act = Activations();  // free first: the old and the new set need not fit together
    STRATA_ASSIGN_OR_RETURN(eager_act, Activations::Allocate(c, weights.max_cols, tokens));
  }
  if (eager_inputs.bytes() < input_bytes) {
    eager_inputs.Reset();
    eager_host.Reset();
    STRATA_ASSIGN_OR_RETURN(eager_inputs, DeviceBuffer::Allocate(input_bytes, "step inputs"));
    STRATA_ASSIGN_OR_RETURN(eager_host, PinnedBuffer::Allocate(input_bytes, "step inputs"));
  }
  const int64_t logit_bytes = shape.num_rows * c.vocab_size * 4;
  if (eager_logits.bytes() < logit_bytes) {
    eager_logits.Reset();
    STRATA_ASSIGN_OR_RETURN(eager_logits, DeviceBuffer::Allocate(logit_bytes, "logits"));
  }
  if (eager_attention_ws.bytes() < ws_bytes) {
    eager_attention_ws.Reset();
    STRATA_ASSIGN_OR_RETURN(eager_attention_ws,
                            DeviceBuffer::Allocate(ws_bytes, "attention workspace"));
  }
  return OkStatus();
}

Status CudaBackend::Impl::RunEager(const Batch& batch, const StepShape& shape, float** logits) {
  const model::ModelConfig& c = config;
  cudaStream_t s = stream.get();
  // A mixed step runs its one-token slices first, so that the decode kernel takes them.
  DecodeFirstStep ordered;
  const Batch* run_batch = &batch;
  int64_t decode_seqs = shape.decode_only ? shape.num_seqs : 0;
  int64_t decode_context = shape.max_context;
  if (!shape.decode_only && shape.num_seqs > 1) {
    ordered = OrderDecodeFirst(batch);
    if (ordered.num_decode > 0) {
      run_batch = &ordered.batch;
      decode_seqs = ordered.num_decode;
      decode_context = 0;
      for (int64_t i = 0; i < decode_seqs; ++i) {
        const SequenceSlice& seq = ordered.batch.sequences[static_cast<size_t>(i)];
        decode_context = std::max(decode_context, seq.start_pos + 1);
      }
    }
  }
  AttentionPlan attention;
  attention.decode_seqs = static_cast<int32_t>(decode_seqs);
  if (decode_seqs > 0) {
    const auto seqs = static_cast<int32_t>(decode_seqs);
    attention.global = kernels::PlanPagedAttentionDecode(
        seqs, static_cast<int32_t>(c.n_heads), static_cast<int32_t>(c.n_kv_heads),
        static_cast<int32_t>(c.head_dim_v), decode_context, 0);
    attention.sliding =
        c.sliding_window > 0
            ? kernels::PlanPagedAttentionDecode(
                  seqs, static_cast<int32_t>(c.n_heads), static_cast<int32_t>(c.n_kv_heads),
                  static_cast<int32_t>(c.head_dim_v), decode_context, c.sliding_window)
            : attention.global;
  }
  const int64_t ws_bytes =
      std::max(attention.global.workspace_bytes, attention.sliding.workspace_bytes);
  const StepLayout layout = StepLayout::For(shape.num_tokens, shape.num_seqs, shape.table_len);
  // The device and host staging buffers may be larger than this step's layout: the layout is
  // recomputed every step and only its bytes are copied.
  STRATA_RETURN_IF_ERROR(EnsureEagerCapacity(shape, layout.total_bytes, ws_bytes));
  attention.workspace = eager_attention_ws.get();
  attention.workspace_bytes = eager_attention_ws.bytes();

  const int64_t used =
      FillStepInputs(*run_batch, options.block_size, shape.num_seqs, layout, eager_host.data());
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      eager_inputs.get(), eager_host.data(), static_cast<size_t>(used), cudaMemcpyHostToDevice, s));
  const std::vector<RowRun> runs = run_batch == &batch ? LogitRowRuns(batch) : ordered.runs;
  StepRun run;
  run.act = &eager_act;
  run.in = StepInputs::At(eager_inputs.get(), layout);
  run.num_tokens = shape.num_tokens;
  run.num_seqs = static_cast<int32_t>(shape.num_seqs);
  run.max_query_len = shape.max_query_len;
  run.attention = attention;
  run.runs = runs;
  run.num_rows = shape.num_rows;
  run.logits = eager_logits.as<float>();
  if (Status st = RunModel(run); !st.ok()) {
    // Let the pending input copy finish before the next step rewrites its pinned source.
    cudaStreamSynchronize(s);
    return st;
  }

  *logits = eager_logits.as<float>();
  return OkStatus();
}

Status CudaBackend::Impl::CaptureGraph(const StepRun& run, GraphExec* exec) {
  cudaStream_t s = stream.get();
  // Thread-local mode: only this thread's unsafe calls (none here: nothing allocates or
  // synchronizes inside RunModel) would break the capture; other threads are unaffected.
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const Status captured = RunModel(run);
  cudaGraph_t graph = nullptr;
  // End the capture whatever happened, so the stream leaves capture mode.
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!captured.ok() || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // an invalidated capture's error is reported here, not by a later call
    if (!captured.ok()) return captured.WithContext("capturing a decode graph");
    return CudaStatus(end, "cudaStreamEndCapture");
  }
  cudaGraphExec_t instance = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&instance, graph, 0);
  cudaGraphDestroy(graph);
  STRATA_CUDA_RETURN_IF_ERROR(inst);
  *exec = GraphExec(instance);
  return OkStatus();
}

Status CudaBackend::Impl::RunGraph(const Batch& batch, const StepShape& /*shape*/, int bucket,
                                   float** logits) {
  cudaStream_t s = stream.get();
  const int64_t padded = kGraphBuckets[bucket];
  const int64_t used =
      FillStepInputs(batch, options.block_size, padded, graph_layout, graph_host.data());
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      graph_inputs.get(), graph_host.data(), static_cast<size_t>(used), cudaMemcpyHostToDevice, s));

  if (graphs[bucket]) {
    STRATA_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graphs[bucket].get(), s));
  } else {
    // First step in this bucket: run it eagerly over the graph buffers (this step's result),
    // then capture the same work once. Running first means every kernel and cuBLAS path the
    // capture records has been loaded and launched before (module lazy loading and cuBLAS's
    // first-call setup then never happen inside a capture); the capture itself executes
    // nothing, so the step is computed once.
    //
    // Everything the captured kernels read lives at fixed addresses (graph_act, graph_inputs,
    // graph_logits, the fixed attention plan and workspace, the weights, the KV pool, the
    // dequantization and cuBLAS workspaces); only the contents of graph_inputs change between
    // replays, written by the copy above, which precedes the launch in stream order.
    const RowRun all{0, 0, padded};
    StepRun run;
    run.act = &graph_act;
    run.in = StepInputs::At(graph_inputs.get(), graph_layout);
    run.num_tokens = padded;
    run.num_seqs = static_cast<int32_t>(padded);
    run.max_query_len = 1;
    run.attention = graph_plans[bucket];
    run.runs = std::span<const RowRun>(&all, 1);
    run.num_rows = padded;
    run.logits = graph_logits.as<float>();
    Status st = RunModel(run);
    if (!st.ok()) {
      cudaStreamSynchronize(s);  // as in RunEager: the pinned inputs may still be read
      return st;
    }
    if (Status captured = CaptureGraph(run, &graphs[bucket]); !captured.ok()) {
      // The eager run above already computed this step: keep its result, and run this
      // bucket's later steps eagerly instead of failing them.
      graph_failed[bucket] = true;
      LogWarn("CUDA graph capture failed; this batch size runs without graphs",
              {{"batch_bucket", std::to_string(kGraphBuckets[bucket])},
               {"error", captured.ToString()}});
    }
  }
  *logits = graph_logits.as<float>();
  return OkStatus();
}

Status CudaBackend::Impl::RunStep(const Batch& batch, const StepShape& shape, float** logits) {
  // Graphs take decode steps whose every slice wants its one row of logits.
  const bool graph = options.cuda_graphs && shape.decode_only && shape.num_rows == shape.num_seqs;
  const int bucket = graph ? GraphBucketIndex(shape.num_seqs) : -1;
  if (bucket >= 0 && !graph_failed[bucket]) return RunGraph(batch, shape, bucket, logits);
  return RunEager(batch, shape, logits);
}

Status CudaBackend::Impl::FinishWithLogits(const float* logits, int64_t rows,
                                           std::vector<float>* out) {
  cudaStream_t s = stream.get();
  out->resize(static_cast<size_t>(rows * config.vocab_size));
  if (rows > 0) {
    if (const cudaError_t e = cudaMemcpyAsync(out->data(), logits, out->size() * sizeof(float),
                                              cudaMemcpyDeviceToHost, s);
        e != cudaSuccess) {
      cudaStreamSynchronize(s);
      return CudaStatus(e, "copying the logits to the host");
    }
  }
  // Also keeps the pinned input staging from being rewritten while its copy is pending.
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return OkStatus();
}

}  // namespace strata::backend::cuda
