// Expected splits were produced by llama.cpp's unicode_regex_split (the version vendored in
// llama-cpp-python 0.3.36) for the same regex lists, then checked by hand against the regexes.
#include "strata/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "strata/tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

using Words = std::vector<std::string>;

Words Split(PreTokenizerKind kind, std::string_view text) { return SplitWordsUtf8(kind, text); }

struct SplitCase {
  std::string text;
  Words default_words;
  Words gpt2;
  Words llama3;
  Words qwen2;
};

class PreTokenizerSplits : public testing::TestWithParam<SplitCase> {};

TEST_P(PreTokenizerSplits, MatchLlamaCpp) {
  const SplitCase& c = GetParam();
  EXPECT_EQ(Split(PreTokenizerKind::kDefault, c.text), c.default_words) << "default";
  EXPECT_EQ(Split(PreTokenizerKind::kGpt2, c.text), c.gpt2) << "gpt2";
  EXPECT_EQ(Split(PreTokenizerKind::kLlama3, c.text), c.llama3) << "llama3";
  EXPECT_EQ(Split(PreTokenizerKind::kQwen2, c.text), c.qwen2) << "qwen2";
}

INSTANTIATE_TEST_SUITE_P(
    HandWritten, PreTokenizerSplits,
    testing::Values(
        SplitCase{"Hello world",
                  {"Hello", " world"},
                  {"Hello", " world"},
                  {"Hello", " world"},
                  {"Hello", " world"}},
        // Contractions: case-sensitive for gpt2, case-insensitive for llama3/qwen2; the
        // default pre-tokenizer cuts the apostrophe out first, so it never sees them.
        SplitCase{"I'm here, aren't you?",
                  {"I", "'", "m", " here", ",", " aren", "'", "t", " you", "?"},
                  {"I", "'m", " here", ",", " aren", "'t", " you", "?"},
                  {"I", "'m", " here", ",", " aren", "'t", " you", "?"},
                  {"I", "'m", " here", ",", " aren", "'t", " you", "?"}},
        SplitCase{"they'RE 'S 'LL 'Ve 'D",
                  {"they", "'", "RE", " ", "'", "S", " ", "'", "LL", " ", "'", "Ve", " ", "'", "D"},
                  {"they", "'", "RE", " '", "S", " '", "LL", " '", "Ve", " '", "D"},
                  {"they", "'RE", " '", "S", " '", "LL", " '", "Ve", " '", "D"},
                  {"they", "'RE", " '", "S", " '", "LL", " '", "Ve", " '", "D"}},
        // Digits: whole runs (gpt2), groups of three from the left (llama3, default's
        // [0-9]{3}), one per word (qwen2).
        SplitCase{"1234567 89",
                  {"123", "456", "7", " ", "89"},
                  {"1234567", " 89"},
                  {"123", "456", "7", " ", "89"},
                  {"1", "2", "3", "4", "5", "6", "7", " ", "8", "9"}},
        SplitCase{"3.14159",
                  {"3", ".", "141", "59"},
                  {"3", ".", "14159"},
                  {"3", ".", "141", "59"},
                  {"3", ".", "1", "4", "1", "5", "9"}},
        SplitCase{"\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6 x\xc2\xb2",  // ٣٤٥٦ x²
                  {"\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6", " x", "\xc2\xb2"},
                  {"\xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6", " x", "\xc2\xb2"},
                  {"\xd9\xa3\xd9\xa4\xd9\xa5", "\xd9\xa6", " x", "\xc2\xb2"},
                  {"\xd9\xa3", "\xd9\xa4", "\xd9\xa5", "\xd9\xa6", " x", "\xc2\xb2"}},
        // \s+(?!\S): the last space of a run starts the next word.
        SplitCase{"  lead  trail  ",
                  {" ", " lead", " ", " trail", "  "},
                  {" ", " lead", " ", " trail", "  "},
                  {" ", " lead", " ", " trail", "  "},
                  {" ", " lead", " ", " trail", "  "}},
        SplitCase{"end ", {"end", " "}, {"end", " "}, {"end", " "}, {"end", " "}},
        // Newline runs: \s*[\r\n]+ keeps them whole for llama3/qwen2.
        SplitCase{"a\n\n\nb",
                  {"a", "\n\n", "\n", "b"},
                  {"a", "\n\n", "\n", "b"},
                  {"a", "\n\n\n", "b"},
                  {"a", "\n\n\n", "b"}},
        SplitCase{"x  \n  y",
                  {"x", "  \n ", " y"},
                  {"x", "  \n ", " y"},
                  {"x", "  \n", " ", " y"},
                  {"x", "  \n", " ", " y"}},
        SplitCase{"\r\n\r\nX",
                  {"\r\n\r", "\n", "X"},
                  {"\r\n\r", "\n", "X"},
                  {"\r\n\r\n", "X"},
                  {"\r\n\r\n", "X"}},
        // Punctuation: one leading non-letter joins a letter run for llama3; trailing
        // newlines join a punctuation run.
        SplitCase{"(word) !?!\n\nnext",
                  {"(", "word", ")", " ", "!?!", "\n", "\n", "next"},
                  {"(", "word", ")", " !?!", "\n", "\n", "next"},
                  {"(word", ")", " !?!\n\n", "next"},
                  {"(word", ")", " !?!\n\n", "next"}},
        SplitCase{"\tTab", {"\t", "Tab"}, {"\t", "Tab"}, {"\tTab"}, {"\tTab"}},
        SplitCase{"$100+<=>^~|`",
                  {"$", "100", "+<=>^~|", "`"},
                  {"$", "100", "+<=>^~|`"},
                  {"$", "100", "+<=>^~|`"},
                  {"$", "1", "0", "0", "+<=>^~|`"}},
        SplitCase{" 12 ab",
                  {" ", "12", " ab"},
                  {" 12", " ab"},
                  {" ", "12", " ab"},
                  {" ", "1", "2", " ab"}},
        // CJK: letters without spaces; full-width punctuation leads the next letter run.
        SplitCase{
            "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe5\x86\x8d\xe8\xa7\x81\xef\xbc\x81",
            {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c", "\xe5\x86\x8d\xe8\xa7\x81",
             "\xef\xbc\x81"},
            {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c", "\xe5\x86\x8d\xe8\xa7\x81",
             "\xef\xbc\x81"},
            {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c\xe5\x86\x8d\xe8\xa7\x81", "\xef\xbc\x81"},
            {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c\xe5\x86\x8d\xe8\xa7\x81", "\xef\xbc\x81"}},
        // Invalid UTF-8 splits as U+FFFD (a symbol-like code point).
        SplitCase{"ab\xff\xfe cd",
                  {"ab", "\xef\xbf\xbd\xef\xbf\xbd", " cd"},
                  {"ab", "\xef\xbf\xbd\xef\xbf\xbd", " cd"},
                  {"ab", "\xef\xbf\xbd\xef\xbf\xbd", " cd"},
                  {"ab", "\xef\xbf\xbd\xef\xbf\xbd", " cd"}}));

TEST(PreTokenizer, EmptyTextHasNoWords) {
  for (PreTokenizerKind kind : {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2,
                                PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2}) {
    EXPECT_TRUE(SplitWords(kind, {}).empty());
  }
}

TEST(PreTokenizer, WordLengthsCoverTheTextExactly) {
  const std::string text =
      "Mixed: caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 12345 \t\n\n  x'S y'll !!! \xf0\x9f\x98\x80\xff";
  const std::vector<char32_t> cps = DecodeUtf8(text);
  for (PreTokenizerKind kind : {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2,
                                PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2}) {
    const std::vector<size_t> lengths = SplitWords(kind, cps);
    EXPECT_EQ(std::accumulate(lengths.begin(), lengths.end(), size_t{0}), cps.size());
    for (size_t length : lengths) EXPECT_GT(length, 0u);
  }
}

TEST(PreTokenizer, LlamaStyleNamesMapToTheirSplitAndMergeRule) {
  const auto llama = LookupPreTokenizer("llama-bpe");
  ASSERT_TRUE(llama.has_value());
  EXPECT_EQ(llama->kind, PreTokenizerKind::kLlama3);
  EXPECT_TRUE(llama->ignore_merges);
  const auto dbrx = LookupPreTokenizer("dbrx");
  ASSERT_TRUE(dbrx.has_value());
  EXPECT_EQ(dbrx->kind, PreTokenizerKind::kLlama3);
  EXPECT_FALSE(dbrx->ignore_merges);
  const auto qwen = LookupPreTokenizer("qwen2");
  ASSERT_TRUE(qwen.has_value());
  EXPECT_EQ(qwen->kind, PreTokenizerKind::kQwen2);
  EXPECT_FALSE(qwen->ignore_merges);
  EXPECT_EQ(LookupPreTokenizer("gpt-2")->kind, PreTokenizerKind::kGpt2);
  EXPECT_EQ(LookupPreTokenizer("default")->kind, PreTokenizerKind::kDefault);
}

TEST(PreTokenizer, UnknownNamesAreNotSupported) {
  EXPECT_FALSE(LookupPreTokenizer("deepseek-coder").has_value());
  EXPECT_FALSE(LookupPreTokenizer("").has_value());
  EXPECT_FALSE(LookupPreTokenizer("LLAMA-BPE").has_value());
}

}  // namespace
}  // namespace strata::tokenizer
