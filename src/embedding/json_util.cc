#include "json_util.h"

#include <fstream>
#include <sstream>

namespace strata::embedding::internal {
namespace {

StatusOr<const Json*> Field(const Json& object, std::string_view key, std::string_view what) {
  const auto it = object.find(key);
  if (it == object.end()) {
    return InvalidArgumentError(std::string(what) + ": '" + std::string(key) + "' is missing");
  }
  return &*it;
}

Status Mistyped(std::string_view key, std::string_view what, std::string_view expected) {
  return InvalidArgumentError(std::string(what) + ": '" + std::string(key) + "' must be " +
                              std::string(expected));
}

}  // namespace

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLossError("cannot read '" + path + "'");
  return text.str();
}

StatusOr<Json> ParseJsonObject(std::string_view text, std::string_view what) {
  Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgumentError(std::string(what) + " is not valid JSON");
  if (!json.is_object()) return InvalidArgumentError(std::string(what) + " is not a JSON object");
  return json;
}

StatusOr<std::string> GetString(const Json& object, std::string_view key, std::string_view what) {
  STRATA_ASSIGN_OR_RETURN(const Json* value, Field(object, key, what));
  if (!value->is_string()) return Mistyped(key, what, "a string");
  return value->get<std::string>();
}

StatusOr<int64_t> GetInt(const Json& object, std::string_view key, std::string_view what) {
  STRATA_ASSIGN_OR_RETURN(const Json* value, Field(object, key, what));
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return Mistyped(key, what, "an integer");
    return static_cast<int64_t>(u);
  }
  if (!value->is_number_integer()) return Mistyped(key, what, "an integer");
  return value->get<int64_t>();
}

StatusOr<double> GetNumber(const Json& object, std::string_view key, std::string_view what) {
  STRATA_ASSIGN_OR_RETURN(const Json* value, Field(object, key, what));
  if (!value->is_number()) return Mistyped(key, what, "a number");
  return value->get<double>();
}

StatusOr<bool> GetBool(const Json& object, std::string_view key, std::string_view what) {
  STRATA_ASSIGN_OR_RETURN(const Json* value, Field(object, key, what));
  if (!value->is_boolean()) return Mistyped(key, what, "true or false");
  return value->get<bool>();
}

}  // namespace strata::embedding::internal
