#include "strata/tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tokenizer_test_util.h"

namespace strata::tokenizer {
namespace {

using testing::kFirstSpecId;
using testing::MakeSpmVocab;
using testing::TokenSpec;

constexpr char kSp[] = "\xe2\x96\x81";  // "▁"

std::unique_ptr<Tokenizer> Make(Vocab vocab) {
  auto tokenizer = SpmTokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  return std::move(tokenizer).value();
}

std::vector<TokenId> Encode(const Tokenizer& t, std::string_view text, bool add_special = false,
                            bool parse_special = false) {
  EncodeOptions options;
  options.add_special = add_special;
  options.parse_special = parse_special;
  return t.Encode(text, options);
}

TokenId Byte(uint8_t b) { return 3 + b; }

TEST(SpmTokenizer, MergesTheHighestScoringPairFirst) {
  // ids: a=259 b=260 c=261 ab=262 bc=263 abc=264
  auto t =
      Make(MakeSpmVocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -5}, {"bc", -2}, {"abc", -9}}));
  const TokenId a = kFirstSpecId, bc = kFirstSpecId + 4, abc = kFirstSpecId + 5;
  // "bc" (-2) beats "ab" (-5); then "a"+"bc" forms "abc" although its own score is low.
  EXPECT_EQ(Encode(*t, "abc"), (std::vector<TokenId>{abc}));
  EXPECT_EQ(Encode(*t, "bca"), (std::vector<TokenId>{bc, a}));
}

TEST(SpmTokenizer, BreaksScoreTiesToTheLeft) {
  auto t = Make(MakeSpmVocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -3}, {"bc", -3}}));
  const TokenId c = kFirstSpecId + 2, ab = kFirstSpecId + 3;
  EXPECT_EQ(Encode(*t, "abc"), (std::vector<TokenId>{ab, c}));
}

TEST(SpmTokenizer, FallsBackToByteTokensForUnknownCharacters) {
  auto t = Make(MakeSpmVocab({{"a", -1}}));
  // "é" is C3 A9 and no token: two byte tokens. An invalid lone byte is a byte token too.
  EXPECT_EQ(Encode(*t, "a\xc3\xa9"), (std::vector<TokenId>{kFirstSpecId, Byte(0xC3), Byte(0xA9)}));
  EXPECT_EQ(Encode(*t, "\xff"), (std::vector<TokenId>{Byte(0xFF)}));
  // A lead byte claims the next byte even when it is not a continuation (no validation, as in
  // llama.cpp): "\xc3" + "a" is one symbol, so "a" comes out as its byte token.
  EXPECT_EQ(Encode(*t,
                   "\xc3"
                   "a"),
            (std::vector<TokenId>{Byte(0xC3), Byte('a')}));
}

TEST(SpmTokenizer, UsesUnknownWhenThereIsNoByteToken) {
  auto t = Make(MakeSpmVocab({{"a", -1}}, /*with_bytes=*/false));
  EXPECT_EQ(Encode(*t, "a\xc3\xa9"), (std::vector<TokenId>{3, 0, 0}));
}

TEST(SpmTokenizer, EscapesSpacesAndAddsTheSpacePrefix) {
  const std::string sp_a = std::string(kSp) + "a";
  auto t = Make(MakeSpmVocab({{"a", -1}, {kSp, -1}, {sp_a, -2}, {"<x>", 0, TokenType::kControl}},
                             true, /*add_space_prefix=*/true));
  const TokenId a = kFirstSpecId, sp = kFirstSpecId + 1, spa = kFirstSpecId + 2,
                x = kFirstSpecId + 3;
  EXPECT_EQ(Encode(*t, "a a"), (std::vector<TokenId>{spa, spa}));
  EXPECT_EQ(Encode(*t, "a  "), (std::vector<TokenId>{spa, sp, sp}));
  // A raw fragment after a special token gets the prefix again.
  EXPECT_EQ(Encode(*t, "a<x>a", false, true), (std::vector<TokenId>{spa, x, spa}));
  EXPECT_EQ(Encode(*t, ""), (std::vector<TokenId>{}));
  (void)a;
}

TEST(SpmTokenizer, AddsBosAndEosWhenTheVocabAsks) {
  Vocab vocab = MakeSpmVocab({{"a", -1}});
  vocab.add_eos = true;
  auto t = Make(std::move(vocab));
  EXPECT_EQ(Encode(*t, "a", true), (std::vector<TokenId>{1, kFirstSpecId, 2}));
  EXPECT_EQ(Encode(*t, "", true), (std::vector<TokenId>{1, 2}));
  EXPECT_EQ(Encode(*t, "a", false), (std::vector<TokenId>{kFirstSpecId}));
}

TEST(SpmTokenizer, ParsesSpecialTokenTextOnlyWhenAsked) {
  auto t = Make(MakeSpmVocab({{"<", -1}, {"s", -1}, {">", -1}}));
  EXPECT_EQ(Encode(*t, "<s>", false, true), (std::vector<TokenId>{1}));
  EXPECT_EQ(Encode(*t, "<s>", false, false),
            (std::vector<TokenId>{kFirstSpecId, kFirstSpecId + 1, kFirstSpecId + 2}));
}

TEST(SpmTokenizer, MergesMayFormAnyVocabTokenAsInLlamaCpp) {
  // Merging does not look at token types: plain text "<0x41>" can merge into the byte token
  // for "A", and "<c>" into a control token, exactly as llama.cpp does.
  auto t = Make(MakeSpmVocab(
      {{"<", -1}, {"c", -1}, {">", -1}, {"<c", -1}, {"<c>", -1, TokenType::kControl}}));
  EXPECT_EQ(Encode(*t, "<c>"), (std::vector<TokenId>{kFirstSpecId + 4}));
}

TEST(SpmTokenizer, RendersPiecesByTokenType) {
  auto t = Make(MakeSpmVocab({{std::string(kSp) + "hi", -1},
                              {"<u>", 0, TokenType::kUserDefined},
                              {"<c>", 0, TokenType::kControl},
                              {"gone", 0, TokenType::kUnused}},
                             true, true));
  EXPECT_EQ(t->TokenToPiece(kFirstSpecId, false), " hi");
  EXPECT_EQ(t->TokenToPiece(kFirstSpecId + 1, false), "<u>");
  EXPECT_EQ(t->TokenToPiece(kFirstSpecId + 2, false), "");
  EXPECT_EQ(t->TokenToPiece(kFirstSpecId + 2, true), "<c>");
  EXPECT_EQ(t->TokenToPiece(kFirstSpecId + 3, true), "");
  EXPECT_EQ(t->TokenToPiece(Byte(0xE4), false), "\xe4");
  EXPECT_EQ(t->TokenToPiece(0, true), "<unk>");
  EXPECT_EQ(t->TokenToPiece(0, false), "");
  EXPECT_EQ(t->TokenToPiece(-1, true), "");
  EXPECT_EQ(t->TokenToPiece(1 << 30, true), "");
}

TEST(SpmTokenizer, DecodeDropsTheLeadingSpaceOfTheFirstTokenOnly) {
  const std::string sp_hi = std::string(kSp) + "hi";
  auto t = Make(MakeSpmVocab({{sp_hi, -1}}, true, /*add_space_prefix=*/true));
  const TokenId hi = kFirstSpecId;
  EXPECT_EQ(t->Decode(std::vector<TokenId>{hi, hi}, false), "hi hi");
  // As llama_detokenize: a leading BOS takes the first-token slot, so the space stays.
  EXPECT_EQ(t->Decode(std::vector<TokenId>{1, hi}, false), " hi");
  EXPECT_EQ(t->Decode(std::vector<TokenId>{1, hi}, true), "<s> hi");
  EXPECT_EQ(t->Decode(std::vector<TokenId>{Byte(0xE4), Byte(0xBD), Byte(0xA0)}, false),
            "\xe4\xbd\xa0");
  EXPECT_EQ(t->Decode(std::vector<TokenId>{}, false), "");
}

TEST(SpmTokenizer, DecodeKeepsLeadingSpacesWithoutSpacePrefix) {
  const std::string sp_hi = std::string(kSp) + "hi";
  auto t = Make(MakeSpmVocab({{sp_hi, -1}}, true, /*add_space_prefix=*/false));
  EXPECT_EQ(t->Decode(std::vector<TokenId>{kFirstSpecId}, false), " hi");
}

TEST(SpmTokenizer, RoundTripsTextThroughEncodeAndDecode) {
  auto t = Make(MakeSpmVocab({{"he", -1}, {"ll", -2}, {"o", -3}, {kSp, -4}, {"w", -5}}));
  for (std::string_view text : {"hello world", "  ", "\xe4\xbd\xa0\xe5\xa5\xbd", "a\tb\n",
                                "<s> not special", "\xf0\x9f\x98\x80"}) {
    EXPECT_EQ(t->Decode(Encode(*t, text, true, false), false), text);
  }
}

TEST(SpmTokenizer, EncodesLongRepetitiveInputs) {
  auto t = Make(MakeSpmVocab({{"a", -1}, {"aa", -2}, {"aaaa", -3}}));
  const std::string text(200000, 'a');
  auto ids = Encode(*t, text);
  EXPECT_EQ(ids.size(), 50000u);
  EXPECT_EQ(t->Decode(ids, false), text);
}

TEST(SpmTokenizer, RejectsNonSpmVocabs) {
  Vocab vocab = MakeSpmVocab({});
  vocab.kind = VocabKind::kBpe;
  auto t = SpmTokenizer::Create(std::move(vocab));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

TEST(Tokenizer, FromVocabBuildsTheTokenizerTheVocabNames) {
  auto t = Tokenizer::FromVocab(MakeSpmVocab({{"x", -1}}));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_NE(dynamic_cast<SpmTokenizer*>(t->get()), nullptr);
  EXPECT_EQ((*t)->vocab().size(), 3u + 256u + 1u);
}

}  // namespace
}  // namespace strata::tokenizer
