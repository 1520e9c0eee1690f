// Regular expressions (an ECMAScript subset) to the grammar IR.
//
// The whole output must match (as if the pattern were ^(?:...)$). Supported: literals; escapes
// \d \D \w \W \s \S \n \r \t \f \v \0 \xHH \uHHHH \u{H...} and escaped metacharacters
// (\. \/ \* and the backslash itself, ...); classes [...] with ranges, negation and the escapes
// above; `.` (any code point but \n, \r, U+2028, U+2029); groups ( ), (?: ) and (?<name> );
// alternation |; quantifiers
// * + ? {n} {n,} {n,m}, each optionally lazy (`?`, same language). `^` at the start and `$` at
// the end of a top-level alternative are accepted and ignored.
//
// Errors are INVALID_ARGUMENT, "regex: at offset N: <problem>": backreferences, lookaround,
// anchors or word boundaries elsewhere, unbalanced parentheses or brackets, bad escapes,
// quantifiers without a target, counts or sizes over Limits (Limits::max_regex_bytes applies).
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"

namespace strata::grammar {

StatusOr<Grammar> RegexToGrammar(std::string_view pattern, const Limits& limits = {});

struct RegexEmbedOptions {
  // Emit the matched text as the inside of a JSON string: `"`, `\` and control characters the
  // pattern matches are written as JSON escapes (\" \\ \n ... \u00XX), so the output is valid
  // JSON text whose decoded value matches the pattern.
  bool json_string = false;
  // JSON Schema `pattern` semantics: the pattern may match anywhere in the value, unless a
  // top-level alternative starts with ^ (then it must match at the start) or ends with $.
  bool search = false;
};

// Adds the rules for `pattern` to `grammar` (rule names prefixed with `name`) and returns the
// index of the rule that matches it. Errors as RegexToGrammar.
StatusOr<int32_t> AddRegexRules(std::string_view pattern, const std::string& name,
                                const RegexEmbedOptions& options, const Limits& limits,
                                Grammar* grammar);

}  // namespace strata::grammar
