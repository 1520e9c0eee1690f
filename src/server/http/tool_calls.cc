#include "strata/server/http/tool_calls.h"

#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "json_type_name.h"
#include "strata/grammar/json_schema.h"

namespace strata::server::http {
namespace {

using json = nlohmann::ordered_json;  // schemas keep their property order

constexpr size_t kMaxTools = 128;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status Invalid(const std::string& field, const std::string& what) {
  return InvalidArgumentError(field + " " + what);
}

Status ReadTool(const json& tool, size_t i, ToolSpec* out) {
  const std::string field = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object())
    return Invalid(field, std::string("must be an object, got ") + JsonTypeName(tool));
  const auto type = tool.find("type");
  if (type == tool.end() || *type != "function") {
    return Invalid(field + ".type", "must be \"function\"");
  }
  const auto function = tool.find("function");
  if (function == tool.end() || !function->is_object()) {
    return Invalid(field + ".function", "must be an object with a \"name\"");
  }
  const auto name = function->find("name");
  if (name == function->end() || !name->is_string() || !ValidName(name->get<std::string>())) {
    return Invalid(field + ".function.name",
                   "must be 1 to 64 letters, digits, underscores or dashes");
  }
  out->name = name->get<std::string>();
  const auto description = function->find("description");
  if (description != function->end() && !description->is_null()) {
    if (!description->is_string()) {
      return Invalid(field + ".function.description", "must be a string");
    }
    out->description = description->get<std::string>();
  }
  const auto parameters = function->find("parameters");
  if (parameters == function->end() || parameters->is_null()) {
    out->parameters_json = R"({"type":"object","properties":{}})";
  } else if (parameters->is_object()) {
    out->parameters_json = parameters->dump();
    // Checked here so that a bad schema is named by its tool, not by the reply schema's pointer.
    StatusOr<grammar::Grammar> compiled = grammar::JsonSchemaToGrammar(out->parameters_json);
    if (!compiled.ok()) {
      return InvalidArgumentError(
          field + ".function.parameters: " + std::string(compiled.status().message()));
    }
  } else {
    return Invalid(field + ".function.parameters",
                   std::string("must be a JSON Schema object, got ") + JsonTypeName(*parameters));
  }
  return OkStatus();
}

std::string RandomCallId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace

Status ReadToolRequest(const json& body, ToolRequest* out) {
  *out = ToolRequest();
  const auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return Invalid("tools", "must be an array of function tools");
    if (tools->size() > kMaxTools) {
      return Invalid("tools", "may hold at most " + std::to_string(kMaxTools) + " tools");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolSpec spec;
      STRATA_RETURN_IF_ERROR(ReadTool((*tools)[i], i, &spec));
      for (const ToolSpec& other : out->tools) {
        if (other.name == spec.name) {
          return Invalid("tools[" + std::to_string(i) + "].function.name",
                         "'" + spec.name + "' is given twice");
        }
      }
      out->tools.push_back(std::move(spec));
    }
  }
  const auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") {
        out->choice = ToolRequest::Choice::kNone;
      } else if (c == "auto") {
        out->choice = ToolRequest::Choice::kAuto;
      } else if (c == "required") {
        out->choice = ToolRequest::Choice::kRequired;
      } else {
        return Invalid("tool_choice",
                       "must be \"none\", \"auto\", \"required\" or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
    } else if (choice->is_object()) {
      const json* name = nullptr;
      const auto function = choice->find("function");
      if (function != choice->end() && function->is_object()) {
        const auto it = function->find("name");
        if (it != function->end() && it->is_string()) name = &*it;
      }
      if (name == nullptr) {
        return Invalid("tool_choice",
                       "must name a function: {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
      }
      out->choice = ToolRequest::Choice::kNamed;
      out->named = name->get<std::string>();
      bool known = false;
      for (const ToolSpec& t : out->tools) known |= t.name == out->named;
      if (!known) {
        return Invalid("tool_choice", "names '" + out->named + "', which is not among the tools");
      }
    } else {
      return Invalid("tool_choice",
                     std::string("must be a string or an object, got ") + JsonTypeName(*choice));
    }
    if (out->tools.empty() && (out->choice == ToolRequest::Choice::kRequired)) {
      return Invalid("tool_choice", "is \"required\" but no tools are given");
    }
  }
  const auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return Invalid("parallel_tool_calls", "must be a boolean");
    out->parallel = parallel->get<bool>();
  }
  return OkStatus();
}

std::string ToolReplySchema(const ToolRequest& request) {
  json calls = json::array();
  for (const ToolSpec& tool : request.tools) {
    if (request.choice == ToolRequest::Choice::kNamed && tool.name != request.named) continue;
    calls.push_back({{"type", "object"},
                     {"properties",
                      {{"name", {{"const", tool.name}}},
                       {"arguments", json::parse(tool.parameters_json, nullptr, false)}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
  }
  json call_list = {{"type", "array"},
                    {"items", calls.size() == 1 ? calls[0] : json{{"anyOf", calls}}},
                    {"minItems", 1},
                    {"maxItems", request.parallel ? request.max_calls : 1}};
  json with_calls = {{"type", "object"},
                     {"properties", {{"tool_calls", std::move(call_list)}}},
                     {"required", {"tool_calls"}},
                     {"additionalProperties", false}};
  if (request.choice != ToolRequest::Choice::kAuto) return with_calls.dump();
  json with_response = {{"type", "object"},
                        {"properties", {{"response", {{"type", "string"}}}}},
                        {"required", {"response"}},
                        {"additionalProperties", false}};
  return json{{"anyOf", {std::move(with_calls), std::move(with_response)}}}.dump();
}

Status ApplyTools(const ToolRequest& request, GenerationInput* input) {
  if (!request.active()) return OkStatus();
  if (input->output_format.kind != OutputFormatInput::Kind::kNone) {
    return Invalid("tools",
                   "cannot be combined with response_format or guided_* (the tool "
                   "calls are the output's format)");
  }
  json listed = json::array();
  for (const ToolSpec& tool : request.tools) {
    listed.push_back({{"name", tool.name},
                      {"description", tool.description},
                      {"parameters", json::parse(tool.parameters_json, nullptr, false)}});
  }
  std::string prompt = "You can call these functions:\n" + listed.dump() + "\n";
  switch (request.choice) {
    case ToolRequest::Choice::kAuto:
      prompt +=
          "Reply with one JSON object: {\"tool_calls\": [{\"name\": <function name>, "
          "\"arguments\": <arguments object>}]} to call functions, or {\"response\": <your "
          "answer>} to answer directly.";
      break;
    case ToolRequest::Choice::kRequired:
      prompt +=
          "Reply with one JSON object that calls functions: {\"tool_calls\": [{\"name\": "
          "<function name>, \"arguments\": <arguments object>}]}.";
      break;
    default:
      prompt += "Reply with one JSON object that calls " + request.named +
                ": {\"tool_calls\": [{\"name\": \"" + request.named +
                "\", \"arguments\": <arguments object>}]}.";
      break;
  }
  if (!input->chat.empty() && input->chat.front().role == "system") {
    input->chat.front().content += "\n\n" + prompt;
  } else {
    input->chat.insert(input->chat.begin(), ChatTurn{"system", prompt});
  }
  input->output_format.kind = OutputFormatInput::Kind::kJsonSchema;
  input->output_format.text = ToolReplySchema(request);
  input->output_format.strict = true;
  return OkStatus();
}

StatusOr<std::string> ToolCallsTurn(const nlohmann::json& tool_calls, const std::string& field) {
  if (!tool_calls.is_array()) return Invalid(field + ".tool_calls", "must be an array");
  json calls = json::array();
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const std::string f = field + ".tool_calls[" + std::to_string(i) + "]";
    const nlohmann::json& call = tool_calls[i];
    const auto function = call.is_object() ? call.find("function") : call.end();
    if (function == call.end() || !function->is_object()) {
      return Invalid(f + ".function", "must be an object with a name and arguments");
    }
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string()) {
      return Invalid(f + ".function.name", "must be a string");
    }
    json arguments = json::object();
    const auto args = function->find("arguments");
    if (args != function->end() && args->is_string()) {
      arguments = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (arguments.is_discarded()) {
        return Invalid(f + ".function.arguments", "must be JSON text");
      }
    } else if (args != function->end() && !args->is_null()) {
      return Invalid(f + ".function.arguments", "must be a string of JSON");
    }
    calls.push_back({{"name", name->get<std::string>()}, {"arguments", std::move(arguments)}});
  }
  return json{{"tool_calls", std::move(calls)}}.dump();
}

std::string ToolResultTurn(std::string_view tool_call_id, std::string_view content) {
  return json{{"tool_result", {{"tool_call_id", tool_call_id}, {"content", content}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The 4 hex digits at raw[at..at+4) as a number, or -1.
int64_t Hex4(std::string_view raw, size_t at) {
  if (at + 4 > raw.size()) return -1;
  int64_t v = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = raw[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

size_t DecodeJsonStringPrefix(std::string_view raw, std::string* out, bool* ended) {
  *ended = false;
  size_t i = 0;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c == '"') {
      *ended = true;
      return i;
    }
    if (c != '\\') {
      *out += c;
      ++i;
      continue;
    }
    if (i + 1 >= raw.size()) return i;  // the escape is not complete yet
    const char e = raw[i + 1];
    if (e != 'u') {
      static constexpr std::string_view kFrom = "\"\\/bfnrt";
      static constexpr std::string_view kTo = "\"\\/\b\f\n\r\t";
      const size_t k = kFrom.find(e);
      *out += k == std::string_view::npos ? e : kTo[k];
      i += 2;
      continue;
    }
    const int64_t hi = Hex4(raw, i + 2);
    if (hi < 0) return i;
    if (hi >= 0xD800 && hi <= 0xDBFF) {  // a surrogate pair: \uD8xx\uDCxx
      const int64_t lo =
          i + 8 <= raw.size() && raw[i + 6] == '\\' && raw[i + 7] == 'u' ? Hex4(raw, i + 8) : -1;
      if (lo < 0) return i;
      AppendUtf8(0x10000 + ((static_cast<uint32_t>(hi) - 0xD800) << 10) +
                     (static_cast<uint32_t>(lo) - 0xDC00),
                 out);
      i += 12;
      continue;
    }
    AppendUtf8(static_cast<uint32_t>(hi), out);
    i += 6;
  }
  return i;
}

ToolReply ParseToolReply(std::string_view text) {
  ToolReply reply;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    const auto calls = doc.find("tool_calls");
    const auto response = doc.find("response");
    if (calls != doc.end() && calls->is_array()) {
      reply.parsed = true;
      for (const json& call : *calls) {
        const auto name = call.is_object() ? call.find("name") : call.end();
        const auto arguments = call.is_object() ? call.find("arguments") : call.end();
        if (name == call.end() || !name->is_string() || arguments == call.end()) {
          reply.parsed = false;
          break;
        }
        ToolCall parsed{RandomCallId(), name->get<std::string>(),
                        arguments->dump(-1, ' ', false, json::error_handler_t::replace)};
        // A small model repeats a call until the array is full; the same call twice is one.
        bool repeated = false;
        for (const ToolCall& c : reply.calls) {
          repeated |= c.name == parsed.name && c.arguments_json == parsed.arguments_json;
        }
        if (!repeated) reply.calls.push_back(std::move(parsed));
      }
      if (reply.parsed) return reply;
      reply.calls.clear();
    } else if (response != doc.end() && response->is_string()) {
      reply.parsed = true;
      reply.content = response->get<std::string>();
      return reply;
    }
  }
  // A reply cut inside {"response": "...": the answer so far, its string closed (dropping a
  // partial escape at the cut); anything else comes back as it is.
  constexpr std::string_view kResponse = kToolResponsePrefix;
  if (text.substr(0, kResponse.size()) == kResponse) {
    for (size_t drop = 0; drop <= 6 && drop < text.size() - kResponse.size(); ++drop) {
      std::string closed(text.substr(0, text.size() - drop));
      closed += "\"}";
      const json cut = json::parse(closed, nullptr, /*allow_exceptions=*/false);
      if (cut.is_object() && cut.contains("response") && cut["response"].is_string()) {
        reply.content = cut["response"].get<std::string>();
        return reply;
      }
    }
  }
  reply.content = std::string(text);
  return reply;
}

}  // namespace strata::server::http
