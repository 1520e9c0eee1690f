#include "strata/server/http/openai_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "json_type_name.h"

namespace strata::server::http {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; the first problem is kept in *error and every later
// read returns nothing.
class Reader {
 public:
  Reader(const json& object, ApiError* error) : object_(object), error_(error) {}

  bool failed() const { return failed_; }

  // The field, or nullptr when absent or null.
  const json* Get(const char* name) const {
    if (failed_) return nullptr;
    const auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  bool Fail(const std::string& param, const std::string& message) {
    if (!failed_) {
      failed_ = true;
      error_->http_status = 400;
      error_->param = param;
      error_->message = message;
    }
    return false;
  }

  bool WrongType(const char* name, const char* want, const json& got) {
    return Fail(name, std::string(name) + " must be " + want + ", got " + JsonTypeName(got));
  }

  std::optional<double> Number(const char* name) {
    const json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      WrongType(name, "a number", *v);
      return std::nullopt;
    }
    return v->get<double>();
  }

  std::optional<float> Float(const char* name) {
    const std::optional<double> d = Number(name);
    if (!d) return std::nullopt;
    // Out-of-float values become +-inf or NaN-free extremes the translator refuses by range.
    return static_cast<float>(*d);
  }

  std::optional<int64_t> Integer(const char* name, int64_t lo, int64_t hi) {
    const json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    int64_t value = 0;
    if (v->is_number_integer()) {
      value = v->get<int64_t>();
    } else if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      value = u > static_cast<uint64_t>(hi) ? hi : static_cast<int64_t>(u);
      if (u > static_cast<uint64_t>(hi)) {
        Fail(name, std::string(name) + " must be at most " + std::to_string(hi));
        return std::nullopt;
      }
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
               std::floor(v->get<double>()) == v->get<double>() &&
               std::fabs(v->get<double>()) < 9.0e15) {
      value = static_cast<int64_t>(v->get<double>());  // 16.0 is 16, as JavaScript clients send
    } else {
      WrongType(name, "an integer", *v);
      return std::nullopt;
    }
    if (value < lo || value > hi) {
      Fail(name, std::string(name) + " must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + ", got " + std::to_string(value));
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> Bool(const char* name) {
    const json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      WrongType(name, "a boolean", *v);
      return std::nullopt;
    }
    return v->get<bool>();
  }

  std::optional<std::string> String(const char* name) {
    const json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      WrongType(name, "a string", *v);
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  // A field that must be absent, null, or equal to the harmless value `ok`.
  void Unsupported(const char* name, const json& ok, const std::string& why) {
    const json* v = Get(name);
    if (v == nullptr || *v == ok) return;
    Fail(name, std::string(name) + " is not supported: " + why);
  }

 private:
  const json& object_;
  ApiError* error_;
  bool failed_ = false;
};

constexpr int32_t kMaxInt32 = std::numeric_limits<int32_t>::max();

bool ReadPrompt(Reader& r, GenerationInput* in) {
  const json* p = r.Get("prompt");
  if (p == nullptr) return r.Fail("prompt", "prompt is required");
  if (p->is_string()) {
    in->kind = GenerationInput::Kind::kText;
    in->text = p->get<std::string>();
    return true;
  }
  if (!p->is_array()) return r.WrongType("prompt", "a string or an array", *p);
  if (p->empty()) return r.Fail("prompt", "prompt must not be empty");
  if ((*p)[0].is_string()) {
    if (p->size() > 1) {
      return r.Fail("prompt",
                    "prompt holds " + std::to_string(p->size()) +
                        " prompts; Strata takes one prompt per request (send one request each)");
    }
    in->kind = GenerationInput::Kind::kText;
    in->text = (*p)[0].get<std::string>();
    return true;
  }
  if ((*p)[0].is_array()) {
    return r.Fail("prompt", "batched token-id prompts are not supported: send one per request");
  }
  in->kind = GenerationInput::Kind::kTokenIds;
  in->token_ids.reserve(p->size());
  for (size_t i = 0; i < p->size(); ++i) {
    const json& id = (*p)[i];
    if (!id.is_number_integer() && !id.is_number_unsigned()) {
      return r.Fail("prompt", "prompt[" + std::to_string(i) + "] must be a token id, got " +
                                  JsonTypeName(id));
    }
    const int64_t v = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{kMaxInt32}
                          ? int64_t{kMaxInt32} + 1
                          : id.get<int64_t>();
    if (v < 0 || v > kMaxInt32) {
      return r.Fail("prompt",
                    "prompt[" + std::to_string(i) + "] must be a token id, got " + id.dump());
    }
    in->token_ids.push_back(static_cast<int32_t>(v));
  }
  return true;
}

bool ReadMessages(Reader& r, GenerationInput* in) {
  const json* m = r.Get("messages");
  if (m == nullptr) return r.Fail("messages", "messages is required");
  if (!m->is_array()) return r.WrongType("messages", "an array", *m);
  in->kind = GenerationInput::Kind::kChat;
  for (size_t i = 0; i < m->size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const json& msg = (*m)[i];
    if (!msg.is_object()) {
      return r.Fail(field, field + " must be an object, got " + JsonTypeName(msg));
    }
    const auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) {
      return r.Fail(field + ".role", field + ".role must be a string");
    }
    ChatTurn turn;
    turn.role = role->get<std::string>();
    if (turn.role == "developer") turn.role = "system";  // OpenAI's newer name for it
    if (turn.role == "function") {
      return r.Fail(field + ".role", field +
                                         ".role 'function' is not supported: use tools and "
                                         "'tool' messages");
    }
    const auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      turn.content = "";
    } else if (content->is_string()) {
      turn.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pf = field + ".content[" + std::to_string(k) + "]";
        const auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || *type != "text") {
          return r.Fail(pf, pf + " must be a text part ({\"type\": \"text\", \"text\": ...}); "
                                 "Strata serves text-only models");
        }
        const auto text = part.find("text");
        if (text == part.end() || !text->is_string()) {
          return r.Fail(pf + ".text", pf + ".text must be a string");
        }
        turn.content += text->get<std::string>();
      }
    } else {
      return r.Fail(field + ".content",
                    field + ".content must be a string or an array of text parts, got " +
                        JsonTypeName(*content));
    }
    // Tool calls and their results go into the conversation in the reply form the model is
    // asked for (tool_calls.h).
    if (turn.role == "tool") {
      const auto id = msg.find("tool_call_id");
      if (id == msg.end() || !id->is_string()) {
        return r.Fail(field + ".tool_call_id", field + ".tool_call_id must be a string");
      }
      turn.role = "user";
      turn.content = ToolResultTurn(id->get<std::string>(), turn.content);
    } else if (const auto calls = msg.find("tool_calls");
               turn.role == "assistant" && calls != msg.end() && !calls->is_null()) {
      StatusOr<std::string> rendered = ToolCallsTurn(*calls, field);
      if (!rendered.ok()) {
        const std::string message(rendered.status().message());
        return r.Fail(message.substr(0, message.find(' ')), message);
      }
      turn.content = std::move(*rendered);
    }
    in->chat.push_back(std::move(turn));
  }
  return true;
}

void ReadStop(Reader& r, SamplingInput* s) {
  const json* v = r.Get("stop");
  if (v == nullptr) return;
  if (v->is_string()) {
    s->stop.push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) {
    r.WrongType("stop", "a string or an array of strings", *v);
    return;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      r.Fail("stop",
             "stop[" + std::to_string(i) + "] must be a string, got " + JsonTypeName((*v)[i]));
      return;
    }
    s->stop.push_back((*v)[i].get<std::string>());
  }
}

// cache_tags: an array of strings (their sizes and UTF-8 are the translator's to check).
void ReadCacheTags(Reader& r, CacheInput* c) {
  const json* v = r.Get("cache_tags");
  if (v == nullptr) return;
  if (!v->is_array()) {
    r.WrongType("cache_tags", "an array of strings", *v);
    return;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      r.Fail("cache_tags", "cache_tags[" + std::to_string(i) + "] must be a string, got " +
                               JsonTypeName((*v)[i]));
      return;
    }
    c->tags.push_back((*v)[i].get<std::string>());
  }
}

void ReadStopTokenIds(Reader& r, SamplingInput* s) {
  const json* v = r.Get("stop_token_ids");
  if (v == nullptr) return;
  if (!v->is_array()) {
    r.WrongType("stop_token_ids", "an array of token ids", *v);
    return;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& id = (*v)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxInt32) {
      r.Fail("stop_token_ids",
             "stop_token_ids[" + std::to_string(i) + "] must be a token id, got " + id.dump());
      return;
    }
    s->stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
}

// Structured output: OpenAI's response_format ({"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}), or vLLM's guided_json,
// guided_regex, guided_choice and guided_grammar; at most one of them.
// `ordered`: the same body parsed keeping its objects' key order (a schema's property order is
// the order its outputs follow; `json` sorts keys).
bool ReadOutputFormat(Reader& r, const nlohmann::ordered_json& ordered, OutputFormatInput* format) {
  using Kind = OutputFormatInput::Kind;
  int given = 0;
  if (const json* rf = r.Get("response_format")) {
    if (!rf->is_object()) return r.WrongType("response_format", "an object", *rf);
    const auto type = rf->find("type");
    if (type == rf->end() || !type->is_string()) {
      return r.Fail("response_format.type",
                    "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    }
    if (*type == "json_object") {
      format->kind = Kind::kJsonObject;
      ++given;
    } else if (*type == "json_schema") {
      const auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object()) {
        return r.Fail("response_format.json_schema",
                      "response_format.json_schema must be an object with a \"schema\"");
      }
      const auto schema = js->find("schema");
      if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
        return r.Fail("response_format.json_schema.schema",
                      "response_format.json_schema.schema must be a JSON Schema object");
      }
      const auto strict = js->find("strict");
      if (strict != js->end() && !strict->is_null()) {
        if (!strict->is_boolean()) {
          return r.Fail("response_format.json_schema.strict",
                        "response_format.json_schema.strict must be a boolean");
        }
        format->strict = strict->get<bool>();
      }
      format->kind = Kind::kJsonSchema;
      format->text = ordered["response_format"]["json_schema"]["schema"].dump();
      ++given;
    } else if (*type != "text") {
      return r.Fail("response_format.type",
                    "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  if (const json* gj = r.Get("guided_json")) {
    if (gj->is_string()) {
      format->text = gj->get<std::string>();
    } else if (gj->is_object()) {
      format->text = ordered["guided_json"].dump();
    } else {
      return r.WrongType("guided_json", "a JSON Schema (an object or its JSON text)", *gj);
    }
    format->kind = Kind::kJsonSchema;
    ++given;
  }
  if (const std::optional<std::string> regex = r.String("guided_regex")) {
    format->kind = Kind::kRegex;
    format->text = *regex;
    ++given;
  }
  if (const std::optional<std::string> grammar = r.String("guided_grammar")) {
    format->kind = Kind::kGrammar;
    format->text = *grammar;
    ++given;
  }
  if (const json* gc = r.Get("guided_choice")) {
    if (!gc->is_array() || gc->empty()) {
      return r.WrongType("guided_choice", "a non-empty array of strings", *gc);
    }
    for (const json& c : *gc) {
      if (!c.is_string()) return r.WrongType("guided_choice", "a non-empty array of strings", *gc);
      format->choices.push_back(c.get<std::string>());
    }
    format->kind = Kind::kChoice;
    ++given;
  }
  if (given > 1) {
    return r.Fail("response_format",
                  "give at most one of response_format (json_object or json_schema), "
                  "guided_json, guided_regex, guided_grammar and guided_choice");
  }
  return !r.failed();
}

}  // namespace

bool ParseOpenAiRequest(Endpoint endpoint, std::string_view body, int32_t default_max_tokens,
                        OpenAiRequest* out, ApiError* error) {
  *out = OpenAiRequest();
  out->endpoint = endpoint;
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    error->http_status = 400;
    error->message = "the request body is not valid JSON";
    error->param = "";
    return false;
  }
  if (!doc.is_object()) {
    error->http_status = 400;
    error->message =
        "the request body must be a JSON object, got " + std::string(JsonTypeName(doc));
    error->param = "";
    return false;
  }
  Reader r(doc, error);
  const std::optional<std::string> model = r.String("model");
  if (!r.failed() && !model) return r.Fail("model", "model is required");
  if (model) out->model = *model;

  GenerationInput& in = out->input;
  const bool chat = endpoint == Endpoint::kChatCompletions;
  if (!r.failed()) {
    if (chat ? !ReadMessages(r, &in) : !ReadPrompt(r, &in)) return false;
  }

  SamplingInput& s = in.sampling;
  std::optional<int64_t> max_tokens = r.Integer("max_tokens", 0, kMaxInt32);
  if (const std::optional<int64_t> mct = r.Integer("max_completion_tokens", 0, kMaxInt32)) {
    max_tokens = mct;
  }
  if (max_tokens) {
    s.max_tokens = static_cast<int32_t>(*max_tokens);
  } else if (default_max_tokens > 0) {
    s.max_tokens = default_max_tokens;
  }
  s.temperature = r.Float("temperature");
  s.top_p = r.Float("top_p");
  s.presence_penalty = r.Float("presence_penalty");
  s.frequency_penalty = r.Float("frequency_penalty");
  s.repetition_penalty = r.Float("repetition_penalty");
  s.min_p = r.Float("min_p");
  if (const std::optional<int64_t> k = r.Integer("top_k", -1, kMaxInt32)) {
    s.top_k = static_cast<int32_t>(*k < 0 ? 0 : *k);  // vLLM's -1 means off, as 0 does here
  }
  if (const std::optional<int64_t> seed = r.Integer("seed", std::numeric_limits<int64_t>::min(),
                                                    std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  ReadStop(r, &s);
  ReadStopTokenIds(r, &s);
  if (const std::optional<bool> ignore = r.Bool("ignore_eos")) s.ignore_eos = *ignore;
  if (const std::optional<int64_t> p = r.Integer("priority", -kMaxInt32, kMaxInt32)) {
    in.priority = static_cast<int32_t>(*p);
  }
  if (const std::optional<std::string> id = r.String("request_id")) in.request_id = *id;
  if (const std::optional<bool> speculative = r.Bool("speculative")) in.speculative = *speculative;
  if (const std::optional<std::string> user = r.String("user")) out->user = *user;
  // Strata's response cache (--response-cache): opt out, a namespace, a shorter lifetime.
  if (const std::optional<bool> use = r.Bool("cache")) in.cache.use = *use;
  if (const std::optional<std::string> ns = r.String("cache_namespace")) {
    in.cache.cache_namespace = *ns;
  }
  if (const std::optional<int64_t> ttl = r.Integer("cache_ttl", 0, kMaxInt32)) {
    in.cache.ttl_seconds = *ttl;
  }
  ReadCacheTags(r, &in.cache);
  if (const std::optional<bool> semantic = r.Bool("cache_semantic")) in.cache.semantic = *semantic;

  // Log-probabilities: completions take `logprobs: N` (the chosen token's and N alternatives);
  // chat takes `logprobs: true` and `top_logprobs: N`.
  constexpr int64_t kMaxTop = 20;
  if (chat) {
    out->logprobs = r.Bool("logprobs").value_or(false);
    if (const std::optional<int64_t> top = r.Integer("top_logprobs", 0, kMaxTop)) {
      if (!out->logprobs && *top > 0) {
        return r.Fail("top_logprobs", "top_logprobs needs logprobs set to true");
      }
      out->top_logprobs = static_cast<int32_t>(*top);
    }
    if (const std::optional<bool> agp = r.Bool("add_generation_prompt")) {
      in.add_generation_prompt = *agp;
    }
  } else {
    const json* lp = r.Get("logprobs");
    if (lp != nullptr && lp->is_boolean()) {
      out->logprobs = lp->get<bool>();  // some clients send a boolean here too
    } else if (const std::optional<int64_t> n = r.Integer("logprobs", 0, kMaxTop)) {
      out->logprobs = true;
      out->top_logprobs = static_cast<int32_t>(*n);
    }
  }
  // The engine computes the chosen token's log-probability with at least one alternative.
  if (out->logprobs) s.logprobs = std::max<int32_t>(out->top_logprobs, 1);

  out->stream = r.Bool("stream").value_or(false);
  if (const json* so = r.Get("stream_options")) {
    if (!so->is_object()) return r.WrongType("stream_options", "an object", *so);
    const auto inc = so->find("include_usage");
    if (inc != so->end() && !inc->is_null()) {
      if (!inc->is_boolean()) {
        return r.Fail("stream_options.include_usage",
                      "stream_options.include_usage must be a boolean");
      }
      out->include_usage = inc->get<bool>();
    }
  }
  if (const std::optional<int64_t> n = r.Integer("n", 1, kMaxInt32); n && *n != 1) {
    return r.Fail("n",
                  "n must be 1: Strata returns one choice per request (send n requests, "
                  "with different seeds, for n samples)");
  }
  if (const std::optional<int64_t> b = r.Integer("best_of", 1, kMaxInt32); b && *b != 1) {
    return r.Fail("best_of", "best_of must be 1");
  }
  r.Unsupported("echo", json(false), "the prompt is not echoed back");
  r.Unsupported("suffix", json(""), "Strata has no insertion mode");
  r.Unsupported("logit_bias", json::object(), "logit biases are not implemented");
  r.Unsupported("functions", json::array(), "use tools instead of the deprecated functions");
  if (r.failed()) return false;
  // Schemas keep their key order: parsed again, only when the body has one.
  nlohmann::ordered_json ordered;
  if (doc.contains("response_format") || doc.contains("guided_json") || doc.contains("tools")) {
    ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
  if (!ReadOutputFormat(r, ordered, &in.output_format)) return false;
  if (chat) {
    Status tools = ReadToolRequest(ordered.is_object() ? ordered : nlohmann::ordered_json::object(),
                                   &out->tools);
    if (tools.ok()) tools = ApplyTools(out->tools, &in);
    if (!tools.ok()) {
      const std::string message(tools.message());
      return r.Fail(message.substr(0, message.find_first_of(" :")), message);
    }
  } else {
    r.Unsupported("tools", json::array(), "tools need /v1/chat/completions");
  }
  return !r.failed();
}

namespace {

// The wire field a serving-core message starts with, renamed to OpenAI's, and the message with
// that name put in front: "sampling.top_p must ..." -> ("top_p", "top_p must ...").
std::pair<std::string, std::string> RenameField(const std::string& message, Endpoint endpoint) {
  size_t end = 0;
  while (end < message.size() && message[end] != ' ' && message[end] != ':') ++end;
  std::string field = message.substr(0, end);
  std::string rest = message.substr(end);
  auto starts = [&](std::string_view prefix) { return field.rfind(prefix, 0) == 0; };
  std::string param;
  if (starts("sampling.")) {
    param = field.substr(9);
    if (param == "logprobs") {
      param = endpoint == Endpoint::kChatCompletions ? "top_logprobs" : "logprobs";
    }
  } else if (field == "cache.namespace") {
    param = "cache_namespace";
  } else if (field == "cache.ttl_seconds") {
    param = "cache_ttl";
  } else if (field.rfind("cache.tags", 0) == 0) {
    param = "cache_tags" + field.substr(10);
  } else if (starts("chat.messages")) {
    param = "messages" + field.substr(13);
  } else if (starts("output_format")) {
    // response_format or one of the guided_* fields: the message says which part is wrong.
    return {"response_format", "response_format" + field.substr(13) + rest};
  } else if (starts("token_ids.ids")) {
    param = "prompt" + field.substr(13);
  } else if (field == "prompt" || field == "request_id" || field == "priority" ||
             field == "max_tokens") {
    param = field;
  } else if (field == "the" && message.rfind("the prompt", 0) == 0) {
    return {endpoint == Endpoint::kChatCompletions ? "messages" : "prompt", message};
  } else {
    // Messages that do not start with a field ("prompt (12 tokens) + max_tokens ...").
    if (message.find("max_tokens") != std::string::npos) return {"max_tokens", message};
    return {"", message};
  }
  return {param, param + rest};
}

}  // namespace

ApiError ApiErrorFromStatus(const Status& status, Endpoint endpoint) {
  ApiError e;
  e.message = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange: {
      auto [param, message] = RenameField(status.message(), endpoint);
      e.http_status = 400;
      e.param = std::move(param);
      e.message = std::move(message);
      break;
    }
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "not_found_error";
      e.code = "model_not_found";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable_error";
      break;
    case StatusCode::kCancelled:
      e.http_status = 499;
      e.type = "cancelled";
      break;
    case StatusCode::kUnauthenticated:
      e.http_status = 401;
      e.code = "invalid_api_key";
      break;
    case StatusCode::kPermissionDenied:
      e.http_status = 403;
      e.type = "permission_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

std::string ErrorBody(const ApiError& error) {
  json e = {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return json{{"error", std::move(e)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace strata::server::http
