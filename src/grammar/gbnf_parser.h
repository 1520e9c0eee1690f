// Internal to strata_grammar: the GBNF parser with predefined rules (the JSON Schema converter
// writes most of its grammar as GBNF text and adds regex-derived rules through the IR).
#pragma once

#include <string_view>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"

namespace strata::grammar::internal {

// Parses `text` on top of `base`: base's rules keep their indices and can be referenced by name.
// The result's root is the rule named `root`. `max_text_bytes` replaces limits.max_grammar_bytes
// (generated text may be larger than what a user may send).
StatusOr<Grammar> ParseGbnfOnto(std::string_view text, Grammar base, const Limits& limits,
                                size_t max_text_bytes);

}  // namespace strata::grammar::internal
