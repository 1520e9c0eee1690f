#include "strata/model/synthetic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "strata/model/dequantize.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"
#include "strata/model/model_weights.h"

namespace strata::model {
namespace {

SyntheticModelSpec TinySpec(SyntheticFtype ftype) {
  SyntheticModelSpec s;
  s.name = "tiny";
  s.n_embd = 256;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.n_ff = 512;
  s.vocab_size = 300;
  s.context_length = 128;
  s.ftype = ftype;
  s.seed = 7;
  return s;
}

std::string Write(const SyntheticModelSpec& spec, const std::string& name, int threads) {
  const std::string path = ::testing::TempDir() + name;
  Status s = WriteSyntheticModel(spec, path, threads);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class SyntheticModelByType : public ::testing::TestWithParam<SyntheticFtype> {};

TEST_P(SyntheticModelByType, LoadsAsALlamaWithMatricesOfTheRequestedSpread) {
  const SyntheticModelSpec spec = TinySpec(GetParam());
  const std::string path =
      Write(spec, "synthetic_" + std::string(SyntheticFtypeName(GetParam())) + ".gguf", 2);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->tensors().size(), 3u + 9u * 2u);
  uint64_t data_bytes = 0;
  for (const GgufTensorInfo& t : file->tensors()) data_bytes += t.num_bytes;
  EXPECT_EQ(data_bytes, SyntheticModelDataBytes(spec));

  auto config = ModelConfig::FromGguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->arch, Architecture::kLlama);
  EXPECT_EQ(config->n_embd, 256);
  EXPECT_EQ(config->n_layers, 2);
  EXPECT_EQ(config->n_heads, 4);
  EXPECT_EQ(config->n_kv_heads, 2);
  EXPECT_EQ(config->head_dim_k, 64);
  EXPECT_EQ(config->n_ff, 512);
  EXPECT_EQ(config->context_length, 128);
  auto weights = ModelWeights::FromGguf(*file, &*config);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_EQ(config->vocab_size, 300);
  EXPECT_FALSE(weights->tied_output);

  // Every matrix is finite with a standard deviation near 1/sqrt(cols).
  for (const MatrixView* m : {&weights->layers[1].wq, &weights->layers[1].down, &weights->output}) {
    std::vector<float> values(static_cast<size_t>(m->rows * m->cols));
    ASSERT_TRUE(Dequantize(m->type, {m->data, m->bytes}, values.size(), values.data()).ok());
    double sum = 0, sum_sq = 0;
    for (float v : values) {
      ASSERT_TRUE(std::isfinite(v)) << m->name;
      sum += v;
      sum_sq += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(values.size());
    const double mean = sum / n;
    const double stddev = std::sqrt(sum_sq / n - mean * mean);
    const double want = 1.0 / std::sqrt(static_cast<double>(m->cols));
    EXPECT_NEAR(stddev / want, 1.0, 0.3) << m->name;
    EXPECT_LT(std::abs(mean), 0.1 * want) << m->name;
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SyntheticModelByType,
                         ::testing::Values(SyntheticFtype::kF16, SyntheticFtype::kBF16,
                                           SyntheticFtype::kQ4_K),
                         [](const auto& info) {
                           return std::string(SyntheticFtypeName(info.param));
                         });

TEST(SyntheticModel, BytesDependOnTheSeedButNotOnTheThreadCount) {
  SyntheticModelSpec spec = TinySpec(SyntheticFtype::kQ4_K);
  const std::vector<char> one = ReadAll(Write(spec, "synthetic_t1.gguf", 1));
  const std::vector<char> three = ReadAll(Write(spec, "synthetic_t3.gguf", 3));
  spec.seed = 8;
  const std::vector<char> other = ReadAll(Write(spec, "synthetic_s8.gguf", 3));
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one, three);
  ASSERT_EQ(one.size(), other.size());
  EXPECT_NE(one, other);
}

TEST(SyntheticModel, TiedEmbeddingsAndLlama3RopeFactorsLoad) {
  SyntheticModelSpec spec = TinySpec(SyntheticFtype::kF16);
  spec.tied_embeddings = true;
  spec.llama3_rope_factor = 32.0f;
  spec.rope_base = 500000.0f;
  const std::string path = Write(spec, "synthetic_tied.gguf", 2);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->FindTensor("output.weight"), nullptr);
  auto config = ModelConfig::FromGguf(*file);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FLOAT_EQ(config->rope_base, 500000.0f);
  auto weights = ModelWeights::FromGguf(*file, &*config);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_TRUE(weights->tied_output);
  // High frequencies are left alone, the lowest divided by the full factor.
  ASSERT_EQ(weights->rope_freqs.size(), 32u);
  EXPECT_FLOAT_EQ(weights->rope_freqs.front(), 1.0f);
  EXPECT_FLOAT_EQ(weights->rope_freqs.back(), 32.0f);
  std::remove(path.c_str());
}

TEST(SyntheticModel, PresetsHaveTheRealModelsShapes) {
  auto big = SyntheticModelPreset("llama3-8b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->n_embd, 4096);
  EXPECT_EQ(big->n_layers, 32);
  EXPECT_EQ(big->n_kv_heads, 8);
  EXPECT_EQ(big->n_ff, 14336);
  EXPECT_EQ(big->vocab_size, 128256);
  EXPECT_TRUE(ValidateSyntheticModelSpec(*big).ok());
  // 8.03 B parameters: about 16 GB in F16; 5.1 GB in Q4_K with every ffn_down in Q6_K (llama.cpp's
  // Q4_K_M, which keeps half of them in Q4_K, is 4.9 GB).
  big->ftype = SyntheticFtype::kF16;
  EXPECT_NEAR(static_cast<double>(SyntheticModelDataBytes(*big)) / 1e9, 16.06, 0.05);
  big->ftype = SyntheticFtype::kQ4_K;
  const double q4 = static_cast<double>(SyntheticModelDataBytes(*big)) / 1e9;
  EXPECT_GT(q4, 4.5);
  EXPECT_LT(q4, 5.2);

  auto small = SyntheticModelPreset("llama3.2-1b");
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->tied_embeddings);
  EXPECT_EQ(small->head_dim, 64);
  EXPECT_TRUE(ValidateSyntheticModelSpec(*small).ok());

  auto unknown = SyntheticModelPreset("llama2-7b");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("llama3-8b"), std::string::npos);
}

TEST(SyntheticModel, InvalidSpecsNameTheFieldAtFault) {
  struct Case {
    void (*edit)(SyntheticModelSpec*);
    std::string needle;
  };
  const Case cases[] = {
      {[](SyntheticModelSpec* s) { s->n_embd = 0; }, "n_embd"},
      {[](SyntheticModelSpec* s) { s->n_kv_heads = 3; }, "multiple of n_kv_heads"},
      {[](SyntheticModelSpec* s) { s->head_dim = 63; }, "head_dim must be even"},
      {[](SyntheticModelSpec* s) { s->vocab_size = 100; }, "vocab_size"},
      {[](SyntheticModelSpec* s) { s->n_ff = 300; }, "n_ff (300) must be a multiple of 256"},
      {[](SyntheticModelSpec* s) { s->rms_eps = 0; }, "rms_eps"},
  };
  for (const Case& c : cases) {
    SyntheticModelSpec spec = TinySpec(SyntheticFtype::kQ4_K);
    c.edit(&spec);
    Status s = ValidateSyntheticModelSpec(spec);
    ASSERT_FALSE(s.ok()) << c.needle;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_FALSE(WriteSyntheticModel(spec, ::testing::TempDir() + "never.gguf", 1).ok());
  }
  // F16 rows need no 256-blocks.
  SyntheticModelSpec f16 = TinySpec(SyntheticFtype::kF16);
  f16.n_ff = 300;
  EXPECT_TRUE(ValidateSyntheticModelSpec(f16).ok());
  EXPECT_FALSE(ParseSyntheticFtype("q8_0").ok());
}

}  // namespace
}  // namespace strata::model
