// BertEncoder: the forward pass of a BERT encoder (Devlin et al. 2019) on the CPU, giving the
// last hidden state of every token:
//   x = LayerNorm(word[id] + position[p] + token_type[0])
//   per layer (post-LN, Vaswani et al. 2017):
//     a = softmax(Q K^T / sqrt(head_dim)) V per head, over the tokens of the same sequence
//     x = LayerNorm(x + a W_o^T + b_o)
//     x = LayerNorm(x + gelu(x W_i^T + b_i) W_2^T + b_2)        (gelu with erf)
// fp32 activations; the matrix products run on the CPU backend's fp32 path
// (backend::cpu::MatMul, weights read in place), the rest in plain loops over the pool.
//
// Batches are ragged: the sequences' tokens are packed one after another, every matrix product
// covers all of them at once, and each token attends only to its own sequence. That is what
// padding to the longest sequence with an attention mask computes, without the padding.
//
// Thread rules: Forward may be called by one thread at a time (the encoder owns its scratch
// buffers); it fans work out over the pool. The config, the weights and the pool must outlive
// the encoder.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/backend/cpu/thread_pool.h"
#include "strata/embedding/bert_config.h"
#include "strata/embedding/bert_weights.h"

namespace strata::embedding {

class BertEncoder {
 public:
  // pool may be null: everything then runs on the calling thread.
  BertEncoder(const BertConfig& config, const BertWeights& weights, backend::cpu::ThreadPool* pool);

  // hidden (resized): [total tokens, hidden_size], the sequences' tokens in order.
  // Each sequence holds 1..max_position_embeddings ids in [0, vocab_size): anything else is a
  // programmer error (checked); SentenceEncoder guarantees it by construction.
  void Forward(std::span<const std::vector<int32_t>> sequences, std::vector<float>* hidden);

  const BertConfig& config() const { return config_; }

 private:
  void Embed(std::span<const std::vector<int32_t>> sequences, float* x);
  void Attention(std::span<const std::vector<int32_t>> sequences, const float* q, const float* k,
                 const float* v, float* out);
  void Linear(const FloatTensor& weight, int64_t rows, int64_t cols, const float* x,
              int64_t n_tokens, float* y);
  // fn(t) for every token row t < n, spread over the pool.
  template <typename Fn>
  void ForEachRow(int64_t n, const Fn& fn);

  const BertConfig& config_;
  const BertWeights& weights_;
  backend::cpu::ThreadPool* pool_;
  // Scratch, reused across calls: [tokens, hidden] each, and [tokens, intermediate].
  std::vector<float> q_, k_, v_, context_, projected_, intermediate_;
};

}  // namespace strata::embedding
