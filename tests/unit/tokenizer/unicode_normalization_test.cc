#include "strata/tokenizer/unicode_normalization.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::tokenizer {
namespace {

std::u32string Lower(std::u32string_view text) {
  std::u32string out;
  for (char32_t cp : text) AppendLowercase(cp, &out);
  return out;
}

TEST(UnicodeNormalization, DecomposesPrecomposedLettersCanonically) {
  EXPECT_EQ(ToNfd(U"\u00e9"), U"e\u0301");                   // é
  EXPECT_EQ(ToNfd(U"\u00c5"), U"A\u030a");                   // Å
  EXPECT_EQ(ToNfd(U"\u212b"), U"A\u030a");                   // ANGSTROM SIGN, a singleton
  EXPECT_EQ(ToNfd(U"\u1f82"), U"\u03b1\u0313\u0300\u0345");  // ᾂ: four deep
  EXPECT_EQ(ToNfd(U"\u1e69"), U"s\u0323\u0307");             // ṩ
  EXPECT_EQ(ToNfd(U"abc xyz"), U"abc xyz");
  EXPECT_EQ(ToNfd(U""), U"");
}

TEST(UnicodeNormalization, LeavesCompatibilityDecompositionsAlone) {
  EXPECT_EQ(ToNfd(U"\ufb01"), U"\ufb01");  // ﬁ ligature: NFKD only
  EXPECT_EQ(ToNfd(U"\u00bd"), U"\u00bd");  // ½
  EXPECT_EQ(ToNfd(U"\u2460"), U"\u2460");  // ①
}

TEST(UnicodeNormalization, DecomposesHangulSyllablesByFormula) {
  EXPECT_EQ(ToNfd(U"\uac00"), U"\u1100\u1161");        // 가: no trailing consonant
  EXPECT_EQ(ToNfd(U"\ud7a3"), U"\u1112\u1175\u11c2");  // 힣: the last syllable
  EXPECT_EQ(ToNfd(U"\ud55c"), U"\u1112\u1161\u11ab");  // 한
}

TEST(UnicodeNormalization, OrdersCombiningMarksByClass) {
  // Dot below (220) sorts before dot above (230), whatever order they come in.
  EXPECT_EQ(ToNfd(U"s\u0307\u0323"), U"s\u0323\u0307");
  EXPECT_EQ(ToNfd(U"s\u0323\u0307"), U"s\u0323\u0307");
  // Equal classes keep their order (the sort is stable); a starter ends a run.
  EXPECT_EQ(ToNfd(U"a\u0301\u0300b\u0300\u0301"), U"a\u0301\u0300b\u0300\u0301");
  EXPECT_EQ(ToNfd(U"\u1e0b\u0323"), U"d\u0323\u0307");  // ḋ + dot below
}

TEST(UnicodeNormalization, KnowsCombiningClassesAndNonspacingMarks) {
  EXPECT_EQ(CanonicalCombiningClass('a'), 0);
  EXPECT_EQ(CanonicalCombiningClass(0x0301), 230);
  EXPECT_EQ(CanonicalCombiningClass(0x0323), 220);
  EXPECT_EQ(CanonicalCombiningClass(0x0345), 240);
  EXPECT_EQ(CanonicalCombiningClass(0x110000), 0);
  EXPECT_TRUE(IsNonspacingMark(0x0301));
  EXPECT_TRUE(IsNonspacingMark(0x0e31));   // Thai MAI HAN-AKAT
  EXPECT_FALSE(IsNonspacingMark(0x0903));  // Devanagari visarga: Mc
  EXPECT_FALSE(IsNonspacingMark(0x20dd));  // enclosing circle: Me
  EXPECT_FALSE(IsNonspacingMark('a'));
  EXPECT_FALSE(IsNonspacingMark(0x110000));
}

TEST(UnicodeNormalization, LowercasesCodePointByCodePoint) {
  EXPECT_EQ(Lower(U"Hello WORLD 123"), U"hello world 123");
  EXPECT_EQ(Lower(U"\u00c9\u00c5\u00d8"), U"\u00e9\u00e5\u00f8");          // ÉÅØ
  EXPECT_EQ(Lower(U"\u0130"), U"i\u0307");                                 // İ: two code points
  EXPECT_EQ(Lower(U"\u03a3\u039f\u03a3"), U"\u03c3\u03bf\u03c3");          // no final sigma
  EXPECT_EQ(Lower(U"\u0410\u042f"), U"\u0430\u044f");                      // Cyrillic
  EXPECT_EQ(Lower(U"\u1e9e\u01c5\u2160"), U"\u00df\u01c6\u2170");          // ẞ ǅ Ⅰ
  EXPECT_EQ(Lower(U"\U00010400"), U"\U00010428");                          // Deseret
  EXPECT_EQ(Lower(U"\u00df\u4e2d\U0001f600"), U"\u00df\u4e2d\U0001f600");  // uncased
  EXPECT_FALSE(LowercaseTablesVersion().empty());
}

}  // namespace
}  // namespace strata::tokenizer
