// Reading JSON objects (dataset lines, SSE event payloads, server facts) through protobuf's
// JSON parser into google.protobuf.Struct: numbers come back as doubles.
//
// Thread rules: pure functions.
#pragma once

#include <google/protobuf/struct.pb.h>

#include <optional>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::bench {

// `text` as a JSON object; kInvalidArgument naming the parser's complaint otherwise.
StatusOr<google::protobuf::Struct> ParseJsonObject(std::string_view text);

// The field `key` of `object`, or nullptr when absent.
const google::protobuf::Value* FindField(const google::protobuf::Struct& object,
                                         std::string_view key);

// `value` as an integer when it is a number with no fractional part within int64.
std::optional<int64_t> AsInt(const google::protobuf::Value& value);

}  // namespace strata::bench
