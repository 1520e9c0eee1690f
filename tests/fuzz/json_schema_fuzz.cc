// libFuzzer target: JsonSchemaToGrammar on arbitrary text. Invariants for any input:
//   - it returns a grammar or an INVALID_ARGUMENT error, never crashes, overflows the stack or
//     runs away with memory (sizes, counts and nesting are bounded by Limits);
//   - a grammar it returns compiles, and a bounded random walk of a matcher over a vocabulary
//     of the 256 single bytes (plus an end token) agrees with itself: every token the mask
//     allows is accepted, the end token only when the root can end, and Rollback restores the
//     mask. The walk's choices come from a hash of the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/grammar/compiled_grammar.h"
#include "strata/grammar/grammar_matcher.h"
#include "strata/grammar/json_schema.h"
#include "strata/grammar/token_vocabulary.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "json_schema_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

std::shared_ptr<const strata::grammar::TokenVocabulary> ByteVocabulary() {
  static const auto* vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");
    auto v = strata::grammar::TokenVocabulary::Build(bytes, std::vector<bool>(bytes.size()), {256});
    Require(v.ok(), "the byte vocabulary builds");
    return new std::shared_ptr<const strata::grammar::TokenVocabulary>(*v);
  }();
  return *vocab;
}

void Walk(const strata::grammar::Grammar& grammar, std::string_view seed_text) {
  using strata::grammar::GrammarMatcher;
  auto compiled = strata::grammar::CompiledGrammar::Compile(grammar, ByteVocabulary());
  Require(compiled.ok(), "a parsed grammar compiles");
  GrammarMatcher m(*compiled);
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto grammar = strata::grammar::JsonSchemaToGrammar(text);
  if (!grammar.ok()) {
    Require(grammar.status().code() == strata::StatusCode::kInvalidArgument,
            "errors are INVALID_ARGUMENT");
    return 0;
  }
  Walk(*grammar, text);
  return 0;
}
