#include "strata/embedding/bert_normalizer.h"

#include <gtest/gtest.h>

namespace strata::embedding {
namespace {

TEST(BertNormalizer, LowercasesAndStripsAccents) {
  const BertNormalizer n;
  EXPECT_EQ(n.Normalize(U"H\u00e9llo W\u00d6RLD"), U"hello world");
  EXPECT_EQ(n.Normalize(U"na\u00efve caf\u00e9 \u00c5ngstr\u00f6m"), U"naive cafe angstrom");
  EXPECT_EQ(n.Normalize(U"\u0130stanbul"), U"istanbul");  // İ: the dot is stripped first
  EXPECT_EQ(n.Normalize(U"\u1f82"), U"\u03b1");           // ᾂ
  EXPECT_EQ(n.Normalize(U""), U"");
}

TEST(BertNormalizer, CleansControlCharactersAndWhitespace) {
  const BertNormalizer n;
  EXPECT_EQ(n.Normalize(U"a\tb\nc\rd"), U"a b c d");
  EXPECT_EQ(n.Normalize(U"a\u3000b\u00a0c\u2003d"), U"a b c d");  // White_Space
  // Dropped: NUL, U+FFFD, other Cc (including U+0085, which is White_Space too: the control
  // test comes first), Cf, Co.
  EXPECT_EQ(n.Normalize(std::u32string(U"a\0b", 3)), U"ab");
  EXPECT_EQ(n.Normalize(U"a\ufffdb\x1c"
                        U"c\u0085d\u200be\u00adf\ue000g"),
            U"abcdefg");
  // Unassigned code points stay.
  EXPECT_EQ(n.Normalize(U"a\u0378b"), U"a\u0378b");
}

TEST(BertNormalizer, SpacesOutChineseCharactersOnly) {
  const BertNormalizer n;
  EXPECT_EQ(n.Normalize(U"\u4e2d\u6587ab"), U" \u4e2d  \u6587 ab");
  EXPECT_EQ(n.Normalize(U"\U00020000"), U" \U00020000 ");  // extension B
  // Kana and Hangul are not "Chinese characters"; Hangul still decomposes (NFD).
  EXPECT_EQ(n.Normalize(U"\u3042"), U"\u3042");
  EXPECT_TRUE(IsChineseChar(0x4e00));
  EXPECT_TRUE(IsChineseChar(0xf900));
  EXPECT_FALSE(IsChineseChar(0x3042));
  EXPECT_FALSE(IsChineseChar(0xac00));
  EXPECT_FALSE(IsChineseChar(0x3002));  // 。 is punctuation
}

TEST(BertNormalizer, EachStepCanBeTurnedOff) {
  BertNormalizerOptions options;
  options.lowercase = false;
  options.strip_accents = false;
  options.clean_text = false;
  options.handle_chinese_chars = false;
  const BertNormalizer n(options);
  const std::u32string text = U"Caf\u00e9\t\u4e2d\u200b";
  EXPECT_EQ(n.Normalize(text), text);
  options.strip_accents = true;
  EXPECT_EQ(BertNormalizer(options).Normalize(U"Caf\u00e9"), U"Cafe");
  options.strip_accents = false;
  options.lowercase = true;
  EXPECT_EQ(BertNormalizer(options).Normalize(U"Caf\u00c9"), U"caf\u00e9");
}

}  // namespace
}  // namespace strata::embedding
