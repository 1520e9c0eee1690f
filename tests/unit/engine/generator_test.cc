#include "strata/engine/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/backend/cpu/kv_storage.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"
#include "support/gguf_builder.h"
#include "support/tiny_llama.h"

namespace strata::engine {
namespace {

using sampling::FinishReason;
using sampling::SamplingParams;
using strata::testing::GgufBuilder;
using tokenizer::TokenId;

using namespace strata::testing::tiny_llama;  // NOLINT: the tiny model's constants and builders

struct Outcome {
  StatusOr<GenerationResult> result;
  std::string streamed;  // the on_text deltas, concatenated
  int deltas = 0;
};

class GeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bytes_ = new std::vector<uint8_t>(BuildModel());
    auto file = model::GgufFile::Parse(MappedFile::FromBytes(*bytes_));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = new model::GgufFile(std::move(*file));
  }
  static void TearDownTestSuite() {
    delete file_;
    delete bytes_;
    file_ = nullptr;
    bytes_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(file_, nullptr);
    backend_ = MakeBackend(int64_t{1} << 20);
    ASSERT_NE(backend_, nullptr);
    tokenizer_ = MakeTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
  }

  static std::unique_ptr<backend::cpu::CpuBackend> MakeBackend(int64_t kv_budget_bytes) {
    return MakeBackendFor(*file_, kv_budget_bytes);
  }

  // Runs one request and checks what holds for every successful one: the streamed deltas
  // concatenate to result.text, none is empty, and the counts add up.
  Outcome Generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                   int64_t prefill_chunk = 512, const tokenizer::Tokenizer* tok = nullptr,
                   backend::Backend* backend = nullptr) {
    Generator generator(backend != nullptr ? backend : backend_.get(),
                        tok != nullptr ? tok : tokenizer_.get(), prefill_chunk);
    Outcome run{InvalidArgumentError("not run"), "", 0};
    run.result = generator.Generate(prompt, params, [&](std::string_view delta) {
      EXPECT_FALSE(delta.empty()) << "an empty delta was streamed";
      run.streamed += delta;
      ++run.deltas;
    });
    if (run.result.ok()) {
      EXPECT_EQ(run.streamed, run.result->text);
      EXPECT_EQ(run.result->stats.prompt_tokens, static_cast<int64_t>(prompt.size()));
      EXPECT_EQ(run.result->stats.generated_tokens,
                static_cast<int64_t>(run.result->tokens.size()));
      EXPECT_LE(static_cast<int64_t>(run.result->tokens.size()), params.max_tokens);
      for (int32_t t : run.result->tokens) {
        EXPECT_TRUE(t >= 0 && t < kVocab) << t;
      }
    } else {
      EXPECT_TRUE(run.streamed.empty());
    }
    return run;
  }

  static SamplingParams Greedy(int32_t max_tokens) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;  // the unconstrained baseline: only max_tokens stops it
    return p;
  }

  // The greedy continuation of kPrompt, unconstrained, with each token's end offset in its text.
  struct Baseline {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<size_t> ends;  // ends[k] = bytes of text produced by tokens[0..k]
  };
  Baseline GreedyBaseline(int32_t max_tokens) {
    Outcome run = Generate(kPrompt, Greedy(max_tokens));
    EXPECT_TRUE(run.result.ok()) << run.result.status().ToString();
    Baseline b;
    if (!run.result.ok()) return b;
    b.tokens = run.result->tokens;
    b.text = run.result->text;
    for (size_t k = 0; k < b.tokens.size(); ++k) {
      b.ends.push_back(
          tokenizer_->Decode(std::span<const int32_t>(b.tokens.data(), k + 1), false).size());
    }
    EXPECT_EQ(tokenizer_->Decode(b.tokens, false), b.text);
    return b;
  }

  // The first k >= 4 whose token did not occur before it (so a stop on that id ends exactly
  // there, a few tokens in); -1 when there is none.
  static int FirstNewToken(const std::vector<int32_t>& tokens) {
    for (size_t k = 4; k < tokens.size(); ++k) {
      if (std::find(tokens.begin(), tokens.begin() + k, tokens[k]) == tokens.begin() + k) {
        return static_cast<int>(k);
      }
    }
    return -1;
  }

  static inline const std::vector<int32_t> kPrompt = {1, 10, 20, 30, 17, 5, 44};

  static std::vector<uint8_t>* bytes_;
  static model::GgufFile* file_;
  std::unique_ptr<backend::cpu::CpuBackend> backend_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

std::vector<uint8_t>* GeneratorTest::bytes_ = nullptr;
model::GgufFile* GeneratorTest::file_ = nullptr;

TEST_F(GeneratorTest, TheTinyModelGeneratesVariedGreedyText) {
  // Guards the other tests: a model stuck on one token would make them vacuous.
  const Baseline b = GreedyBaseline(24);
  ASSERT_EQ(b.tokens.size(), 24u);
  EXPECT_GE(std::set<int32_t>(b.tokens.begin(), b.tokens.end()).size(), 4u);
  EXPECT_GE(b.text.size(), 24u);
  // The same request again on the same backend (its KV now holds the last run) gives the same.
  const Baseline again = GreedyBaseline(24);
  EXPECT_EQ(again.tokens, b.tokens);
}

TEST_F(GeneratorTest, MaxTokensEndsWithFinishReasonLength) {
  for (int32_t max_tokens : {1, 5, 17}) {
    Outcome run = Generate(kPrompt, Greedy(max_tokens));
    ASSERT_TRUE(run.result.ok()) << run.result.status().ToString();
    EXPECT_EQ(run.result->tokens.size(), static_cast<size_t>(max_tokens));
    EXPECT_EQ(run.result->finish_reason, FinishReason::kLength);
    EXPECT_EQ(run.result->text, tokenizer_->Decode(run.result->tokens, false));
  }
}

TEST_F(GeneratorTest, StopStringAcrossTokensEndsGenerationAndIsNeverEmitted) {
  const Baseline b = GreedyBaseline(32);
  ASSERT_EQ(b.tokens.size(), 32u);
  // A stop string made of the last byte of token i and the first byte of token i + 1 (a vowel
  // then a consonant, which no single piece holds), for the first i where both have text.
  std::string stop;
  for (size_t i = 2; i + 1 < b.tokens.size() && stop.empty(); ++i) {
    if (b.ends[i] > b.ends[i - 1] && b.ends[i + 1] > b.ends[i])
      stop = b.text.substr(b.ends[i] - 1, 2);
  }
  ASSERT_EQ(stop.size(), 2u);
  // Where it first occurs (maybe earlier than token i), and the token that completes it.
  const size_t at = b.text.find(stop);
  ASSERT_NE(at, std::string::npos);
  const size_t last =
      std::lower_bound(b.ends.begin(), b.ends.end(), at + stop.size()) - b.ends.begin();
  ASSERT_LT(last, b.tokens.size());
  // It spans two tokens: its first byte comes before the completing token's text begins.
  ASSERT_GT(last, 0u);
  ASSERT_LT(at, b.ends[last - 1]) << "'" << stop << "' lies within one token";

  SamplingParams p = Greedy(32);
  p.stop = {"never-matches", stop};
  Outcome run = Generate(kPrompt, p);
  ASSERT_TRUE(run.result.ok()) << run.result.status().ToString();
  EXPECT_EQ(run.result->finish_reason, FinishReason::kStop);
  EXPECT_EQ(run.result->text, b.text.substr(0, at));
  EXPECT_EQ(run.result->text.find(stop), std::string::npos);
  EXPECT_EQ(run.streamed.find(stop), std::string::npos);
  // Generation stopped at the token that completed the stop string (it is reported).
  EXPECT_EQ(run.result->tokens,
            std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + last + 1));
}

TEST_F(GeneratorTest, TextHeldBackForAnUnmatchedStopStringIsReleasedAtTheEnd) {
  const Baseline b = GreedyBaseline(12);
  ASSERT_FALSE(b.text.empty());
  // The text's last byte followed by a byte no piece has: a partial match at the very end.
  SamplingParams p = Greedy(12);
  p.stop = {b.text.substr(b.text.size() - 1) + "#"};
  Outcome run = Generate(kPrompt, p);
  ASSERT_TRUE(run.result.ok()) << run.result.status().ToString();
  EXPECT_EQ(run.result->finish_reason, FinishReason::kLength);
  EXPECT_EQ(run.result->tokens, b.tokens);
  EXPECT_EQ(run.result->text, b.text);
}

TEST_F(GeneratorTest, StopTokenIdEndsGenerationWithoutItsText) {
  const Baseline b = GreedyBaseline(24);
  const int k = FirstNewToken(b.tokens);
  ASSERT_GE(k, 4) << "the baseline repeats its first tokens";
  SamplingParams p = Greedy(24);
  p.stop_token_ids = {b.tokens[k]};
  Outcome run = Generate(kPrompt, p);
  ASSERT_TRUE(run.result.ok()) << run.result.status().ToString();
  EXPECT_EQ(run.result->finish_reason, FinishReason::kStop);
  EXPECT_EQ(run.result->tokens, std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + k + 1));
  EXPECT_EQ(run.result->text, b.text.substr(0, b.ends[k - 1]));
}

TEST_F(GeneratorTest, EndOfSequenceEndsGenerationUnlessIgnored) {
  const Baseline b = GreedyBaseline(24);
  const int k = FirstNewToken(b.tokens);
  ASSERT_GE(k, 4) << "the baseline repeats its first tokens";
  // A vocab whose EOS is the token greedy decoding reaches at step k.
  const std::unique_ptr<tokenizer::Tokenizer> tok = MakeTokenizer(b.tokens[k]);
  ASSERT_NE(tok, nullptr);
  ASSERT_TRUE(tok->vocab().IsEndOfGeneration(b.tokens[k]));
  for (int j = 0; j < k; ++j) {
    ASSERT_FALSE(tok->vocab().IsEndOfGeneration(b.tokens[j])) << j;
  }

  SamplingParams p = Greedy(24);
  p.ignore_eos = false;
  Outcome stopped = Generate(kPrompt, p, 512, tok.get());
  ASSERT_TRUE(stopped.result.ok()) << stopped.result.status().ToString();
  EXPECT_EQ(stopped.result->finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.result->tokens,
            std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + k + 1));
  EXPECT_EQ(stopped.result->text, tok->Decode(std::span<const int32_t>(b.tokens.data(), k), false));

  p.ignore_eos = true;
  Outcome ignored = Generate(kPrompt, p, 512, tok.get());
  ASSERT_TRUE(ignored.result.ok()) << ignored.result.status().ToString();
  EXPECT_EQ(ignored.result->finish_reason, FinishReason::kLength);
  EXPECT_EQ(ignored.result->tokens, b.tokens);
  EXPECT_EQ(ignored.result->text, tok->Decode(b.tokens, false));
}

TEST_F(GeneratorTest, SameSeedSameTokensAndDifferentSeedDifferentTokens) {
  constexpr int32_t kTokens = 40;
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = kTokens;
  p.ignore_eos = true;
  p.seed = 1234;
  Outcome first = Generate(kPrompt, p);
  Outcome second = Generate(kPrompt, p);
  p.seed = 1235;
  Outcome other = Generate(kPrompt, p);
  ASSERT_TRUE(first.result.ok() && second.result.ok() && other.result.ok());
  ASSERT_EQ(first.result->tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(first.result->tokens, second.result->tokens);
  EXPECT_EQ(first.result->text, second.result->text);
  EXPECT_NE(first.result->tokens, other.result->tokens);
  // Sampling really samples: it does not just follow the greedy path.
  EXPECT_NE(first.result->tokens, GreedyBaseline(kTokens).tokens);
}

TEST_F(GeneratorTest, ChunkedPrefillGivesTheSameGreedyTokens) {
  const std::vector<int32_t> prompt = {1, 12, 7, 33, 40, 9, 21, 50, 3, 28, 14};
  Outcome whole = Generate(prompt, Greedy(20), 512);
  ASSERT_TRUE(whole.result.ok()) << whole.result.status().ToString();
  for (int64_t chunk : {1, 3, 4, 10}) {
    SCOPED_TRACE("prefill_chunk " + std::to_string(chunk));
    Outcome chunked = Generate(prompt, Greedy(20), chunk);
    ASSERT_TRUE(chunked.result.ok()) << chunked.result.status().ToString();
    EXPECT_EQ(chunked.result->tokens, whole.result->tokens);
    EXPECT_EQ(chunked.result->text, whole.result->text);
  }
}

TEST_F(GeneratorTest, PromptPlusMaxTokensBeyondTheContextIsInvalid) {
  const std::vector<int32_t> prompt(10, 7);
  Outcome over = Generate(prompt, Greedy(kContext - 10 + 1));
  ASSERT_FALSE(over.result.ok());
  EXPECT_EQ(over.result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.result.status().message().find("context"), std::string::npos)
      << over.result.status().message();
  // Exactly filling the context is allowed.
  Outcome full = Generate(prompt, Greedy(kContext - 10));
  ASSERT_TRUE(full.result.ok()) << full.result.status().ToString();
  EXPECT_EQ(full.result->tokens.size(), static_cast<size_t>(kContext - 10));
  EXPECT_EQ(full.result->finish_reason, FinishReason::kLength);
}

TEST_F(GeneratorTest, RequestLargerThanTheKvCacheIsResourceExhausted) {
  backend::cpu::KvCacheConfig kv;
  kv.num_layers = kLayers;
  kv.num_kv_heads = kKvHeads;
  kv.head_dim_k = kHeadDim;
  kv.head_dim_v = kHeadDim;
  kv.block_size = kBlockSize;
  kv.dtype = backend::cpu::KvDtype::kF16;
  // Three blocks: 12 tokens.
  std::unique_ptr<backend::cpu::CpuBackend> small =
      MakeBackend(3 * backend::cpu::KvBytesPerBlock(kv));
  ASSERT_NE(small, nullptr);
  ASSERT_EQ(small->kv_geometry().num_blocks, 3);
  const std::vector<int32_t> prompt = {1, 10, 20, 30, 40};
  Outcome over = Generate(prompt, Greedy(8), 512, nullptr, small.get());  // 13 tokens
  ASSERT_FALSE(over.result.ok());
  EXPECT_EQ(over.result.status().code(), StatusCode::kResourceExhausted);
  Outcome fits = Generate(prompt, Greedy(7), 512, nullptr, small.get());  // 12 tokens
  ASSERT_TRUE(fits.result.ok()) << fits.result.status().ToString();
  EXPECT_EQ(fits.result->tokens.size(), 7u);
  // The small cache gives the same tokens as the large one.
  Outcome large = Generate(prompt, Greedy(7));
  ASSERT_TRUE(large.result.ok());
  EXPECT_EQ(fits.result->tokens, large.result->tokens);
}

TEST_F(GeneratorTest, EmptyPromptIsInvalid) {
  Outcome run = Generate({}, Greedy(4));
  ASSERT_FALSE(run.result.ok());
  EXPECT_EQ(run.result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(run.result.status().message().find("prompt"), std::string::npos);
}

TEST_F(GeneratorTest, BadSamplingParametersAreInvalid) {
  SamplingParams p = Greedy(4);
  p.temperature = -1.0f;
  Outcome negative = Generate(kPrompt, p);
  ASSERT_FALSE(negative.result.ok());
  EXPECT_EQ(negative.result.status().code(), StatusCode::kInvalidArgument);
  p = Greedy(0);
  Outcome zero = Generate(kPrompt, p);
  ASSERT_FALSE(zero.result.ok());
  EXPECT_EQ(zero.result.status().code(), StatusCode::kInvalidArgument);
  p = Greedy(4);
  p.stop_token_ids = {static_cast<int32_t>(kVocab)};  // outside the vocabulary
  Outcome bad_stop = Generate(kPrompt, p);
  ASSERT_FALSE(bad_stop.result.ok());
  EXPECT_EQ(bad_stop.result.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(GeneratorTest, StreamedDeltasConcatenateToTheResultText) {
  // Generate() checks this for every run; here with several stop strings that hold text back
  // at many points, and over enough tokens for many deltas.
  const Baseline b = GreedyBaseline(30);
  SamplingParams p = Greedy(30);
  p.stop = {"a#", "e#", "i#", "o#", "u#"};  // every vowel starts a partial match
  Outcome run = Generate(kPrompt, p);
  ASSERT_TRUE(run.result.ok()) << run.result.status().ToString();
  EXPECT_EQ(run.result->text, b.text);
  EXPECT_GE(run.deltas, 5);
}

}  // namespace
}  // namespace strata::engine
