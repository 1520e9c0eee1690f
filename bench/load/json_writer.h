// JsonWriter: builds one compact JSON text (no whitespace), for strata-bench's JSON lines.
//
// Usage: w.BeginObject().Key("a").Int(1).Key("b").BeginArray().String("x").EndArray()
// .EndObject(); then w.text(). Commas are inserted automatically. Non-finite numbers are written
// as null (JSON has no NaN/Infinity).
//
// Thread rules: not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::bench {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Inserts `json`, which must already be one valid JSON value.
  JsonWriter& Raw(std::string_view json);

  const std::string& text() const { return out_; }

  // `value` as a JSON string literal, quotes included.
  static std::string Quote(std::string_view value);

 private:
  void BeforeValue();

  std::string out_;
  // Per open container: whether it has no element yet.
  std::vector<bool> empty_;
  bool after_key_ = false;
};

}  // namespace strata::bench
