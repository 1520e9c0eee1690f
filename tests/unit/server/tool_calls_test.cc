#include "strata/server/http/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/grammar/json_schema.h"
#include "strata/server/http/openai_response.h"

namespace strata::server::http {
namespace {

using nlohmann::json;

constexpr const char* kTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}}},
  {"type": "function", "function": {"name": "ping"}}]})";

ToolRequest Read(const std::string& body) {
  ToolRequest out;
  const Status status = ReadToolRequest(json::parse(body), &out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

std::string Refusal(const std::string& body) {
  ToolRequest out;
  const Status status = ReadToolRequest(json::parse(body), &out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << body;
  return std::string(status.message());
}

json WithChoice(const json& choice) {
  json body = json::parse(kTools);
  body["tool_choice"] = choice;
  return body;
}

TEST(ToolRequest, ReadsToolsChoiceAndParallelism) {
  ToolRequest r = Read(kTools);
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather now");
  EXPECT_EQ(json::parse(r.tools[1].parameters_json)["type"], "object");  // absent: no arguments
  EXPECT_EQ(r.choice, ToolRequest::Choice::kAuto);
  EXPECT_TRUE(r.parallel);
  EXPECT_TRUE(r.active());

  r = Read(WithChoice("none").dump());
  EXPECT_FALSE(r.active());
  EXPECT_EQ(Read(WithChoice("required").dump()).choice, ToolRequest::Choice::kRequired);
  r = Read(WithChoice({{"type", "function"}, {"function", {{"name", "ping"}}}}).dump());
  EXPECT_EQ(r.choice, ToolRequest::Choice::kNamed);
  EXPECT_EQ(r.named, "ping");
  json body = json::parse(kTools);
  body["parallel_tool_calls"] = false;
  EXPECT_FALSE(Read(body.dump()).parallel);
  EXPECT_FALSE(Read("{}").active());
}

TEST(ToolRequest, RefusesMalformedToolsNamingTheField) {
  EXPECT_EQ(Refusal(R"({"tools": {}})").rfind("tools ", 0), 0u);
  EXPECT_EQ(Refusal(R"({"tools": [{"type": "retrieval"}]})").rfind("tools[0].type ", 0), 0u);
  EXPECT_EQ(Refusal(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})")
                .rfind("tools[0].function.name ", 0),
            0u);
  EXPECT_NE(Refusal(R"({"tools": [{"type": "function", "function": {"name": "f"}},
                                  {"type": "function", "function": {"name": "f"}}]})")
                .find("given twice"),
            std::string::npos);
  const std::string bad_schema = Refusal(R"({"tools": [{"type": "function", "function":
      {"name": "f", "parameters": {"type": "object", "not": {}}}}]})");
  EXPECT_EQ(bad_schema.rfind("tools[0].function.parameters: ", 0), 0u) << bad_schema;
  EXPECT_NE(Refusal(WithChoice("always").dump()).find("tool_choice"), std::string::npos);
  EXPECT_NE(Refusal(WithChoice({{"type", "function"}, {"function", {{"name", "nope"}}}}).dump())
                .find("not among the tools"),
            std::string::npos);
  EXPECT_NE(Refusal(WithChoice({{"type", "function"}}).dump()).find("must name a function"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"tool_choice": "required"})").find("no tools"), std::string::npos);
  json body = json::parse(kTools);
  body["parallel_tool_calls"] = "yes";
  EXPECT_EQ(Refusal(body.dump()).rfind("parallel_tool_calls ", 0), 0u);
}

TEST(ToolRequest, TheReplySchemaCompilesForEveryChoice) {
  for (const json& choice : {json("auto"), json("required"),
                             json{{"type", "function"}, {"function", {{"name", "ping"}}}}}) {
    const ToolRequest r = Read(WithChoice(choice).dump());
    const std::string schema = ToolReplySchema(r);
    EXPECT_TRUE(grammar::JsonSchemaToGrammar(schema).ok()) << schema;
    const json parsed = json::parse(schema);
    EXPECT_EQ(parsed.contains("anyOf"), r.choice == ToolRequest::Choice::kAuto) << schema;
  }
  // A call names its function before its arguments, and parameters keep their order.
  ToolRequest ordered;
  ASSERT_TRUE(ReadToolRequest(nlohmann::ordered_json::parse(R"({"tools": [{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object", "properties":
      {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}}}}}]})"),
                              &ordered)
                  .ok());
  const std::string text = ToolReplySchema(ordered);
  EXPECT_LT(text.find(R"("name")"), text.find(R"("arguments")")) << text;
  EXPECT_LT(text.find("zeta"), text.find("alpha")) << text;
  json body = WithChoice({{"type", "function"}, {"function", {{"name", "ping"}}}});
  body["parallel_tool_calls"] = false;
  const json schema = json::parse(ToolReplySchema(Read(body.dump())));
  const json& calls = schema["properties"]["tool_calls"];
  EXPECT_EQ(calls["maxItems"], 1);
  EXPECT_EQ(calls["items"]["properties"]["name"]["const"], "ping");  // only the named one
}

TEST(ToolRequest, ApplyToolsAddsTheSystemTurnAndTheFormat) {
  GenerationInput input;
  input.kind = GenerationInput::Kind::kChat;
  input.chat = {{"user", "weather?"}};
  ASSERT_TRUE(ApplyTools(Read(kTools), &input).ok());
  ASSERT_EQ(input.chat.size(), 2u);
  EXPECT_EQ(input.chat[0].role, "system");
  EXPECT_NE(input.chat[0].content.find("get_weather"), std::string::npos);
  EXPECT_EQ(input.output_format.kind, OutputFormatInput::Kind::kJsonSchema);

  // An existing system turn is extended; a format of the client's own conflicts.
  GenerationInput with_system;
  with_system.chat = {{"system", "Be brief."}, {"user", "hi"}};
  ASSERT_TRUE(ApplyTools(Read(kTools), &with_system).ok());
  EXPECT_EQ(with_system.chat.size(), 2u);
  EXPECT_EQ(with_system.chat[0].content.rfind("Be brief.", 0), 0u);
  GenerationInput formatted;
  formatted.output_format.kind = OutputFormatInput::Kind::kRegex;
  EXPECT_EQ(ApplyTools(Read(kTools), &formatted).code(), StatusCode::kInvalidArgument);
  // tool_choice none changes nothing.
  GenerationInput untouched;
  untouched.chat = {{"user", "hi"}};
  ASSERT_TRUE(ApplyTools(Read(WithChoice("none").dump()), &untouched).ok());
  EXPECT_EQ(untouched.chat.size(), 1u);
  EXPECT_EQ(untouched.output_format.kind, OutputFormatInput::Kind::kNone);
}

TEST(ToolReply, ParsesCallsOrAResponseAndKeepsOtherTextAsIs) {
  ToolReply reply =
      ParseToolReply(R"({"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}},)"
                     R"({"name":"ping","arguments":{}}]})");
  ASSERT_TRUE(reply.parsed);
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(reply.calls[0].arguments_json), json({{"city", "Oslo"}}));
  EXPECT_EQ(reply.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(reply.calls[0].id.size(), 29u);
  EXPECT_NE(reply.calls[0].id, reply.calls[1].id);
  reply = ParseToolReply(R"({"tool_calls":[{"name":"ping","arguments":{}},)"
                         R"({"name":"ping","arguments":{}},{"name":"ping","arguments":{"a":1}}]})");
  ASSERT_EQ(reply.calls.size(), 2u);  // the repeated call once
  EXPECT_EQ(reply.calls[1].arguments_json, R"({"a":1})");
  reply = ParseToolReply(R"({"response":"It is sunny."})");
  EXPECT_TRUE(reply.parsed);
  EXPECT_TRUE(reply.calls.empty());
  EXPECT_EQ(reply.content, "It is sunny.");
  // Cut by max_tokens inside the answer: the answer so far (a partial escape dropped).
  reply = ParseToolReply(R"({"response":"cut sh)");
  EXPECT_FALSE(reply.parsed);
  EXPECT_EQ(reply.content, "cut sh");
  reply = ParseToolReply("{\"response\":\"say \\\"hi\\\" \\u00");  // inside \u00..
  EXPECT_EQ(reply.content, "say \"hi\" ");
  // Cut anywhere else: the text as it is.
  reply = ParseToolReply(R"({"tool_calls":[{"name":"pi)");
  EXPECT_FALSE(reply.parsed);
  EXPECT_TRUE(reply.calls.empty());
  EXPECT_EQ(reply.content, R"({"tool_calls":[{"name":"pi)");
}

TEST(ToolReply, EarlierCallsAndResultsAreRenderedInTheReplyForm) {
  const json calls = json::parse(R"([{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}])");
  StatusOr<std::string> turn = ToolCallsTurn(calls, "messages[1]");
  ASSERT_TRUE(turn.ok()) << turn.status().ToString();
  EXPECT_EQ(json::parse(*turn),
            json::parse(R"({"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]})"));
  const json bad = json::parse(R"([{"function": {"name": "f", "arguments": "{oops"}}])");
  turn = ToolCallsTurn(bad, "messages[1]");
  ASSERT_FALSE(turn.ok());
  EXPECT_EQ(turn.status().message().rfind("messages[1].tool_calls[0].function.arguments ", 0), 0u);
  EXPECT_EQ(json::parse(ToolResultTurn("call_1", "18 C")),
            json::parse(R"({"tool_result":{"tool_call_id":"call_1","content":"18 C"}})"));
}

TEST(ToolReply, AStringDecodesAsItArrivesHoldingBackIncompleteEscapes) {
  std::string out;
  bool ended = false;
  EXPECT_EQ(DecodeJsonStringPrefix(R"(ab\n\"c\u00e9)", &out, &ended), 13u);
  EXPECT_EQ(out, "ab\n\"c\xC3\xA9");
  EXPECT_FALSE(ended);
  out.clear();
  EXPECT_EQ(DecodeJsonStringPrefix(R"(x\u00)", &out, &ended), 1u);  // \u00.. not complete
  EXPECT_EQ(out, "x");
  out.clear();
  EXPECT_EQ(DecodeJsonStringPrefix("y\\", &out, &ended), 1u);  // a lone backslash waits
  out.clear();
  EXPECT_EQ(DecodeJsonStringPrefix(R"(\ud83d\ude00!"})", &out, &ended), 13u);
  EXPECT_EQ(out, "\xF0\x9F\x98\x80!");
  EXPECT_TRUE(ended);
  out.clear();
  EXPECT_EQ(DecodeJsonStringPrefix(R"(\ud83d\ude)", &out, &ended), 0u);  // half a pair waits
}

engine::StreamChunk Chunk(const std::string& text, bool last) {
  engine::StreamChunk chunk;
  chunk.text = text;
  chunk.token_ids = {1};
  if (last) chunk.finish_reason = sampling::FinishReason::kStop;
  return chunk;
}

ResponseContext ToolContext() {
  ResponseContext ctx;
  ctx.endpoint = Endpoint::kChatCompletions;
  ctx.id = "chatcmpl-1";
  ctx.model = "m";
  ctx.tools = true;
  return ctx;
}

TEST(ToolResponder, AReplyWithCallsBecomesToolCallsWithTheirFinishReason) {
  Responder responder(ToolContext());
  responder.Add(Chunk(R"({"tool_calls":[{"name":"ping",)", false));
  const engine::StreamChunk last = Chunk(R"("arguments":{}}]})", true);
  responder.Add(last);
  const json body = json::parse(responder.Body(last));
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "ping");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{}");

  Responder words(ToolContext());
  const engine::StreamChunk answer = Chunk(R"({"response":"Hello"})", true);
  words.Add(answer);
  const json said = json::parse(words.Body(answer));
  EXPECT_EQ(said["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(said["choices"][0]["message"]["content"], "Hello");
}

TEST(ToolResponder, StreamedCallsComeWholeAtTheEndWithIndexes) {
  Responder responder(ToolContext());
  std::string events = responder.Events(Chunk(R"({"tool_calls":[{"name":"ping","argu)", false));
  events += responder.Events(Chunk(R"(ments":{}},{"name":"ping","arguments":{"n":2}}]})", true));
  std::vector<json> parsed;
  size_t at = 0;
  while ((at = events.find("data: ", at)) != std::string::npos) {
    const size_t end = events.find("\n\n", at);
    const std::string data = events.substr(at + 6, end - at - 6);
    if (data != "[DONE]") parsed.push_back(json::parse(data));
    at = end;
  }
  // role, two tool-call deltas, the finish event.
  ASSERT_EQ(parsed.size(), 4u) << events;
  EXPECT_EQ(parsed[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(parsed[1]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(parsed[2]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(parsed[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "ping");
  EXPECT_EQ(parsed[3]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_NE(events.find("data: [DONE]"), std::string::npos);
}

TEST(ToolResponder, AnAnswerInWordsStreamsAsItArrives) {
  Responder responder(ToolContext());
  std::string content;
  const auto take = [&](const std::string& events) {
    size_t at = 0;
    while ((at = events.find("data: {", at)) != std::string::npos) {
      const size_t end = events.find("\n\n", at);
      const json e = json::parse(events.substr(at + 6, end - at - 6));
      const json& delta = e["choices"][0]["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      at = end;
    }
  };
  take(responder.Events(Chunk(R"({"respo)", false)));
  EXPECT_EQ(content, "");
  take(responder.Events(Chunk(R"(nse":"It is \u00)", false)));
  EXPECT_EQ(content, "It is ");
  take(responder.Events(Chunk(R"(e9t\u00e9")", false)));
  EXPECT_EQ(content, "It is \xC3\xA9t\xC3\xA9");
  const std::string last = responder.Events(Chunk("}", true));
  take(last);
  EXPECT_EQ(content, "It is \xC3\xA9t\xC3\xA9");
  EXPECT_NE(last.find(R"("finish_reason":"stop")"), std::string::npos) << last;
}

}  // namespace
}  // namespace strata::server::http
