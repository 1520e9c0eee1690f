// The transformer forward pass on the device: the same sequence of operations as
// CpuBackend::Forward (src/backend/cpu/cpu_backend.cc), each one a kernel of kernels/ or a
// cuBLAS GEMM, all enqueued on the backend's stream.
#include <algorithm>
#include <string>

#include "cuda_backend_impl.h"
#include "cuda_status.h"
#include "strata/kernels/activation.h"
#include "strata/kernels/elementwise.h"
#include "strata/kernels/embedding.h"
#include "strata/kernels/kv_write.h"
#include "strata/kernels/rms_norm.h"
#include "strata/kernels/rope.h"

namespace strata::backend::cuda {

int64_t Activations::BytesFor(const model::ModelConfig& c, int64_t max_cols, int64_t tokens) {
  const int64_t floats = tokens * (3 * c.n_embd + c.n_heads * c.head_dim_k +
                                   c.n_kv_heads * (c.head_dim_k + c.head_dim_v) +
                                   c.n_heads * c.head_dim_v + 2 * c.n_ff);
  // Each buffer is rounded up to cudaMalloc's 256-byte granularity at most.
  return floats * 4 + (2 * tokens * max_cols + 128) * 2 + 10 * 256;
}

StatusOr<Activations> Activations::Allocate(const model::ModelConfig& c, int64_t max_cols,
                                            int64_t tokens) {
  Activations a;
  a.capacity = tokens;
  auto alloc = [&](DeviceBuffer* b, int64_t elems, int64_t elem_bytes) -> Status {
    STRATA_ASSIGN_OR_RETURN(*b, DeviceBuffer::Allocate(tokens * elems * elem_bytes, "activations"));
    return OkStatus();
  };
  STRATA_RETURN_IF_ERROR(alloc(&a.x, c.n_embd, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.h, c.n_embd, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.q, c.n_heads * c.head_dim_k, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.k, c.n_kv_heads * c.head_dim_k, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.v, c.n_kv_heads * c.head_dim_v, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.attn, c.n_heads * c.head_dim_v, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.o, c.n_embd, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.gate, c.n_ff, 4));
  STRATA_RETURN_IF_ERROR(alloc(&a.up, c.n_ff, 4));
  STRATA_ASSIGN_OR_RETURN(a.x_f16,
                          DeviceBuffer::Allocate((2 * tokens * max_cols + 128) * 2, "activations"));
  return a;
}

const void* CudaBackend::Impl::KLayer(int64_t layer) const {
  const model::ModelConfig& c = config;
  const int64_t slots = static_cast<int64_t>(num_blocks) * options.block_size;
  const int64_t layer_elems = slots * c.n_kv_heads * (c.head_dim_k + c.head_dim_v);
  return kv.as<uint16_t>() + layer * layer_elems;
}

const void* CudaBackend::Impl::VLayer(int64_t layer) const {
  const int64_t slots = static_cast<int64_t>(num_blocks) * options.block_size;
  return static_cast<const uint16_t*>(KLayer(layer)) +
         slots * config.n_kv_heads * config.head_dim_k;
}

MatMulContext CudaBackend::Impl::MatMulFor(const Activations& act) const {
  MatMulContext m;
  m.stream = stream.get();
  m.cublas = cublas.get();
  m.dequant_f16 = dequant_f16.get();
  m.dequant_f16_elements = dequant_f16.bytes() / 2;
  m.x_f16 = act.x_f16.get();
  m.x_f16_elements = act.x_f16.bytes() / 2;
  return m;
}

Status CudaBackend::Impl::RunModel(const StepRun& run) {
  const model::ModelConfig& c = config;
  const DeviceWeights& w = weights;
  const Activations& a = *run.act;
  cudaStream_t s = stream.get();
  const MatMulContext mm = MatMulFor(a);
  const int64_t n = run.num_tokens;
  const int64_t E = c.n_embd;
  float* x = a.x.as<float>();
  float* h = a.h.as<float>();
  float* q = a.q.as<float>();
  float* k = a.k.as<float>();
  float* v = a.v.as<float>();
  float* attn = a.attn.as<float>();
  float* o = a.o.as<float>();
  float* gate = a.gate.as<float>();
  float* up = a.up.as<float>();
  const int64_t qw = c.n_heads * c.head_dim_k;
  const int64_t kw = c.n_kv_heads * c.head_dim_k;
  const int64_t vw = c.n_kv_heads * c.head_dim_v;
  const int64_t num_slots = static_cast<int64_t>(num_blocks) * options.block_size;

  STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchEmbeddingGather(
      w.token_embd.data, static_cast<kernels::EmbeddingType>(w.token_embd.type), c.vocab_size, E,
      run.in.tokens, n, c.embedding_scale, x, s));

  for (int64_t il = 0; il < c.n_layers; ++il) {
    const DeviceLayer& l = w.layers[il];
    // h = norm(x); from the second layer on, the previous FFN output is added to x first (the
    // CPU's "x += o" at the end of a block, fused).
    STRATA_CUDA_RETURN_IF_ERROR(
        kernels::LaunchRmsNorm(x, il == 0 ? nullptr : o, l.attn_norm, h, n, E, c.rms_eps, s));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.wq, h, n, q, qw));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.wk, h, n, k, kw));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.wv, h, n, v, vw));
    if (l.bq != nullptr) {
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchAddBiasInPlace(q, l.bq, n, qw, s));
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchAddBiasInPlace(k, l.bk, n, kw, s));
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchAddBiasInPlace(v, l.bv, n, vw, s));
    }
    if (c.has_qk_norm) {
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(q, nullptr, l.q_norm, q, n * c.n_heads,
                                                         c.head_dim_k, c.rms_eps, s));
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(k, nullptr, l.k_norm, k, n * c.n_kv_heads,
                                                         c.head_dim_k, c.rms_eps, s));
    }
    const kernels::RopeStyle style = c.rope_style == model::RopeStyle::kNeox
                                         ? kernels::RopeStyle::kNeox
                                         : kernels::RopeStyle::kNorm;
    STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchRope(
        q, c.n_heads, k, c.n_kv_heads, run.in.positions, n, c.head_dim_k, c.rope_dim, style,
        c.RopeBase(il), c.RopeFreqScale(il), w.rope_freqs, s));
    void* k_cache = const_cast<void*>(KLayer(il));
    void* v_cache = const_cast<void*>(VLayer(il));
    STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchKvWrite(k, v, run.in.slots, n, c.n_kv_heads,
                                                       c.head_dim_k, c.head_dim_v, k_cache, v_cache,
                                                       num_slots, kernels::KvCacheDtype::kF16, s));

    kernels::PagedKvLayer kvl;
    kvl.k = k_cache;
    kvl.v = v_cache;
    kvl.dtype = kernels::KvElementType::kF16;
    kvl.num_kv_heads = static_cast<int32_t>(c.n_kv_heads);
    kvl.head_dim_k = static_cast<int32_t>(c.head_dim_k);
    kvl.head_dim_v = static_cast<int32_t>(c.head_dim_v);
    kvl.block_size = options.block_size;
    const int32_t window = c.SlidingWindow(il);
    // The leading one-token sequences go to the decode kernel, the rest to the prefill kernel
    // (which indexes queries, outputs and tables through cu_seqlens and the offsets, so it takes
    // the tail of the arrays as they are).
    const int32_t nd = run.attention.decode_seqs;
    if (nd > 0) {
      kernels::PagedAttentionDecodeArgs d;
      d.kv = kvl;
      d.q = q;
      d.block_tables = run.in.block_table;
      d.block_table_offsets = run.in.table_offsets;
      d.context_lens = run.in.context_lens;
      d.num_seqs = nd;
      d.num_heads = static_cast<int32_t>(c.n_heads);
      d.scale = c.attention_scale;
      d.sliding_window = window;
      d.out = attn;
      const kernels::PagedAttentionDecodePlan& plan =
          window > 0 ? run.attention.sliding : run.attention.global;
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchPagedAttentionDecode(
          d, plan, run.attention.workspace, run.attention.workspace_bytes, s));
    }
    if (nd < run.num_seqs) {
      kernels::PagedAttentionPrefillArgs p;
      p.kv = kvl;
      p.q = q;
      p.cu_seqlens_q = run.in.cu_seqlens + nd;
      p.block_tables = run.in.block_table;
      p.block_table_offsets = run.in.table_offsets + nd;
      p.context_lens = run.in.context_lens + nd;
      p.num_seqs = run.num_seqs - nd;
      p.max_query_len = run.max_query_len;
      p.num_heads = static_cast<int32_t>(c.n_heads);
      p.scale = c.attention_scale;
      p.sliding_window = window;
      p.out = attn;
      STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchPagedAttentionPrefill(p, s));
    }

    STRATA_RETURN_IF_ERROR(MatMul(mm, l.wo, attn, n, o, E));
    if (c.has_post_norms) {
      STRATA_CUDA_RETURN_IF_ERROR(
          kernels::LaunchRmsNorm(o, nullptr, l.post_attn_norm, o, n, E, c.rms_eps, s));
    }
    // x += o; h = norm(x).
    STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(x, o, l.ffn_norm, h, n, E, c.rms_eps, s));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.gate, h, n, gate, c.n_ff));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.up, h, n, up, c.n_ff));
    const kernels::GatedActivation act = c.activation == model::FfnActivation::kGeluTanh
                                             ? kernels::GatedActivation::kGeluTanh
                                             : kernels::GatedActivation::kSilu;
    STRATA_CUDA_RETURN_IF_ERROR(
        kernels::LaunchGatedActivation(act, gate, c.n_ff, up, c.n_ff, gate, c.n_ff, n, c.n_ff, s));
    STRATA_RETURN_IF_ERROR(MatMul(mm, l.down, gate, n, o, E));
    if (c.has_post_norms) {
      STRATA_CUDA_RETURN_IF_ERROR(
          kernels::LaunchRmsNorm(o, nullptr, l.post_ffn_norm, o, n, E, c.rms_eps, s));
    }
  }
  if (run.num_rows == 0) return OkStatus();

  // The last layer's residual add, only for the rows whose logits are wanted (the other rows'
  // x is not read again), then the final norm into consecutive rows of h.
  for (const RowRun& r : run.runs) {
    STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(x + r.src * E, o + r.src * E, w.output_norm,
                                                       h + r.dst * E, r.count, E, c.rms_eps, s));
  }
  STRATA_RETURN_IF_ERROR(MatMul(mm, w.output, h, run.num_rows, run.logits, c.vocab_size));
  if (c.final_logit_softcap > 0) {
    STRATA_CUDA_RETURN_IF_ERROR(kernels::LaunchSoftCapInPlace(run.logits, c.final_logit_softcap,
                                                              run.num_rows * c.vocab_size, s));
  }
  return OkStatus();
}

}  // namespace strata::backend::cuda
