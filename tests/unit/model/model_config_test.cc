#include "strata/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/gguf_builder.h"

namespace strata::model {
namespace {

using testing::GgufBuilder;

// GGUF metadata as an editable list: tests start from a real model's keys, then replace or drop
// exactly one before building the file.
class Metadata {
 public:
  explicit Metadata(std::string arch) : arch_(std::move(arch)) {
    String("general.architecture", arch_);
  }

  // "<arch>.<suffix>", the way the keys of one architecture are spelled.
  std::string Key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  Metadata& U32(const std::string& key, uint32_t v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) { b.AddU32(k, v); });
  }
  Metadata& I32(const std::string& key, int32_t v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) { b.AddI32(k, v); });
  }
  Metadata& U64(const std::string& key, uint64_t v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) { b.AddU64(k, v); });
  }
  Metadata& F32(const std::string& key, float v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) { b.AddF32(k, v); });
  }
  Metadata& F64(const std::string& key, double v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) {
      GgufBuilder::Bytes value;
      GgufBuilder::Put<double>(&value, v);
      b.AddRawValue(k, GgufBuilder::kF64, value);
    });
  }
  Metadata& String(const std::string& key, const std::string& v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) { b.AddString(k, v); });
  }
  Metadata& BoolArray(const std::string& key, const std::vector<bool>& v) {
    std::vector<uint8_t> bytes(v.begin(), v.end());
    return Put(key, [bytes](GgufBuilder& b, std::string_view k) {
      b.AddArray<uint8_t>(k, GgufBuilder::kBool, bytes);
    });
  }
  Metadata& U32Array(const std::string& key, const std::vector<uint32_t>& v) {
    return Put(key, [v](GgufBuilder& b, std::string_view k) {
      b.AddArray<uint32_t>(k, GgufBuilder::kU32, v);
    });
  }
  Metadata& Remove(const std::string& key) {
    std::erase_if(entries_, [&](const Entry& e) { return e.first == key; });
    return *this;
  }

  StatusOr<ModelConfig> Load() const {
    GgufBuilder builder;
    for (const Entry& e : entries_) e.second(builder, e.first);
    const std::vector<uint8_t> bytes = builder.Build();
    StatusOr<GgufFile> file = GgufFile::Parse(MappedFile::FromBytes(bytes));
    if (!file.ok()) return file.status();
    return ModelConfig::FromGguf(*file);
  }

 private:
  using Writer = std::function<void(GgufBuilder&, std::string_view)>;
  using Entry = std::pair<std::string, Writer>;

  Metadata& Put(const std::string& key, Writer writer) {
    for (Entry& e : entries_) {
      if (e.first == key) {
        e.second = std::move(writer);
        return *this;
      }
    }
    entries_.emplace_back(key, std::move(writer));
    return *this;
  }

  std::string arch_;
  std::vector<Entry> entries_;
};

// The keys of gemma-3-270m's GGUF, as llama.cpp's converter writes them.
Metadata Gemma3_270m() {
  Metadata m("gemma3");
  m.U32(m.Key("context_length"), 32768)
      .U32(m.Key("embedding_length"), 640)
      .U32(m.Key("block_count"), 18)
      .U32(m.Key("feed_forward_length"), 2048)
      .U32(m.Key("attention.head_count"), 4)
      .F32(m.Key("attention.layer_norm_rms_epsilon"), 1e-6f)
      .U32(m.Key("attention.key_length"), 256)
      .U32(m.Key("attention.value_length"), 256)
      .F32(m.Key("rope.freq_base"), 1000000.0f)
      .U32(m.Key("attention.sliding_window"), 512)
      .U32(m.Key("attention.head_count_kv"), 1);
  return m;
}

// Llama 2 7B: no head_count_kv, key_length or rope keys (all defaults).
Metadata Llama2_7b() {
  Metadata m("llama");
  m.U32(m.Key("context_length"), 4096)
      .U32(m.Key("embedding_length"), 4096)
      .U32(m.Key("block_count"), 32)
      .U32(m.Key("feed_forward_length"), 11008)
      .U32(m.Key("attention.head_count"), 32)
      .F32(m.Key("attention.layer_norm_rms_epsilon"), 1e-5f);
  return m;
}

// Llama 3.1 8B: grouped-query attention, base 500000. Its "llama3" RoPE scaling lives in the
// rope_freqs.weight tensor (per-frequency factors), not in the metadata.
Metadata Llama31_8b() {
  Metadata m("llama");
  m.U32(m.Key("context_length"), 131072)
      .U32(m.Key("embedding_length"), 4096)
      .U32(m.Key("block_count"), 32)
      .U32(m.Key("feed_forward_length"), 14336)
      .U32(m.Key("attention.head_count"), 32)
      .U32(m.Key("attention.head_count_kv"), 8)
      .F32(m.Key("rope.freq_base"), 500000.0f)
      .F32(m.Key("attention.layer_norm_rms_epsilon"), 1e-5f)
      .U32(m.Key("rope.dimension_count"), 128);
  return m;
}

// Qwen2.5 0.5B.
Metadata Qwen25_05b() {
  Metadata m("qwen2");
  m.U32(m.Key("context_length"), 32768)
      .U32(m.Key("embedding_length"), 896)
      .U32(m.Key("block_count"), 24)
      .U32(m.Key("feed_forward_length"), 4864)
      .U32(m.Key("attention.head_count"), 14)
      .U32(m.Key("attention.head_count_kv"), 2)
      .F32(m.Key("rope.freq_base"), 1000000.0f)
      .F32(m.Key("attention.layer_norm_rms_epsilon"), 1e-6f);
  return m;
}

ModelConfig LoadOk(const Metadata& m) {
  StatusOr<ModelConfig> c = m.Load();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig{};
}

void ExpectError(const Metadata& m, StatusCode code, const std::string& needle) {
  StatusOr<ModelConfig> c = m.Load();
  ASSERT_FALSE(c.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(c.status().code(), code) << c.status().ToString();
  EXPECT_NE(c.status().message().find(needle), std::string::npos)
      << "message '" << c.status().message() << "' lacks '" << needle << "'";
}

// ---- Valid configurations -------------------------------------------------------------------

TEST(ModelConfig, ReadsGemma3_270m) {
  const ModelConfig c = LoadOk(Gemma3_270m());
  EXPECT_EQ(c.arch, Architecture::kGemma3);
  EXPECT_EQ(c.arch_name, "gemma3");
  EXPECT_EQ(ArchitectureName(c.arch), "gemma3");
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_EQ(c.n_embd, 640);
  EXPECT_EQ(c.n_layers, 18);
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 1);
  // key_length (256) is not n_embd / n_heads (160): the explicit key wins.
  EXPECT_EQ(c.head_dim_k, 256);
  EXPECT_EQ(c.head_dim_v, 256);
  EXPECT_EQ(c.rope_dim, 256);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.vocab_size, 0);  // set from token_embd by ModelWeights

  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.activation, FfnActivation::kGeluTanh);
  EXPECT_TRUE(c.has_qk_norm);
  EXPECT_TRUE(c.has_post_norms);
  EXPECT_FALSE(c.has_qkv_bias);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(640.0f));
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  // query_pre_attn_scalar = head_dim = 256 for this size: scores are scaled by 1/16.
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);

  // Global layers use the file's base; local (sliding) layers Gemma 3's 10k.
  EXPECT_EQ(c.rope_base, 1000000.0f);
  EXPECT_EQ(c.rope_base_swa, 10000.0f);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_EQ(c.rope_freq_scale_swa, 1.0f);

  // Five local layers, then one global: layers 5, 11 and 17 are global.
  EXPECT_EQ(c.sliding_window, 512);
  ASSERT_EQ(c.layer_is_sliding.size(), 18u);
  for (int64_t il = 0; il < 18; ++il) {
    const bool global = il % 6 == 5;
    EXPECT_EQ(c.layer_is_sliding[il], !global) << "layer " << il;
    EXPECT_EQ(c.SlidingWindow(il), global ? 0 : 512) << "layer " << il;
    EXPECT_EQ(c.RopeBase(il), global ? 1000000.0f : 10000.0f) << "layer " << il;
    EXPECT_EQ(c.RopeFreqScale(il), 1.0f) << "layer " << il;
  }
}

TEST(ModelConfig, Gemma3HonoursExplicitScaleLocalBaseSoftcapAndPeriod) {
  Metadata m = Gemma3_270m();
  m.F32(m.Key("attention.scale"), 1.0f / std::sqrt(168.0f))  // 27B: query_pre_attn_scalar 168
      .F32(m.Key("rope.freq_base_swa"), 20000.0f)
      .F32(m.Key("final_logit_softcapping"), 30.0f)
      .U32(m.Key("attention.sliding_window_pattern"), 4)
      .F32(m.Key("rope.scaling.factor"), 8.0f);
  const ModelConfig c = LoadOk(m);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(168.0f));
  EXPECT_EQ(c.final_logit_softcap, 30.0f);
  EXPECT_EQ(c.rope_base_swa, 20000.0f);
  // Linear scaling applies to the global layers only.
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.125f);
  EXPECT_EQ(c.rope_freq_scale_swa, 1.0f);
  for (int64_t il = 0; il < 18; ++il) {
    const bool global = il % 4 == 3;
    EXPECT_EQ(c.layer_is_sliding[il], !global) << "layer " << il;
    EXPECT_EQ(c.RopeBase(il), global ? 1000000.0f : 20000.0f) << "layer " << il;
    EXPECT_FLOAT_EQ(c.RopeFreqScale(il), global ? 0.125f : 1.0f) << "layer " << il;
  }
}

// Gemma 3 27B's query_pre_attn_scalar (168 = n_embd / n_head) is not its head width (128) and
// is not in the file; like llama.cpp we recognise that size by its 62 layers.
TEST(ModelConfig, Gemma3_27bScalesAttentionByEmbeddingPerHead) {
  Metadata m = Gemma3_270m();
  m.U32(m.Key("embedding_length"), 5376)
      .U32(m.Key("block_count"), 62)
      .U32(m.Key("attention.head_count"), 32)
      .U32(m.Key("attention.head_count_kv"), 16)
      .U32(m.Key("attention.key_length"), 128)
      .U32(m.Key("attention.value_length"), 128);
  EXPECT_FLOAT_EQ(LoadOk(m).attention_scale, 1.0f / std::sqrt(168.0f));
  // Other sizes use the head width (query_pre_attn_scalar == head_dim for 270M..12B).
  EXPECT_FLOAT_EQ(LoadOk(Gemma3_270m()).attention_scale, 1.0f / 16.0f);
}

TEST(ModelConfig, Gemma3ReadsAPerLayerSlidingPattern) {
  Metadata m = Gemma3_270m();
  std::vector<bool> pattern(18, false);
  pattern[0] = pattern[3] = pattern[4] = pattern[17] = true;
  m.BoolArray(m.Key("attention.sliding_window_pattern"), pattern);
  const ModelConfig c = LoadOk(m);
  ASSERT_EQ(c.layer_is_sliding.size(), 18u);
  for (int64_t il = 0; il < 18; ++il) {
    EXPECT_EQ(c.layer_is_sliding[il], pattern[il]) << "layer " << il;
    EXPECT_EQ(c.SlidingWindow(il), pattern[il] ? 512 : 0) << "layer " << il;
  }
}

TEST(ModelConfig, Gemma3WithoutSlidingWindowIsGlobalEverywhere) {
  Metadata m = Gemma3_270m();
  m.Remove(m.Key("attention.sliding_window"));
  const ModelConfig c = LoadOk(m);
  EXPECT_EQ(c.sliding_window, 0);
  for (int64_t il = 0; il < c.n_layers; ++il) {
    EXPECT_FALSE(c.layer_is_sliding[il]) << il;
    EXPECT_EQ(c.SlidingWindow(il), 0) << il;
    EXPECT_EQ(c.RopeBase(il), 1000000.0f) << il;
  }
}

TEST(ModelConfig, ReadsLlama2WithDefaults) {
  const ModelConfig c = LoadOk(Llama2_7b());
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 32);   // no head_count_kv: multi-head attention
  EXPECT_EQ(c.head_dim_k, 128);  // n_embd / n_heads
  EXPECT_EQ(c.head_dim_v, 128);
  EXPECT_EQ(c.rope_dim, 128);
  EXPECT_EQ(c.n_ff, 11008);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::kNorm);
  EXPECT_EQ(c.activation, FfnActivation::kSilu);
  EXPECT_EQ(c.rope_base, 10000.0f);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(c.embedding_scale, 1.0f);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_FALSE(c.has_qk_norm);
  EXPECT_FALSE(c.has_post_norms);
  EXPECT_FALSE(c.has_qkv_bias);
  EXPECT_EQ(c.sliding_window, 0);
  ASSERT_EQ(c.layer_is_sliding.size(), 32u);
  for (int64_t il = 0; il < 32; ++il) {
    EXPECT_FALSE(c.layer_is_sliding[il]) << il;
    EXPECT_EQ(c.RopeBase(il), 10000.0f) << il;
  }
}

TEST(ModelConfig, ReadsLlama31WithGroupedQueryAttention) {
  const ModelConfig c = LoadOk(Llama31_8b());
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim_k, 128);
  EXPECT_EQ(c.rope_dim, 128);
  EXPECT_EQ(c.rope_base, 500000.0f);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);  // llama3 scaling is per-frequency, in rope_freqs.weight
  EXPECT_EQ(c.rope_style, RopeStyle::kNorm);
}

TEST(ModelConfig, ReadsQwen2WithNeoxRope) {
  const ModelConfig c = LoadOk(Qwen25_05b());
  EXPECT_EQ(c.arch, Architecture::kQwen2);
  EXPECT_EQ(c.arch_name, "qwen2");
  EXPECT_EQ(c.n_embd, 896);
  EXPECT_EQ(c.n_heads, 14);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim_k, 64);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.rope_base, 1000000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.activation, FfnActivation::kSilu);
  EXPECT_FALSE(c.has_qk_norm);
  EXPECT_TRUE(c.has_qkv_bias);
  EXPECT_EQ(c.embedding_scale, 1.0f);
}

TEST(ModelConfig, LinearRopeScalingDividesTheFrequencies) {
  {
    Metadata m = Llama2_7b();
    m.String(m.Key("rope.scaling.type"), "linear").F32(m.Key("rope.scaling.factor"), 4.0f);
    EXPECT_FLOAT_EQ(LoadOk(m).rope_freq_scale, 0.25f);
  }
  {
    Metadata m = Llama2_7b();  // the older key
    m.F32(m.Key("rope.scale_linear"), 2.0f);
    EXPECT_FLOAT_EQ(LoadOk(m).rope_freq_scale, 0.5f);
  }
  {
    Metadata m = Llama2_7b();  // scaling.factor wins over scale_linear
    m.F32(m.Key("rope.scaling.factor"), 8.0f).F32(m.Key("rope.scale_linear"), 2.0f);
    EXPECT_FLOAT_EQ(LoadOk(m).rope_freq_scale, 0.125f);
  }
  {
    Metadata m = Llama2_7b();  // type "none" turns a stray factor off
    m.String(m.Key("rope.scaling.type"), "none").F32(m.Key("rope.scaling.factor"), 4.0f);
    EXPECT_EQ(LoadOk(m).rope_freq_scale, 1.0f);
  }
}

TEST(ModelConfig, AcceptsPartialRotaryAndSeparateValueWidth) {
  Metadata m = Llama2_7b();
  m.U32(m.Key("rope.dimension_count"), 64).U32(m.Key("attention.value_length"), 96);
  const ModelConfig c = LoadOk(m);
  EXPECT_EQ(c.head_dim_k, 128);
  EXPECT_EQ(c.head_dim_v, 96);
  EXPECT_EQ(c.rope_dim, 64);
}

TEST(ModelConfig, AcceptsAnyIntegerWidthAndFloat64) {
  Metadata m = Llama2_7b();
  m.U64(m.Key("block_count"), 32)
      .I32(m.Key("attention.head_count"), 32)
      .F64(m.Key("attention.layer_norm_rms_epsilon"), 1e-5);
  const ModelConfig c = LoadOk(m);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
}

// ---- Errors ---------------------------------------------------------------------------------

TEST(ModelConfig, MissingArchitectureIsNotFound) {
  Metadata m = Llama2_7b();
  m.Remove("general.architecture");
  ExpectError(m, StatusCode::kNotFound, "general.architecture");
}

TEST(ModelConfig, UnsupportedArchitectureIsUnimplemented) {
  Metadata m("mamba");
  m.U32("mamba.context_length", 2048);
  ExpectError(m, StatusCode::kUnimplemented, "'mamba'");
}

TEST(ModelConfig, ArchitectureOfTheWrongTypeIsInvalid) {
  Metadata m = Llama2_7b();
  m.U32("general.architecture", 1);
  ExpectError(m, StatusCode::kInvalidArgument, "general.architecture");
}

class RequiredKeyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RequiredKeyTest, MissingKeyIsNotFoundAndNamed) {
  for (Metadata m : {Llama2_7b(), Gemma3_270m(), Qwen25_05b()}) {
    const std::string key = m.Key(GetParam());
    m.Remove(key);
    ExpectError(m, StatusCode::kNotFound, key);
  }
}

INSTANTIATE_TEST_SUITE_P(Keys, RequiredKeyTest,
                         ::testing::Values("context_length", "embedding_length", "block_count",
                                           "feed_forward_length", "attention.head_count",
                                           "attention.layer_norm_rms_epsilon"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (ch == '.') ch = '_';
                           }
                           return name;
                         });

// Every count the config reads, with its upper bound: 0, a negative value, one past the bound
// and a string are each rejected with a message naming the key.
struct CountKey {
  const char* suffix;
  uint64_t too_large;
};

class CountKeyTest : public ::testing::TestWithParam<CountKey> {};

TEST_P(CountKeyTest, RejectsZeroNegativeAbsurdAndWrongType) {
  const CountKey& k = GetParam();
  auto check = [&](const std::function<void(Metadata&, const std::string&)>& edit,
                   const char* what) {
    SCOPED_TRACE(std::string(k.suffix) + " " + what);
    Metadata m = Llama2_7b();
    const std::string key = m.Key(k.suffix);
    edit(m, key);
    ExpectError(m, StatusCode::kInvalidArgument, key);
  };
  check([](Metadata& m, const std::string& key) { m.U32(key, 0); }, "zero");
  check([](Metadata& m, const std::string& key) { m.I32(key, -8); }, "negative");
  check([&](Metadata& m, const std::string& key) { m.U64(key, k.too_large); }, "too large");
  check([](Metadata& m, const std::string& key) { m.U64(key, ~uint64_t{0}); }, "2^64 - 1");
  check([](Metadata& m, const std::string& key) { m.String(key, "4096"); }, "string");
  check([](Metadata& m, const std::string& key) { m.F32(key, 4096.0f); }, "float");
}

INSTANTIATE_TEST_SUITE_P(Keys, CountKeyTest,
                         ::testing::Values(CountKey{"context_length", (uint64_t{1} << 24) + 1},
                                           CountKey{"embedding_length", (uint64_t{1} << 20) + 1},
                                           CountKey{"block_count", 4097},
                                           CountKey{"feed_forward_length", (1u << 20) + 1},
                                           CountKey{"attention.head_count", 4097},
                                           CountKey{"attention.head_count_kv", 4097},
                                           CountKey{"attention.key_length", 4097},
                                           CountKey{"attention.value_length", 4097},
                                           CountKey{"rope.dimension_count", 4097}),
                         [](const ::testing::TestParamInfo<CountKey>& info) {
                           std::string name = info.param.suffix;
                           for (char& ch : name) {
                             if (ch == '.') ch = '_';
                           }
                           return name;
                         });

TEST(ModelConfig, KvHeadsMustDivideHeads) {
  {
    Metadata m = Llama31_8b();
    m.U32(m.Key("attention.head_count_kv"), 5);  // 32 % 5 != 0
    ExpectError(m, StatusCode::kInvalidArgument, "head_count_kv");
  }
  {
    Metadata m = Llama31_8b();
    m.U32(m.Key("attention.head_count_kv"), 64);  // more KV heads than query heads
    ExpectError(m, StatusCode::kInvalidArgument, "head_count_kv");
  }
}

// Without key_length the head width is n_embd / n_heads, which must then be a whole, non-zero
// number: 4096 / 24 would silently truncate, and n_heads > n_embd would give head_dim 0 (an
// attention scale of 1/sqrt(0)).
TEST(ModelConfig, EmbeddingMustSplitEvenlyIntoHeadsWithoutKeyLength) {
  {
    Metadata m = Llama2_7b();
    m.U32(m.Key("attention.head_count"), 24).U32(m.Key("attention.head_count_kv"), 8);
    ExpectError(m, StatusCode::kInvalidArgument, "attention.head_count");
  }
  {
    Metadata m = Llama2_7b();
    m.U32(m.Key("embedding_length"), 16).U32(m.Key("attention.head_count"), 32);
    ExpectError(m, StatusCode::kInvalidArgument, "attention.head_count");
  }
  {
    // With an explicit key_length the product need not equal n_embd (gemma3 does this).
    Metadata m = Llama2_7b();
    m.U32(m.Key("attention.head_count"), 24)
        .U32(m.Key("attention.head_count_kv"), 8)
        .U32(m.Key("attention.key_length"), 128);
    EXPECT_EQ(LoadOk(m).head_dim_k, 128);
  }
}

TEST(ModelConfig, RopeDimensionMustBeEvenAndFitTheHead) {
  {
    Metadata m = Llama2_7b();
    m.U32(m.Key("rope.dimension_count"), 63);
    ExpectError(m, StatusCode::kInvalidArgument, "rope.dimension_count");
  }
  {
    Metadata m = Llama2_7b();
    m.U32(m.Key("rope.dimension_count"), 256);  // head_dim is 128
    ExpectError(m, StatusCode::kInvalidArgument, "rope.dimension_count");
  }
}

TEST(ModelConfig, RmsEpsilonMustBeInTheOpenUnitInterval) {
  const float bad[] = {0.0f,
                       -1e-6f,
                       1.0f,
                       2.0f,
                       std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity()};
  for (float eps : bad) {
    SCOPED_TRACE(eps);
    Metadata m = Llama2_7b();
    m.F32(m.Key("attention.layer_norm_rms_epsilon"), eps);
    ExpectError(m, StatusCode::kInvalidArgument, "attention.layer_norm_rms_epsilon");
  }
  Metadata m = Llama2_7b();
  m.String(m.Key("attention.layer_norm_rms_epsilon"), "1e-5");
  ExpectError(m, StatusCode::kInvalidArgument, "attention.layer_norm_rms_epsilon");
}

// Optional positive floats: zero, negative, NaN, infinity, a float64 that overflows fp32 and
// one that underflows to 0 are all rejected, naming the key.
TEST(ModelConfig, RopeAndScaleFloatsMustBePositiveAndFinite) {
  const char* keys[] = {"rope.freq_base",     "rope.scaling.factor", "rope.scale_linear",
                        "rope.freq_base_swa", "attention.scale",     "final_logit_softcapping"};
  for (const char* suffix : keys) {
    for (double v : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity(), 1e300, 1e-300}) {
      SCOPED_TRACE(std::string(suffix) + " = " + std::to_string(v));
      Metadata m = Gemma3_270m();
      m.F64(m.Key(suffix), v);
      ExpectError(m, StatusCode::kInvalidArgument, m.Key(suffix));
    }
  }
}

TEST(ModelConfig, UnknownRopeScalingTypeIsUnimplemented) {
  Metadata m = Llama31_8b();
  m.String(m.Key("rope.scaling.type"), "yarn").F32(m.Key("rope.scaling.factor"), 4.0f);
  ExpectError(m, StatusCode::kUnimplemented, "'yarn'");
  Metadata wrong_type = Llama31_8b();
  wrong_type.U32(wrong_type.Key("rope.scaling.type"), 1);
  ExpectError(wrong_type, StatusCode::kInvalidArgument, "rope.scaling.type");
}

TEST(ModelConfig, Gemma3SlidingPatternMustFitTheLayers) {
  {
    Metadata m = Gemma3_270m();  // one flag short
    m.BoolArray(m.Key("attention.sliding_window_pattern"), std::vector<bool>(17, true));
    ExpectError(m, StatusCode::kInvalidArgument, m.Key("attention.sliding_window_pattern"));
  }
  {
    Metadata m = Gemma3_270m();  // integers, not bools
    m.U32Array(m.Key("attention.sliding_window_pattern"), std::vector<uint32_t>(18, 1));
    ExpectError(m, StatusCode::kInvalidArgument, m.Key("attention.sliding_window_pattern"));
  }
  {
    Metadata m = Gemma3_270m();  // period 0
    m.U32(m.Key("attention.sliding_window_pattern"), 0);
    ExpectError(m, StatusCode::kInvalidArgument, m.Key("attention.sliding_window_pattern"));
  }
  {
    Metadata m = Gemma3_270m();
    m.I32(m.Key("attention.sliding_window"), -512);
    ExpectError(m, StatusCode::kInvalidArgument, m.Key("attention.sliding_window"));
  }
}

}  // namespace
}  // namespace strata::model
