// GBNF (llama.cpp's grammar syntax) to the grammar IR.
//
//   root   ::= "{" ws pair ("," ws pair)* "}"   # `root` is the start rule
//   pair   ::= [a-z]+ ":" [0-9]{1,3}
//   ws     ::= [ \t\n]*
//
// Supported: `name ::= alternatives` rules (names [A-Za-z0-9_-]+; a rule ends where the next
// `name ::=` begins, so rules may span lines), string literals "..." with escapes \n \t \r \\ \"
// \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH, classes [...] with ^, ranges and the same escapes, `.`
// (any code point), groups ( ), alternation |, and the postfix operators * + ? {m} {m,} {m,n}.
// `#` starts a comment to the end of the line. Input is UTF-8.
//
// Errors are INVALID_ARGUMENT, "gbnf: line L, column C: <problem>": an undefined rule (named),
// no `root` rule, a left-recursive rule (named), a bad escape, unbalanced parentheses or
// brackets, counts or sizes over Limits, invalid UTF-8.
#pragma once

#include <string_view>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"

namespace strata::grammar {

StatusOr<Grammar> ParseGbnf(std::string_view text, const Limits& limits = {});

}  // namespace strata::grammar
