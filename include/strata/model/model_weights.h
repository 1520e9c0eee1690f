// ModelWeights: views of a transformer's tensors inside the mapped GGUF file, checked against
// the ModelConfig's shapes. Large matrices stay in the map (no copy of the model in RAM); the
// small vectors (norms, biases, RoPE factors) are converted to owned fp32 copies.
//
// Immutable after FromGguf; valid while the GgufFile lives. Any thread may read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/ggml_type.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"

namespace strata::model {

// A row-major matrix in the file: `rows` rows of `cols` elements (cols = ggml's ne[0]).
struct MatrixView {
  std::string name;
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t bytes = 0;
  bool present() const { return data != nullptr; }
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  MatrixView wq;                      // [n_heads * head_dim_k, n_embd]
  MatrixView wk;                      // [n_kv_heads * head_dim_k, n_embd]
  MatrixView wv;                      // [n_kv_heads * head_dim_v, n_embd]
  MatrixView wo;                      // [n_embd, n_heads * head_dim_v]
  std::vector<float> bq, bk, bv;      // qwen2 biases; empty when absent
  std::vector<float> q_norm, k_norm;  // [head_dim_k] (gemma3)
  std::vector<float> post_attn_norm;  // [n_embd] (gemma3)
  std::vector<float> ffn_norm;        // [n_embd]
  MatrixView gate;                    // [n_ff, n_embd]
  MatrixView up;                      // [n_ff, n_embd]
  MatrixView down;                    // [n_embd, n_ff]
  std::vector<float> post_ffn_norm;   // [n_embd] (gemma3)
};

struct ModelWeights {
  MatrixView token_embd;  // [vocab, n_embd]
  MatrixView output;      // [vocab, n_embd]; the same tensor as token_embd when tied
  bool tied_output = false;
  std::vector<float> output_norm;  // [n_embd]
  std::vector<float> rope_freqs;   // [rope_dim / 2] llama3 frequency factors; empty when absent
  std::vector<LayerWeights> layers;

  // Finds every tensor the architecture needs and checks its shape and type. Errors name the
  // tensor (missing, wrong shape, unsupported type). Sets config->vocab_size.
  static StatusOr<ModelWeights> FromGguf(const GgufFile& file, ModelConfig* config);

  // Bytes of the matrices one decode step reads (every layer's weights plus the output).
  uint64_t MatrixBytes() const;
};

}  // namespace strata::model
