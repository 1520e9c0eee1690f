#include "strata/tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tokenizer {
namespace {

std::vector<char32_t> Decode(std::string_view text) { return DecodeUtf8(text); }

TEST(UnicodeClass, ClassifiesByMajorGeneralCategory) {
  EXPECT_EQ(GetUnicodeClass('a'), UnicodeClass::kLetter);
  EXPECT_EQ(GetUnicodeClass('Z'), UnicodeClass::kLetter);
  EXPECT_EQ(GetUnicodeClass(0x00E9), UnicodeClass::kLetter);  // é
  EXPECT_EQ(GetUnicodeClass(0x4E2D), UnicodeClass::kLetter);  // 中
  EXPECT_EQ(GetUnicodeClass(0x3042), UnicodeClass::kLetter);  // あ
  EXPECT_EQ(GetUnicodeClass(0x02B0), UnicodeClass::kLetter);  // ʰ (Lm)
  EXPECT_EQ(GetUnicodeClass('7'), UnicodeClass::kNumber);
  EXPECT_EQ(GetUnicodeClass(0x0663), UnicodeClass::kNumber);  // Arabic-Indic 3 (Nd)
  EXPECT_EQ(GetUnicodeClass(0x2163), UnicodeClass::kNumber);  // Roman numeral IV (Nl)
  EXPECT_EQ(GetUnicodeClass(0x00B2), UnicodeClass::kNumber);  // superscript 2 (No)
  EXPECT_EQ(GetUnicodeClass(' '), UnicodeClass::kSeparator);
  EXPECT_EQ(GetUnicodeClass(0x3000), UnicodeClass::kSeparator);
  EXPECT_EQ(GetUnicodeClass(0x0301), UnicodeClass::kMark);  // combining acute
  EXPECT_EQ(GetUnicodeClass('!'), UnicodeClass::kPunctuation);
  EXPECT_EQ(GetUnicodeClass(0x3002), UnicodeClass::kPunctuation);  // 。
  EXPECT_EQ(GetUnicodeClass('$'), UnicodeClass::kSymbol);
  EXPECT_EQ(GetUnicodeClass('`'), UnicodeClass::kSymbol);
  EXPECT_EQ(GetUnicodeClass(0x1F600), UnicodeClass::kSymbol);  // 😀
  EXPECT_EQ(GetUnicodeClass('\n'), UnicodeClass::kControl);
  EXPECT_EQ(GetUnicodeClass(0x200D), UnicodeClass::kControl);  // ZWJ (Cf)
  EXPECT_EQ(GetUnicodeClass(0xD800), UnicodeClass::kControl);  // surrogate (Cs)
  EXPECT_EQ(GetUnicodeClass(0xE000), UnicodeClass::kControl);  // private use (Co)
  EXPECT_EQ(GetUnicodeClass(0x0378), UnicodeClass::kUnassigned);
  EXPECT_EQ(GetUnicodeClass(0x10FFFF), UnicodeClass::kUnassigned);
  EXPECT_EQ(GetUnicodeClass(0x110000), UnicodeClass::kUnassigned);
  EXPECT_EQ(GetUnicodeClass(0xFFFFFFFF), UnicodeClass::kUnassigned);
}

TEST(UnicodeClass, AsciiPunctuationIsTheDefaultPreTokenizerList) {
  // llama.cpp spells \p{P} for ASCII as this explicit list; the table must agree.
  const std::string_view punctuation = "!\"#%&'()*,-./:;?@[\\]_{}";
  for (char32_t cp = 0; cp < 0x80; ++cp) {
    const bool listed = punctuation.find(static_cast<char>(cp)) != std::string_view::npos;
    EXPECT_EQ(GetUnicodeClass(cp) == UnicodeClass::kPunctuation, listed)
        << "U+" << static_cast<uint32_t>(cp);
  }
}

TEST(UnicodeClass, Latin1TableAgreesWithRangeTable) {
  const uint32_t* begin = internal::kUnicodeClassRanges;
  const uint32_t* end = begin + internal::kNumUnicodeClassRanges;
  ASSERT_GT(internal::kNumUnicodeClassRanges, 1000u);
  EXPECT_EQ(*begin >> 8, 0u);
  EXPECT_TRUE(std::is_sorted(begin, end));
  for (const uint32_t* it = begin + 1; it != end; ++it) {
    EXPECT_NE(*it & 0xFF, *(it - 1) & 0xFF) << "adjacent ranges with one class at " << (*it >> 8);
  }
  for (uint32_t cp = 0; cp < 0x100; ++cp) {
    const uint32_t* it = std::upper_bound(begin, end, (cp << 8) | 0xFF);
    EXPECT_EQ(internal::kLatin1Classes[cp], *(it - 1) & 0xFF) << "U+" << cp;
  }
  EXPECT_FALSE(UnicodeTablesVersion().empty());
}

TEST(UnicodeWhitespace, IsTheWhiteSpaceProperty) {
  const std::set<char32_t> expected = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                       0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                       0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                       0x2029, 0x202F, 0x205F, 0x3000};
  for (char32_t cp = 0; cp < 0x10000; ++cp) {
    EXPECT_EQ(IsUnicodeWhitespace(cp), expected.count(cp) == 1)
        << "U+" << static_cast<uint32_t>(cp);
  }
  EXPECT_FALSE(IsUnicodeWhitespace(0x1C));    // Python's isspace() says yes
  EXPECT_FALSE(IsUnicodeWhitespace(0x200B));  // zero-width space is Cf
  EXPECT_FALSE(IsUnicodeWhitespace(0x110000));
}

TEST(Utf8Decode, DecodesValidSequencesOfEveryLength) {
  EXPECT_EQ(Decode("a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"),
            (std::vector<char32_t>{'a', 0xE9, 0x4E2D, 0x1F600}));
  EXPECT_EQ(Decode(std::string("\0x", 2)), (std::vector<char32_t>{0, 'x'}));
  EXPECT_TRUE(Decode("").empty());
}

TEST(Utf8Decode, InvalidBytesBecomeReplacementCharactersOneByteEach) {
  constexpr char32_t R = kReplacementCharacter;
  EXPECT_EQ(Decode("\x80"), (std::vector<char32_t>{R}));
  EXPECT_EQ(Decode("\xff\xfe"), (std::vector<char32_t>{R, R}));
  EXPECT_EQ(Decode("\xf8\x88\x80\x80\x80"), (std::vector<char32_t>{R, R, R, R, R}));
  // A truncated sequence: the lead byte fails alone, then the continuation byte fails too.
  EXPECT_EQ(Decode("\xe4\xb8"), (std::vector<char32_t>{R, R}));
  EXPECT_EQ(Decode("a\xe4\xb8z"), (std::vector<char32_t>{'a', R, R, 'z'}));
  // A missing continuation byte: only the lead byte is consumed.
  EXPECT_EQ(Decode("\xc3("), (std::vector<char32_t>{R, '('}));
  EXPECT_EQ(Decode("\xf0\x9f\x98"), (std::vector<char32_t>{R, R, R}));
}

TEST(Utf8Decode, AcceptsOverlongFormsAndSurrogatesLikeLlamaCpp) {
  EXPECT_EQ(Decode("\xc0\x80"), (std::vector<char32_t>{0}));
  EXPECT_EQ(Decode("\xc1\xbf"), (std::vector<char32_t>{0x7F}));
  EXPECT_EQ(Decode("\xe0\x80\xaf"), (std::vector<char32_t>{'/'}));
  EXPECT_EQ(Decode("\xed\xa0\x80"), (std::vector<char32_t>{0xD800}));
  EXPECT_EQ(Decode("\xf4\x8f\xbf\xbf"), (std::vector<char32_t>{0x10FFFF}));
}

TEST(Utf8Decode, ValuesAboveMaxCodepointAreInvalidLeadBytes) {
  constexpr char32_t R = kReplacementCharacter;
  EXPECT_EQ(Decode("\xf4\x90\x80\x80"), (std::vector<char32_t>{R, R, R, R}));
  EXPECT_EQ(Decode("\xf7\xbf\xbf\xbf"), (std::vector<char32_t>{R, R, R, R}));
}

TEST(Utf8Decode, AdvancesPositionByTheBytesConsumed) {
  const std::string_view text =
      "\xe4\xb8\xad\x80"
      "b";
  size_t pos = 0;
  EXPECT_EQ(DecodeUtf8(text, &pos), 0x4E2Du);
  EXPECT_EQ(pos, 3u);
  EXPECT_EQ(DecodeUtf8(text, &pos), kReplacementCharacter);
  EXPECT_EQ(pos, 4u);
  EXPECT_EQ(DecodeUtf8(text, &pos), char32_t{'b'});
  EXPECT_EQ(pos, 5u);
}

TEST(Utf8Encode, EncodesEveryLengthAndRoundTrips) {
  const std::vector<char32_t> cps = {'a', 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF};
  const std::string utf8 = EncodeUtf8(cps);
  EXPECT_EQ(utf8, "a\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
  EXPECT_EQ(DecodeUtf8(utf8), cps);
}

TEST(Utf8Encode, SurrogatesEncodeAsThreeBytesAndOutOfRangeAsReplacement) {
  std::string out;
  AppendUtf8(0xDFFF, &out);
  EXPECT_EQ(out, "\xed\xbf\xbf");
  out.clear();
  AppendUtf8(0x110000, &out);
  EXPECT_EQ(out, "\xef\xbf\xbd");
}

TEST(ByteAlphabet, MatchesGpt2BytesToUnicode) {
  EXPECT_EQ(ByteToUnicode('A'), char32_t{'A'});
  EXPECT_EQ(ByteToUnicode('!'), char32_t{'!'});
  EXPECT_EQ(ByteToUnicode(0xA1), char32_t{0xA1});
  EXPECT_EQ(ByteToUnicode(0xFF), char32_t{0xFF});
  EXPECT_EQ(ByteToUnicode(0x00), char32_t{0x100});
  EXPECT_EQ(ByteToUnicode('\n'), char32_t{0x10A});  // Ċ
  EXPECT_EQ(ByteToUnicode(' '), char32_t{0x120});   // Ġ
  EXPECT_EQ(ByteToUnicode(0x7F), char32_t{0x121});
  EXPECT_EQ(ByteToUnicode(0xA0), char32_t{0x142});
  EXPECT_EQ(ByteToUnicode(0xAD), char32_t{0x143});
}

TEST(ByteAlphabet, IsABijectionWithItsInverse) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_EQ(UnicodeToByte(cp), std::optional<uint8_t>(static_cast<uint8_t>(b)));
  }
  EXPECT_EQ(UnicodeToByte(' '), std::nullopt);
  EXPECT_EQ(UnicodeToByte(0xAD), std::nullopt);
  EXPECT_EQ(UnicodeToByte(0x144), std::nullopt);
  EXPECT_EQ(UnicodeToByte(0x4E2D), std::nullopt);
}

}  // namespace
}  // namespace strata::tokenizer
