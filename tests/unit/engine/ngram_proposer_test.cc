#include "strata/engine/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata::engine {
namespace {

std::vector<int32_t> Propose(const std::vector<int32_t>& tokens, int32_t max_tokens,
                             NgramProposerOptions options = {}) {
  NgramProposer proposer(options);
  std::vector<int32_t> draft;
  proposer.Propose(1, tokens, max_tokens, &draft);
  return draft;
}

TEST(NgramProposer, ProposesWhatFollowedTheSuffixBefore) {
  // "... 5 6 7 8 9 ... 5 6" -> 7 8 9.
  EXPECT_EQ(Propose({1, 5, 6, 7, 8, 9, 2, 3, 5, 6}, 3), (std::vector<int32_t>{7, 8, 9}));
}

TEST(NgramProposer, StopsAtMaxTokensAndAtTheEnd) {
  EXPECT_EQ(Propose({1, 5, 6, 7, 8, 9, 2, 3, 5, 6}, 2), (std::vector<int32_t>{7, 8}));
  // The continuation runs into the suffix itself: at most up to the last token.
  EXPECT_EQ(Propose({4, 5, 6, 4, 5, 6, 4, 5}, 8), (std::vector<int32_t>{6, 4, 5}));
  EXPECT_TRUE(Propose({1, 5, 6, 7, 5, 6}, 0).empty());
}

TEST(NgramProposer, TheLongestSuffixWinsThenTheMostRecentOccurrence) {
  // The 2-gram "3 4" occurs twice; the 3-gram "2 3 4" only at the start: it wins.
  EXPECT_EQ(Propose({2, 3, 4, 10, 9, 3, 4, 11, 2, 3, 4}, 1), (std::vector<int32_t>{10}));
  // Without a longer match, the most recent earlier "3 4" is taken.
  EXPECT_EQ(Propose({3, 4, 10, 9, 3, 4, 11, 8, 3, 4}, 1), (std::vector<int32_t>{11}));
}

TEST(NgramProposer, ProposesNothingWithoutAMatchOrBelowMinNgram) {
  EXPECT_TRUE(Propose({1, 2, 3, 4, 5, 6}, 4).empty());
  EXPECT_TRUE(Propose({}, 4).empty());
  EXPECT_TRUE(Propose({7}, 4).empty());
  // Only the last token recurs: a 1-gram, below the default min_ngram of 2...
  EXPECT_TRUE(Propose({1, 9, 2, 3, 9}, 4).empty());
  // ...but found with min_ngram 1.
  EXPECT_EQ(Propose({1, 9, 2, 3, 9}, 2, {1, 4}), (std::vector<int32_t>{2, 3}));
}

TEST(NgramProposer, AppendsToTheDraftItIsGiven) {
  NgramProposer proposer({});
  std::vector<int32_t> draft = {99};
  const std::vector<int32_t> tokens = {1, 5, 6, 7, 5, 6};
  proposer.Propose(1, tokens, 1, &draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{99, 7}));
}

TEST(NgramProposerOptions, ValidateNamesTheBadField) {
  EXPECT_TRUE(NgramProposerOptions{}.Validate().ok());
  EXPECT_NE(NgramProposerOptions({0, 3}).Validate().message().find("min_ngram"), std::string::npos);
  EXPECT_NE(NgramProposerOptions({3, 2}).Validate().message().find("max_ngram"), std::string::npos);
  EXPECT_NE(NgramProposerOptions({1, 65}).Validate().message().find("max_ngram"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::engine
