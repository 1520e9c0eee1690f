#include "bench/load/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/load/json_value.h"

namespace strata::bench {
namespace {

TEST(JsonWriter, WritesCompactJsonThatParsesBack) {
  JsonWriter w;
  w.BeginObject()
      .Key("s")
      .String("quote\" backslash\\ newline\n tab\t ctl\x01 utf8 \xc3\xa9")
      .Key("n")
      .Number(1.5)
      .Key("i")
      .Int(-7)
      .Key("b")
      .Bool(true)
      .Key("nan")
      .Number(std::nan(""))
      .Key("a")
      .BeginArray()
      .Int(1)
      .BeginObject()
      .EndObject()
      .BeginArray()
      .EndArray()
      .EndArray()
      .Key("raw")
      .Raw("{\"x\":[1]}")
      .EndObject();
  EXPECT_EQ(w.text().find('\n'), std::string::npos);
  const auto parsed = ParseJsonObject(w.text());
  ASSERT_TRUE(parsed.ok()) << w.text();
  const auto& f = parsed->fields();
  EXPECT_EQ(f.at("s").string_value(), "quote\" backslash\\ newline\n tab\t ctl\x01 utf8 \xc3\xa9");
  EXPECT_EQ(f.at("n").number_value(), 1.5);
  EXPECT_EQ(f.at("i").number_value(), -7);
  EXPECT_TRUE(f.at("b").bool_value());
  EXPECT_EQ(f.at("nan").kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(f.at("a").list_value().values_size(), 3);
  EXPECT_EQ(f.at("raw").struct_value().fields().at("x").list_value().values(0).number_value(), 1);
}

TEST(JsonWriter, NumbersRoundTripExactly) {
  for (double v : {0.1, 1e-300, 123456.789, 2.0 / 3.0}) {
    JsonWriter w;
    w.BeginObject().Key("v").Number(v).EndObject();
    const auto parsed = ParseJsonObject(w.text());
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed->fields().at("v").number_value(), v);
  }
}

}  // namespace
}  // namespace strata::bench
