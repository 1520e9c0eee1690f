#include "strata/grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar_test_util.h"
#include "strata/grammar/gbnf.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::grammar {
namespace {

using testing::BruteForceMask;
using testing::MaskBit;

// Printable ASCII bytes, multi-byte pieces, pieces that split UTF-8 characters, an empty control
// token, a never-allowed token and two end tokens.
std::shared_ptr<const TokenVocabulary> MixedVocabulary() {
  std::vector<std::string> bytes;
  std::vector<bool> never;
  auto add = [&](std::string b, bool never_allowed = false) {
    bytes.push_back(std::move(b));
    never.push_back(never_allowed);
    return static_cast<int32_t>(bytes.size() - 1);
  };
  const int32_t eos = add("");
  add("", /*never_allowed=*/true);         // a control token
  const int32_t eot = add("<eot>", true);  // end token whose text is never matched
  add("x", /*never_allowed=*/true);        // special token with ordinary-looking bytes
  for (int b = 0x20; b < 0x7F; ++b) add(std::string(1, static_cast<char>(b)));
  add("\n");
  add("\t");
  for (const char* piece :
       {"ab",     "abc",          "\"",     "\",",      "\"}",      "{\"",      "\":",
        "\": \"", "},{",          "[{\"",   "]}",       "\n  ",     "true",     "tr",
        "ue",     "null",         "fal",    "se",       "123",      "-1",       ".5",
        "e+",     "hello",        " world", "\xc3\xa9", "\xc3",     "\xa9",     "\xe2\x82",
        "\xac",   "\xe2\x82\xac", "\xe2",   "\x82\xac", "\xf0\x9f", "\x98\x80", "\xf0\x9f\x98\x80",
        "a\xc3",  "\xa9z",        "((",     "))",       "(x)",      "bb",       "aaa",
        "\xff",   "\xc0\x80"}) {
    add(piece);
  }
  auto v = TokenVocabulary::Build(bytes, never, {eos, eot});
  EXPECT_TRUE(v.ok());
  return *v;
}

const char* const kGrammars[] = {
    // JSON-like values.
    R"g(root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( pair ( "," ws pair )* )? "}"
pair ::= string ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \n]{0,3})g",
    // Ambiguous alternatives and nullable rules.
    R"g(root ::= ( "a" | "ab" | "abc" ) "b"* tail
tail ::= "" | "c" tail | "\u00e9")g",
    // Nested (non-tail) recursion.
    R"g(root ::= item+
item ::= "(" item* ")" | [a-z])g",
    // Unicode classes that tokens split.
    R"g(root ::= [\u00e0-\u00ff\u20ac\U0001F600-\U0001F64F a-z]{0,12} "!"?)g",
};

class MaskMatchesBruteForce : public ::testing::TestWithParam<int> {};

TEST_P(MaskMatchesBruteForce, OnRandomReachableStates) {
  auto grammar = ParseGbnf(kGrammars[GetParam()]);
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  std::vector<uint32_t> mask(vocab->bitmask_words());
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    GrammarMatcher m(*compiled);
    for (int step = 0; step < 40; ++step) {
      m.FillNextTokenBitmask(mask);
      ASSERT_EQ(mask, BruteForceMask(m)) << "seed " << seed << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        if (MaskBit(mask, id) && !vocab->is_end_token(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t id = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(id));
      // Now and then undo a few tokens and check the mask there too.
      if (rng() % 5 == 0 && m.NumRollbackTokens() >= 2) {
        m.Rollback(2);
        m.FillNextTokenBitmask(mask);
        ASSERT_EQ(mask, BruteForceMask(m)) << "after rollback, seed " << seed;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grammars, MaskMatchesBruteForce, ::testing::Range(0, 4));

TEST(GrammarMatcher, NeverAllowedAndEmptyTokensAreNeverAllowed) {
  auto grammar = ParseGbnf(R"(root ::= [a-z]*)");
  ASSERT_TRUE(grammar.ok());
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  GrammarMatcher m(*compiled);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  m.FillNextTokenBitmask(mask);
  EXPECT_FALSE(MaskBit(mask, 1));  // empty control token
  EXPECT_FALSE(MaskBit(mask, 3));  // "x", never allowed
  EXPECT_FALSE(m.AcceptToken(3));
  EXPECT_TRUE(MaskBit(mask, 0));  // both end tokens: the root can end
  EXPECT_TRUE(MaskBit(mask, 2));
  EXPECT_FALSE(m.AcceptToken(-1));
  EXPECT_FALSE(m.AcceptToken(vocab->size()));
}

TEST(GrammarMatcher, EndTokenOnlyWhenRootCanEndThenNothing) {
  auto grammar = ParseGbnf(R"(root ::= "ab")");
  ASSERT_TRUE(grammar.ok());
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  GrammarMatcher m(*compiled);
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_FALSE(m.AcceptToken(0));
  EXPECT_TRUE(m.AcceptBytes("a"));
  EXPECT_FALSE(m.AcceptToken(0));
  EXPECT_TRUE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.CanTerminate());
  EXPECT_TRUE(m.AcceptToken(2));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.IsDead());
  std::vector<uint32_t> mask(vocab->bitmask_words(), ~0u);
  m.FillNextTokenBitmask(mask);
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);
  EXPECT_FALSE(m.AcceptBytes("a"));
  m.Rollback(1);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.CanTerminate());
  m.Rollback(2);
  EXPECT_FALSE(m.CanTerminate());
  EXPECT_TRUE(m.AcceptBytes("ab"));
}

TEST(GrammarMatcher, CharacterSplitAcrossTokensCompletesLater) {
  auto grammar = ParseGbnf("root ::= \"\\u20ac\" \"z\"");
  ASSERT_TRUE(grammar.ok());
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  GrammarMatcher m(*compiled);
  EXPECT_TRUE(m.AcceptBytes("\xe2"));
  EXPECT_FALSE(m.AcceptBytes("\xc3"));
  EXPECT_TRUE(m.AcceptBytes("\x82\xac"));
  EXPECT_TRUE(m.AcceptBytes("z"));
  EXPECT_TRUE(m.CanTerminate());
}

TEST(GrammarMatcher, GrammarThatMatchesNothingIsDeadAtTheStart) {
  Grammar g;
  g.root = g.AddRule("root");
  auto compiled = CompiledGrammar::Compile(g, MixedVocabulary());
  ASSERT_TRUE(compiled.ok());
  GrammarMatcher m(*compiled);
  EXPECT_TRUE(m.IsDead());
  EXPECT_FALSE(m.CanTerminate());
}

TEST(GrammarMatcher, SharedCacheGivesTheSameMasksToTwoMatchers) {
  auto grammar = ParseGbnf(kGrammars[0]);
  ASSERT_TRUE(grammar.ok());
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  const std::vector<std::string> pieces = {"{\"", "ab", "\":",  " ", "[",
                                           "123", ",",  "true", "]", "}"};
  std::vector<std::vector<uint32_t>> first;
  for (int pass = 0; pass < 2; ++pass) {
    GrammarMatcher m(*compiled);
    std::vector<uint32_t> mask(vocab->bitmask_words());
    for (size_t i = 0; i < pieces.size(); ++i) {
      m.FillNextTokenBitmask(mask);
      if (pass == 0) {
        first.push_back(mask);
      } else {
        EXPECT_EQ(mask, first[i]) << "step " << i;
      }
      ASSERT_TRUE(m.AcceptBytes(pieces[i])) << pieces[i];
    }
    EXPECT_TRUE(m.CanTerminate());
  }
  const CompiledGrammar::CacheStats stats = (*compiled)->cache_stats();
  EXPECT_GE(stats.mask_hits, static_cast<int64_t>(pieces.size()));
  EXPECT_GT(stats.position_entries, 0);
}

TEST(GrammarMatcher, NextMaskIsCachedOnlyOnceItsPositionsWereComputed) {
  auto grammar = ParseGbnf(kGrammars[0]);
  ASSERT_TRUE(grammar.ok());
  auto vocab = MixedVocabulary();
  auto compiled = CompiledGrammar::Compile(*grammar, vocab);
  ASSERT_TRUE(compiled.ok());
  std::vector<uint32_t> mask(vocab->bitmask_words());
  GrammarMatcher first(*compiled);
  EXPECT_FALSE(first.NextMaskIsCached());  // a fresh grammar: nothing computed yet
  const CompiledGrammar::CacheStats before = (*compiled)->cache_stats();
  EXPECT_FALSE(first.NextMaskIsCached());  // asking computes nothing and counts nothing
  const CompiledGrammar::CacheStats after = (*compiled)->cache_stats();
  EXPECT_EQ(after.position_entries, before.position_entries);
  EXPECT_EQ(after.mask_hits + after.mask_misses, before.mask_hits + before.mask_misses);
  first.FillNextTokenBitmask(mask);
  EXPECT_TRUE(first.NextMaskIsCached());
  ASSERT_TRUE(first.AcceptBytes("{\""));
  EXPECT_FALSE(first.NextMaskIsCached());  // inside a string key: a new position
  first.FillNextTokenBitmask(mask);
  EXPECT_TRUE(first.NextMaskIsCached());
  // Another request on the same grammar finds both positions computed.
  GrammarMatcher second(*compiled);
  EXPECT_TRUE(second.NextMaskIsCached());
  ASSERT_TRUE(second.AcceptBytes("{\""));
  EXPECT_TRUE(second.NextMaskIsCached());
  // Terminated or dead: nothing to compute.
  GrammarMatcher done(*compiled);
  ASSERT_TRUE(done.AcceptBytes("1"));
  ASSERT_TRUE(done.AcceptToken(0));  // the end token
  ASSERT_TRUE(done.IsTerminated());
  EXPECT_TRUE(done.NextMaskIsCached());
}

TEST(GrammarMatcher, CompileRejectsLeftRecursionAndNullVocabulary) {
  Grammar g;
  g.root = g.AddRule("root");
  g.rules[0].alternatives.push_back(Alternative{{Element::Ref(0), Element::Char('a')}});
  auto c = CompiledGrammar::Compile(g, MixedVocabulary());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'root' is left-recursive"), std::string::npos);
  auto n = CompiledGrammar::Compile(g, nullptr);
  EXPECT_FALSE(n.ok());
}

TEST(TokenVocabulary, RejectsMismatchedSizesAndBadEndIds) {
  auto a = TokenVocabulary::Build({"a", "b"}, {false}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("never_allowed has 1 entries for 2 tokens"),
            std::string::npos);
  auto b = TokenVocabulary::Build({"a", "b"}, {false, false}, {2});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("end token id 2"), std::string::npos);
}

TEST(TokenVocabulary, SortsMatchableTokensWithCommonPrefixes) {
  auto v =
      TokenVocabulary::Build({"b", "ab", "", "a", "abc"}, {false, false, false, false, true}, {2});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)->sorted_ids(), (std::vector<int32_t>{3, 1, 0}));
  EXPECT_EQ((*v)->sorted_lcp(), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_FALSE((*v)->is_matchable(4));
  EXPECT_FALSE((*v)->is_matchable(2));
}

}  // namespace
}  // namespace strata::grammar
