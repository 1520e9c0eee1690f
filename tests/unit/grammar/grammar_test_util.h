// Shared by the grammar tests: a byte vocabulary, whole-string matching through a matcher, the
// brute-force mask and random walks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "strata/grammar/compiled_grammar.h"
#include "strata/grammar/grammar.h"
#include "strata/grammar/grammar_matcher.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::grammar::testing {

// Token b (0..255) is the single byte b; token 256 is the end token.
inline constexpr int32_t kByteEndToken = 256;

inline std::shared_ptr<const TokenVocabulary> ByteVocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");
    auto v = TokenVocabulary::Build(bytes, std::vector<bool>(bytes.size(), false), {kByteEndToken});
    return std::move(v).value();
  }();
  return vocab;
}

inline std::shared_ptr<const CompiledGrammar> CompileForBytes(const Grammar& g) {
  auto c = CompiledGrammar::Compile(g, ByteVocabulary());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// Whether the whole of `s` is in the grammar's language, fed one byte per token, and the end
// token then accepted. Also checks each byte against the mask.
inline bool MatchesBytes(const std::shared_ptr<const CompiledGrammar>& g, std::string_view s) {
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(g->vocabulary().bitmask_words());
  for (char c : s) {
    const int32_t id = static_cast<uint8_t>(c);
    m.FillNextTokenBitmask(mask);
    const bool allowed = (mask[id >> 5] >> (id & 31)) & 1;
    const bool accepted = m.AcceptToken(id);
    EXPECT_EQ(allowed, accepted) << "mask and AcceptToken disagree on byte " << id;
    if (!accepted) return false;
  }
  m.FillNextTokenBitmask(mask);
  const bool end_allowed = (mask[kByteEndToken >> 5] >> (kByteEndToken & 31)) & 1;
  EXPECT_EQ(end_allowed, m.CanTerminate());
  return m.AcceptToken(kByteEndToken) && m.IsTerminated();
}

// A front end's grammar accepts every string of `accept` and none of `reject`.
inline void ExpectLanguage(const StatusOr<Grammar>& g, const std::vector<std::string>& accept,
                           const std::vector<std::string>& reject) {
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto compiled = CompileForBytes(*g);
  ASSERT_NE(compiled, nullptr);
  for (const std::string& s : accept) EXPECT_TRUE(MatchesBytes(compiled, s)) << "'" << s << "'";
  for (const std::string& s : reject) EXPECT_FALSE(MatchesBytes(compiled, s)) << "'" << s << "'";
}

inline bool MaskBit(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id >> 5] >> (id & 31)) & 1;
}

// What AcceptToken says for every id, on copies of `m`.
inline std::vector<uint32_t> BruteForceMask(const GrammarMatcher& m) {
  const TokenVocabulary& vocab = m.compiled_grammar().vocabulary();
  std::vector<uint32_t> mask(vocab.bitmask_words(), 0);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    GrammarMatcher copy(m);
    if (copy.AcceptToken(id)) mask[id >> 5] |= 1u << (id & 31);
  }
  return mask;
}

// A random walk: random allowed tokens (uniform over the mask, filtered by `keep` when given)
// until only the end token is allowed, the end token is drawn, or max_tokens. Returns the bytes.
template <typename Keep>
std::string RandomWalk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937* rng,
                       int max_tokens, Keep keep, bool* ended) {
  GrammarMatcher m(g);
  const TokenVocabulary& vocab = g->vocabulary();
  std::vector<uint32_t> mask(vocab.bitmask_words());
  std::string out;
  *ended = false;
  for (int step = 0; step < max_tokens; ++step) {
    m.FillNextTokenBitmask(mask);
    std::vector<int32_t> allowed;
    bool end_allowed = false;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (!MaskBit(mask, id)) continue;
      if (vocab.is_end_token(id)) {
        end_allowed = true;
      } else if (keep(id)) {
        allowed.push_back(id);
      }
    }
    if (allowed.empty() || (end_allowed && (*rng)() % 8 == 0)) {
      *ended = end_allowed && m.AcceptToken(vocab.end_token_ids().front());
      return out;
    }
    const int32_t id = allowed[(*rng)() % allowed.size()];
    EXPECT_TRUE(m.AcceptToken(id));
    out += vocab.token_bytes(id);
  }
  return out;
}

}  // namespace strata::grammar::testing
