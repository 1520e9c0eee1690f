#include "strata/embedding/wordpiece_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::embedding {
namespace {

// A BERT-style tokenizer.json over a tiny vocabulary; `model`, `normalizer`, `pre_tokenizer`,
// `post_processor` and `added` replace their parts for the error tests.
struct Parts {
  std::string vocab =
      R"("[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"[MASK]":4,"un":5,"##aff":6,"##able":7,)"
      R"("play":8,"##ing":9,"##s":10,"!":11,"'":12,"t":13,"don":14,"a":15,"##a":16,)"
      R"("cafe":17,"中":18,"文":19,"hello":20,"##b":21,"b":22,"ß":23,"##ß":24)";
  std::string model_extra = R"("continuing_subword_prefix":"##","max_input_chars_per_word":9)";
  std::string model_type = "WordPiece";
  std::string unk = "[UNK]";
  std::string normalizer =
      R"({"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,)"
      R"("strip_accents":null,"lowercase":true})";
  std::string pre_tokenizer = R"({"type":"BertPreTokenizer"})";
  std::string post_processor =
      R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},)"
      R"({"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],)"
      R"("pair":[],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2],"tokens":["[CLS]"]},)"
      R"("[SEP]":{"id":"[SEP]","ids":[3],"tokens":["[SEP]"]}}})";
  std::string added =
      R"([{"id":0,"content":"[PAD]","special":true,"normalized":false,"lstrip":false,)"
      R"("rstrip":false,"single_word":false},{"id":2,"content":"[CLS]","special":true,)"
      R"("normalized":false},{"id":3,"content":"[SEP]","normalized":false},)"
      R"({"id":4,"content":"[MASK]"}])";

  std::string Json() const {
    return R"({"version":"1.0","truncation":{"max_length":128},"padding":null,"added_tokens":)" +
           added + R"(,"normalizer":)" + normalizer + R"(,"pre_tokenizer":)" + pre_tokenizer +
           R"(,"post_processor":)" + post_processor +
           R"(,"decoder":{"type":"WordPiece"},"model":{"type":")" + model_type +
           R"(","unk_token":")" + unk + R"(",)" + model_extra + R"(,"vocab":{)" + vocab + "}}}";
  }
};

WordPieceTokenizer Make(const Parts& parts = {}) {
  auto t = WordPieceTokenizer::FromJson(parts.Json());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

std::vector<int32_t> Ids(const WordPieceTokenizer& t, std::string_view text, int max = 512) {
  auto ids = t.Encode(text, max);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

using V = std::vector<int32_t>;

TEST(WordPieceTokenizer, ReadsTheVocabularyAndSpecialIds) {
  const WordPieceTokenizer t = Make();
  EXPECT_EQ(t.vocab_size(), 25);
  EXPECT_EQ(t.cls_id(), 2);
  EXPECT_EQ(t.sep_id(), 3);
  EXPECT_EQ(t.unk_id(), 1);
  EXPECT_EQ(t.TokenText(6), "##aff");
  EXPECT_EQ(t.TokenId("##able"), 7);
  EXPECT_EQ(t.TokenId("missing"), std::nullopt);
}

TEST(WordPieceTokenizer, SplitsWordsGreedilyLongestFirst) {
  const WordPieceTokenizer t = Make();
  EXPECT_EQ(Ids(t, "unaffable"), (V{2, 5, 6, 7, 3}));
  EXPECT_EQ(Ids(t, "playing plays"), (V{2, 8, 9, 8, 10, 3}));
  // "aaa": "a" then "##a" twice; a piece never restarts without the prefix.
  EXPECT_EQ(Ids(t, "aaa"), (V{2, 15, 16, 16, 3}));
  EXPECT_EQ(Ids(t, ""), (V{2, 3}));
  EXPECT_EQ(Ids(t, " \t\n"), (V{2, 3}));
}

TEST(WordPieceTokenizer, MakesAWordWithAnUncoveredStretchOneUnknownToken) {
  const WordPieceTokenizer t = Make();
  // "playx": "play" matches but "##x" does not: the whole word is [UNK], not "play" [UNK].
  EXPECT_EQ(Ids(t, "playx hello"), (V{2, 1, 20, 3}));
  EXPECT_EQ(Ids(t, "zzz"), (V{2, 1, 3}));
}

TEST(WordPieceTokenizer, MakesWordsOverTheCharacterLimitUnknown) {
  const WordPieceTokenizer t = Make();
  // max_input_chars_per_word is 9 code points, not bytes.
  EXPECT_EQ(Ids(t, "aaaaaaaaa"), (V{2, 15, 16, 16, 16, 16, 16, 16, 16, 16, 3}));
  EXPECT_EQ(Ids(t, "aaaaaaaaaa"), (V{2, 1, 3}));
  EXPECT_EQ(Ids(t, "\u00df\u00df\u00df\u00df\u00df\u00df\u00df\u00df\u00df"),
            (V{2, 23, 24, 24, 24, 24, 24, 24, 24, 24, 3}));
  EXPECT_EQ(Ids(t, "\u00df\u00df\u00df\u00df\u00df\u00df\u00df\u00df\u00df\u00df"), (V{2, 1, 3}));
}

TEST(WordPieceTokenizer, NormalizesAndPreTokenizesFirst) {
  const WordPieceTokenizer t = Make();
  EXPECT_EQ(Ids(t, "Don't!"), (V{2, 14, 12, 13, 11, 3}));
  EXPECT_EQ(Ids(t, "CAF\xc3\x89"), (V{2, 17, 3}));                   // CAFÉ
  EXPECT_EQ(Ids(t, "\xe4\xb8\xad\xe6\x96\x87"), (V{2, 18, 19, 3}));  // 中文
}

TEST(WordPieceTokenizer, MatchesAddedTokensInTheRawText) {
  const WordPieceTokenizer t = Make();
  EXPECT_EQ(Ids(t, "hello[SEP]hello"), (V{2, 20, 3, 20, 3}));
  EXPECT_EQ(Ids(t, "[CLS][MASK] [PAD]"), (V{2, 2, 4, 0, 3}));
  // Case-sensitive and not normalized: "[sep]" is punctuation and a word.
  EXPECT_EQ(Ids(t, "[sep]"), (V{2, 1, 1, 1, 3}));
  EXPECT_EQ(t.EncodePieces("a[SEP]"), (V{15, 3}));
}

TEST(WordPieceTokenizer, CutsToMaxTokensWithClsAndSep) {
  const WordPieceTokenizer t = Make();
  EXPECT_EQ(Ids(t, "playing plays", 4), (V{2, 8, 9, 3}));
  EXPECT_EQ(Ids(t, "playing plays", 2), (V{2, 3}));
  EXPECT_EQ(Ids(t, "playing plays", 6), (V{2, 8, 9, 8, 10, 3}));
  EXPECT_EQ(t.Encode("a", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(WordPieceTokenizer, RejectsInvalidUtf8) {
  const WordPieceTokenizer t = Make();
  for (std::string bad : {"\xff", "a\xc3", "\xed\xa0\x80", "\xc0\x80", "\xf4\x90\x80\x80"}) {
    const auto ids = t.Encode(bad);
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(ids.status().message().find("not valid UTF-8"), std::string::npos);
  }
}

TEST(WordPieceTokenizer, ReadsBertProcessingAndNoNormalizer) {
  Parts parts;
  parts.post_processor = R"({"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]})";
  parts.normalizer = "null";
  const WordPieceTokenizer t = Make(parts);
  EXPECT_EQ(t.cls_id(), 2);
  EXPECT_EQ(Ids(t, "hello HELLO"), (V{2, 20, 1, 3}));  // no lowercasing
}

void ExpectLoadError(const Parts& parts, StatusCode code, const std::string& needle) {
  const auto t = WordPieceTokenizer::FromJson(parts.Json());
  ASSERT_FALSE(t.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(t.status().code(), code) << t.status().ToString();
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().ToString();
}

TEST(WordPieceTokenizer, RefusesPipelinesItDoesNotImplement) {
  Parts p;
  p.model_type = "BPE";
  ExpectLoadError(p, StatusCode::kUnimplemented, "model type 'BPE'");
  p = Parts();
  p.normalizer = R"({"type":"NFKC"})";
  ExpectLoadError(p, StatusCode::kUnimplemented, "normalizer 'NFKC'");
  p = Parts();
  p.pre_tokenizer = R"({"type":"Whitespace"})";
  ExpectLoadError(p, StatusCode::kUnimplemented, "pre_tokenizer 'Whitespace'");
  p = Parts();
  p.pre_tokenizer = "null";
  ExpectLoadError(p, StatusCode::kUnimplemented, "BertPreTokenizer is required");
  p = Parts();
  p.post_processor = R"({"type":"RobertaProcessing"})";
  ExpectLoadError(p, StatusCode::kUnimplemented, "post_processor 'RobertaProcessing'");
  p = Parts();
  p.post_processor =
      R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}}],)"
      R"("special_tokens":{}})";
  ExpectLoadError(p, StatusCode::kUnimplemented, "post_processor.single");
  p = Parts();
  p.added = R"([{"id":4,"content":"[MASK]","lstrip":true}])";
  ExpectLoadError(p, StatusCode::kUnimplemented, "sets 'lstrip'");
  p = Parts();
  p.added = R"([{"id":99,"content":"[NEW]"}])";
  ExpectLoadError(p, StatusCode::kUnimplemented, "id outside the vocab");
}

TEST(WordPieceTokenizer, RejectsMalformedFiles) {
  EXPECT_EQ(WordPieceTokenizer::FromJson("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WordPieceTokenizer::FromJson("[]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WordPieceTokenizer::FromJson("{}").status().code(), StatusCode::kInvalidArgument);
  Parts p;
  p.unk = "[NOPE]";
  ExpectLoadError(p, StatusCode::kInvalidArgument, "unk_token '[NOPE]' is not in the vocab");
  p = Parts();
  p.vocab = R"("a":0,"b":0)";
  ExpectLoadError(p, StatusCode::kInvalidArgument, "not a distinct integer");
  p = Parts();
  p.vocab = R"("a":0,"b":5)";
  ExpectLoadError(p, StatusCode::kInvalidArgument, "not a distinct integer");
  p = Parts();
  p.model_extra = R"("continuing_subword_prefix":"##","max_input_chars_per_word":"x")";
  ExpectLoadError(p, StatusCode::kInvalidArgument, "max_input_chars_per_word");
  EXPECT_EQ(WordPieceTokenizer::Load("/nonexistent/tokenizer.json").status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata::embedding
