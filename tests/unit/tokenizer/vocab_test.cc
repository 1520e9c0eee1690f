#include "strata/tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/gguf_builder.h"

namespace strata::tokenizer {
namespace {

using strata::testing::GgufBuilder;

// A small but complete Gemma-like SPM tokenizer section, without the key `omit` (so that a
// test can add it with another value: the GGUF reader rejects repeated keys).
GgufBuilder SpmFile(std::string_view omit = "") {
  GgufBuilder b;
  auto u32 = [&](std::string_view key, uint32_t v) {
    if (key != omit) b.AddU32(key, v);
  };
  auto flag = [&](std::string_view key, bool v) {
    if (key != omit) b.AddBool(key, v);
  };
  b.AddString("general.architecture", "gemma3")
      .AddString("tokenizer.ggml.model", "llama")
      .AddString("tokenizer.ggml.pre", "default")
      .AddStringArray("tokenizer.ggml.tokens",
                      {"<pad>", "<eos>", "<bos>", "<unk>", "<end_of_turn>", "\n", "a",
                       "\xe2\x96\x81"
                       "b",
                       "<0x41>", "</s>"})
      .AddArray<float>("tokenizer.ggml.scores", GgufBuilder::kF32,
                       {0, 0, 0, 0, 0, 0, -1.5f, -2.5f, 0, 0})
      .AddArray<int32_t>("tokenizer.ggml.token_type", GgufBuilder::kI32,
                         {3, 3, 3, 2, 3, 4, 1, 1, 6, 4});
  u32("tokenizer.ggml.bos_token_id", 2);
  u32("tokenizer.ggml.eos_token_id", 1);
  u32("tokenizer.ggml.unknown_token_id", 3);
  u32("tokenizer.ggml.padding_token_id", 0);
  flag("tokenizer.ggml.add_bos_token", true);
  flag("tokenizer.ggml.add_eos_token", false);
  flag("tokenizer.ggml.add_space_prefix", false);
  return b;
}

StatusOr<Vocab> Load(const GgufBuilder& builder, std::vector<uint8_t>* storage) {
  *storage = builder.Build();
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(*storage));
  if (!file.ok()) return file.status();
  return Vocab::FromGguf(*file);
}

void ExpectError(const StatusOr<Vocab>& result, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  EXPECT_NE(result.status().message().find(needle), std::string::npos)
      << "message '" << result.status().message() << "' lacks '" << needle << "'";
}

TEST(Vocab, ReadsAGemmaStyleTokenizer) {
  std::vector<uint8_t> bytes;
  auto vocab = Load(SpmFile(), &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->kind, VocabKind::kSpm);
  EXPECT_EQ(vocab->size(), 10u);
  EXPECT_EQ(vocab->bos_id, 2);
  EXPECT_EQ(vocab->eos_id, 1);
  EXPECT_EQ(vocab->unk_id, 3);
  EXPECT_EQ(vocab->pad_id, 0);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_eos);
  EXPECT_FALSE(vocab->add_space_prefix);
  EXPECT_FLOAT_EQ(vocab->scores[7], -2.5f);
  EXPECT_EQ(vocab->types[8], TokenType::kByte);
  EXPECT_EQ(vocab->Find("\xe2\x96\x81"
                        "b"),
            7);
  EXPECT_EQ(vocab->Find("missing"), kNoToken);
  EXPECT_EQ(vocab->byte_to_id['A'], 8);
  EXPECT_EQ(vocab->byte_to_id['\n'], 5);  // no <0x0A>: falls back to the one-byte token
  EXPECT_EQ(vocab->byte_to_id['z'], kNoToken);
}

TEST(Vocab, FindsEndOfTurnByTextAndMarksEndOfGenerationTokens) {
  std::vector<uint8_t> bytes;
  auto vocab = Load(SpmFile(), &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->eot_id, 4);  // "<end_of_turn>", no eot key in the file
  // "</s>" is user-defined in the file but is an end-of-generation text: llama.cpp makes it
  // control too, which changes how it tokenizes.
  EXPECT_TRUE(vocab->HasAttr(9, token_attr::kControl));
  EXPECT_TRUE(vocab->HasAttr(9, token_attr::kUserDefined));
  EXPECT_EQ(vocab->EndOfGenerationIds(), (std::vector<TokenId>{1, 4, 9}));
  EXPECT_TRUE(vocab->IsEndOfGeneration(4));
  EXPECT_FALSE(vocab->IsEndOfGeneration(2));
  EXPECT_TRUE(vocab->IsControl(2));
  EXPECT_FALSE(vocab->IsControl(6));
}

TEST(Vocab, AppliesLlamaCppDefaultsWhenKeysAreAbsent) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "x"});
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->pre, "default");
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_TRUE(vocab->add_space_prefix);
  EXPECT_EQ(vocab->types[3], TokenType::kNormal);
  EXPECT_EQ(vocab->scores[3], 0.0f);
}

TEST(Vocab, DropsDefaultIdsOutsideATinyVocab) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"x"})
      .AddBool("tokenizer.ggml.add_bos_token", false);
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->bos_id, kNoToken);
  EXPECT_EQ(vocab->eos_id, kNoToken);
  EXPECT_EQ(vocab->unk_id, 0);
}

TEST(Vocab, RenamesEmptyTokensAsLlamaCppDoes) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", ""});
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->tokens[3], "[EMPTY_3]");
}

TEST(Vocab, NegativeSpecialIdMeansNone) {
  GgufBuilder b = SpmFile();
  b.AddI32("tokenizer.ggml.eot_token_id", -1);
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  // -1 says "none", so llama.cpp's text-based detection still applies.
  EXPECT_EQ(vocab->eot_id, 4);
}

TEST(Vocab, RejectsAFileWithoutTokenizer) {
  GgufBuilder b;
  b.AddString("general.architecture", "llama");
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kNotFound, "tokenizer.ggml.model");
}

TEST(Vocab, RejectsUnknownTokenizerModels) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "t5").AddStringArray("tokenizer.ggml.tokens", {"a"});
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kUnimplemented, "tokenizer.ggml.model = 't5'");
}

TEST(Vocab, RejectsMissingOrMistypedTokens) {
  GgufBuilder missing;
  missing.AddString("tokenizer.ggml.model", "llama");
  std::vector<uint8_t> bytes;
  ExpectError(Load(missing, &bytes), StatusCode::kNotFound, "tokenizer.ggml.tokens");

  GgufBuilder wrong;
  wrong.AddString("tokenizer.ggml.model", "llama")
      .AddArray<int32_t>("tokenizer.ggml.tokens", GgufBuilder::kI32, {1, 2});
  ExpectError(Load(wrong, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.tokens");

  GgufBuilder empty;
  empty.AddString("tokenizer.ggml.model", "llama").AddStringArray("tokenizer.ggml.tokens", {});
  ExpectError(Load(empty, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.tokens is empty");
}

TEST(Vocab, RejectsShortScoreAndTypeArrays) {
  GgufBuilder scores;
  scores.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"})
      .AddArray<float>("tokenizer.ggml.scores", GgufBuilder::kF32, {1, 2});
  std::vector<uint8_t> bytes;
  ExpectError(Load(scores, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.scores has 2");

  GgufBuilder types;
  types.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"})
      .AddArray<int32_t>("tokenizer.ggml.token_type", GgufBuilder::kI32, {1});
  ExpectError(Load(types, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.token_type has 1");

  GgufBuilder mistyped;
  mistyped.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"a"})
      .AddStringArray("tokenizer.ggml.scores", {"x"});
  ExpectError(Load(mistyped, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.scores");
}

TEST(Vocab, AcceptsIntegerScoresAsLlamaCppDoes) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"})
      .AddArray<int32_t>("tokenizer.ggml.scores", GgufBuilder::kI32, {-1, -2, -3, -4});
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->scores, (std::vector<float>{-1, -2, -3}));
}

TEST(Vocab, RejectsSpecialIdsOutOfRange) {
  GgufBuilder b = SpmFile();
  b.AddU32("tokenizer.ggml.eot_token_id", 10);
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kInvalidArgument,
              "tokenizer.ggml.eot_token_id = 10 is out of range");

  GgufBuilder huge = SpmFile("tokenizer.ggml.padding_token_id");
  huge.AddU64("tokenizer.ggml.padding_token_id", uint64_t{1} << 40);
  ExpectError(Load(huge, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.padding_token_id");

  GgufBuilder mistyped = SpmFile("tokenizer.ggml.unknown_token_id");
  mistyped.AddString("tokenizer.ggml.unknown_token_id", "3");
  ExpectError(Load(mistyped, &bytes), StatusCode::kInvalidArgument,
              "tokenizer.ggml.unknown_token_id");
}

TEST(Vocab, RejectsDuplicateTokenTexts) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "b", "a"});
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kInvalidArgument, "ids 1 and 3");
}

TEST(Vocab, RejectsMalformedByteTokens) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xG1>"})
      .AddArray<int32_t>("tokenizer.ggml.token_type", GgufBuilder::kI32, {2, 3, 3, 6});
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kInvalidArgument, "not <0xXX>");
}

TEST(Vocab, RejectsAddBosWithoutBos) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"x"})
      .AddBool("tokenizer.ggml.add_bos_token", true);
  std::vector<uint8_t> bytes;
  ExpectError(Load(b, &bytes), StatusCode::kInvalidArgument, "tokenizer.ggml.add_bos_token");

  GgufBuilder mistyped = SpmFile("tokenizer.ggml.add_space_prefix");
  mistyped.AddU32("tokenizer.ggml.add_space_prefix", 1);
  ExpectError(Load(mistyped, &bytes), StatusCode::kInvalidArgument,
              "tokenizer.ggml.add_space_prefix must be a bool");
}

TEST(Vocab, BpeNeedsMergesAndFollowsThePreTokenizerDefaults) {
  GgufBuilder no_merges;
  no_merges.AddString("tokenizer.ggml.model", "gpt2")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  std::vector<uint8_t> bytes;
  ExpectError(Load(no_merges, &bytes), StatusCode::kNotFound, "tokenizer.ggml.merges");

  GgufBuilder llama3;
  llama3.AddString("tokenizer.ggml.model", "gpt2")
      .AddString("tokenizer.ggml.pre", "llama-bpe")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<|eot_id|>"})
      .AddStringArray("tokenizer.ggml.merges", {"a b"})
      .AddU32("tokenizer.ggml.bos_token_id", 0);
  auto vocab = Load(llama3, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->kind, VocabKind::kBpe);
  EXPECT_EQ(vocab->merges, (std::vector<std::string>{"a b"}));
  EXPECT_TRUE(vocab->add_bos);  // llama.cpp's default for the llama3 pre-tokenizer
  EXPECT_FALSE(vocab->add_space_prefix);
  EXPECT_EQ(vocab->eot_id, 3);
  EXPECT_TRUE(vocab->HasAttr(3, token_attr::kControl));
}

TEST(Vocab, ReadsTheChatTemplate) {
  GgufBuilder b = SpmFile();
  b.AddString("tokenizer.chat_template", "{{ bos_token }}<start_of_turn>");
  std::vector<uint8_t> bytes;
  auto vocab = Load(b, &bytes);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(vocab->chat_template, "{{ bos_token }}<start_of_turn>");
}

TEST(Vocab, RecognisesNonAsciiEndOfTurnTexts) {
  Vocab v;
  v.tokens = {"x",
              "<\xef\xbd\x9c"
              "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};
  v.types = {TokenType::kNormal, TokenType::kUserDefined};
  ASSERT_TRUE(v.Finalize().ok());
  EXPECT_EQ(v.eot_id, 1);
  EXPECT_TRUE(v.HasAttr(1, token_attr::kControl));
  EXPECT_EQ(v.eog_ids, (std::vector<TokenId>{1}));
}

TEST(Vocab, Phi3SpecialTokensStripWhitespaceAfterThem) {
  Vocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "<|user|>", "<|endoftext|>", "x"};
  v.types = {TokenType::kUnknown,     TokenType::kControl, TokenType::kControl,
             TokenType::kUserDefined, TokenType::kControl, TokenType::kNormal};
  ASSERT_TRUE(v.Finalize("Phi-3 Mini", "phi3").ok());
  EXPECT_TRUE(v.HasAttr(3, token_attr::kRstrip));
  EXPECT_TRUE(v.HasAttr(2, token_attr::kRstrip));
  EXPECT_FALSE(v.HasAttr(1, token_attr::kRstrip));
  EXPECT_FALSE(v.HasAttr(4, token_attr::kRstrip));
  EXPECT_FALSE(v.HasAttr(5, token_attr::kRstrip));
}

}  // namespace
}  // namespace strata::tokenizer
