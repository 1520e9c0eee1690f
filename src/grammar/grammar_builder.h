// Internal to strata_grammar: what the front ends share to build a Grammar under Limits
// (helper rules for groups and repetition, element budgets, UTF-8 decoding).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"

namespace strata::grammar::internal {

class GrammarBuilder {
 public:
  GrammarBuilder(Grammar* grammar, const Limits& limits) : grammar_(grammar), limits_(limits) {}

  Grammar& grammar() { return *grammar_; }
  const Limits& limits() const { return limits_; }

  // A new rule named "<base>_<n>" with the given alternatives.
  StatusOr<int32_t> AddHelperRule(const std::string& base, std::vector<Alternative> alternatives);
  // A new rule with exactly this name.
  StatusOr<int32_t> AddNamedRule(const std::string& name, std::vector<Alternative> alternatives);

  // Appends `body` repeated between min and max times (max < 0: unbounded) to `out`, adding
  // helper rules as needed. Errors when min/max exceed limits.max_repetition or min > max.
  Status AppendRepeat(const Element& body, int64_t min, int64_t max, const std::string& base,
                      std::vector<Element>* out);

  // Counts elements added outside the helpers above (alternatives built by the caller).
  Status Charge(int64_t elements);

 private:
  Grammar* grammar_;
  Limits limits_;
  int64_t elements_ = 0;
  int64_t helper_counter_ = 0;
};

// Decodes one UTF-8 code point at text[*pos]; advances *pos. nullopt for invalid UTF-8.
std::optional<char32_t> DecodeUtf8(std::string_view text, size_t* pos);

// "line L, column C" of a byte offset (1-based).
std::string LineColumn(std::string_view text, size_t offset);

}  // namespace strata::grammar::internal
