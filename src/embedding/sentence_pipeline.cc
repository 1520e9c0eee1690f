#include "strata/embedding/sentence_pipeline.h"

#include <filesystem>

#include "json_util.h"

namespace strata::embedding {
namespace {

constexpr std::string_view kTransformer = "sentence_transformers.models.Transformer";
constexpr std::string_view kPooling = "sentence_transformers.models.Pooling";
constexpr std::string_view kNormalize = "sentence_transformers.models.Normalize";

// The parsed object in `path`, or a null Json when the file does not exist.
StatusOr<internal::Json> ReadOptional(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return internal::Json();
  STRATA_ASSIGN_OR_RETURN(std::string text, internal::ReadTextFile(path));
  return internal::ParseJsonObject(text, path);
}

Status CheckModules(const std::string& path, SentencePipeline* pipeline) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return OkStatus();
  STRATA_ASSIGN_OR_RETURN(std::string text, internal::ReadTextFile(path));
  const internal::Json modules =
      internal::Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (modules.is_discarded() || !modules.is_array()) {
    return InvalidArgumentError(path + " is not a JSON array");
  }
  std::vector<std::string> types;
  for (const internal::Json& module : modules) {
    if (!module.is_object()) return InvalidArgumentError(path + ": a module is not an object");
    STRATA_ASSIGN_OR_RETURN(std::string type, internal::GetString(module, "type", path));
    types.push_back(type);
  }
  const bool plain = types.size() == 2 && types[0] == kTransformer && types[1] == kPooling;
  const bool normalized = types.size() == 3 && types[0] == kTransformer && types[1] == kPooling &&
                          types[2] == kNormalize;
  if (!plain && !normalized) {
    return UnimplementedError(path + ": only Transformer, Pooling[, Normalize] is supported");
  }
  pipeline->normalize = normalized;
  return OkStatus();
}

Status CheckPooling(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(internal::Json pooling, ReadOptional(path));
  if (pooling.is_null()) return OkStatus();
  for (const auto& [key, value] : pooling.items()) {
    if (!key.starts_with("pooling_mode_")) continue;
    const bool wanted = key == "pooling_mode_mean_tokens";
    if (!value.is_boolean() || value.get<bool>() != wanted) {
      return UnimplementedError(path + ": only mean pooling is supported (" + key + ")");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<SentencePipeline> SentencePipeline::Load(const std::string& dir) {
  SentencePipeline pipeline;
  STRATA_RETURN_IF_ERROR(CheckModules(dir + "/modules.json", &pipeline));
  STRATA_RETURN_IF_ERROR(CheckPooling(dir + "/1_Pooling/config.json"));
  const std::string bert_config = dir + "/sentence_bert_config.json";
  STRATA_ASSIGN_OR_RETURN(internal::Json config, ReadOptional(bert_config));
  if (!config.is_null()) {
    STRATA_ASSIGN_OR_RETURN(int64_t max_len,
                            internal::GetInt(config, "max_seq_length", bert_config));
    if (max_len < 2 || max_len > (int64_t{1} << 20)) {
      return InvalidArgumentError(bert_config + ": max_seq_length must be between 2 and 2^20");
    }
    pipeline.max_seq_length = static_cast<int>(max_len);
    // sentence-transformers would lowercase with Python's str.lower() before the tokenizer.
    if (config.contains("do_lower_case")) {
      STRATA_ASSIGN_OR_RETURN(bool lower, internal::GetBool(config, "do_lower_case", bert_config));
      if (lower) return UnimplementedError(bert_config + ": do_lower_case true is not supported");
    }
  }
  return pipeline;
}

}  // namespace strata::embedding
