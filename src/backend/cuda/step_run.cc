// One Forward step: validation, the upload of the step's inputs, and the model run, either
// eagerly or as the replay of a CUDA graph captured for the step's bucket; then the logits come
// back to the host, or the rows are sampled on the device and only their tokens come back.
#include <algorithm>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_status.h"
#include "strata/common/logging.h"
#include "strata/kernels/sampling.h"

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

Status CudaBackend::Impl::RunEager(const Batch& batch, const StepShape& shape,
                                   const float** logits) {
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
                                   const float** logits) {
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

Status CudaBackend::Impl::RunStep(const Batch& batch, const StepShape& shape,
                                  const float** logits) {
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

Status CudaBackend::Impl::EnsureSamplingCapacity(int64_t rows) {
  const int64_t params_bytes = rows * static_cast<int64_t>(sizeof(kernels::DeviceSamplingParams));
  if (sample_params.bytes() < params_bytes) {
    const int64_t want = std::max<int64_t>(rows, 256);
    sample_params.Reset();
    sample_params_host.Reset();
    sample_tokens.Reset();
    sample_tokens_host.Reset();
    const int64_t pb = want * static_cast<int64_t>(sizeof(kernels::DeviceSamplingParams));
    STRATA_ASSIGN_OR_RETURN(sample_params, DeviceBuffer::Allocate(pb, "sampling parameters"));
    STRATA_ASSIGN_OR_RETURN(sample_params_host, PinnedBuffer::Allocate(pb, "sampling parameters"));
    STRATA_ASSIGN_OR_RETURN(sample_tokens, DeviceBuffer::Allocate(want * 4, "sampled tokens"));
    STRATA_ASSIGN_OR_RETURN(sample_tokens_host, PinnedBuffer::Allocate(want * 4, "sampled tokens"));
  }
  return OkStatus();
}

Status CudaBackend::Impl::FinishSampled(const float* logits, std::span<const RowSampling> rows,
                                        SampledStep* out) {
  cudaStream_t s = stream.get();
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t vocab = config.vocab_size;
  int64_t host_rows = 0;
  bool any_backend = false;
  bool all_greedy = true;
  for (const RowSampling& r : rows) {
    host_rows += r.on_backend ? 0 : 1;
    any_backend |= r.on_backend;
    all_greedy &= !r.on_backend || r.temperature <= 0.0f;
  }
  // Runs on error paths too: the step's pinned staging must not be rewritten while read.
  auto fail = [&](Status st) {
    cudaStreamSynchronize(s);
    return st;
  };
  if (any_backend) {
    if (Status st = EnsureSamplingCapacity(n); !st.ok()) return fail(st);
    auto* tokens = static_cast<int32_t*>(sample_tokens.get());
    int err = 0;
    if (all_greedy) {
      err = kernels::LaunchArgMax(logits, n, vocab, vocab, tokens, s);
    } else {
      auto* host = reinterpret_cast<kernels::DeviceSamplingParams*>(sample_params_host.data());
      for (int64_t i = 0; i < n; ++i) {
        const RowSampling& r = rows[static_cast<size_t>(i)];
        kernels::DeviceSamplingParams& p = host[i];
        // Rows the host samples get a cheap greedy pass; their tokens are not used.
        p.temperature = r.on_backend ? r.temperature : 0.0f;
        p.top_k = r.top_k;
        p.top_p = r.top_p;
        p.min_p = r.min_p;
        p.u = r.u;
      }
      const size_t bytes = static_cast<size_t>(n) * sizeof(kernels::DeviceSamplingParams);
      if (const cudaError_t e =
              cudaMemcpyAsync(sample_params.get(), host, bytes, cudaMemcpyHostToDevice, s);
          e != cudaSuccess) {
        return fail(CudaStatus(e, "copying the sampling parameters"));
      }
      err = kernels::LaunchSample(
          logits, n, vocab, vocab,
          static_cast<const kernels::DeviceSamplingParams*>(sample_params.get()), tokens, s);
    }
    if (err != 0) {
      return fail(CudaStatus(static_cast<cudaError_t>(err), "launching the sampling kernel"));
    }
    if (const cudaError_t e =
            cudaMemcpyAsync(sample_tokens_host.data(), tokens, static_cast<size_t>(n) * 4,
                            cudaMemcpyDeviceToHost, s);
        e != cudaSuccess) {
      return fail(CudaStatus(e, "copying the sampled tokens"));
    }
  }
  out->logits.resize(static_cast<size_t>(host_rows * vocab));
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rows[static_cast<size_t>(i)].on_backend) continue;
    if (const cudaError_t e =
            cudaMemcpyAsync(out->logits.data() + k * vocab, logits + i * vocab,
                            static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToHost, s);
        e != cudaSuccess) {
      return fail(CudaStatus(e, "copying the logits to the host"));
    }
    ++k;
  }
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  out->tokens.assign(static_cast<size_t>(n), -1);
  if (any_backend) {
    const auto* tokens = reinterpret_cast<const int32_t*>(sample_tokens_host.data());
    for (int64_t i = 0; i < n; ++i) {
      if (rows[static_cast<size_t>(i)].on_backend) out->tokens[static_cast<size_t>(i)] = tokens[i];
    }
  }
  return OkStatus();
}

}  // namespace strata::backend::cuda
