// The name of a JSON value's type as the HTTP API's error messages say it ("a string", "an
// array"): private to src/server/http.
#pragma once

#include <nlohmann/json.hpp>

namespace strata::server::http {

const char* JsonTypeName(const nlohmann::json& value);

}  // namespace strata::server::http
