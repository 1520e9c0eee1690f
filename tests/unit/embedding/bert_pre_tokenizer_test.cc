#include "strata/embedding/bert_pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::embedding {
namespace {

std::vector<std::u32string> Words(std::u32string_view text) {
  std::vector<std::u32string> out;
  for (std::u32string_view w : SplitBertWords(text)) out.emplace_back(w);
  return out;
}

using W = std::vector<std::u32string>;

TEST(BertPreTokenizer, SplitsAtWhitespaceAndDropsIt) {
  EXPECT_EQ(Words(U"hello world"), (W{U"hello", U"world"}));
  EXPECT_EQ(Words(U"  a \t\n b  "), (W{U"a", U"b"}));
  EXPECT_EQ(Words(U"a\u3000b"), (W{U"a", U"b"}));
  EXPECT_EQ(Words(U""), W{});
  EXPECT_EQ(Words(U"   "), W{});
}

TEST(BertPreTokenizer, IsolatesEachPunctuationCharacter) {
  EXPECT_EQ(Words(U"don't!!"), (W{U"don", U"'", U"t", U"!", U"!"}));
  EXPECT_EQ(Words(U"a+b=c$5"), (W{U"a", U"+", U"b", U"=", U"c", U"$", U"5"}));
  EXPECT_EQ(Words(U"\u00bfqu\u00e9?"), (W{U"\u00bf", U"qu\u00e9", U"?"}));
  EXPECT_EQ(Words(U"x\u3002y"), (W{U"x", U"\u3002", U"y"}));  // 。
}

TEST(BertPreTokenizer, KeepsNonAsciiSymbolsInsideWords) {
  EXPECT_EQ(Words(U"a\U0001f600b \u20acx"), (W{U"a\U0001f600b", U"\u20acx"}));
  EXPECT_TRUE(IsBertPunctuation('`'));
  EXPECT_TRUE(IsBertPunctuation('~'));
  EXPECT_TRUE(IsBertPunctuation(0x2014));   // em dash: Pd
  EXPECT_FALSE(IsBertPunctuation(0x20ac));  // €: Sc beyond ASCII
  EXPECT_FALSE(IsBertPunctuation('a'));
  EXPECT_FALSE(IsBertPunctuation(' '));
}

}  // namespace
}  // namespace strata::embedding
