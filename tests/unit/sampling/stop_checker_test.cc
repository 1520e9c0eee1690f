#include "strata/sampling/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "strata/sampling/xoshiro256.h"

namespace strata::sampling {
namespace {

struct Matched {
  std::string output;  // everything emitted, Flush() included
  int matched = -1;
};

// Feeds `deltas` one by one, then flushes.
Matched Feed(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  StopChecker checker(stops);
  Matched run;
  for (const std::string& delta : deltas) run.output += checker.Push(delta);
  run.output += checker.Flush();
  run.matched = checker.matched_index();
  return run;
}

std::vector<std::string> Bytes(std::string_view text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

// The contract, the slow way: the first end position at which some stop string (the longest
// one there) ends.
Matched Reference(const std::vector<std::string>& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
          (best < 0 || s.size() > stops[static_cast<size_t>(best)].size())) {
        best = static_cast<int>(i);
      }
    }
    if (best >= 0) {
      return {text.substr(0, end - stops[static_cast<size_t>(best)].size()), best};
    }
  }
  return {text, -1};
}

TEST(StopChecker, PassesTextThroughWithoutStopStrings) {
  StopChecker checker(std::vector<std::string>{});
  EXPECT_EQ(checker.Push("Hello"), "Hello");
  EXPECT_EQ(checker.Push(""), "");
  EXPECT_EQ(checker.Push(" world"), " world");
  EXPECT_EQ(checker.Flush(), "");
  EXPECT_FALSE(checker.stopped());
}

TEST(StopChecker, HoldsBackAPossibleStopStringAcrossOneByteDeltas) {
  StopChecker checker(std::vector<std::string>{"END"});
  EXPECT_EQ(checker.Push("a"), "a");
  EXPECT_EQ(checker.Push("E"), "");  // could begin "END"
  EXPECT_EQ(checker.num_held_bytes(), 1u);
  EXPECT_EQ(checker.Push("N"), "");
  EXPECT_EQ(checker.Push("x"), "ENx");  // ruled out: released
  EXPECT_EQ(checker.Push("E"), "");
  EXPECT_EQ(checker.Push("N"), "");
  EXPECT_EQ(checker.Push("D"), "");  // matched: nothing of it is emitted
  EXPECT_TRUE(checker.stopped());
  EXPECT_EQ(checker.matched_index(), 0);
  EXPECT_EQ(checker.Push("more"), "");
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopChecker, EmitsTextBeforeTheStopStringInTheSameDelta) {
  StopChecker checker(std::vector<std::string>{"</s>"});
  EXPECT_EQ(checker.Push("The answer is 4.</s>And then"), "The answer is 4.");
  EXPECT_TRUE(checker.stopped());
}

TEST(StopChecker, FlushReleasesAnUnfinishedPrefix) {
  StopChecker checker(std::vector<std::string>{"cd"});
  EXPECT_EQ(checker.Push("abc"), "ab");
  EXPECT_EQ(checker.Flush(), "c");
  EXPECT_FALSE(checker.stopped());
}

TEST(StopChecker, OverlappingPrefixesStopAtTheFirstToComplete) {
  const std::vector<std::string> stops = {"abc", "ab"};
  for (const auto& deltas :
       {Bytes("xabcd"), std::vector<std::string>{"xabcd"}, std::vector<std::string>{"xa", "bcd"}}) {
    const Matched run = Feed(stops, deltas);
    EXPECT_EQ(run.output, "x");
    EXPECT_EQ(run.matched, 1);  // "ab" completes first
  }
  // Only "abc" listed: "ab" alone is held, then released when "abd" rules it out.
  EXPECT_EQ(Feed({"abc"}, Bytes("xabdab")).output, "xabdab");
}

TEST(StopChecker, AShorterStopInsideALongerOneWinsWhenItEndsFirst) {
  const Matched run = Feed({"abcd", "bc"}, {"abcd"});
  EXPECT_EQ(run.output, "a");
  EXPECT_EQ(run.matched, 1);
  // Ending at the same byte, the longer (earlier-starting) one wins.
  const Matched same_end = Feed({"bc", "abc"}, {"zabc"});
  EXPECT_EQ(same_end.output, "z");
  EXPECT_EQ(same_end.matched, 1);
}

TEST(StopChecker, MultipleStopStrings) {
  const std::vector<std::string> stops = {"\n\n", "User:", "###"};
  const Matched run = Feed(stops, {"Sure", ".", " Us", "e", "r", " data\n", "#", "##", " x"});
  EXPECT_EQ(run.output, "Sure. User data\n");
  EXPECT_EQ(run.matched, 2);
}

TEST(StopChecker, SelfOverlappingPatternsAreFound) {
  EXPECT_EQ(Feed({"aab"}, Bytes("aaab!")).output, "a");
  EXPECT_EQ(Feed({"abab"}, Bytes("abaabababx")).output, "aba");
  EXPECT_EQ(Feed({"aaa"}, {"aa", "a"}).output, "");
}

TEST(StopChecker, NeverSplitsAUtf8Character) {
  StopChecker checker(std::vector<std::string>{"\xC3\xA9!"});  // "é!"
  std::string out;
  for (const std::string& b : Bytes("caf\xC3\xA9 \xC3\xA9!")) {
    const std::string piece = checker.Push(b);
    // Whatever is emitted ends on a character boundary here.
    if (!piece.empty()) {
      EXPECT_NE(static_cast<unsigned char>(piece.back()), 0xC3u);
    }
    out += piece;
  }
  EXPECT_EQ(out, "caf\xC3\xA9 ");
  EXPECT_TRUE(checker.stopped());
}

TEST(StopChecker, OutputDependsOnlyOnTheTextNotOnItsSplit) {
  Xoshiro256 rng(2024);
  auto random_string = [&](size_t max_length) {
    std::string s(1 + rng.Next() % max_length, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng.Next() % 3);
    return s;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    const size_t num_stops = rng.Next() % 4;  // zero included
    for (size_t i = 0; i < num_stops; ++i) stops.push_back(random_string(5));
    const std::string text = random_string(40);
    const Matched expected = Reference(stops, text);

    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      const size_t length = rng.Next() % 6;  // empty deltas included
      chunks.push_back(text.substr(at, length));
      at += length;
    }
    for (const auto& deltas : {Bytes(text), std::vector<std::string>{text}, chunks}) {
      const Matched run = Feed(stops, deltas);
      ASSERT_EQ(run.output, expected.output) << "text " << text << " trial " << trial;
      ASSERT_EQ(run.matched, expected.matched) << "text " << text << " trial " << trial;
    }
  }
}

TEST(StopChecker, HoldsLessThanTheLongestStopString) {
  StopChecker checker(std::vector<std::string>{"aaab", "ab"});
  for (int i = 0; i < 100; ++i) {
    checker.Push("a");
    ASSERT_LE(checker.num_held_bytes(), 3u);
  }
  EXPECT_EQ(checker.num_held_bytes(), 3u);
  EXPECT_FALSE(checker.stopped());
}

}  // namespace
}  // namespace strata::sampling
