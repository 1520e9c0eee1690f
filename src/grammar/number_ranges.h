// Internal to strata_grammar: GBNF expressions for decimal numbers within bounds (JSON Schema
// minimum / maximum / exclusiveMinimum / exclusiveMaximum).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "strata/common/status.h"

namespace strata::grammar::internal {

// Integers are kept within +-(10^15 - 1): exact as doubles, so every bound check is exact.
inline constexpr int64_t kMaxBoundedInteger = 999999999999999;

struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// A GBNF expression for the JSON integers in [lo, hi] (no leading zeros, no "-0"); lo <= hi.
std::string IntegerRangeGbnf(int64_t lo, int64_t hi);

// A GBNF expression for integers satisfying the bounds (within +-kMaxBoundedInteger); nullopt
// when no integer does.
std::optional<std::string> BoundedIntegerGbnf(std::optional<NumberBound> lower,
                                              std::optional<NumberBound> upper);

// A GBNF expression for JSON numbers satisfying the bounds: integers, numbers with up to six
// fraction digits whose whole unit interval is inside the bounds, or (for intervals narrower
// than that) numbers with a fixed number of fraction digits. Every accepted text parses to a
// double that satisfies the bounds. nullopt when nothing was found (empty interval).
std::optional<std::string> BoundedNumberGbnf(std::optional<NumberBound> lower,
                                             std::optional<NumberBound> upper);

}  // namespace strata::grammar::internal
