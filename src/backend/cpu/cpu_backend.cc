#include "strata/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <string>

#include "strata/backend/cpu/attention.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/backend/cpu/ops.h"
#include "strata/model/dequantize.h"

namespace strata::backend::cpu {
namespace {

// Runs fn(begin, end) over [0, n): inline for tiny n (a decode step's per-token work is
// smaller than a pool dispatch), on the pool otherwise.
template <typename Fn>
void ForRange(ThreadPool* pool, int64_t n, Fn&& fn) {
  if (n <= 1) {
    if (n == 1) fn(0, 1);
    return;
  }
  pool->ParallelFor(n, [&](int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace

StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const model::GgufFile& file,
                                                         const CpuBackendOptions& options) {
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  STRATA_ASSIGN_OR_RETURN(b->config_, model::ModelConfig::FromGguf(file));
  if (options.max_layers < 0) {
    return InvalidArgumentError("max_layers must be >= 0, got " +
                                std::to_string(options.max_layers));
  }
  if (options.max_layers > 0 && options.max_layers < b->config_.n_layers) {
    b->config_.n_layers = options.max_layers;
    b->config_.layer_is_sliding.resize(static_cast<size_t>(options.max_layers));
  }
  STRATA_ASSIGN_OR_RETURN(b->weights_, model::ModelWeights::FromGguf(file, &b->config_));
  for (const model::MatrixView* m : {&b->weights_.token_embd, &b->weights_.output}) {
    if (!MatMulSupports(m->type)) {
      return UnimplementedError("tensor '" + m->name + "' has type " +
                                std::string(model::GgmlTypeName(m->type)) +
                                ", which the CPU backend cannot multiply");
    }
  }
  for (const auto& l : b->weights_.layers) {
    for (const model::MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      if (!MatMulSupports(m->type)) {
        return UnimplementedError("tensor '" + m->name + "' has type " +
                                  std::string(model::GgmlTypeName(m->type)) +
                                  ", which the CPU backend cannot multiply");
      }
    }
  }
  if (options.block_size < 1 || options.block_size > 1024) {
    return InvalidArgumentError("block size must be between 1 and 1024 tokens, got " +
                                std::to_string(options.block_size));
  }
  b->options_ = options;
  const model::ModelConfig& c = b->config_;
  KvCacheConfig kv;
  kv.num_layers = static_cast<int32_t>(c.n_layers);
  kv.num_kv_heads = static_cast<int32_t>(c.n_kv_heads);
  kv.head_dim_k = static_cast<int32_t>(c.head_dim_k);
  kv.head_dim_v = static_cast<int32_t>(c.head_dim_v);
  kv.block_size = options.block_size;
  kv.dtype = options.kv_dtype;
  kv.num_blocks = KvBlocksForBudget(kv, options.kv_budget_bytes);
  if (kv.num_blocks < 1) {
    return FailedPreconditionError("the KV budget of " + std::to_string(options.kv_budget_bytes) +
                                   " bytes holds no block; one block of " +
                                   std::to_string(options.block_size) + " tokens needs " +
                                   std::to_string(KvBytesPerBlock(kv)) + " bytes");
  }
  STRATA_ASSIGN_OR_RETURN(b->kv_, KvStorage::Create(kv));
  b->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  b->matmul_plan_ = b->ChooseMatMulPlan();
  return b;
}

MatMulPlan CpuBackend::ChooseMatMulPlan() {
  if (options_.matmul_plan.has_value()) return *options_.matmul_plan;
  switch (options_.matmul_precision) {
    case MatMulPrecisionSetting::kFp32:
      return MatMulPlan(MatMulPrecision::kFp32);
    case MatMulPrecisionSetting::kInt8:
      return MatMulPlan(MatMulPrecision::kInt8);
    case MatMulPrecisionSetting::kAuto:
      break;
  }
  // Every matrix a forward pass multiplies with, once per layer; the head once.
  std::vector<MatMulUse> uses;
  auto add = [&](const model::MatrixView& m) {
    uses.push_back({WeightMatrix{m.type, m.data, m.rows, m.cols}, 1});
  };
  add(weights_.output);
  for (const model::LayerWeights& l : weights_.layers) {
    for (const model::MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      add(*m);
    }
  }
  return cpu::ChooseMatMulPlan(MeasureMatMulPrecisions(uses, pool_.get()));
}

KvGeometry CpuBackend::kv_geometry() const {
  KvGeometry g;
  g.block_size = kv_->config().block_size;
  g.num_blocks = kv_->config().num_blocks;
  g.bytes_per_block = KvBytesPerBlock(kv_->config());
  return g;
}

std::string CpuBackend::Describe() const {
  return "cpu (" + std::string(MatMulIsa()) + ", " + std::to_string(num_threads()) + " threads, " +
         matmul_plan_.Describe() + ", " + KvDtypeName(kv_->config().dtype) + " KV)";
}

void CpuBackend::ParallelForHost(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  ForRange(pool_.get(), n, fn);
}

Status CpuBackend::Validate(const Batch& batch) const {
  return ValidateBatch(batch, config_, kv_->config().block_size, kv_->config().num_blocks);
}

void CpuBackend::MatMul(const model::MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  MatMulSameInput({{&w, y}}, x, n_tokens);
}

void CpuBackend::MatMulSameInput(
    std::initializer_list<std::pair<const model::MatrixView*, float*>> outputs, const float* x,
    int64_t n_tokens) {
  STRATA_CHECK(outputs.size() <= kMaxMatMulTargets);
  std::array<MatMulTarget, kMaxMatMulTargets> targets;
  size_t n = 0;
  for (const auto& [w, y] : outputs) {
    targets[n++] = {WeightMatrix{w->type, w->data, w->rows, w->cols}, y,
                    MatMulOptions{matmul_plan_.For(w->type)}};
  }
  cpu::MatMulSameInput({targets.data(), n}, x, n_tokens, pool_.get());
}

void CpuBackend::Embed(const Batch& batch, float* x) {
  const model::MatrixView& e = weights_.token_embd;
  const model::GgmlTypeTraits traits = model::TraitsOf(e.type);
  const uint64_t row_bytes = static_cast<uint64_t>(e.cols) / traits.block_size * traits.type_size;
  int64_t t = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    for (int32_t id : seq.tokens) {
      const uint8_t* row = e.data + static_cast<uint64_t>(id) * row_bytes;
      float* out = x + t * e.cols;
      // Sizes were checked when the weights were loaded; this cannot fail.
      Status s = model::Dequantize(e.type, {row, row_bytes}, e.cols, out);
      STRATA_CHECK(s.ok());
      if (config_.embedding_scale != 1.0f) ScaleInPlace(out, config_.embedding_scale, e.cols);
      ++t;
    }
  }
}

Status CpuBackend::Forward(const Batch& batch, std::vector<float>* logits) {
  STRATA_RETURN_IF_ERROR(Validate(batch));
  const model::ModelConfig& c = config_;
  int64_t n = 0;
  int64_t n_rows = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    n += static_cast<int64_t>(seq.tokens.size());
    n_rows += LogitsRows(seq);
  }
  x_.resize(n * c.n_embd);
  h_.resize(std::max(n, n_rows) * c.n_embd);
  q_.resize(n * c.n_heads * c.head_dim_k);
  k_.resize(n * c.n_kv_heads * c.head_dim_k);
  v_.resize(n * c.n_kv_heads * c.head_dim_v);
  attn_.resize(n * c.n_heads * c.head_dim_v);
  o_.resize(n * c.n_embd);
  gate_.resize(n * c.n_ff);
  up_.resize(n * c.n_ff);
  pos_.resize(n);
  rope_.resize(n * 2 * c.rope_dim);

  int64_t t = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    for (size_t i = 0; i < seq.tokens.size(); ++i) pos_[t++] = seq.start_pos + i;
  }
  const float* freq_factors = weights_.rope_freqs.empty() ? nullptr : weights_.rope_freqs.data();
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* table = rope_.data() + i * 2 * c.rope_dim;
      RopeTable(pos_[i], c.rope_dim, c.rope_base, c.rope_freq_scale, freq_factors, table);
      RopeTable(pos_[i], c.rope_dim, c.rope_base_swa, c.rope_freq_scale_swa, freq_factors,
                table + c.rope_dim);
    }
  });

  Embed(batch, x_.data());
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    AttentionBlock(layer, batch, n);
    FeedForwardBlock(layer, n);
  }

  // Final norm of the rows whose logits are wanted, then the output projection.
  int64_t row = 0;
  t = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    const int64_t len = static_cast<int64_t>(seq.tokens.size());
    const int64_t first = t + len - LogitsRows(seq);
    for (int64_t i = first; i < t + len; ++i) {
      RmsNorm(x_.data() + i * c.n_embd, weights_.output_norm.data(), c.n_embd, c.rms_eps,
              h_.data() + row * c.n_embd);
      ++row;
    }
    t += len;
  }
  logits->resize(n_rows * c.vocab_size);
  if (n_rows == 0) return OkStatus();
  MatMul(weights_.output, h_.data(), n_rows, logits->data());
  if (c.final_logit_softcap > 0) {
    SoftCapInPlace(logits->data(), c.final_logit_softcap, n_rows * c.vocab_size);
  }
  return OkStatus();
}

void CpuBackend::AttentionBlock(int64_t layer, const Batch& batch, int64_t n) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = weights_.layers[layer];
  const int64_t E = c.n_embd;
  const int64_t qw = c.n_heads * c.head_dim_k;
  const int64_t kw = c.n_kv_heads * c.head_dim_k;
  const int64_t vw = c.n_kv_heads * c.head_dim_v;
  const int64_t ow = c.n_heads * c.head_dim_v;

  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RmsNorm(x_.data() + i * E, w.attn_norm.data(), E, c.rms_eps, h_.data() + i * E);
    }
  });
  MatMulSameInput({{&w.wq, q_.data()}, {&w.wk, k_.data()}, {&w.wv, v_.data()}}, h_.data(), n);

  // Per token: biases, q/k norms, RoPE, and the K/V write into the sequence's blocks.
  std::vector<int32_t> seq_of(n);
  {
    int64_t t = 0;
    for (size_t s = 0; s < batch.sequences.size(); ++s) {
      for (size_t i = 0; i < batch.sequences[s].tokens.size(); ++i) seq_of[t++] = s;
    }
  }
  const bool sliding = c.layer_is_sliding[layer];
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* q = q_.data() + i * qw;
      float* k = k_.data() + i * kw;
      float* v = v_.data() + i * vw;
      if (!w.bq.empty()) {
        AddInPlace(q, w.bq.data(), qw);
        AddInPlace(k, w.bk.data(), kw);
        AddInPlace(v, w.bv.data(), vw);
      }
      if (c.has_qk_norm) {
        for (int64_t h = 0; h < c.n_heads; ++h) {
          float* head = q + h * c.head_dim_k;
          RmsNorm(head, w.q_norm.data(), c.head_dim_k, c.rms_eps, head);
        }
        for (int64_t h = 0; h < c.n_kv_heads; ++h) {
          float* head = k + h * c.head_dim_k;
          RmsNorm(head, w.k_norm.data(), c.head_dim_k, c.rms_eps, head);
        }
      }
      const float* table = rope_.data() + i * 2 * c.rope_dim + (sliding ? c.rope_dim : 0);
      if (c.rope_style == model::RopeStyle::kNeox) {
        RopeNeox(q, c.n_heads, c.head_dim_k, c.rope_dim, table);
        RopeNeox(k, c.n_kv_heads, c.head_dim_k, c.rope_dim, table);
      } else {
        RopeNorm(q, c.n_heads, c.head_dim_k, c.rope_dim, table);
        RopeNorm(k, c.n_kv_heads, c.head_dim_k, c.rope_dim, table);
      }
      kv_->Write(static_cast<int32_t>(layer), batch.sequences[seq_of[i]].block_ids, pos_[i], k, v);
    }
  });

  // Attention: every sequence's tasks in one parallel region.
  std::vector<PagedAttentionArgs> args(batch.sequences.size());
  std::vector<int64_t> task_start(batch.sequences.size() + 1, 0);
  int64_t t = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& seq = batch.sequences[s];
    PagedAttentionArgs& a = args[s];
    a.kv = kv_.get();
    a.layer = static_cast<int32_t>(layer);
    a.block_ids = seq.block_ids;
    a.q = q_.data() + t * qw;
    a.q_pos = pos_.data() + t;
    a.n_q = static_cast<int64_t>(seq.tokens.size());
    a.n_heads = static_cast<int32_t>(c.n_heads);
    a.scale = c.attention_scale;
    a.sliding_window = c.SlidingWindow(layer);
    a.out = attn_.data() + t * ow;
    task_start[s + 1] = task_start[s] + PagedAttentionTasks(a);
    t += a.n_q;
  }
  ForRange(pool_.get(), task_start.back(), [&](int64_t begin, int64_t end) {
    size_t s =
        std::upper_bound(task_start.begin(), task_start.end(), begin) - task_start.begin() - 1;
    while (begin < end) {
      const int64_t stop = std::min(end, task_start[s + 1]);
      PagedAttention(args[s], begin - task_start[s], stop - task_start[s]);
      begin = stop;
      ++s;
    }
  });

  MatMul(w.wo, attn_.data(), n, o_.data());
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* o = o_.data() + i * E;
      if (c.has_post_norms) RmsNorm(o, w.post_attn_norm.data(), E, c.rms_eps, o);
      AddInPlace(x_.data() + i * E, o, E);
    }
  });
}

void CpuBackend::FeedForwardBlock(int64_t layer, int64_t n) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = weights_.layers[layer];
  const int64_t E = c.n_embd;
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RmsNorm(x_.data() + i * E, w.ffn_norm.data(), E, c.rms_eps, h_.data() + i * E);
    }
  });
  MatMulSameInput({{&w.gate, gate_.data()}, {&w.up, up_.data()}}, h_.data(), n);
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* g = gate_.data() + i * c.n_ff;
      const float* u = up_.data() + i * c.n_ff;
      if (c.activation == model::FfnActivation::kGeluTanh) {
        GeluTanhMul(g, u, c.n_ff, g);
      } else {
        SiluMul(g, u, c.n_ff, g);
      }
    }
  });
  MatMul(w.down, gate_.data(), n, o_.data());
  ForRange(pool_.get(), n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* o = o_.data() + i * E;
      if (c.has_post_norms) RmsNorm(o, w.post_ffn_norm.data(), E, c.rms_eps, o);
      AddInPlace(x_.data() + i * E, o, E);
    }
  });
}

}  // namespace strata::backend::cpu
