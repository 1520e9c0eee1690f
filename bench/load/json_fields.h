// Exception-free use of nlohmann-json for strata-bench: parsing that reports a Status, typed
// member lookups that answer nullptr / "" / nullopt for a missing or mistyped member, and
// serialization that cannot throw (invalid UTF-8 in a string becomes U+FFFD).
//
// Thread rules: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::bench {

// `text` as a JSON object; kInvalidArgument naming the parser's complaint otherwise.
StatusOr<nlohmann::json> ParseJsonObject(std::string_view text);

// The member `key` of `object`; nullptr when `object` is not an object or has no such member.
const nlohmann::json* FindField(const nlohmann::json& object, std::string_view key);

// The text of a string value; "" for nullptr or any other type.
std::string_view AsString(const nlohmann::json* value);

// An integer, or a number with no fractional part within +-9e15; nullopt for anything else.
std::optional<int64_t> AsInt(const nlohmann::json& value);

// Compact JSON text (no whitespace, hence one line); NaN and infinities are written as null.
std::string JsonText(const nlohmann::ordered_json& value);

}  // namespace strata::bench
