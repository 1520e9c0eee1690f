// The grammar IR that every front end (GBNF, regular expressions, JSON Schema) produces and
// CompiledGrammar consumes.
//
// A Grammar is a list of rules; a rule is a list of alternatives; an alternative is a sequence
// of elements; an element is either a code-point class (sorted, disjoint, inclusive ranges of
// char32_t; negation already resolved) or a reference to another rule. Repetition is not an
// element form: the front ends expand `*`, `+`, `?` and `{m,n}` into helper rules (right
// recursion or a chain of optional rules, each body factored into one rule, so a bounded repeat
// costs O(n) elements and nesting never multiplies sizes). A rule with no alternatives matches
// nothing; an empty alternative matches the empty string.
//
// Thread safety: a Grammar is a plain value; treat it as immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "strata/common/status.h"

namespace strata::grammar {

// Bounds every front end enforces, so that hostile inputs cost bounded time and memory.
struct Limits {
  int32_t max_rules = 20000;             // rules, helpers included
  int64_t max_elements = 400000;         // elements over all alternatives
  int32_t max_repetition = 1000;         // m and n of {m,n}, minItems, maxLength, ...
  size_t max_grammar_bytes = 64 * 1024;  // GBNF text and JSON Schema text
  size_t max_regex_bytes = 4 * 1024;     // one regular expression
  int32_t max_nesting_depth = 32;        // groups in GBNF/regex, schema nesting
  size_t max_literal_bytes = 64 * 1024;  // one enum/const literal
};

// Inclusive range of Unicode code points.
struct CodepointRange {
  char32_t lo = 0;
  char32_t hi = 0;
  bool operator==(const CodepointRange&) const = default;
};

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

struct Element {
  enum class Kind { kClass, kRule };
  Kind kind = Kind::kClass;
  std::vector<CodepointRange> ranges;  // kClass: sorted, disjoint, non-adjacent ranges
  int32_t rule = -1;                   // kRule: index into Grammar::rules

  static Element Class(std::vector<CodepointRange> ranges);  // normalizes (sorts, merges)
  static Element Char(char32_t c) { return Class({{c, c}}); }
  static Element Ref(int32_t rule_index);
};

struct Alternative {
  std::vector<Element> elements;
};

struct Rule {
  std::string name;
  std::vector<Alternative> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;
  int32_t root = -1;

  // Appends a rule and returns its index.
  int32_t AddRule(std::string name, std::vector<Alternative> alternatives = {});
  // Total number of elements over all rules.
  int64_t NumElements() const;
};

// Sorts and merges ranges; drops ranges with lo > hi; clamps to kMaxCodepoint.
std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges);
// [0, kMaxCodepoint] minus `ranges` (which must be normalized).
std::vector<CodepointRange> NegateRanges(const std::vector<CodepointRange>& ranges);

// Checks the structure (indices in range, a root, classes normalized), the limits (rule and
// element counts) and rejects left recursion (a rule that can reach itself without consuming
// input), naming the rule. INVALID_ARGUMENT with the problem otherwise.
Status ValidateGrammar(const Grammar& grammar, const Limits& limits = {});

// For each rule: whether it can match the empty string.
std::vector<bool> NullableRules(const Grammar& grammar);

// A GBNF-like rendering for logs and tests (not guaranteed to parse back).
std::string GrammarToString(const Grammar& grammar);

// Appends the UTF-8 encoding of `c` to `out`.
void AppendUtf8(char32_t c, std::string* out);

}  // namespace strata::grammar
