#include "bench/load/json_value.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>

namespace strata::bench {

StatusOr<google::protobuf::Struct> ParseJsonObject(std::string_view text) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &object);
  if (!status.ok()) {
    return InvalidArgumentError("not a JSON object: " + std::string(status.message()));
  }
  return object;
}

const google::protobuf::Value* FindField(const google::protobuf::Struct& object,
                                         std::string_view key) {
  const auto it = object.fields().find(std::string(key));
  return it == object.fields().end() ? nullptr : &it->second;
}

std::optional<int64_t> AsInt(const google::protobuf::Value& value) {
  if (value.kind_case() != google::protobuf::Value::kNumberValue) return std::nullopt;
  const double d = value.number_value();
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return std::nullopt;
  return static_cast<int64_t>(d);
}

}  // namespace strata::bench
