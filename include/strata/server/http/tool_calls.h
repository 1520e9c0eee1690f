// Tool calling for the chat completions API (OpenAI's `tools`, `tool_choice`,
// `parallel_tool_calls`), on any model, with structured output doing the hard part.
//
// The model is told about the tools in a system message and must answer with one JSON object,
// which constrained decoding guarantees (the reply schema is the request's output format):
//   {"tool_calls": [{"name": <a tool's name>, "arguments": <that tool's parameters>}, ...]}
// or, when it may answer in words (tool_choice "auto"), {"response": "<text>"}. tool_choice
// "required" allows only tool calls, a named function only calls of it, "none" leaves the
// request as if no tools were given; parallel_tool_calls false allows one call. The server
// turns the reply back into OpenAI's shape: `message.tool_calls` with ids and JSON-text
// `arguments`, finish_reason "tool_calls"; or the response as `content`. Earlier turns with
// tool calls and tool results are rendered into the conversation in the same JSON form, so the
// model sees its own calls and their results.
//
// Thread rules: plain functions and values.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/server/generation_input.h"

namespace strata::server::http {

struct ToolSpec {
  std::string name;             // [A-Za-z0-9_-]{1,64}
  std::string description;      // may be empty
  std::string parameters_json;  // a JSON Schema of the arguments ({"type": "object"} if absent)
};

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<ToolSpec> tools;
  Choice choice = Choice::kAuto;
  std::string named;      // kNamed: the function's name
  bool parallel = true;   // several calls in one reply
  int32_t max_calls = 8;  // calls in one reply at most (with parallel)

  // Tools are in play: some are given and tool_choice is not "none".
  bool active() const { return !tools.empty() && choice != Choice::kNone; }
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat request body (an object).
// INVALID_ARGUMENT with a message starting with the field ("tools[1].function.name must ...",
// "tool_choice names 'f', which is not among the tools") for anything malformed.
// `body` keeps its objects' key order (nlohmann::ordered_json), so tools' parameters keep theirs.
Status ReadToolRequest(const nlohmann::ordered_json& body, ToolRequest* out);

// The JSON Schema a reply must follow (see the top of the file).
std::string ToolReplySchema(const ToolRequest& request);

// Tells the model about the tools in a system message of `input` (a chat: an existing first
// system message is extended, else one is added) and sets the reply schema as its output
// format. INVALID_ARGUMENT when the request also sets an output format.
Status ApplyTools(const ToolRequest& request, GenerationInput* input);

// The content of an assistant turn that made `tool_calls` (OpenAI's array of
// {"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}), in the reply
// form the model is asked for. INVALID_ARGUMENT naming the field (`field` is the message's,
// e.g. "messages[3]") for a malformed call.
StatusOr<std::string> ToolCallsTurn(const nlohmann::json& tool_calls, const std::string& field);
// The content of the user turn that carries a tool's result (a "tool" message).
std::string ToolResultTurn(std::string_view tool_call_id, std::string_view content);

// A reply turned back into OpenAI's shape.
struct ToolCall {
  std::string id;  // "call_" + 24 random alphanumerics
  std::string name;
  std::string arguments_json;  // the arguments object as JSON text
};
struct ToolReply {
  bool parsed = false;  // the text was a whole reply object
  std::vector<ToolCall> calls;
  std::string content;  // {"response": ...}, or the raw text when not parsed
};
// Calls repeated with the same name and arguments are kept once.
ToolReply ParseToolReply(std::string_view text);

// Streaming a {"response": "..."} reply as it comes: `raw` is the response string's JSON text
// after its opening quote, received so far. Appends to *out what its complete characters
// decode to, stopping before an escape that is not complete yet or at the closing quote (then
// *ended is set), and returns how many bytes of `raw` that used.
size_t DecodeJsonStringPrefix(std::string_view raw, std::string* out, bool* ended);
inline constexpr std::string_view kToolResponsePrefix = R"({"response":")";

}  // namespace strata::server::http
