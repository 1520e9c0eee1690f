#include "strata/embedding/bert_encoder.h"

#include <algorithm>
#include <cmath>

#include "bert_ops.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/common/check.h"

namespace strata::embedding {

BertEncoder::BertEncoder(const BertConfig& config, const BertWeights& weights,
                         backend::cpu::ThreadPool* pool)
    : config_(config), weights_(weights), pool_(pool) {}

template <typename Fn>
void BertEncoder::ForEachRow(int64_t n, const Fn& fn) {
  const auto body = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  };
  if (pool_ == nullptr) {
    body(0, n);
  } else {
    pool_->ParallelFor(n, 4, body);
  }
}

void BertEncoder::Linear(const FloatTensor& weight, int64_t rows, int64_t cols, const float* x,
                         int64_t n_tokens, float* y) {
  const backend::cpu::WeightMatrix w{model::GgmlType::kF32,
                                     reinterpret_cast<const uint8_t*>(weight.data()), rows, cols};
  backend::cpu::MatMul(w, x, n_tokens, y, pool_);
}

void BertEncoder::Embed(std::span<const std::vector<int32_t>> sequences, float* x) {
  const int64_t h = config_.hidden_size;
  const auto eps = static_cast<float>(config_.layer_norm_eps);
  const float* type0 = weights_.token_type_embeddings.data();  // every token is segment A
  int64_t t = 0;
  for (const std::vector<int32_t>& ids : sequences) {
    for (size_t p = 0; p < ids.size(); ++p, ++t) {
      const float* word = weights_.word_embeddings.data() + int64_t{ids[p]} * h;
      const float* pos = weights_.position_embeddings.data() + static_cast<int64_t>(p) * h;
      float* row = x + t * h;
      for (int64_t d = 0; d < h; ++d) row[d] = word[d] + pos[d] + type0[d];
      internal::LayerNorm(row, weights_.embedding_norm_weight.data(),
                          weights_.embedding_norm_bias.data(), h, eps, row);
    }
  }
}

void BertEncoder::Attention(std::span<const std::vector<int32_t>> sequences, const float* q,
                            const float* k, const float* v, float* out) {
  const int64_t h = config_.hidden_size;
  const int64_t heads = config_.num_heads;
  const int64_t dh = config_.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  std::vector<int64_t> starts(sequences.size() + 1, 0);
  for (size_t s = 0; s < sequences.size(); ++s) {
    starts[s + 1] = starts[s] + static_cast<int64_t>(sequences[s].size());
  }
  // One task per (sequence, head). The head's keys are first transposed into [head_dim, len],
  // so each query's scores are a sum of scaled key rows (a loop over j that vectorizes, where a
  // dot product per key would be a serial float reduction); then softmax and the weighted sum
  // of the value rows.
  const auto task = [&](int64_t begin, int64_t end) {
    std::vector<float> keys_t;
    std::vector<float> scores;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t s = job / heads;
      const int64_t head = job % heads;
      const int64_t first = starts[s];
      const int64_t len = starts[s + 1] - first;
      keys_t.resize(dh * len);
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = k + (first + j) * h + head * dh;
        for (int64_t d = 0; d < dh; ++d) keys_t[d * len + j] = kj[d];
      }
      scores.resize(len);
      for (int64_t i = 0; i < len; ++i) {
        const float* qi = q + (first + i) * h + head * dh;
        std::fill(scores.begin(), scores.end(), 0.0f);
        for (int64_t d = 0; d < dh; ++d) {
          const float qd = qi[d] * scale;
          const float* row = keys_t.data() + d * len;
          for (int64_t j = 0; j < len; ++j) scores[j] += qd * row[j];
        }
        const float max_score = *std::max_element(scores.begin(), scores.end());
        float sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          scores[j] = std::exp(scores[j] - max_score);
          sum += scores[j];
        }
        const float inv = 1.0f / sum;
        float* oi = out + (first + i) * h + head * dh;
        std::fill(oi, oi + dh, 0.0f);
        for (int64_t j = 0; j < len; ++j) {
          const float* vj = v + (first + j) * h + head * dh;
          const float p = scores[j] * inv;
          for (int64_t d = 0; d < dh; ++d) oi[d] += p * vj[d];
        }
      }
    }
  };
  const auto jobs = static_cast<int64_t>(sequences.size()) * heads;
  if (pool_ == nullptr) {
    task(0, jobs);
  } else {
    pool_->ParallelFor(jobs, 1, task);
  }
}

void BertEncoder::Forward(std::span<const std::vector<int32_t>> sequences,
                          std::vector<float>* hidden) {
  const int64_t h = config_.hidden_size;
  const int64_t ff = config_.intermediate_size;
  const auto eps = static_cast<float>(config_.layer_norm_eps);
  int64_t n = 0;
  for (const std::vector<int32_t>& ids : sequences) {
    STRATA_CHECK(!ids.empty() &&
                 static_cast<int64_t>(ids.size()) <= config_.max_position_embeddings);
    for (int32_t id : ids) STRATA_CHECK(id >= 0 && id < config_.vocab_size);
    n += static_cast<int64_t>(ids.size());
  }
  hidden->resize(n * h);
  q_.resize(n * h);
  k_.resize(n * h);
  v_.resize(n * h);
  context_.resize(n * h);
  projected_.resize(n * h);
  intermediate_.resize(n * ff);
  float* x = hidden->data();
  Embed(sequences, x);
  for (const BertLayerWeights& l : weights_.layers) {
    Linear(l.query_weight, h, h, x, n, q_.data());
    Linear(l.key_weight, h, h, x, n, k_.data());
    Linear(l.value_weight, h, h, x, n, v_.data());
    ForEachRow(n, [&](int64_t t) {
      internal::AddBias(q_.data() + t * h, l.query_bias.data(), h);
      internal::AddBias(k_.data() + t * h, l.key_bias.data(), h);
      internal::AddBias(v_.data() + t * h, l.value_bias.data(), h);
    });
    Attention(sequences, q_.data(), k_.data(), v_.data(), context_.data());
    Linear(l.attention_output_weight, h, h, context_.data(), n, projected_.data());
    ForEachRow(n, [&](int64_t t) {
      float* row = projected_.data() + t * h;
      internal::AddBiasResidual(row, l.attention_output_bias.data(), x + t * h, h);
      internal::LayerNorm(row, l.attention_norm_weight.data(), l.attention_norm_bias.data(), h, eps,
                          x + t * h);
    });
    Linear(l.intermediate_weight, ff, h, x, n, intermediate_.data());
    ForEachRow(n, [&](int64_t t) {
      internal::AddBiasGelu(intermediate_.data() + t * ff, l.intermediate_bias.data(), ff);
    });
    Linear(l.output_weight, h, ff, intermediate_.data(), n, projected_.data());
    ForEachRow(n, [&](int64_t t) {
      float* row = projected_.data() + t * h;
      internal::AddBiasResidual(row, l.output_bias.data(), x + t * h, h);
      internal::LayerNorm(row, l.output_norm_weight.data(), l.output_norm_bias.data(), h, eps,
                          x + t * h);
    });
  }
}

}  // namespace strata::embedding
