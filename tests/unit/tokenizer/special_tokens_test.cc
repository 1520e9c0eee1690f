#include "strata/tokenizer/special_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>
#include <string>
#include <vector>

#include "tokenizer_test_util.h"

namespace strata::tokenizer {
namespace {

using testing::MakeSpmVocab;
using testing::TokenSpec;

// A fragment as text: raw text in quotes, a token as #id. (Built by appending: GCC 12 warns
// falsely about "literal" + std::string at -O3.)
std::string ShowOne(bool is_token, TokenId id, std::string_view text) {
  std::string s;
  if (is_token) {
    s += '#';
    s += std::to_string(id);
  } else {
    s += '\'';
    s += text;
    s += '\'';
  }
  return s;
}

std::vector<std::string> Show(const std::vector<TextFragment>& fragments) {
  std::vector<std::string> out;
  for (const TextFragment& f : fragments) out.push_back(ShowOne(f.is_token(), f.token, f.text));
  return out;
}

bool IsCSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// The partition rule written the slow, obvious way: candidates one by one in priority order,
// each scanning every raw fragment left to right and splitting it.
std::vector<std::string> ReferencePartition(const Vocab& vocab, const std::string& text,
                                            bool parse_special) {
  struct Frag {
    bool token;
    TokenId id;
    size_t begin, end;
  };
  std::list<Frag> frags;
  if (!text.empty()) frags.push_back({false, kNoToken, 0, text.size()});
  std::vector<TokenId> order;
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab.attrs[i] & (token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown)) {
      order.push_back(static_cast<TokenId>(i));
    }
  }
  std::sort(order.begin(), order.end(),
            [&](TokenId a, TokenId b) { return vocab.tokens[a].size() > vocab.tokens[b].size(); });
  for (TokenId id : order) {
    const uint32_t attr = vocab.attrs[id];
    if (!parse_special && (attr & (token_attr::kControl | token_attr::kUnknown))) continue;
    const std::string& needle = vocab.tokens[id];
    for (auto it = frags.begin(); it != frags.end(); ++it) {
      if (it->token) continue;
      size_t begin = it->begin;
      const size_t end = it->end;
      std::string_view window(text.data(), end);
      size_t match = window.find(needle, begin);
      if (match == std::string_view::npos) continue;
      // Replace this fragment by the pieces: left, token, then keep scanning the right part.
      auto pos = frags.erase(it);
      while (match != std::string_view::npos) {
        size_t left_end = match;
        if (attr & token_attr::kLstrip) {
          while (left_end > begin && IsCSpace(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) frags.insert(pos, {false, kNoToken, begin, left_end});
        frags.insert(pos, {true, id, 0, 0});
        size_t right = match + needle.size();
        if (attr & token_attr::kRstrip) {
          while (right < end && IsCSpace(text[right])) ++right;
        }
        begin = right;
        match = begin < end ? window.find(needle, begin) : std::string_view::npos;
      }
      if (begin < end) frags.insert(pos, {false, kNoToken, begin, end});
      it = std::prev(pos);
    }
  }
  std::vector<std::string> out;
  for (const Frag& f : frags) {
    out.push_back(ShowOne(f.token, f.id, std::string_view(text).substr(f.begin, f.end - f.begin)));
  }
  return out;
}

TEST(SpecialTokenPartitioner, SplitsOutControlTokensOnlyWhenParsingSpecials) {
  Vocab vocab = MakeSpmVocab({{"<ctl>", 0, TokenType::kControl}, {"hi", 0}}, false);
  SpecialTokenPartitioner p(vocab);
  EXPECT_EQ(Show(p.Partition("hi<ctl>there", true)),
            (std::vector<std::string>{"'hi'", "#3", "'there'"}));
  EXPECT_EQ(Show(p.Partition("hi<ctl>there", false)), (std::vector<std::string>{"'hi<ctl>there'"}));
  // BOS text is a control token too.
  EXPECT_EQ(Show(p.Partition("<s><s>", true)), (std::vector<std::string>{"#1", "#1"}));
  EXPECT_TRUE(p.Partition("", true).empty());
}

TEST(SpecialTokenPartitioner, UserDefinedTokensAreAlwaysSplitOut) {
  Vocab vocab = MakeSpmVocab(
      {{"\n\n", 0, TokenType::kUserDefined}, {"\n", 0, TokenType::kUserDefined}}, false);
  SpecialTokenPartitioner p(vocab);
  // Longer first: "\n\n" claims pairs, "\n" takes the rest.
  EXPECT_EQ(Show(p.Partition("a\n\n\nb", false)),
            (std::vector<std::string>{"'a'", "#3", "#4", "'b'"}));
  EXPECT_EQ(Show(p.Partition("\n\n\n\n", false)), (std::vector<std::string>{"#3", "#3"}));
}

TEST(SpecialTokenPartitioner, LongerTokensWinOverlaps) {
  Vocab vocab = MakeSpmVocab(
      {{"ab", 0, TokenType::kUserDefined}, {"bcd", 0, TokenType::kUserDefined}}, false);
  SpecialTokenPartitioner p(vocab);
  // "bcd" is tried first although "ab" starts earlier.
  EXPECT_EQ(Show(p.Partition("abcd", false)), (std::vector<std::string>{"'a'", "#4"}));
  EXPECT_EQ(Show(p.Partition("ab cd", false)), (std::vector<std::string>{"#3", "' cd'"}));
}

TEST(SpecialTokenPartitioner, StripAttributesSwallowWhitespaceWithinTheFragment) {
  Vocab vocab = MakeSpmVocab(
      {{"<L>", 0, TokenType::kUserDefined}, {"<R>", 0, TokenType::kUserDefined}}, false);
  vocab.attrs[3] |= token_attr::kLstrip;
  vocab.attrs[4] |= token_attr::kRstrip;
  SpecialTokenPartitioner p(vocab);
  EXPECT_EQ(Show(p.Partition("a \t<L> b", false)), (std::vector<std::string>{"'a'", "#3", "' b'"}));
  EXPECT_EQ(Show(p.Partition("a <R> \n b", false)),
            (std::vector<std::string>{"'a '", "#4", "'b'"}));
  EXPECT_EQ(Show(p.Partition("  <L>", false)), (std::vector<std::string>{"#3"}));
  EXPECT_EQ(Show(p.Partition("<R><L>", false)), (std::vector<std::string>{"#4", "#3"}));
}

TEST(SpecialTokenPartitioner, FragmentsAreViewsIntoTheInput) {
  Vocab vocab = MakeSpmVocab({{"<x>", 0, TokenType::kUserDefined}}, false);
  SpecialTokenPartitioner p(vocab);
  const std::string text = "ab<x>cd";
  auto fragments = p.Partition(text, false);
  ASSERT_EQ(fragments.size(), 3u);
  EXPECT_EQ(fragments[0].text.data(), text.data());
  EXPECT_EQ(fragments[2].text.data(), text.data() + 5);
  EXPECT_EQ(p.num_candidates(), 4u);  // <unk>, <s>, </s>, <x>
}

TEST(SpecialTokenPartitioner, ClaimsLongWhitespaceRunsLongestFirst) {
  std::vector<TokenSpec> specs;
  for (int n = 2; n <= 31; ++n) specs.push_back({std::string(n, ' '), 0, TokenType::kUserDefined});
  Vocab vocab = MakeSpmVocab(specs, false);
  SpecialTokenPartitioner p(vocab);
  const std::string text(200000, ' ');
  auto fragments = p.Partition(text, false);
  // 200000 = 6451 * 31 + 19
  ASSERT_EQ(fragments.size(), 6452u);
  EXPECT_EQ(fragments.front().token, 3 + 29);
  EXPECT_EQ(fragments.back().token, 3 + 17);
}

// Random vocabs and texts over a tiny alphabet, so that candidates overlap a lot; the fast
// partition must agree with the reference on every one.
TEST(SpecialTokenPartitioner, AgreesWithTheReferenceOnRandomInputs) {
  std::mt19937 rng(1234);
  const std::string alphabet = "ab \n";
  auto random_string = [&](size_t min_len, size_t max_len) {
    std::string s(std::uniform_int_distribution<size_t>(min_len, max_len)(rng), 'a');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  int compared = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<TokenSpec> specs;
    std::vector<std::string> seen;
    const int num_specials = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < num_specials; ++i) {
      std::string t = random_string(1, 4);
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      specs.push_back({t, 0, rng() % 2 ? TokenType::kControl : TokenType::kUserDefined});
    }
    Vocab vocab = MakeSpmVocab(specs, false);
    for (size_t i = 3; i < vocab.size(); ++i) {
      if (rng() % 4 == 0) vocab.attrs[i] |= token_attr::kLstrip;
      if (rng() % 4 == 0) vocab.attrs[i] |= token_attr::kRstrip;
    }
    SpecialTokenPartitioner p(vocab);
    for (int t = 0; t < 20; ++t) {
      const std::string text = random_string(0, 40);
      for (bool parse_special : {false, true}) {
        ASSERT_EQ(Show(p.Partition(text, parse_special)),
                  ReferencePartition(vocab, text, parse_special))
            << "text '" << text << "' parse_special " << parse_special << " round " << round;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 300 * 20 * 2);
}

// Every string over {a, b} up to length 3 is a candidate, so each position starts three
// occurrences: more than the partitioner stores, so most candidates are found by re-scanning.
TEST(SpecialTokenPartitioner, AgreesWithTheReferenceWhenOccurrencesExceedTheStorageBudget) {
  std::mt19937 rng(99);
  std::vector<TokenSpec> specs;
  for (int len = 1; len <= 3; ++len) {
    for (int bits = 0; bits < (1 << len); ++bits) {
      std::string t;
      for (int i = 0; i < len; ++i) t += (bits >> i) & 1 ? 'b' : 'a';
      specs.push_back({t, 0, bits % 3 == 0 ? TokenType::kControl : TokenType::kUserDefined});
    }
  }
  for (int round = 0; round < 20; ++round) {
    Vocab vocab = MakeSpmVocab(specs, false);
    for (size_t i = 3; i < vocab.size(); ++i) {
      if (rng() % 5 == 0) vocab.attrs[i] |= token_attr::kRstrip;
    }
    SpecialTokenPartitioner p(vocab);
    std::string text(600 + rng() % 400, 'a');
    for (char& c : text) c = "ab  "[rng() % (round % 2 ? 4 : 2)];
    for (bool parse_special : {false, true}) {
      ASSERT_EQ(Show(p.Partition(text, parse_special)),
                ReferencePartition(vocab, text, parse_special))
          << "round " << round << " parse_special " << parse_special;
    }
  }
}

}  // namespace
}  // namespace strata::tokenizer
