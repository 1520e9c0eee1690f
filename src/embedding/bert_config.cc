#include "strata/embedding/bert_config.h"

#include "json_util.h"

namespace strata::embedding {
namespace {

Status ReadDim(const internal::Json& root, std::string_view key, const std::string& what,
               int64_t* out) {
  STRATA_ASSIGN_OR_RETURN(*out, internal::GetInt(root, key, what));
  if (*out < 1 || *out > BertConfig::kMaxDim) {
    return InvalidArgumentError(what + ": '" + std::string(key) + "' must be between 1 and " +
                                std::to_string(BertConfig::kMaxDim) + ", got " +
                                std::to_string(*out));
  }
  return OkStatus();
}

// An optional string field that, when present, must have the one value we implement.
Status RequireIfPresent(const internal::Json& root, std::string_view key, std::string_view expected,
                        const std::string& what) {
  if (!root.contains(key)) return OkStatus();
  STRATA_ASSIGN_OR_RETURN(std::string value, internal::GetString(root, key, what));
  if (value != expected) {
    return UnimplementedError(what + ": " + std::string(key) + " '" + value +
                              "' is not supported (only '" + std::string(expected) + "')");
  }
  return OkStatus();
}

}  // namespace

StatusOr<BertConfig> BertConfig::Load(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, internal::ReadTextFile(path));
  return FromJson(text, path);
}

StatusOr<BertConfig> BertConfig::FromJson(std::string_view json, const std::string& what) {
  STRATA_ASSIGN_OR_RETURN(internal::Json root, internal::ParseJsonObject(json, what));
  STRATA_RETURN_IF_ERROR(RequireIfPresent(root, "model_type", "bert", what));
  STRATA_RETURN_IF_ERROR(RequireIfPresent(root, "hidden_act", "gelu", what));
  STRATA_RETURN_IF_ERROR(RequireIfPresent(root, "position_embedding_type", "absolute", what));
  BertConfig c;
  STRATA_RETURN_IF_ERROR(ReadDim(root, "vocab_size", what, &c.vocab_size));
  STRATA_RETURN_IF_ERROR(ReadDim(root, "hidden_size", what, &c.hidden_size));
  STRATA_RETURN_IF_ERROR(ReadDim(root, "num_hidden_layers", what, &c.num_layers));
  STRATA_RETURN_IF_ERROR(ReadDim(root, "num_attention_heads", what, &c.num_heads));
  STRATA_RETURN_IF_ERROR(ReadDim(root, "intermediate_size", what, &c.intermediate_size));
  STRATA_RETURN_IF_ERROR(
      ReadDim(root, "max_position_embeddings", what, &c.max_position_embeddings));
  STRATA_RETURN_IF_ERROR(ReadDim(root, "type_vocab_size", what, &c.type_vocab_size));
  STRATA_ASSIGN_OR_RETURN(c.layer_norm_eps, internal::GetNumber(root, "layer_norm_eps", what));
  if (!(c.layer_norm_eps > 0 && c.layer_norm_eps < 1)) {
    return InvalidArgumentError(what + ": layer_norm_eps must be in (0, 1)");
  }
  if (c.hidden_size % c.num_heads != 0) {
    return InvalidArgumentError(what + ": hidden_size (" + std::to_string(c.hidden_size) +
                                ") must be a multiple of num_attention_heads (" +
                                std::to_string(c.num_heads) + ")");
  }
  return c;
}

}  // namespace strata::embedding
