#include "bench/load/json_fields.h"

#include <cmath>
#include <limits>

namespace strata::bench {

StatusOr<nlohmann::json> ParseJsonObject(std::string_view text) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("not a JSON object: ") + e.what());
  }
  if (!value.is_object()) {
    return InvalidArgumentError(std::string("not a JSON object: a ") + value.type_name());
  }
  return value;
}

const nlohmann::json* FindField(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string_view AsString(const nlohmann::json* value) {
  if (value == nullptr || !value->is_string()) return {};
  return value->get_ref<const std::string&>();
}

std::optional<int64_t> AsInt(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_number_float()) return std::nullopt;
  const double d = value.get<double>();
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::string JsonText(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace strata::bench
