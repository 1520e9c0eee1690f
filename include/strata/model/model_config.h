// ModelConfig: the hyperparameters of a transformer, read from GGUF metadata (never hard-coded
// per model). One struct covers the architectures Strata runs: gemma3 and the Llama family
// (llama — which also carries Mistral —, and qwen2). Immutable after FromGguf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/gguf_file.h"

namespace strata::model {

enum class Architecture { kGemma3, kLlama, kQwen2 };

// How RoPE pairs the dimensions of a head: kNorm rotates (2i, 2i+1) (llama's GGUF layout,
// whose q/k weights the converter permuted); kNeox rotates (i, i + rope_dim/2) (gemma3, qwen2).
enum class RopeStyle { kNorm, kNeox };

enum class FfnActivation {
  kGeluTanh,  // GeGLU: gelu_tanh(gate) * up (Gemma)
  kSilu,      // SwiGLU: silu(gate) * up (Llama family)
};

// ModelConfig is the layer plan every backend executes: each architecture-specific choice (norms,
// biases, RoPE style and scaling, activation, sliding window, soft-cap, embedding scale) is a
// field set once by FromGguf from the architecture and the file. The weights loader and both
// backends read only these fields and never name an architecture, so a new architecture is a
// new case in FromGguf (and new kernels only for a new kind of operation).
struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;  // general.architecture

  int64_t vocab_size = 0;      // rows of token_embd
  int64_t context_length = 0;  // <arch>.context_length: positions the model was trained for
  int64_t n_embd = 0;          // hidden size
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim_k = 0;  // <arch>.attention.key_length, default n_embd / n_heads
  int64_t head_dim_v = 0;
  int64_t n_ff = 0;  // feed-forward width
  float rms_eps = 1e-6f;

  // RoPE: theta_i(pos) = pos * freq_scale * base^(-2i / rope_dim) / freq_factor_i.
  RopeStyle rope_style = RopeStyle::kNorm;
  int64_t rope_dim = 0;            // rotated dimensions per head (<arch>.rope.dimension_count)
  float rope_base = 10000.0f;      // global layers
  float rope_freq_scale = 1.0f;    // 1 / <arch>.rope.scaling.factor (linear scaling)
  float rope_base_swa = 10000.0f;  // sliding-window layers (gemma3: <arch>.rope.freq_base_swa)
  float rope_freq_scale_swa = 1.0f;

  // Attention: scores = scale * q.k; sliding layers see the last `sliding_window` positions
  // (the query's own included); 0 = no sliding window anywhere.
  float attention_scale = 1.0f;
  int32_t sliding_window = 0;
  std::vector<bool> layer_is_sliding;  // [n_layers]

  float embedding_scale = 1.0f;      // gemma: sqrt(n_embd)
  float final_logit_softcap = 0.0f;  // 0 = none
  FfnActivation activation = FfnActivation::kSilu;
  bool has_qk_norm = false;     // per-head RMSNorm of q and k (gemma3)
  bool has_post_norms = false;  // post-attention and post-FFN RMSNorm (gemma3)
  bool has_qkv_bias = false;    // q/k/v projection biases required (qwen2; optional elsewhere)

  // Reads and checks the hyperparameters; errors name the key (missing, wrong type, or out of
  // range — e.g. n_heads not a multiple of n_kv_heads). UNIMPLEMENTED for other architectures.
  static StatusOr<ModelConfig> FromGguf(const GgufFile& file);

  float RopeBase(int64_t layer) const {
    return layer_is_sliding[layer] ? rope_base_swa : rope_base;
  }
  float RopeFreqScale(int64_t layer) const {
    return layer_is_sliding[layer] ? rope_freq_scale_swa : rope_freq_scale;
  }
  int32_t SlidingWindow(int64_t layer) const {
    return layer_is_sliding[layer] ? sliding_window : 0;
  }
};

std::string_view ArchitectureName(Architecture arch);

}  // namespace strata::model
