// BertWeights: a BERT encoder's tensors, found by their Hugging Face names (optionally under a
// "bert." prefix) in a SafetensorsFile and checked against a BertConfig's shapes.
//
// Every tensor is exposed as fp32: F32 tensors whose data is 4-byte aligned in the file are
// read in place (the mmap is the storage; nothing is copied), F16/BF16 tensors and misaligned
// F32 ones are converted once into memory owned here. Layouts are PyTorch's: a Linear weight is
// [out_features, in_features], row-major.
//
// Lifetime: the SafetensorsFile must outlive the BertWeights made from it. Immutable after
// construction; any thread may read it.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/common/status.h"
#include "strata/embedding/bert_config.h"
#include "strata/embedding/safetensors_file.h"

namespace strata::embedding {

// A tensor's elements as fp32: a view into the file or an owned converted copy. Move-only.
class FloatTensor {
 public:
  FloatTensor() = default;
  FloatTensor(FloatTensor&&) noexcept = default;
  FloatTensor& operator=(FloatTensor&&) noexcept = default;
  FloatTensor(const FloatTensor&) = delete;
  FloatTensor& operator=(const FloatTensor&) = delete;

  // INVALID_ARGUMENT when the tensor's dtype is not F32, F16 or BF16.
  static StatusOr<FloatTensor> FromSafetensors(const SafetensorsFile& file,
                                               const SafetensorsTensorInfo& info);

  const float* data() const { return data_; }
  int64_t size() const { return size_; }
  bool owns_data() const { return !owned_.empty(); }

 private:
  const float* data_ = nullptr;
  int64_t size_ = 0;
  std::vector<float> owned_;  // when converted or realigned; data_ points into it
};

struct BertLayerWeights {
  FloatTensor query_weight;             // [hidden, hidden]
  FloatTensor query_bias;               // [hidden]
  FloatTensor key_weight;               // [hidden, hidden]
  FloatTensor key_bias;                 // [hidden]
  FloatTensor value_weight;             // [hidden, hidden]
  FloatTensor value_bias;               // [hidden]
  FloatTensor attention_output_weight;  // [hidden, hidden]
  FloatTensor attention_output_bias;    // [hidden]
  FloatTensor attention_norm_weight;    // [hidden] (LayerNorm gamma)
  FloatTensor attention_norm_bias;      // [hidden] (LayerNorm beta)
  FloatTensor intermediate_weight;      // [intermediate, hidden]
  FloatTensor intermediate_bias;        // [intermediate]
  FloatTensor output_weight;            // [hidden, intermediate]
  FloatTensor output_bias;              // [hidden]
  FloatTensor output_norm_weight;       // [hidden]
  FloatTensor output_norm_bias;         // [hidden]
};

struct BertWeights {
  FloatTensor word_embeddings;        // [vocab_size, hidden]
  FloatTensor position_embeddings;    // [max_position_embeddings, hidden]
  FloatTensor token_type_embeddings;  // [type_vocab_size, hidden]
  FloatTensor embedding_norm_weight;  // [hidden]
  FloatTensor embedding_norm_bias;    // [hidden]
  std::vector<BertLayerWeights> layers;

  // Finds and checks every tensor; INVALID_ARGUMENT naming a missing tensor or a shape that
  // differs from the config's. Tensors the encoder does not use (the pooler, position_ids) are
  // ignored.
  static StatusOr<BertWeights> FromSafetensors(const SafetensorsFile& file,
                                               const BertConfig& config);
};

}  // namespace strata::embedding
