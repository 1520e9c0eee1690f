#include "strata/embedding/sentence_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tiny_bert.h"

namespace strata::embedding {
namespace {

using testing::TinyBert;
using testing::TinyBertSpec;

const std::vector<std::string> kTexts = {
    "the cat sat on the mat",
    "a big red car is fast!",
    "",
    "dogs ran and played",  // "dog ##s", "play ##ed"
    "green tree, blue house. unknown words",
    "the",
};

std::unique_ptr<SentenceEncoder> LoadOrDie(const std::string& dir,
                                           const SentenceEncoderOptions& options = {}) {
  auto encoder = SentenceEncoder::Load(dir, options);
  EXPECT_TRUE(encoder.ok()) << encoder.status().ToString();
  return encoder.ok() ? std::move(encoder).value() : nullptr;
}

// Worst |ours - reference| over the texts' embeddings, with the place it happens.
void ExpectMatchesReference(SentenceEncoder& encoder, const TinyBert& model,
                            const std::vector<std::string>& texts, double tolerance) {
  auto embeddings = encoder.Encode(texts);
  ASSERT_TRUE(embeddings.ok()) << embeddings.status().ToString();
  ASSERT_EQ(embeddings->size(), texts.size());
  double worst = 0;
  size_t worst_text = 0, worst_dim = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = encoder.tokenizer().Encode(texts[i], encoder.max_tokens());
    ASSERT_TRUE(ids.ok());
    const std::vector<double> want = model.Embed(*ids);
    ASSERT_EQ((*embeddings)[i].size(), want.size());
    for (size_t d = 0; d < want.size(); ++d) {
      const double err = std::abs((*embeddings)[i][d] - want[d]);
      if (err > worst) {
        worst = err;
        worst_text = i;
        worst_dim = d;
      }
    }
  }
  EXPECT_LE(worst, tolerance) << "worst element: text " << worst_text << " ('" << texts[worst_text]
                              << "'), dimension " << worst_dim;
}

TEST(SentenceEncoder, MatchesAFloat64ReferenceOnATinyModel) {
  const TinyBert model{TinyBertSpec{}};
  auto encoder = LoadOrDie(model.Write("reference"));
  ASSERT_NE(encoder, nullptr);
  EXPECT_EQ(encoder->dimension(), 12);
  EXPECT_EQ(encoder->max_tokens(), 24);  // no sentence_bert_config.json: the model's positions
  ExpectMatchesReference(*encoder, model, kTexts, 2e-6);
}

TEST(SentenceEncoder, GivesUnitVectors) {
  const TinyBert model{TinyBertSpec{}};
  auto encoder = LoadOrDie(model.Write("unit"));
  ASSERT_NE(encoder, nullptr);
  auto embeddings = encoder->Encode(kTexts);
  ASSERT_TRUE(embeddings.ok());
  for (const std::vector<float>& e : *embeddings) {
    double norm = 0;
    for (float v : e) norm += double(v) * v;
    EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6);
  }
}

TEST(SentenceEncoder, EmbedsATextTheSameAloneAndInAnyBatch) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("batch");
  auto encoder = LoadOrDie(dir);
  ASSERT_NE(encoder, nullptr);
  auto together = encoder->Encode(kTexts);
  ASSERT_TRUE(together.ok());
  // Several forward passes of a few tokens each, and one text per call.
  SentenceEncoderOptions small;
  small.max_batch_tokens = 24;
  auto split_encoder = LoadOrDie(dir, small);
  ASSERT_NE(split_encoder, nullptr);
  auto split = split_encoder->Encode(kTexts);
  ASSERT_TRUE(split.ok());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    auto alone = encoder->Encode(std::span(&kTexts[i], 1));
    ASSERT_TRUE(alone.ok());
    for (size_t d = 0; d < (*together)[i].size(); ++d) {
      // The matrix products may pick other kernels for other token counts: fp32 rounding.
      EXPECT_NEAR((*alone)[0][d], (*together)[i][d], 1e-6) << "text " << i;
      EXPECT_NEAR((*split)[i][d], (*together)[i][d], 1e-6) << "text " << i;
    }
  }
}

TEST(SentenceEncoder, RunsOnOneThreadAndOnSeveral) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("threads");
  for (int threads : {1, 3}) {
    SentenceEncoderOptions options;
    options.num_threads = threads;
    auto encoder = LoadOrDie(dir, options);
    ASSERT_NE(encoder, nullptr);
    ExpectMatchesReference(*encoder, model, kTexts, 2e-6);
  }
}

TEST(SentenceEncoder, SerializesCallsFromSeveralThreads) {
  const TinyBert model{TinyBertSpec{}};
  SentenceEncoderOptions options;
  options.num_threads = 2;
  auto encoder = LoadOrDie(model.Write("concurrent"), options);
  ASSERT_NE(encoder, nullptr);
  auto expected = encoder->Encode(kTexts);
  ASSERT_TRUE(expected.ok());
  std::vector<std::vector<std::vector<float>>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        auto got = encoder->Encode(kTexts);
        if (got.ok()) results[t] = *got;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, *expected);
}

TEST(SentenceEncoder, ReadsF16WeightsUnderABertPrefix) {
  TinyBertSpec spec;
  spec.dtype = "F16";
  spec.prefix = "bert.";
  spec.seed = 11;
  const TinyBert model(spec);
  auto encoder = LoadOrDie(model.Write("f16"));
  ASSERT_NE(encoder, nullptr);
  ExpectMatchesReference(*encoder, model, kTexts, 2e-6);
}

TEST(SentenceEncoder, CutsLongTextsToMaxTokens) {
  const TinyBert model{TinyBertSpec{}};
  SentenceEncoderOptions options;
  options.max_tokens = 6;
  auto encoder = LoadOrDie(model.Write("cut"), options);
  ASSERT_NE(encoder, nullptr);
  const std::vector<std::string> texts = {"the cat sat on the mat and the dog ran",
                                          "the cat sat on"};
  auto embeddings = encoder->Encode(texts);
  ASSERT_TRUE(embeddings.ok());
  EXPECT_EQ(encoder->tokenizer().Encode(texts[0], 6)->size(), 6u);
  for (size_t d = 0; d < (*embeddings)[0].size(); ++d) {
    EXPECT_FLOAT_EQ((*embeddings)[0][d], (*embeddings)[1][d]);
  }
  // Past the model's positions: refused at load.
  options.max_tokens = 25;
  EXPECT_EQ(SentenceEncoder::Load(model.Write("cut"), options).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(SentenceEncoder, FollowsTheFolderSentenceTransformersFiles) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("pipeline");
  TinyBert::WriteFile(dir + "/sentence_bert_config.json",
                      R"({"max_seq_length": 8, "do_lower_case": false})");
  TinyBert::WriteFile(dir + "/modules.json",
                      R"([{"type": "sentence_transformers.models.Transformer"},
                          {"type": "sentence_transformers.models.Pooling"}])");
  std::filesystem::create_directories(dir + "/1_Pooling");
  TinyBert::WriteFile(dir + "/1_Pooling/config.json",
                      R"({"word_embedding_dimension": 12, "pooling_mode_cls_token": false,
                          "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false})");
  auto encoder = LoadOrDie(dir);
  ASSERT_NE(encoder, nullptr);
  EXPECT_EQ(encoder->max_tokens(), 8);
  EXPECT_FALSE(encoder->pipeline().normalize);
  auto embedding = encoder->Encode(std::vector<std::string>{"the cat"});
  ASSERT_TRUE(embedding.ok());
  double norm = 0;
  for (float v : (*embedding)[0]) norm += double(v) * v;
  EXPECT_GT(std::abs(std::sqrt(norm) - 1.0), 1e-3);  // mean pooling without normalization

  TinyBert::WriteFile(dir + "/1_Pooling/config.json", R"({"pooling_mode_cls_token": true,
                          "pooling_mode_mean_tokens": false})");
  EXPECT_EQ(SentenceEncoder::Load(dir).status().code(), StatusCode::kUnimplemented);
  std::filesystem::remove(dir + "/1_Pooling/config.json");
  TinyBert::WriteFile(dir + "/modules.json",
                      R"([{"type": "sentence_transformers.models.Transformer"},
                          {"type": "sentence_transformers.models.Pooling"},
                          {"type": "sentence_transformers.models.Dense"}])");
  EXPECT_EQ(SentenceEncoder::Load(dir).status().code(), StatusCode::kUnimplemented);
}

TEST(SentenceEncoder, ReportsTheTextThatIsNotUtf8) {
  const TinyBert model{TinyBertSpec{}};
  auto encoder = LoadOrDie(model.Write("utf8"));
  ASSERT_NE(encoder, nullptr);
  const auto result = encoder->Encode(std::vector<std::string>{"the cat", "bad \xff byte"});
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("texts[1]"), std::string::npos)
      << result.status().ToString();
  auto none = encoder->Encode(std::vector<std::string>{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(SentenceEncoder, RefusesFoldersThatDoNotFit) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("bad");
  EXPECT_EQ(SentenceEncoder::Load(dir + "/missing").status().code(), StatusCode::kNotFound);

  // A config whose hidden size differs from the weights: the tensor is named.
  TinyBertSpec wider;
  wider.hidden = 15;
  TinyBert::WriteFile(dir + "/config.json", TinyBert(wider).ConfigJson());
  auto shape = SentenceEncoder::Load(dir);
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.status().message().find("embeddings.word_embeddings.weight"), std::string::npos)
      << shape.status().ToString();

  // A tokenizer with more tokens than the model embeds.
  TinyBertSpec fewer;
  fewer.vocab = 20;
  const TinyBert small(fewer);
  const std::string small_dir = small.Write("small_vocab");
  EXPECT_EQ(SentenceEncoder::Load(small_dir).status().code(), StatusCode::kFailedPrecondition);

  // An activation other than erf GELU.
  std::string config = model.ConfigJson();
  config.replace(config.find("\"gelu\""), 6, "\"relu\"");
  TinyBert::WriteFile(dir + "/config.json", config);
  EXPECT_EQ(SentenceEncoder::Load(dir).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace strata::embedding
