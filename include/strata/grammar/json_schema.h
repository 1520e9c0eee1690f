// JSON Schema (and OpenAI's json_object / choice outputs) to the grammar IR.
//
// Every text the grammar accepts is valid JSON that validates against the schema. Supported:
// type (string, number, integer, boolean, null, object, array, or a list of these), properties
// (emitted in the schema's order), required, additionalProperties (false / true / a schema;
// absent: not allowed when JsonSchemaOptions::strict, else any value), enum, const, anyOf,
// oneOf (as anyOf), allOf with one member, $ref to "#", "#/$defs/..." and "#/definitions/..."
// (recursion included), items, prefixItems (and draft-7 array `items` with additionalItems),
// minItems, maxItems, minLength, maxLength, pattern (ECMAScript subset, see regex.h; matched
// anywhere unless anchored, as JSON Schema says), format date / time / date-time / uuid / email,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum (integers exactly within +-10^15;
// numbers conservatively, see number_ranges). `{}` and `true` mean any JSON value.
//
// Deliberately conservative (a subset of the valid values, never an invalid one): integers stay
// within +-10^15 when bounded and 18 digits otherwise; numbers have at most 16 integer digits,
// 16 fraction digits and a two-digit exponent (6 fraction digits and no exponent when bounded);
// keys of additional properties use no escapes; sizes above Limits::max_repetition are capped
// (a maximum) or refused (a minimum); strings with a format cannot also have lengths or a
// pattern. Enum values are filtered by a sibling `type`. oneOf is treated as anyOf.
//
// Whitespace between tokens: none by default (compact JSON); JsonSchemaOptions::max_whitespace
// allows up to that many spaces/newlines between tokens, so a model cannot loop on whitespace.
//
// Errors are INVALID_ARGUMENT, "json_schema: <JSON pointer>: <problem>": unsupported keywords
// (not, if/then/else, patternProperties, dependentRequired, uniqueItems, multipleOf, contains,
// propertyNames, minProperties, maxProperties, unevaluated*, ...), keywords of the wrong type,
// min > max, an unresolvable $ref, an invalid pattern, a schema that accepts nothing, input over
// Limits (size, nesting depth, rules).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "strata/common/status.h"
#include "strata/grammar/grammar.h"

namespace strata::grammar {

struct JsonSchemaOptions {
  // additionalProperties absent: false (true) or any value (false).
  bool strict = true;
  // Spaces/newlines allowed between JSON tokens (0 = compact); at most 16.
  int max_whitespace = 0;
  Limits limits;
};

StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json,
                                      const JsonSchemaOptions& options = {});

// Any JSON object (OpenAI response_format {"type": "json_object"}), compact.
Grammar AnyJsonObjectGrammar();

// Exactly one of `choices` (raw text, not JSON). INVALID_ARGUMENT when empty or over limits.
StatusOr<Grammar> ChoiceGrammar(std::span<const std::string> choices, const Limits& limits = {});

}  // namespace strata::grammar
