#include "strata/model/model_config.h"

#include <cmath>

namespace strata::model {
namespace {

// Reads "<arch>.<suffix>" as a positive integer bounded by `max`.
StatusOr<int64_t> ReadCount(const GgufFile& file, const std::string& key, int64_t max) {
  auto v = file.GetUint(key);
  if (!v.ok()) return v.status();
  if (*v < 1 || *v > static_cast<uint64_t>(max)) {
    return InvalidArgumentError("metadata key '" + key + "' must be between 1 and " +
                                std::to_string(max) + ", got " + std::to_string(*v));
  }
  return static_cast<int64_t>(*v);
}

StatusOr<int64_t> ReadCountOr(const GgufFile& file, const std::string& key, int64_t max,
                              int64_t fallback) {
  if (file.Find(key) == nullptr) return fallback;
  return ReadCount(file, key, max);
}

StatusOr<float> ReadPositiveFloatOr(const GgufFile& file, const std::string& key, float fallback) {
  if (file.Find(key) == nullptr) return fallback;
  auto v = file.GetFloat(key);
  if (!v.ok()) return v.status();
  // Checked after the conversion: a float64 beyond fp32's range would become inf or 0.
  const float f = static_cast<float>(*v);
  if (!std::isfinite(f) || !(f > 0)) {
    return InvalidArgumentError("metadata key '" + key + "' must be a positive finite number");
  }
  return f;
}

}  // namespace

std::string_view ArchitectureName(Architecture arch) {
  switch (arch) {
    case Architecture::kGemma3:
      return "gemma3";
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
  }
  return "unknown";
}

StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  STRATA_ASSIGN_OR_RETURN(std::string_view arch, file.GetString("general.architecture"));
  c.arch_name = std::string(arch);
  if (arch == "gemma3") {
    c.arch = Architecture::kGemma3;
  } else if (arch == "llama") {
    c.arch = Architecture::kLlama;
  } else if (arch == "qwen2") {
    c.arch = Architecture::kQwen2;
  } else {
    return UnimplementedError("architecture '" + c.arch_name +
                              "' is not supported (supported: gemma3, llama, qwen2)");
  }
  const std::string p = c.arch_name + ".";
  constexpr int64_t kMaxWidth = int64_t{1} << 20;
  STRATA_ASSIGN_OR_RETURN(c.context_length, ReadCount(file, p + "context_length", 1 << 24));
  STRATA_ASSIGN_OR_RETURN(c.n_embd, ReadCount(file, p + "embedding_length", kMaxWidth));
  STRATA_ASSIGN_OR_RETURN(c.n_layers, ReadCount(file, p + "block_count", 4096));
  STRATA_ASSIGN_OR_RETURN(c.n_ff, ReadCount(file, p + "feed_forward_length", kMaxWidth));
  STRATA_ASSIGN_OR_RETURN(c.n_heads, ReadCount(file, p + "attention.head_count", 4096));
  STRATA_ASSIGN_OR_RETURN(c.n_kv_heads,
                          ReadCountOr(file, p + "attention.head_count_kv", 4096, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgumentError("attention.head_count (" + std::to_string(c.n_heads) +
                                ") must be a multiple of attention.head_count_kv (" +
                                std::to_string(c.n_kv_heads) + ")");
  }
  // Without key_length a head is n_embd / n_heads wide, which must then be a whole (and so
  // non-zero) number rather than a silent truncation.
  if (file.Find(p + "attention.key_length") == nullptr && c.n_embd % c.n_heads != 0) {
    return InvalidArgumentError(p + "embedding_length (" + std::to_string(c.n_embd) +
                                ") must be a multiple of " + p + "attention.head_count (" +
                                std::to_string(c.n_heads) + ") when " + p +
                                "attention.key_length is absent");
  }
  STRATA_ASSIGN_OR_RETURN(
      c.head_dim_k, ReadCountOr(file, p + "attention.key_length", 4096, c.n_embd / c.n_heads));
  STRATA_ASSIGN_OR_RETURN(c.head_dim_v,
                          ReadCountOr(file, p + "attention.value_length", 4096, c.head_dim_k));
  STRATA_ASSIGN_OR_RETURN(c.rope_dim,
                          ReadCountOr(file, p + "rope.dimension_count", 4096, c.head_dim_k));
  if (c.rope_dim > c.head_dim_k || c.rope_dim % 2 != 0) {
    return InvalidArgumentError("rope.dimension_count must be even and at most key_length");
  }
  {
    auto eps = file.GetFloat(p + "attention.layer_norm_rms_epsilon");
    if (!eps.ok()) return eps.status();
    if (!(*eps > 0 && *eps < 1)) {
      return InvalidArgumentError("attention.layer_norm_rms_epsilon must be in (0, 1)");
    }
    c.rms_eps = static_cast<float>(*eps);
  }
  STRATA_ASSIGN_OR_RETURN(c.rope_base, ReadPositiveFloatOr(file, p + "rope.freq_base", 10000.0f));
  float scaling = 0;
  if (file.Find(p + "rope.scaling.factor") != nullptr) {
    STRATA_ASSIGN_OR_RETURN(scaling, ReadPositiveFloatOr(file, p + "rope.scaling.factor", 1.0f));
  } else if (file.Find(p + "rope.scale_linear") != nullptr) {
    STRATA_ASSIGN_OR_RETURN(scaling, ReadPositiveFloatOr(file, p + "rope.scale_linear", 1.0f));
  }
  if (auto* type = file.Find(p + "rope.scaling.type"); type != nullptr) {
    auto name = file.GetString(p + "rope.scaling.type");
    if (!name.ok()) return name.status();
    if (*name != "linear" && *name != "none") {
      return UnimplementedError("rope.scaling.type '" + std::string(*name) +
                                "' is not supported (linear, none)");
    }
    if (*name == "none") scaling = 0;
  }
  c.rope_freq_scale = scaling == 0 ? 1.0f : 1.0f / scaling;
  c.rope_base_swa = c.rope_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
  c.layer_is_sliding.assign(c.n_layers, false);

  if (c.arch == Architecture::kGemma3) {
    c.rope_style = RopeStyle::kNeox;
    c.activation = FfnActivation::kGeluTanh;
    c.has_qk_norm = true;
    c.has_post_norms = true;
    c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
    // Gemma 3's local layers use base 10k unless the file says otherwise; the scale of the
    // global layers (long-context variants) does not apply to them.
    STRATA_ASSIGN_OR_RETURN(c.rope_base_swa,
                            ReadPositiveFloatOr(file, p + "rope.freq_base_swa", 10000.0f));
    c.rope_freq_scale_swa = 1.0f;
    // The scale is 1/sqrt(query_pre_attn_scalar), which GGUF converters do not store. It is
    // head_dim for every Gemma 3 size but the 27B one (62 layers), where it is n_embd / n_head
    // (168, against a head_dim of 128); llama.cpp special-cases that size the same way. A file
    // that states attention.scale wins.
    if (c.n_layers == 62 && c.n_embd % c.n_heads == 0) {
      c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_heads));
    }
    if (file.Find(p + "attention.scale") != nullptr) {
      STRATA_ASSIGN_OR_RETURN(c.attention_scale,
                              ReadPositiveFloatOr(file, p + "attention.scale", 1.0f));
    }
    if (file.Find(p + "final_logit_softcapping") != nullptr) {
      STRATA_ASSIGN_OR_RETURN(c.final_logit_softcap,
                              ReadPositiveFloatOr(file, p + "final_logit_softcapping", 1.0f));
    }
    int64_t window = 0;
    STRATA_ASSIGN_OR_RETURN(window,
                            ReadCountOr(file, p + "attention.sliding_window", int64_t{1} << 24, 0));
    if (window > 0) {
      c.sliding_window = static_cast<int32_t>(window);
      // Five local layers then one global, unless the file gives another period.
      const std::string pattern_key = p + "attention.sliding_window_pattern";
      const GgufValue* pattern = file.Find(pattern_key);
      if (pattern != nullptr && pattern->is_array()) {
        // One flag per layer: true where the layer uses the sliding window.
        if (pattern->array_type() != GgufValueType::kBool ||
            pattern->array_size() != static_cast<uint64_t>(c.n_layers)) {
          return InvalidArgumentError("metadata key '" + pattern_key +
                                      "' must be an array of block_count bools");
        }
        for (int64_t il = 0; il < c.n_layers; ++il) {
          c.layer_is_sliding[il] = pattern->ArrayInt(il) != 0;
        }
      } else {
        int64_t period = 6;
        STRATA_ASSIGN_OR_RETURN(period, ReadCountOr(file, pattern_key, 4096, 6));
        for (int64_t il = 0; il < c.n_layers; ++il) {
          c.layer_is_sliding[il] = il % period < period - 1;
        }
      }
    }
  } else {
    c.rope_style = c.arch == Architecture::kQwen2 ? RopeStyle::kNeox : RopeStyle::kNorm;
    c.activation = FfnActivation::kSilu;
    c.has_qkv_bias = c.arch == Architecture::kQwen2;
  }
  return c;
}

}  // namespace strata::model
