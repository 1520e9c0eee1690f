#include "strata/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata::tokenizer {
namespace {

// A tiny byte-level vocab. Token texts are spelled in GPT-2's byte alphabet: "Ġ" is a space,
// "Ċ" a newline, "ï¿½" the UTF-8 bytes of U+FFFD.
struct TinyToken {
  std::string text;
  TokenType type = TokenType::kNormal;
};

const std::vector<TinyToken>& TinyTokens() {
  static const std::vector<TinyToken> tokens = {
      {"h"},                                       // 0
      {"e"},                                       // 1
      {"l"},                                       // 2
      {"o"},                                       // 3
      {"\xc4\xa0"},                                // 4  Ġ
      {"w"},                                       // 5
      {"r"},                                       // 6
      {"d"},                                       // 7
      {"he"},                                      // 8
      {"ll"},                                      // 9
      {"hell"},                                    // 10
      {"hello"},                                   // 11
      {"\xc4\xa0w"},                               // 12 Ġw
      {"or"},                                      // 13
      {"\xc4\xa0wor"},                             // 14 Ġwor
      {"<|eot_id|>", TokenType::kControl},         // 15
      {"<ud>", TokenType::kUserDefined},           // 16
      {"\xc4\xa0world"},                           // 17 Ġworld: no merge builds it
      {"\xc3\x83"},                                // 18 Ã (first byte of é, 0xC3)
      {"\xc3\xaf\xc2\xbf\xc2\xbd"},                // 19 ï¿½: U+FFFD's bytes EF BF BD
      {"<|begin_of_text|>", TokenType::kControl},  // 20
      {"<0x41>", TokenType::kByte},                // 21
      {"unused0", TokenType::kUnused},             // 22
      {"\xc4\x8a"},                                // 23 Ċ
      {"\xc4\x8a\xc4\x8a"},                        // 24 ĊĊ: no merge builds it
  };
  return tokens;
}

const std::vector<std::string>& TinyMerges() {
  static const std::vector<std::string> merges = {
      "h e",                        // 0
      "l l",                        // 1
      "he ll",                      // 2
      "hell o",                     // 3
      "\xc4\xa0 w",                 // 4  Ġ w
      "o r",                        // 5
      "\xc4\xa0w or",               // 6  Ġw or
      "w o",                        // 7  builds "wo", which is not a token
      "\xc3\xaf \xc2\xbf",          // 8  ï ¿
      "\xc3\xaf\xc2\xbf \xc2\xbd",  // 9  ï¿ ½
      "h e",                        // 10 repeated pair: the first rank counts
      "nospace",                    // 11 malformed: ignored
  };
  return merges;
}

Vocab TinyVocab(std::string pre) {
  Vocab vocab;
  vocab.kind = VocabKind::kBpe;
  vocab.model = "gpt2";
  vocab.pre = std::move(pre);
  for (const TinyToken& token : TinyTokens()) {
    vocab.tokens.push_back(token.text);
    vocab.types.push_back(token.type);
  }
  vocab.merges = TinyMerges();
  vocab.bos_id = 20;
  vocab.eos_id = 15;
  const Status status = vocab.Finalize();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return vocab;
}

std::unique_ptr<Tokenizer> Make(std::string pre, bool add_bos = false, bool add_eos = false) {
  Vocab vocab = TinyVocab(std::move(pre));
  vocab.add_bos = add_bos;
  vocab.add_eos = add_eos;
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeBpeTokenizer(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

std::vector<TokenId> Ids(const Tokenizer& tokenizer, std::string_view text,
                         bool parse_special = false, bool add_special = false) {
  EncodeOptions options;
  options.add_special = add_special;
  options.parse_special = parse_special;
  return tokenizer.Encode(text, options);
}

using V = std::vector<TokenId>;

TEST(BpeTokenizer, MergesLowestRankFirst) {
  auto tokenizer = Make("qwen2");
  ASSERT_NE(tokenizer, nullptr);
  // h e -> he (rank 0), l l -> ll (1), he ll -> hell (2), hell o -> hello (3).
  EXPECT_EQ(Ids(*tokenizer, "hello"), V({11}));
  // Ġ w (4), o r (5), Ġw or (6); "ld" has no merge.
  EXPECT_EQ(Ids(*tokenizer, "hello world"), V({11, 14, 2, 7}));
}

TEST(BpeTokenizer, EqualRanksMergeLeftmostFirst) {
  auto tokenizer = Make("qwen2");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(Ids(*tokenizer, "lll"), V({9, 2}));
  EXPECT_EQ(Ids(*tokenizer, "llll"), V({9, 9}));
}

TEST(BpeTokenizer, MergedSymbolThatIsNotATokenFallsBackToByteTokens) {
  auto tokenizer = Make("qwen2");
  ASSERT_NE(tokenizer, nullptr);
  // "w o" merges into "wo", which the vocab lacks: llama.cpp emits its one-byte tokens.
  EXPECT_EQ(Ids(*tokenizer, "wo"), V({5, 3}));
  // "é" is spelled "Ã©": "Ã" is a token; "©" (bytes C2 A9) has no token, nor do its bytes,
  // so it is dropped, as in llama.cpp.
  EXPECT_EQ(Ids(*tokenizer, "\xc3\xa9"), V({18}));
}

TEST(BpeTokenizer, InvalidUtf8EncodesAsTheReplacementCharacter) {
  auto tokenizer = Make("llama-bpe");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(Ids(*tokenizer, "\xff"), V({19}));
  EXPECT_EQ(Ids(*tokenizer, "h\x80\x80"), V({0, 19, 19}));
}

TEST(BpeTokenizer, Llama3IgnoresMergesForWordsThatAreTokens) {
  auto llama = Make("llama-bpe");
  auto qwen = Make("qwen2");
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(Ids(*llama, " world"), V({17}));
  EXPECT_EQ(Ids(*qwen, " world"), V({14, 2, 7}));
}

TEST(BpeTokenizer, SplitsWordsWithTheNamedPreTokenizer) {
  auto llama = Make("llama-bpe");
  auto gpt2 = Make("gpt-2");
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(gpt2, nullptr);
  // llama3 keeps "\n\n" whole (and, ignoring merges, finds the token "ĊĊ"); gpt-2 splits it
  // as \s+(?!\S) then \s+.
  EXPECT_EQ(Ids(*llama, "h\n\nh"), V({0, 24, 0}));
  EXPECT_EQ(Ids(*gpt2, "h\n\nh"), V({0, 23, 23, 0}));
}

TEST(BpeTokenizer, ControlTokensNeedParseSpecial) {
  auto tokenizer = Make("llama-bpe");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(Ids(*tokenizer, "hello<|eot_id|>hello", /*parse_special=*/true), V({11, 15, 11}));
  const V plain = Ids(*tokenizer, "hello<|eot_id|>hello", /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 15), 0);
  EXPECT_EQ(plain.front(), 11);
}

TEST(BpeTokenizer, UserDefinedTokensAreAlwaysRecognised) {
  auto tokenizer = Make("llama-bpe");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(Ids(*tokenizer, "hello<ud> world", /*parse_special=*/false), V({11, 16, 17}));
  EXPECT_EQ(Ids(*tokenizer, "<ud><ud>", /*parse_special=*/false), V({16, 16}));
}

TEST(BpeTokenizer, AddsBosAndEosAsTheVocabSays) {
  auto both = Make("llama-bpe", /*add_bos=*/true, /*add_eos=*/true);
  ASSERT_NE(both, nullptr);
  EXPECT_EQ(Ids(*both, "hello", false, /*add_special=*/true), V({20, 11, 15}));
  EXPECT_EQ(Ids(*both, "hello", false, /*add_special=*/false), V({11}));
  EXPECT_EQ(Ids(*both, "", false, /*add_special=*/true), V({20, 15}));
  auto none = Make("llama-bpe");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(Ids(*none, "hello", false, /*add_special=*/true), V({11}));
  EXPECT_TRUE(Ids(*none, "", false, true).empty());
}

TEST(BpeTokenizer, PiecesMapBackThroughTheByteAlphabet) {
  auto tokenizer = Make("llama-bpe");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->TokenToPiece(14, false), " wor");
  EXPECT_EQ(tokenizer->TokenToPiece(23, false), "\n");
  EXPECT_EQ(tokenizer->TokenToPiece(19, false), "\xef\xbf\xbd");
  EXPECT_EQ(tokenizer->TokenToPiece(18, false), "\xc3");  // a lone byte: partial UTF-8
  EXPECT_EQ(tokenizer->TokenToPiece(21, false), "A");     // <0x41>
  EXPECT_EQ(tokenizer->TokenToPiece(15, false), "");
  EXPECT_EQ(tokenizer->TokenToPiece(15, true), "<|eot_id|>");
  EXPECT_EQ(tokenizer->TokenToPiece(16, false), "<ud>");
  EXPECT_EQ(tokenizer->TokenToPiece(22, true), "");
  EXPECT_EQ(tokenizer->TokenToPiece(-1, true), "");
  EXPECT_EQ(tokenizer->TokenToPiece(1000, true), "");
}

TEST(BpeTokenizer, DecodeConcatenatesPieces) {
  auto tokenizer = Make("llama-bpe");
  ASSERT_NE(tokenizer, nullptr);
  const V ids = Ids(*tokenizer, "hello<|eot_id|> world", /*parse_special=*/true);
  EXPECT_EQ(tokenizer->Decode(ids, /*render_special=*/false), "hello world");
  EXPECT_EQ(tokenizer->Decode(ids, /*render_special=*/true), "hello<|eot_id|> world");
  // A byte sequence split over tokens comes back whole.
  EXPECT_EQ(tokenizer->Decode(V({18}), false), "\xc3");
}

TEST(BpeTokenizer, UnsupportedPreTokenizerIsUnimplemented) {
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeBpeTokenizer(TinyVocab("deepseek-coder"));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tokenizer.status().message().find("deepseek-coder"), std::string::npos);
}

TEST(BpeTokenizer, RejectsNonBpeVocab) {
  Vocab vocab = TinyVocab("default");
  vocab.kind = VocabKind::kSpm;
  vocab.model = "llama";
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeBpeTokenizer(std::move(vocab));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::tokenizer
