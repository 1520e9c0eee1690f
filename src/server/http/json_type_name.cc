#include "json_type_name.h"

namespace strata::server::http {

const char* JsonTypeName(const nlohmann::json& value) {
  using nlohmann::json;
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    default:
      return "a value of another type";
  }
}

}  // namespace strata::server::http
