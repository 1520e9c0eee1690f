#include "strata/embedding/bert_weights.h"

#include <cstring>
#include <string>

#include "strata/model/fp16.h"

namespace strata::embedding {
namespace {

std::string ShapeString(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

class TensorFinder {
 public:
  explicit TensorFinder(const SafetensorsFile& file) : file_(file) {
    // Checkpoints saved from BertForX carry the encoder under "bert.".
    if (file.FindTensor("embeddings.word_embeddings.weight") == nullptr &&
        file.FindTensor("bert.embeddings.word_embeddings.weight") != nullptr) {
      prefix_ = "bert.";
    }
  }

  Status Get(const std::string& name, std::vector<uint64_t> shape, FloatTensor* out) const {
    const SafetensorsTensorInfo* info = file_.FindTensor(prefix_ + name);
    if (info == nullptr) {
      return InvalidArgumentError("tensor '" + prefix_ + name + "' is missing");
    }
    if (info->shape != shape) {
      return InvalidArgumentError("tensor '" + info->name + "' has shape " +
                                  ShapeString(info->shape) + ", the config needs " +
                                  ShapeString(shape));
    }
    STRATA_ASSIGN_OR_RETURN(*out, FloatTensor::FromSafetensors(file_, *info));
    return OkStatus();
  }

 private:
  const SafetensorsFile& file_;
  std::string prefix_;
};

}  // namespace

StatusOr<FloatTensor> FloatTensor::FromSafetensors(const SafetensorsFile& file,
                                                   const SafetensorsTensorInfo& info) {
  const bool f32 = info.dtype == SafetensorsDtype::kF32;
  const bool f16 = info.dtype == SafetensorsDtype::kF16;
  if (!f32 && !f16 && info.dtype != SafetensorsDtype::kBF16) {
    return InvalidArgumentError("tensor '" + info.name + "' has dtype " +
                                std::string(SafetensorsDtypeName(info.dtype)) +
                                "; weights must be F32, F16 or BF16");
  }
  FloatTensor t;
  t.size_ = static_cast<int64_t>(info.num_elements);
  if (info.num_elements == 0) return t;  // nothing to view or convert
  const std::span<const uint8_t> bytes = file.TensorData(info);
  if (f32 && reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    t.data_ = reinterpret_cast<const float*>(bytes.data());
    return t;
  }
  t.owned_.resize(info.num_elements);
  if (f32) {
    std::memcpy(t.owned_.data(), bytes.data(), bytes.size());
  } else {
    for (uint64_t i = 0; i < info.num_elements; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      t.owned_[i] = f16 ? model::Fp16ToFloat(h) : model::Bf16ToFloat(h);
    }
  }
  t.data_ = t.owned_.data();
  return t;
}

StatusOr<BertWeights> BertWeights::FromSafetensors(const SafetensorsFile& file,
                                                   const BertConfig& config) {
  const TensorFinder find(file);
  const auto h = static_cast<uint64_t>(config.hidden_size);
  const auto ff = static_cast<uint64_t>(config.intermediate_size);
  BertWeights w;
  STRATA_RETURN_IF_ERROR(find.Get("embeddings.word_embeddings.weight",
                                  {static_cast<uint64_t>(config.vocab_size), h},
                                  &w.word_embeddings));
  STRATA_RETURN_IF_ERROR(find.Get("embeddings.position_embeddings.weight",
                                  {static_cast<uint64_t>(config.max_position_embeddings), h},
                                  &w.position_embeddings));
  STRATA_RETURN_IF_ERROR(find.Get("embeddings.token_type_embeddings.weight",
                                  {static_cast<uint64_t>(config.type_vocab_size), h},
                                  &w.token_type_embeddings));
  STRATA_RETURN_IF_ERROR(find.Get("embeddings.LayerNorm.weight", {h}, &w.embedding_norm_weight));
  STRATA_RETURN_IF_ERROR(find.Get("embeddings.LayerNorm.bias", {h}, &w.embedding_norm_bias));
  w.layers.resize(config.num_layers);
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    BertLayerWeights& l = w.layers[i];
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.query.weight", {h, h}, &l.query_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.query.bias", {h}, &l.query_bias));
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.key.weight", {h, h}, &l.key_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.key.bias", {h}, &l.key_bias));
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.value.weight", {h, h}, &l.value_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "attention.self.value.bias", {h}, &l.value_bias));
    STRATA_RETURN_IF_ERROR(
        find.Get(p + "attention.output.dense.weight", {h, h}, &l.attention_output_weight));
    STRATA_RETURN_IF_ERROR(
        find.Get(p + "attention.output.dense.bias", {h}, &l.attention_output_bias));
    STRATA_RETURN_IF_ERROR(
        find.Get(p + "attention.output.LayerNorm.weight", {h}, &l.attention_norm_weight));
    STRATA_RETURN_IF_ERROR(
        find.Get(p + "attention.output.LayerNorm.bias", {h}, &l.attention_norm_bias));
    STRATA_RETURN_IF_ERROR(
        find.Get(p + "intermediate.dense.weight", {ff, h}, &l.intermediate_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "intermediate.dense.bias", {ff}, &l.intermediate_bias));
    STRATA_RETURN_IF_ERROR(find.Get(p + "output.dense.weight", {h, ff}, &l.output_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "output.dense.bias", {h}, &l.output_bias));
    STRATA_RETURN_IF_ERROR(find.Get(p + "output.LayerNorm.weight", {h}, &l.output_norm_weight));
    STRATA_RETURN_IF_ERROR(find.Get(p + "output.LayerNorm.bias", {h}, &l.output_norm_bias));
  }
  return w;
}

}  // namespace strata::embedding
