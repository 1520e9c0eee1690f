#include "strata/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gbnf_parser.h"
#include "grammar_builder.h"
#include "number_ranges.h"
#include "strata/grammar/regex.h"

namespace strata::grammar {
namespace {

using json = nlohmann::ordered_json;  // keeps the schema's property order
using internal::NumberBound;

const std::set<std::string>& UnsupportedKeywords() {
  static const std::set<std::string> k = {"not",
                                          "if",
                                          "then",
                                          "else",
                                          "patternProperties",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "uniqueItems",
                                          "multipleOf",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "propertyNames",
                                          "minProperties",
                                          "maxProperties",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "$dynamicRef",
                                          "$recursiveRef",
                                          "contentSchema"};
  return k;
}

// Keywords that constrain a value (the rest is annotation or ignored).
const std::set<std::string>& ConstrainingKeywords() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "items",
                                          "prefixItems",
                                          "additionalItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum"};
  return k;
}

constexpr const char* kPrimitives = R"gbnf(
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )
json-number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
json-int ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
json-never ::= [^\x00-\U0010FFFF]
key-char ::= [^"\\\x00-\x1F]
fmt-hex ::= [0-9a-fA-F]
fmt-day31 ::= "0" [1-9] | [12] [0-9] | "3" [01]
fmt-day30 ::= "0" [1-9] | [12] [0-9] | "30"
fmt-day28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
fmt-date ::= [1-9] [0-9]{3} "-" ( ( "0" [13578] | "1" [02] ) "-" fmt-day31 | ( "0" [469] | "11" ) "-" fmt-day30 | "02-" fmt-day28 )
fmt-hh ::= [01] [0-9] | "2" [0-3]
fmt-time ::= fmt-hh ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] fmt-hh ":" [0-5] [0-9] )
fmt-date-time ::= fmt-date "T" fmt-time
fmt-uuid ::= fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}
fmt-email ::= [A-Za-z0-9_+-]+ ( "." [A-Za-z0-9_+-]+ )* "@" [A-Za-z0-9-]+ ( "." [A-Za-z0-9-]+ )+
)gbnf";

// A GBNF string literal for raw UTF-8 bytes.
std::string Literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const std::string kQuote = "\"\\\"\"";  // GBNF for a JSON double quote

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

bool ValueHasType(const json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

class Converter {
 public:
  Converter(const json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

  StatusOr<Grammar> Convert() {
    STRATA_ASSIGN_OR_RETURN(std::string expr, Visit(root_, "", 0));
    std::string ws = "ws ::= \"\"\n";
    if (options_.max_whitespace > 0) {
      ws = "ws ::= [ \\n]{0," + std::to_string(std::min(options_.max_whitespace, 16)) + "}\n";
    }
    const std::string text = std::string(kPrimitives) + ws + rules_ + "root ::= " + expr + "\n";
    auto g = internal::ParseGbnfOnto(text, std::move(base_), options_.limits, size_t{16} << 20);
    if (!g.ok()) return InvalidArgumentError("json_schema: " + g.status().message());
    return g;
  }

 private:
  Status Err(const std::string& ptr, const std::string& what) const {
    return InvalidArgumentError("json_schema: " + (ptr.empty() ? std::string("(root)") : ptr) +
                                ": " + what);
  }

  std::string NewRule(const std::string& hint, const std::string& body) {
    const std::string name = hint + "-" + std::to_string(++next_id_);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  StatusOr<std::string> Visit(const json& s, const std::string& ptr, int depth) {
    if (depth > options_.limits.max_nesting_depth) {
      return Err(ptr,
                 "schema nested deeper than " + std::to_string(options_.limits.max_nesting_depth));
    }
    if (s.is_boolean()) return std::string(s.get<bool>() ? "json-value" : "json-never");
    if (!s.is_object()) return Err(ptr, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (UnsupportedKeywords().count(key)) {
        return Err(ptr, "keyword '" + key + "' is not supported");
      }
    }
    auto sibling = [&](const char* self) -> std::optional<std::string> {
      for (const auto& [key, value] : s.items()) {
        if (key != self && ConstrainingKeywords().count(key)) return key;
      }
      return std::nullopt;
    };
    if (s.contains("$ref")) {
      if (auto other = sibling("$ref")) {
        return Err(ptr, "'$ref' with the sibling keyword '" + *other + "' is not supported");
      }
      return Ref(s["$ref"], ptr, depth);
    }
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return Err(ptr, "'allOf' is only supported with exactly one member");
      }
      if (auto other = sibling("allOf")) {
        return Err(ptr, "'allOf' with the sibling keyword '" + *other + "' is not supported");
      }
      return Visit(all[0], ptr + "/allOf/0", depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& any = s[key];
      if (!any.is_array() || any.empty()) {
        return Err(ptr, std::string("'") + key + "' must be a non-empty array");
      }
      if (auto other = sibling(key)) {
        return Err(ptr, std::string("'") + key + "' with the sibling keyword '" + *other +
                            "' is not supported");
      }
      std::string alts;
      for (size_t i = 0; i < any.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(
            std::string e, Visit(any[i], ptr + "/" + key + "/" + std::to_string(i), depth + 1));
        alts += (i ? " | " : "") + e;
      }
      return NewRule("any-of", alts);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) return Err(ptr, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Err(ptr, "'type' must be a string or an array of strings");
      }
      for (const std::string& t2 : types) {
        if (t2 != "string" && t2 != "number" && t2 != "integer" && t2 != "boolean" &&
            t2 != "null" && t2 != "object" && t2 != "array") {
          return Err(ptr, "unknown type '" + t2 + "'");
        }
      }
    }
    if (s.contains("const") || s.contains("enum")) return Values(s, types, ptr);
    if (types.empty()) {
      auto has = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys) {
          if (s.contains(k)) return true;
        }
        return false;
      };
      // Without `type`, keywords of one kind restrict nothing else; keeping to the kinds they
      // name is a (conservative) subset.
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) {
        types.push_back("array");
      }
      if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
        types.push_back("number");
      }
      if (types.empty()) return std::string("json-value");
    }
    std::string alts;
    for (const std::string& t : types) {
      std::string e;
      if (t == "string") {
        STRATA_ASSIGN_OR_RETURN(e, String(s, ptr));
      } else if (t == "number" || t == "integer") {
        STRATA_ASSIGN_OR_RETURN(e, Number(s, ptr, t == "integer"));
      } else if (t == "boolean") {
        e = "(\"true\" | \"false\")";
      } else if (t == "null") {
        e = "\"null\"";
      } else if (t == "object") {
        STRATA_ASSIGN_OR_RETURN(e, Object(s, ptr, depth));
      } else {
        STRATA_ASSIGN_OR_RETURN(e, Array(s, ptr, depth));
      }
      alts += (alts.empty() ? "" : " | ") + e;
    }
    return types.size() == 1 ? alts : NewRule("types", alts);
  }

  StatusOr<std::string> Ref(const json& ref, const std::string& ptr, int depth) {
    if (!ref.is_string()) return Err(ptr, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    auto it = ref_rules_.find(target);
    if (it != ref_rules_.end()) return it->second;
    if (target.empty() || target[0] != '#') {
      return Err(ptr, "cannot resolve '$ref' \"" + target + "\" (only local references)");
    }
    const json* node = &root_;
    std::string tail = target.substr(1);
    size_t pos = 0;
    while (pos < tail.size()) {
      if (tail[pos] != '/') return Err(ptr, "cannot resolve '$ref' \"" + target + "\"");
      const size_t next = tail.find('/', pos + 1);
      std::string token =
          tail.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          key += token[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          key += token[i];
        }
      }
      if (node->is_object() && node->contains(key)) {
        node = &(*node)[key];
      } else if (node->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos && key.size() < 9 &&
                 std::stoul(key) < node->size()) {
        node = &(*node)[std::stoul(key)];
      } else {
        return Err(ptr, "cannot resolve '$ref' \"" + target + "\"");
      }
      pos = next == std::string::npos ? tail.size() : next;
    }
    const std::string name = "ref-" + std::to_string(++next_id_);
    ref_rules_[target] = name;
    STRATA_ASSIGN_OR_RETURN(std::string body, Visit(*node, tail, depth + 1));
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  StatusOr<std::string> Values(const json& s, const std::vector<std::string>& types,
                               const std::string& ptr) {
    std::vector<json> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return Err(ptr, "'enum' must be an array");
      for (const json& v : s["enum"]) values.push_back(v);
    }
    std::string alts;
    for (const json& v : values) {
      bool typed = types.empty();
      for (const std::string& t : types) typed = typed || ValueHasType(v, t);
      if (!typed) continue;
      if (s.contains("const") && s.contains("enum") &&
          std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end()) {
        continue;
      }
      std::string text;
      try {
        text = v.dump(-1, ' ', false, json::error_handler_t::strict);
      } catch (const json::exception& e) {
        return Err(ptr, std::string("bad enum/const value: ") + e.what());
      }
      if (text.size() > options_.limits.max_literal_bytes) {
        return Err(ptr, "enum/const value longer than " +
                            std::to_string(options_.limits.max_literal_bytes) + " bytes");
      }
      alts += (alts.empty() ? "" : " | ") + Literal(text);
    }
    if (alts.empty()) return Err(ptr, "'enum'/'const' leave no value of the schema's type");
    return NewRule("enum", alts);
  }

  StatusOr<std::optional<int64_t>> Count(const json& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::optional<int64_t>();
    const json& v = s[key];
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
      const uint64_t n = v.get<uint64_t>();
      return std::optional<int64_t>(static_cast<int64_t>(std::min<uint64_t>(n, 1ull << 40)));
    }
    if (v.is_number_float() && v.get<double>() >= 0 &&
        std::floor(v.get<double>()) == v.get<double>()) {
      return std::optional<int64_t>(static_cast<int64_t>(std::min(v.get<double>(), 1e12)));
    }
    return Err(ptr, std::string("'") + key + "' must be a non-negative integer");
  }

  // min/max counts: min above the limit is an error, max above it is capped (fewer values).
  Status Counts(const json& s, const char* min_key, const char* max_key, const std::string& ptr,
                int64_t* min, int64_t* max) {
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> lo, Count(s, min_key, ptr));
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> hi, Count(s, max_key, ptr));
    *min = lo.value_or(0);
    *max = hi.value_or(-1);
    if (hi && *min > *max) {
      return Err(ptr, std::string("'") + min_key + "' (" + std::to_string(*min) + ") > '" +
                          max_key + "' (" + std::to_string(*max) + ")");
    }
    const int64_t limit = options_.limits.max_repetition;
    if (*min > limit) {
      return Err(ptr, std::string("'") + min_key + "' above the limit " + std::to_string(limit));
    }
    if (*max > limit) *max = limit;
    return OkStatus();
  }

  StatusOr<std::string> String(const json& s, const std::string& ptr) {
    int64_t min = 0, max = -1;
    STRATA_RETURN_IF_ERROR(Counts(s, "minLength", "maxLength", ptr, &min, &max));
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (!s["format"].is_string()) return Err(ptr, "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f == "date" || f == "time" || f == "date-time" || f == "uuid" || f == "email") {
        if (lengths || s.contains("pattern")) {
          return Err(ptr, "'format' with 'pattern', 'minLength' or 'maxLength' is not supported");
        }
        return kQuote + " fmt-" + f + " " + kQuote;
      }
      // Other formats are annotations.
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Err(ptr, "'pattern' must be a string");
      if (lengths) return Err(ptr, "'pattern' with 'minLength'/'maxLength' is not supported");
      RegexEmbedOptions o;
      o.json_string = true;
      o.search = true;
      auto rule = AddRegexRules(s["pattern"].get<std::string>(),
                                "pattern" + std::to_string(++next_id_), o, options_.limits, &base_);
      if (!rule.ok()) return Err(ptr, "invalid 'pattern': " + rule.status().message());
      return kQuote + " " + base_.rules[*rule].name + " " + kQuote;
    }
    if (!lengths) return std::string("json-string");
    return kQuote + " json-char{" + std::to_string(min) + "," +
           (max >= 0 ? std::to_string(max) : "") + "} " + kQuote;
  }

  StatusOr<std::optional<NumberBound>> Bound(const json& s, const char* inclusive,
                                             const char* exclusive, bool lower,
                                             const std::string& ptr) {
    std::optional<NumberBound> b;
    auto tighter = [&](NumberBound c) {
      if (!b || (lower ? c.value > b->value : c.value < b->value) ||
          (c.value == b->value && c.exclusive)) {
        b = c;
      }
    };
    bool draft4_exclusive = false;
    if (s.contains(exclusive)) {
      const json& e = s[exclusive];
      if (e.is_boolean()) {
        draft4_exclusive = e.get<bool>();
      } else if (e.is_number()) {
        tighter({e.get<double>(), true});
      } else {
        return Err(ptr, std::string("'") + exclusive + "' must be a number");
      }
    }
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number())
        return Err(ptr, std::string("'") + inclusive + "' must be a number");
      tighter({s[inclusive].get<double>(), draft4_exclusive});
    }
    if (b && !std::isfinite(b->value))
      return Err(ptr, std::string("'") + inclusive + "' is not finite");
    return b;
  }

  StatusOr<std::string> Number(const json& s, const std::string& ptr, bool integer) {
    STRATA_ASSIGN_OR_RETURN(std::optional<NumberBound> lo,
                            Bound(s, "minimum", "exclusiveMinimum", true, ptr));
    STRATA_ASSIGN_OR_RETURN(std::optional<NumberBound> hi,
                            Bound(s, "maximum", "exclusiveMaximum", false, ptr));
    if (lo && hi &&
        (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)))) {
      return Err(ptr, "the minimum is above the maximum: no value satisfies both");
    }
    if (!lo && !hi) return std::string(integer ? "json-int" : "json-number");
    std::optional<std::string> e =
        integer ? internal::BoundedIntegerGbnf(lo, hi) : internal::BoundedNumberGbnf(lo, hi);
    if (!e)
      return Err(ptr, std::string("no ") + (integer ? "integer" : "number") +
                          " within +-10^15 satisfies the bounds");
    return NewRule(integer ? "int" : "num", *e);
  }

  // Keys of additional properties: unescaped strings other than `names`.
  std::string KeyNotIn(const std::vector<std::string>& names) {
    struct Node {
      bool terminal = false;
      std::map<char32_t, int> children;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      std::vector<char32_t> cps;
      size_t pos = 0;
      bool plain = true;
      while (pos < name.size()) {
        std::optional<char32_t> c = internal::DecodeUtf8(name, &pos);
        if (!c || *c < 0x20 || *c == '"' || *c == '\\') {
          plain = false;  // such a key cannot be written without escapes anyway
          break;
        }
        cps.push_back(*c);
      }
      if (!plain) continue;
      int node = 0;
      for (char32_t c : cps) {
        auto it = trie[node].children.find(c);
        if (it == trie[node].children.end()) {
          trie.push_back(Node{});
          const int child = static_cast<int>(trie.size() - 1);
          trie[node].children[c] = child;
          node = child;
        } else {
          node = it->second;
        }
      }
      trie[node].terminal = true;
    }
    const int base = next_id_ + 1;
    next_id_ += static_cast<int>(trie.size());
    auto name_of = [&](int n) { return "key-" + std::to_string(base + n); };
    for (size_t n = 0; n < trie.size(); ++n) {
      std::string alts;
      if (!trie[n].terminal) alts = kQuote;
      std::string excluded;
      for (const auto& [c, child] : trie[n].children) {
        std::string utf8;
        AppendUtf8(c, &utf8);
        alts += (alts.empty() ? "" : " | ") + Literal(utf8) + " " + name_of(child);
        char buf[16];
        std::snprintf(buf, sizeof(buf), "\\U%08X", static_cast<unsigned>(c));
        excluded += buf;
      }
      alts += (alts.empty() ? "" : " | ") + std::string("[^\"\\\\\\x00-\\x1F") + excluded +
              "] key-char* " + kQuote;
      rules_ += name_of(static_cast<int>(n)) + " ::= " + alts + "\n";
    }
    return kQuote + " " + name_of(0);
  }

  StatusOr<std::string> Object(const json& s, const std::string& ptr, int depth) {
    struct Prop {
      std::string name;
      std::string kv;  // rule: "name" ws ":" ws value
      bool required;
    };
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Err(ptr, "'required' must be an array of strings");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Err(ptr, "'required' must be an array of strings");
        required.push_back(r.get<std::string>());
      }
    }
    auto is_required = [&](const std::string& n) {
      return std::find(required.begin(), required.end(), n) != required.end();
    };
    std::vector<Prop> props;
    std::vector<std::string> names;
    auto add_prop = [&](const std::string& name, const std::string& value_expr) {
      const std::string key = json(name).dump(-1, ' ', false, json::error_handler_t::replace);
      props.push_back(
          {name, NewRule("kv", Literal(key) + " ws \":\" ws " + value_expr), is_required(name)});
    };
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object()) return Err(ptr, "'properties' must be an object");
      for (const auto& [name, sub] : p.items()) {
        names.push_back(name);
        const std::string sub_ptr = ptr + "/properties/" + PointerToken(name);
        if (sub.is_boolean() && !sub.get<bool>()) {
          if (is_required(name)) return Err(sub_ptr, "a required property has the schema false");
          continue;
        }
        STRATA_ASSIGN_OR_RETURN(std::string e, Visit(sub, sub_ptr, depth + 1));
        add_prop(name, e);
      }
    }
    for (const std::string& r : required) {
      if (std::find(names.begin(), names.end(), r) == names.end()) {
        names.push_back(r);
        add_prop(r, "json-value");
      }
    }
    std::optional<std::string> additional;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        if (a.get<bool>()) additional = "json-value";
      } else if (a.is_object()) {
        STRATA_ASSIGN_OR_RETURN(additional, Visit(a, ptr + "/additionalProperties", depth + 1));
      } else {
        return Err(ptr, "'additionalProperties' must be a boolean or a schema");
      }
    } else if (!options_.strict) {
      additional = "json-value";
    }
    std::string addl_after = "\"\"", addl_first = "\"\"";
    if (additional) {
      const std::string key = names.empty() ? "json-string" : KeyNotIn(names);
      const std::string kv = NewRule("extra", key + " ws \":\" ws " + *additional);
      addl_after = "( \",\" ws " + kv + " ws )*";
      addl_first = "( " + kv + " ws ( \",\" ws " + kv + " ws )* )?";
    }
    // after(i): properties i.. when one was written already; first(i): when none was. Linear
    // in the number of properties whatever subset is required.
    std::string after = NewRule("props-after", addl_after);
    std::string first = NewRule("props-first", addl_first);
    for (size_t i = props.size(); i-- > 0;) {
      const Prop& p = props[i];
      const std::string next_after = after;
      if (p.required) {
        after = NewRule("props-after", "\",\" ws " + p.kv + " ws " + next_after);
        first = NewRule("props-first", p.kv + " ws " + next_after);
      } else {
        after = NewRule("props-after", "( \",\" ws " + p.kv + " ws )? " + next_after);
        first = NewRule("props-first", p.kv + " ws " + next_after + " | " + first);
      }
    }
    return NewRule("object", "\"{\" ws " + first + " \"}\"");
  }

  StatusOr<std::string> Array(const json& s, const std::string& ptr, int depth) {
    std::vector<std::string> prefix;
    const json* prefix_items = nullptr;
    std::string prefix_key = "prefixItems";
    std::optional<std::string> items = std::string("json-value");  // nullopt: no more items
    const char* items_key = "items";
    if (s.contains("prefixItems")) {
      prefix_items = &s["prefixItems"];
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix_items = &s["items"];  // draft-7 tuple form
      prefix_key = "items";
      items_key = "additionalItems";
    }
    if (prefix_items) {
      if (!prefix_items->is_array()) return Err(ptr, "'" + prefix_key + "' must be an array");
      for (size_t i = 0; i < prefix_items->size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(
            std::string e,
            Visit((*prefix_items)[i], ptr + "/" + prefix_key + "/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
    }
    if (s.contains(items_key)) {
      const json& it = s[items_key];
      if (it.is_boolean() && !it.get<bool>()) {
        items.reset();
      } else {
        STRATA_ASSIGN_OR_RETURN(items, Visit(it, ptr + "/" + items_key, depth + 1));
      }
    }
    int64_t min = 0, max = -1;
    STRATA_RETURN_IF_ERROR(Counts(s, "minItems", "maxItems", ptr, &min, &max));
    const int64_t k = static_cast<int64_t>(prefix.size());
    if (!items) max = max < 0 ? k : std::min(max, k);
    if (min > k && !items) return Err(ptr, "'minItems' is more than the items allowed");
    if (max >= 0 && min > max) return Err(ptr, "'minItems' is more than 'maxItems'");
    const int64_t explicit_count = max >= 0 ? std::min(std::max(k, min), max) : std::max(k, min);
    // Positions after the explicit ones.
    std::string tail = "\"\"";
    const int64_t rest = max < 0 ? -1 : max - explicit_count;
    if (items && rest != 0) {
      const std::string item = NewRule("item", *items + " ws");
      if (explicit_count == 0) {
        tail = "( " + item + " ( \",\" ws " + item + " )" +
               (rest < 0 ? "*" : "{0," + std::to_string(rest - 1) + "}") + " )?";
      } else {
        tail = "( \",\" ws " + item + " )" + (rest < 0 ? "*" : "{0," + std::to_string(rest) + "}");
      }
    }
    std::string chain = NewRule("items-tail", tail);
    for (int64_t j = explicit_count; j-- > 0;) {
      const std::string elem = j < k ? prefix[j] : *items;
      const std::string body = (j == 0 ? "" : "\",\" ws ") + elem + " ws " + chain;
      chain = NewRule("items", j < min ? body : "\"\" | " + body);
    }
    return NewRule("array", "\"[\" ws " + chain + " \"]\"");
  }

  const json& root_;
  JsonSchemaOptions options_;
  Grammar base_;
  std::string rules_;
  int next_id_ = 0;
  std::map<std::string, std::string> ref_rules_;
};

// Deepest bracket nesting outside strings (a cheap guard before parsing).
int NestingDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json,
                                      const JsonSchemaOptions& options) {
  if (schema_json.size() > options.limits.max_grammar_bytes) {
    return InvalidArgumentError("json_schema: schema is " + std::to_string(schema_json.size()) +
                                " bytes, more than the limit " +
                                std::to_string(options.limits.max_grammar_bytes));
  }
  // A schema level is at most a few brackets deep (properties, items, anyOf arrays).
  if (NestingDepth(schema_json) > 4 * options.limits.max_nesting_depth + 8) {
    return InvalidArgumentError("json_schema: schema nested deeper than " +
                                std::to_string(options.limits.max_nesting_depth));
  }
  json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("json_schema: not valid JSON: ") + e.what());
  }
  return Converter(schema, options).Convert();
}

Grammar AnyJsonObjectGrammar() {
  JsonSchemaOptions options;
  options.strict = false;
  auto g = JsonSchemaToGrammar(R"({"type": "object"})", options);
  STRATA_CHECK(g.ok());
  return std::move(g).value();
}

StatusOr<Grammar> ChoiceGrammar(std::span<const std::string> choices, const Limits& limits) {
  if (choices.empty()) return InvalidArgumentError("choice: no choices given");
  size_t total = 0;
  Grammar g;
  std::vector<Alternative> alts;
  for (size_t i = 0; i < choices.size(); ++i) {
    total += choices[i].size();
    if (total > limits.max_grammar_bytes) {
      return InvalidArgumentError("choice: choices are more than " +
                                  std::to_string(limits.max_grammar_bytes) + " bytes");
    }
    Alternative a;
    size_t pos = 0;
    while (pos < choices[i].size()) {
      std::optional<char32_t> c = internal::DecodeUtf8(choices[i], &pos);
      if (!c)
        return InvalidArgumentError("choice: choice " + std::to_string(i) + " is not valid UTF-8");
      a.elements.push_back(Element::Char(*c));
    }
    alts.push_back(std::move(a));
  }
  g.root = g.AddRule("root", std::move(alts));
  return g;
}

}  // namespace strata::grammar
