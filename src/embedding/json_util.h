// JSON helpers for the embedding module's model files (tokenizer.json, config.json, ...): read
// and parse without exceptions, and typed field access that turns a missing or mistyped field
// into a Status naming it. Internal to src/embedding/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::embedding::internal {

using Json = nlohmann::json;

// The whole file. NOT_FOUND when it cannot be opened.
StatusOr<std::string> ReadTextFile(const std::string& path);

// Parses `text`; INVALID_ARGUMENT naming `what` (e.g. the file) when it is not valid JSON or
// not an object.
StatusOr<Json> ParseJsonObject(std::string_view text, std::string_view what);

// object[key] as the type asked for. INVALID_ARGUMENT "<what>: <key> ..." when absent or of
// another type (integers must fit; a float must be a JSON number).
StatusOr<std::string> GetString(const Json& object, std::string_view key, std::string_view what);
StatusOr<int64_t> GetInt(const Json& object, std::string_view key, std::string_view what);
StatusOr<double> GetNumber(const Json& object, std::string_view key, std::string_view what);
StatusOr<bool> GetBool(const Json& object, std::string_view key, std::string_view what);

}  // namespace strata::embedding::internal
