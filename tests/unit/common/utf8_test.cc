#include "strata/common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace strata {
namespace {

TEST(IsValidUtf8, AcceptsEveryWellFormedLength) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ASCII\n"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));          // é
  EXPECT_TRUE(IsValidUtf8("\xE6\x9D\xB1"));      // 東
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));  // 😀
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));      // U+D7FF, just below the surrogates
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

TEST(IsValidUtf8, RejectsMalformedSequencesAndSaysWhere) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"ab\x80", 2},                // lone continuation byte
      {"\xC0\xAF", 0},              // overlong '/'
      {"\xC1\xBF", 0},              // overlong
      {"x\xE0\x80\xAF", 1},         // overlong 3-byte
      {"\xED\xA0\x80", 0},          // surrogate U+D800
      {"\xF0\x80\x80\xAF", 0},      // overlong 4-byte
      {"\xF4\x90\x80\x80", 0},      // above U+10FFFF
      {"\xF5\x80\x80\x80", 0},      // invalid lead
      {"\xFF", 0},                  // invalid byte
      {"ok\xE6\x9D", 2},            // truncated at the end
      {"\xC3(", 0},                 // bad continuation
      {"\xE6\x9D\xB1\xF0\x9F", 3},  // valid then truncated
  };
  for (const Case& c : cases) {
    size_t offset = 999;
    EXPECT_FALSE(IsValidUtf8(c.text, &offset)) << c.offset;
    EXPECT_EQ(offset, c.offset) << "case at " << c.offset;
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(ToValidUtf8, ReplacesEachInvalidByteAndKeepsValidText) {
  EXPECT_EQ(ToValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(ToValidUtf8(""), "");
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A truncated 3-byte sequence: its lead byte, then its continuation byte.
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xDE\x9E\x00\x00\xC0\xAF\xED\xA0\x80x")));
}

}  // namespace
}  // namespace strata
