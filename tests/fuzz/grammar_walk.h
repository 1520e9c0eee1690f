// What the grammar fuzz targets (gbnf_fuzz, regex_fuzz, json_schema_fuzz) share: the check of a
// front end's result. Invariants for any input:
//   - the front end returns a grammar or an INVALID_ARGUMENT error, never crashes, overflows the
//     stack or runs away with memory (sizes, counts and nesting are bounded by Limits);
//   - a grammar it returns compiles, and a bounded random walk of a matcher over a vocabulary
//     of the 256 single bytes (plus an end token) agrees with itself: every token the mask
//     allows is accepted, the end token only when the root can end, and Rollback restores the
//     mask. The walk's choices come from a hash of the input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "strata/grammar/compiled_grammar.h"
#include "strata/grammar/grammar_matcher.h"
#include "strata/grammar/token_vocabulary.h"

namespace strata::fuzz {

inline std::shared_ptr<const grammar::TokenVocabulary> ByteVocabulary() {
  static const auto* vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");
    auto v = grammar::TokenVocabulary::Build(bytes, std::vector<bool>(bytes.size()), {256});
    Require(v.ok(), "the byte vocabulary builds");
    return new std::shared_ptr<const grammar::TokenVocabulary>(*v);
  }();
  return *vocab;
}

inline void WalkGrammar(const grammar::Grammar& g, std::string_view seed_text) {
  auto compiled = grammar::CompiledGrammar::Compile(g, ByteVocabulary());
  Require(compiled.ok(), "a grammar the front end returns compiles");
  grammar::GrammarMatcher m(*compiled);
  uint64_t h = 1469598103934665603ull;
  for (char c : seed_text) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  std::vector<uint32_t> mask(ByteVocabulary()->bitmask_words()), again(mask.size());
  for (int step = 0; step < 48; ++step) {
    m.FillNextTokenBitmask(mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < 257; ++id) {
      if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    }
    Require(((mask[256 >> 5] >> (256 & 31)) & 1) == m.CanTerminate(),
            "the end token is allowed exactly when the root can end");
    if (allowed.empty()) return;
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t id = allowed[(h >> 33) % allowed.size()];
    Require(m.AcceptToken(id), "an allowed token is accepted");
    if (m.IsTerminated()) return;
    if (step % 7 == 3) {
      m.Rollback(1);
      m.FillNextTokenBitmask(again);
      Require(again == mask, "rollback restores the mask");
      Require(m.AcceptToken(id), "the token is accepted again after rollback");
    }
  }
}

// Checks a front end's answer for `text` (see the top of the file).
inline void CheckFrontEnd(const StatusOr<grammar::Grammar>& result, std::string_view text) {
  if (!result.ok()) {
    Require(result.status().code() == StatusCode::kInvalidArgument, "errors are INVALID_ARGUMENT");
    return;
  }
  WalkGrammar(*result, text);
}

}  // namespace strata::fuzz
