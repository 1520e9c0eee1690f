#include "strata/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/tokenizer/spm_tokenizer.h"
#include "tokenizer_test_util.h"

namespace strata::tokenizer {
namespace {

using testing::kFirstSpecId;
using testing::MakeSpmVocab;

constexpr char kSp[] = "\xe2\x96\x81";
constexpr char kFffd[] = "\xef\xbf\xbd";

TokenId Byte(uint8_t b) { return 3 + b; }

std::unique_ptr<Tokenizer> MakeTokenizer(bool add_space_prefix = false) {
  auto t = SpmTokenizer::Create(MakeSpmVocab(
      {{std::string(kSp) + "hi", -1}, {"\xe4\xbd\xa0", -1}, {"<c>", 0, TokenType::kControl}}, true,
      add_space_prefix));
  EXPECT_TRUE(t.ok());
  return std::move(t).value();
}

TEST(IncrementalDetokenizer, HoldsBackASplitCharacterUntilItCompletes) {
  auto t = MakeTokenizer();
  IncrementalDetokenizer d(*t, false);
  EXPECT_EQ(d.Push(Byte(0xE5)), "");
  EXPECT_EQ(d.num_pending_bytes(), 1u);
  EXPECT_EQ(d.Push(Byte(0xA5)), "");
  EXPECT_EQ(d.Push(Byte(0xBD)), "\xe5\xa5\xbd");
  EXPECT_EQ(d.num_pending_bytes(), 0u);
  EXPECT_EQ(d.Push(kFirstSpecId), " hi");
  EXPECT_EQ(d.Flush(), "");
  EXPECT_EQ(d.num_tokens(), 4u);
}

TEST(IncrementalDetokenizer, ReplacesBytesThatCanNoLongerFormACharacter) {
  auto t = MakeTokenizer();
  IncrementalDetokenizer d(*t, false);
  EXPECT_EQ(d.Push(Byte(0xE5)), "");
  EXPECT_EQ(d.Push(Byte(0xA5)), "");
  // 'A' cannot continue the sequence: the two held bytes become one U+FFFD.
  EXPECT_EQ(d.Push(Byte('A')), std::string(kFffd) + "A");
  EXPECT_EQ(d.Push(Byte(0xFF)), kFffd);
  EXPECT_EQ(d.Push(Byte(0xF0)), "");
  EXPECT_EQ(d.Flush(), kFffd);  // unfinished at the end
  EXPECT_EQ(d.Flush(), "");
}

TEST(IncrementalDetokenizer, AppliesTheFirstTokenSpaceRuleLikeDecode) {
  auto t = MakeTokenizer(/*add_space_prefix=*/true);
  IncrementalDetokenizer d(*t, false);
  EXPECT_EQ(d.Push(kFirstSpecId), "hi");
  EXPECT_EQ(d.Push(kFirstSpecId), " hi");

  IncrementalDetokenizer after_bos(*t, true);
  EXPECT_EQ(after_bos.Push(1), "<s>");
  EXPECT_EQ(after_bos.Push(kFirstSpecId), " hi");
}

TEST(IncrementalDetokenizer, RendersControlTokensOnlyWhenAsked) {
  auto t = MakeTokenizer();
  IncrementalDetokenizer plain(*t, false);
  EXPECT_EQ(plain.Push(kFirstSpecId + 2), "");
  IncrementalDetokenizer special(*t, true);
  EXPECT_EQ(special.Push(kFirstSpecId + 2), "<c>");
  EXPECT_EQ(special.Push(-5), "");  // invalid ids add nothing
}

// The contract: deltas + Flush == ReplaceInvalidUtf8(Decode(ids)), for any id sequence.
TEST(IncrementalDetokenizer, DeltasConcatenateToTheSanitizedDecode) {
  for (bool add_space_prefix : {false, true}) {
    auto t = MakeTokenizer(add_space_prefix);
    std::mt19937 rng(42);
    const int vocab_size = static_cast<int>(t->vocab().size());
    for (int round = 0; round < 500; ++round) {
      std::vector<TokenId> ids(rng() % 20);
      for (TokenId& id : ids) {
        id = rng() % 3 == 0 ? static_cast<TokenId>(rng() % vocab_size)
                            : Byte(static_cast<uint8_t>(0x80 + rng() % 0x78));
      }
      for (bool render_special : {false, true}) {
        IncrementalDetokenizer d(*t, render_special);
        std::string streamed;
        for (TokenId id : ids) {
          std::string delta = d.Push(id);
          ASSERT_EQ(ReplaceInvalidUtf8(delta), delta) << "a delta must be valid UTF-8";
          streamed += delta;
        }
        streamed += d.Flush();
        ASSERT_EQ(streamed, ReplaceInvalidUtf8(t->Decode(ids, render_special)));
      }
    }
  }
}

TEST(Utf8, ReplacesMaximalInvalidSubpartsLikePython) {
  // Expectations from Python's bytes.decode("utf-8", errors="replace").
  const std::string r = kFffd;
  EXPECT_EQ(ReplaceInvalidUtf8("abc"), "abc");
  EXPECT_EQ(ReplaceInvalidUtf8("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(ReplaceInvalidUtf8("\xc3("), r + "(");
  EXPECT_EQ(ReplaceInvalidUtf8("\xe4\xbd("), r + "(");
  EXPECT_EQ(ReplaceInvalidUtf8("\xc0\x80"), r + r);                  // overlong lead
  EXPECT_EQ(ReplaceInvalidUtf8("\xe0\x80\x80"), r + r + r);          // overlong second byte
  EXPECT_EQ(ReplaceInvalidUtf8("\xed\xa0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(ReplaceInvalidUtf8("\xf4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(ReplaceInvalidUtf8("\xf0\x9f\x98"), r);                  // unfinished at the end
  EXPECT_EQ(ReplaceInvalidUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(ReplaceInvalidUtf8("\x80\xbf"), r + r);
  EXPECT_EQ(ReplaceInvalidUtf8("\xff"), r);
  EXPECT_EQ(ReplaceInvalidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8, CompletePrefixStopsBeforeAnUnfinishedSequenceOnly) {
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe4\xbd"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe4\xbd\xa0"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xe4("), 4u);  // invalid, not unfinished
  EXPECT_EQ(CompleteUtf8Prefix("\xf0"), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("\xf5"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

}  // namespace
}  // namespace strata::tokenizer
