// BertConfig: the hyperparameters of a BERT encoder, from a Hugging Face config.json
// ("model_type": "bert"). Only what this module runs is accepted: GELU with erf ("gelu"),
// absolute position embeddings, hidden_size a multiple of num_attention_heads; anything else is
// UNIMPLEMENTED or INVALID_ARGUMENT naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::embedding {

struct BertConfig {
  // Bounds on every size, far above real models, so products of them fit in int64_t.
  static constexpr int64_t kMaxDim = int64_t{1} << 20;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  double layer_norm_eps = 1e-12;

  int64_t head_dim() const { return hidden_size / num_heads; }

  // Errors name `what` (Load: the path) and the field.
  static StatusOr<BertConfig> Load(const std::string& path);
  static StatusOr<BertConfig> FromJson(std::string_view json,
                                       const std::string& what = "config.json");
};

}  // namespace strata::embedding
