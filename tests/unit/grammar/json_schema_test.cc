// GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s <regex> automaton when built
// with sanitizers; the reference std::regex is only test code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "strata/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar_test_util.h"

namespace strata::grammar {
namespace {

using json = nlohmann::json;
using testing::CompileForBytes;
using testing::MatchesBytes;

std::shared_ptr<const CompiledGrammar> CompileSchema(const std::string& schema,
                                                     const JsonSchemaOptions& options = {}) {
  auto g = JsonSchemaToGrammar(schema, options);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  return CompileForBytes(*g);
}

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

class JsonSchemaLanguage : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(JsonSchemaLanguage, AcceptsAndRejects) {
  auto g = CompileSchema(GetParam().schema);
  ASSERT_NE(g, nullptr);
  for (const std::string& s : GetParam().accept) EXPECT_TRUE(MatchesBytes(g, s)) << s;
  for (const std::string& s : GetParam().reject) EXPECT_FALSE(MatchesBytes(g, s)) << s;
}

INSTANTIATE_TEST_SUITE_P(
    Features, JsonSchemaLanguage,
    ::testing::Values(
        SchemaCase{"string",
                   R"({"type":"string"})",
                   {R"("")", R"("a\"b\\c\u00e9")"},
                   {"\"a\nb\"", R"("\ud800")", "abc", R"("a)"}},
        SchemaCase{"integer", R"({"type":"integer"})", {"0", "-12", "123456"}, {"01", "1.5", "+1"}},
        SchemaCase{"number",
                   R"({"type":"number"})",
                   {"0", "-1.25", "3e10", "2.5E-3"},
                   {".5", "1.", "1e", "--1"}},
        SchemaCase{"boolean_null",
                   R"({"type":["boolean","null"]})",
                   {"true", "false", "null"},
                   {"True", "0"}},
        SchemaCase{
            "object_required",
            R"({"type":"object","properties":{"a":{"type":"integer"},
                   "b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]})",
            {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
             R"({"a":1,"b":"","c":false})"},
            {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","d":1})", R"({"b":"x",})"}},
        SchemaCase{"all_optional",
                   R"({"properties":{"a":{"type":"null"},"b":{"type":"null"}}})",
                   {"{}", R"({"a":null})", R"({"b":null})", R"({"a":null,"b":null})"},
                   {R"({,"b":null})", R"({"a":null,})"}},
        SchemaCase{"additional_schema",
                   R"({"type":"object","properties":{"ab":{"type":"string"}},
                   "additionalProperties":{"type":"integer"}})",
                   {R"({"ab":"x","a":1,"abc":2})", R"({"x":5})", "{}"},
                   {R"({"ab":1})", R"({"ab":"x","ab":3})", R"({"c":"s"})"}},
        SchemaCase{"enum_prefixes",
                   R"({"enum":["a","ab","abc",1,null,{"k":[1]}]})",
                   {R"("a")", R"("ab")", R"("abc")", "1", "null", R"({"k":[1]})"},
                   {R"("abcd")", R"("b")", "2"}},
        SchemaCase{"const", R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")"}},
        SchemaCase{"array_counts",
                   R"({"type":"array","items":{"type":"integer"},"minItems":2,
                   "maxItems":3})",
                   {"[1,2]", "[1,2,3]"},
                   {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"}},
        SchemaCase{"prefix_items",
                   R"({"prefixItems":[{"type":"string"},{"type":"integer"}],
                   "items":false})",
                   {"[]", R"(["a"])", R"(["a",1])"},
                   {R"(["a",1,2])", "[1]"}},
        SchemaCase{"string_lengths",
                   R"({"type":"string","minLength":2,"maxLength":3})",
                   {R"("ab")", R"("\u00e9\u00e9\u00e9")", "\"\xe2\x82\xac\xe2\x82\xac\""},
                   {R"("a")", R"("abcd")"}},
        SchemaCase{"pattern",
                   R"({"type":"string","pattern":"^[a-z]+[0-9]{2}$"})",
                   {R"("ab12")"},
                   {R"("ab1")", R"("12")", R"("ab123")"}},
        SchemaCase{"date",
                   R"({"type":"string","format":"date"})",
                   {R"("2024-02-28")"},
                   {R"("2024-02-30")", R"("2024-13-01")", R"("24-01-01")"}},
        SchemaCase{"integer_range",
                   R"({"type":"integer","minimum":-5,"maximum":123})",
                   {"-5", "0", "9", "99", "123", "-1"},
                   {"-6", "124", "200", "-10", "1000"}},
        SchemaCase{"integer_exclusive",
                   R"({"type":"integer","exclusiveMinimum":0,
                   "exclusiveMaximum":10})",
                   {"1", "9"},
                   {"0", "10", "-1"}},
        SchemaCase{"number_bounds",
                   R"({"type":"number","minimum":-2.5,"maximum":3.75})",
                   {"-2", "3", "0.5", "-1.999", "2.75"},
                   {"-3", "4", "3.8"}},
        SchemaCase{"narrow_number",
                   R"({"type":"number","exclusiveMinimum":0.1,"maximum":0.2})",
                   {"0.2"},
                   {"0.1", "0.3", "0", "0.25"}},
        SchemaCase{"recursion",
                   R"({"type":"object","properties":{"next":{"anyOf":[
                   {"type":"null"},{"$ref":"#"}]}},"required":["next"]})",
                   {R"({"next":null})", R"({"next":{"next":{"next":null}}})"},
                   {R"({"next":{}})"}}),
    [](const ::testing::TestParamInfo<SchemaCase>& info) { return std::string(info.param.name); });

TEST(JsonSchema, BoundedWhitespaceOption) {
  JsonSchemaOptions options;
  options.max_whitespace = 2;
  auto g = CompileSchema(R"({"type":"object","properties":{"a":{"type":"integer"}}})", options);
  EXPECT_TRUE(MatchesBytes(g, "{ \"a\" :\n 1 }"));
  EXPECT_FALSE(MatchesBytes(g, "{   \"a\":1}"));
  auto compact = CompileSchema(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_FALSE(MatchesBytes(compact, "{ \"a\":1}"));
}

TEST(JsonSchema, StrictDecidesMissingAdditionalProperties) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  EXPECT_FALSE(MatchesBytes(CompileSchema(schema), R"({"a":1,"b":2})"));
  JsonSchemaOptions lax;
  lax.strict = false;
  EXPECT_TRUE(MatchesBytes(CompileSchema(schema, lax), R"({"a":1,"b":[true]})"));
}

TEST(JsonSchema, AnyJsonObjectAndChoices) {
  auto any = CompileForBytes(AnyJsonObjectGrammar());
  EXPECT_TRUE(MatchesBytes(any, R"({"x":[1,{"y":null}],"z":"w"})"));
  EXPECT_TRUE(MatchesBytes(any, "{}"));
  EXPECT_FALSE(MatchesBytes(any, "[]"));
  const std::vector<std::string> choices = {"yes", "no", "y\xc3\xa9s"};
  auto c = ChoiceGrammar(choices);
  ASSERT_TRUE(c.ok());
  auto cc = CompileForBytes(*c);
  EXPECT_TRUE(MatchesBytes(cc, "no"));
  EXPECT_TRUE(MatchesBytes(cc, "y\xc3\xa9s"));
  EXPECT_FALSE(MatchesBytes(cc, "ye"));
  EXPECT_FALSE(ChoiceGrammar(std::vector<std::string>{}).ok());
}

struct SchemaError {
  const char* schema;
  const char* message;
};

class JsonSchemaErrors : public ::testing::TestWithParam<SchemaError> {};

TEST_P(JsonSchemaErrors, NameThePointerAndProblem) {
  auto g = JsonSchemaToGrammar(GetParam().schema);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(GetParam().message), std::string::npos)
      << g.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonSchemaErrors,
    ::testing::Values(
        SchemaError{R"({"properties":{"tags":{"type":"array","uniqueItems":true}}})",
                    "json_schema: /properties/tags: keyword 'uniqueItems' is not supported"},
        SchemaError{R"({"not":{}})", "(root): keyword 'not' is not supported"},
        SchemaError{R"({"if":{},"then":{}})", "keyword 'if' is not supported"},
        SchemaError{R"({"type":"object","patternProperties":{}})", "'patternProperties'"},
        SchemaError{R"({"type":"number","multipleOf":2})", "'multipleOf'"},
        SchemaError{R"({"type":"object","minProperties":1})", "'minProperties'"},
        SchemaError{R"({"items":{"contains":{}}})", "/items: keyword 'contains'"},
        SchemaError{R"({"type":"integer","unevaluatedProperties":false})",
                    "'unevaluatedProperties'"},
        SchemaError{R"({"$ref":"#/$defs/missing"})", "cannot resolve '$ref'"},
        SchemaError{R"({"$ref":"http://x/y.json"})", "only local references"},
        SchemaError{R"({"type":"string","minLength":5,"maxLength":2})",
                    "'minLength' (5) > 'maxLength' (2)"},
        SchemaError{R"({"type":"string","minLength":"3"})",
                    "'minLength' must be a non-negative integer"},
        SchemaError{R"({"type":"array","minItems":-1})", "'minItems' must be a non-negative"},
        SchemaError{R"({"type":"integer","minimum":10,"maximum":2})",
                    "minimum is above the maximum"},
        SchemaError{R"({"type":"integer","minimum":1.2,"maximum":1.8})", "no integer"},
        SchemaError{R"({"type":"string","pattern":"(a"})", "invalid 'pattern'"},
        SchemaError{R"({"type":"strin"})", "unknown type 'strin'"},
        SchemaError{R"({"type":"object","properties":[]})", "'properties' must be an object"},
        SchemaError{R"({"type":"object","required":"a"})", "'required' must be an array"},
        SchemaError{R"({"enum":[1,2],"type":"string"})", "leave no value"},
        SchemaError{R"({"allOf":[{},{}]})", "'allOf' is only supported with exactly one"},
        SchemaError{R"({"$ref":"#"})", "left-recursive"},
        SchemaError{R"({"type":"string","minLength":5000})", "above the limit 1000"},
        SchemaError{"{\"type\":", "not valid JSON"},
        SchemaError{"42", "a schema must be an object or a boolean"}));

TEST(JsonSchema, DeepNestingAndHugeInputsAreErrors) {
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 40; ++i) deep += "}";
  auto g = JsonSchemaToGrammar(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than 32"), std::string::npos);
  auto brackets = JsonSchemaToGrammar(std::string(20000, '[') + std::string(20000, ']'));
  ASSERT_FALSE(brackets.ok());
  auto big = JsonSchemaToGrammar("{\"description\":\"" + std::string(70000, 'x') + "\"}");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than the limit 65536"), std::string::npos);
}

// ---- Property test: random walks validate against the schema. ---------------------------

size_t CodepointCount(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

const json* Resolve(const json& root, const std::string& ref) {
  const json* node = &root;
  size_t pos = 1;
  while (pos < ref.size()) {
    const size_t next = ref.find('/', pos + 1);
    const std::string key =
        ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    node = &(*node)[key];
    pos = next == std::string::npos ? ref.size() : next;
  }
  return node;
}

bool TypeMatches(const json& v, const std::string& t) {
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  return v.is_array();
}

// A checker for the supported keywords (what jsonschema would say for these test schemas).
bool Valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return Valid(v, *Resolve(root, s["$ref"]), root);
  if (s.contains("allOf")) {
    for (const json& m : s["allOf"]) {
      if (!Valid(v, m, root)) return false;
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    int n = 0;
    for (const json& m : s[key]) n += Valid(v, m, root);
    if (n == 0 || (std::string(key) == "oneOf" && n != 1)) return false;
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    return false;
  }
  if (s.contains("type")) {
    bool any = false;
    if (s["type"].is_string()) {
      any = TypeMatches(v, s["type"]);
    } else {
      for (const json& t : s["type"]) any = any || TypeMatches(v, t);
    }
    if (!any) return false;
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && CodepointCount(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && CodepointCount(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") &&
        !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) {
      return false;
    }
    if (s.contains("format")) {
      static const std::map<std::string, std::string> kFormats = {
          {"date", R"(\d{4}-\d{2}-\d{2})"},
          {"time", R"(\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))"},
          {"date-time", R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))"},
          {"uuid", R"([0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})"},
          {"email", R"([^@]+@[^@]+\.[^@]+)"}};
      if (!std::regex_match(str, std::regex(kFormats.at(s["format"])))) return false;
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && !(d >= s["minimum"].get<double>())) return false;
    if (s.contains("maximum") && !(d <= s["maximum"].get<double>())) return false;
    if (s.contains("exclusiveMinimum") && !(d > s["exclusiveMinimum"].get<double>())) return false;
    if (s.contains("exclusiveMaximum") && !(d < s["exclusiveMaximum"].get<double>())) return false;
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (!Valid(value, props[key], root)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!Valid(value, s["additionalProperties"], root)) return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    const json prefix = s.value("prefixItems", json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < prefix.size()) {
        if (!Valid(v[i], prefix[i], root)) return false;
      } else if (s.contains("items") && !Valid(v[i], s["items"], root)) {
        return false;
      }
    }
  }
  return true;
}

const char* const kPropertySchemas[] = {
    R"({"type":"string"})",
    R"({"type":"integer"})",
    R"({"type":"number"})",
    R"({"type":["boolean","null"]})",
    R"({})",
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"}},"required":["name"]})",
    R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"boolean"},"c":{"type":"integer"}}})",
    R"({"type":"object","properties":{"p1":{"const":1},"p2":{"const":2},"p3":{"const":3},"p4":{"const":4},"p5":{"const":5},"p6":{"const":6},"p7":{"const":7},"p8":{"const":8}},"required":["p2","p5","p8"]})",
    R"({"type":"object","properties":{"ab":{"type":"boolean"}},"additionalProperties":{"type":"integer","minimum":0,"maximum":9}})",
    R"({"type":"object","additionalProperties":true,"properties":{"k":{"type":"null"}},"required":["k"]})",
    R"({"enum":["a","ab","abc","b\u00e9","\u20ac"]})",
    R"({"enum":[1,"x",null,true,{"k":[1,2]},[]]})",
    R"({"const":{"fixed":[1,"two"]}})",
    R"({"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":5,"maximum":50}]})",
    R"({"oneOf":[{"type":"null"},{"type":"array","items":{"type":"integer"},"maxItems":3}]})",
    R"({"allOf":[{"type":"string","minLength":2,"maxLength":4}]})",
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"})",
    R"({"definitions":{"leaf":{"type":"string","maxLength":2}},"type":"array","items":{"$ref":"#/definitions/leaf"},"maxItems":3})",
    R"({"type":"object","properties":{"next":{"anyOf":[{"type":"null"},{"$ref":"#"}]}},"required":["next"]})",
    R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":4})",
    R"({"type":"array","prefixItems":[{"type":"string","maxLength":2},{"type":"integer"}],"items":false})",
    R"({"type":"array","prefixItems":[{"const":"h"}],"items":{"type":"null"},"minItems":3,"maxItems":5})",
    R"({"type":"string","minLength":2,"maxLength":5})",
    R"({"type":"string","pattern":"^[a-z]+[0-9]{2}$"})",
    R"({"type":"string","pattern":"\\d{2}"})",
    R"({"type":"string","format":"date"})",
    R"({"type":"string","format":"date-time"})",
    R"({"type":"string","format":"uuid"})",
    R"({"type":"string","format":"email"})",
    R"({"type":"string","format":"time"})",
    R"({"type":"integer","minimum":-5,"maximum":123})",
    R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":1000})",
    R"({"type":"integer","maximum":-10})",
    R"({"type":"integer","minimum":0})",
    R"({"type":"integer","minimum":1.5,"maximum":7.2})",
    R"({"type":"number","minimum":-2.5,"maximum":3.75})",
    R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
    R"({"type":"number","exclusiveMinimum":0.1,"maximum":0.2})",
    R"({"type":"number","minimum":-0.3,"exclusiveMaximum":-0.1})",
    R"({"type":"number","maximum":0})",
    R"({"type":"number","exclusiveMinimum":-1e3})",
    R"({"type":"object","properties":{"\u540d\u524d":{"type":"string","maxLength":3},"\u00e9":{"enum":["\u00e9","\u20ac"]}},"required":["\u540d\u524d","\u00e9"]})",
    R"({"type":["string","integer"],"maxLength":2,"maximum":3})",
};

// Byte tokens plus multi-byte pieces (some splitting UTF-8) and an end token.
std::shared_ptr<const TokenVocabulary> WalkVocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"\":", "\",\"", "\"}", "true", "null", "\\u00e9", "\\n", "\xc3\xa9",
                          "\xe2\x82", "\xac\"", "12", "-0.", "e+1", "{\"", "[{", "}]", "],"}) {
      bytes.push_back(p);
    }
    bytes.push_back("");
    const int32_t end = static_cast<int32_t>(bytes.size() - 1);
    return *TokenVocabulary::Build(bytes, std::vector<bool>(bytes.size(), false), {end});
  }();
  return vocab;
}

class JsonSchemaProperty : public ::testing::TestWithParam<int> {};

TEST_P(JsonSchemaProperty, RandomWalksParseAndValidate) {
  const std::string schema_text = kPropertySchemas[GetParam()];
  const json schema = json::parse(schema_text);
  auto g = JsonSchemaToGrammar(schema_text);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto compiled = CompiledGrammar::Compile(*g, WalkVocabulary());
  ASSERT_TRUE(compiled.ok());
  const TokenVocabulary& vocab = *WalkVocabulary();
  const std::string structural = "\"}],:0123456789";
  int ended = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    std::mt19937 rng(seed * 31 + GetParam());
    GrammarMatcher m(*compiled);
    std::vector<uint32_t> mask(vocab.bitmask_words());
    std::string out;
    bool done = false;
    for (int step = 0; step < 300 && !done; ++step) {
      m.FillNextTokenBitmask(mask);
      std::vector<int32_t> allowed, preferred;
      bool end_allowed = false;
      for (int32_t id = 0; id < vocab.size(); ++id) {
        if (!testing::MaskBit(mask, id)) continue;
        if (vocab.is_end_token(id)) {
          end_allowed = true;
          continue;
        }
        allowed.push_back(id);
        const std::string& t = vocab.token_bytes(id);
        if (t.size() > 1 || structural.find(t[0]) != std::string::npos) preferred.push_back(id);
      }
      if (end_allowed && (allowed.empty() || rng() % 4 == 0)) {
        ASSERT_TRUE(m.AcceptToken(vocab.end_token_ids().front()));
        done = true;
        break;
      }
      ASSERT_FALSE(allowed.empty()) << "dead end after '" << out << "'";
      const std::vector<int32_t>& pool = !preferred.empty() && rng() % 2 ? preferred : allowed;
      const int32_t id = pool[rng() % pool.size()];
      ASSERT_TRUE(m.AcceptToken(id));
      out += vocab.token_bytes(id);
    }
    if (!done) continue;
    ++ended;
    json value;
    try {
      value = json::parse(out);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "not JSON: '" << out << "': " << e.what();
      continue;
    }
    EXPECT_TRUE(Valid(value, schema, schema)) << schema_text << " produced " << out;
  }
  EXPECT_GE(ended, 4) << schema_text;
}

INSTANTIATE_TEST_SUITE_P(Schemas, JsonSchemaProperty,
                         ::testing::Range(0, static_cast<int>(std::size(kPropertySchemas))));

}  // namespace
}  // namespace strata::grammar
