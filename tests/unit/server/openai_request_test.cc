// The OpenAI request bodies read into GenerationInput, and serving-core errors in OpenAI's
// shape (no server: the functions alone).
#include "strata/server/http/openai_request.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::server::http {
namespace {

OpenAiRequest Parse(Endpoint e, const std::string& body, int32_t default_max = 0) {
  OpenAiRequest r;
  ApiError err;
  EXPECT_TRUE(ParseOpenAiRequest(e, body, default_max, &r, &err)) << body << ": " << err.message;
  return r;
}

ApiError Refused(Endpoint e, const std::string& body) {
  OpenAiRequest r;
  ApiError err;
  EXPECT_FALSE(ParseOpenAiRequest(e, body, 0, &r, &err)) << body;
  EXPECT_EQ(err.http_status, 400) << body;
  return err;
}

constexpr Endpoint kCompletions = Endpoint::kCompletions;
constexpr Endpoint kChat = Endpoint::kChatCompletions;

TEST(OpenAiRequest, PromptsAreTextOneStringInAListOrTokenIds) {
  OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": "hi"})", 16);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.input.kind, GenerationInput::Kind::kText);
  EXPECT_EQ(r.input.text, "hi");
  EXPECT_EQ(r.input.sampling.max_tokens, 16);  // the endpoint's default
  r = Parse(kCompletions, R"({"model": "m", "prompt": ["only"], "max_tokens": 3})", 16);
  EXPECT_EQ(r.input.text, "only");
  EXPECT_EQ(r.input.sampling.max_tokens, 3);
  r = Parse(kCompletions, R"({"model": "m", "prompt": [1, 2, 3]})");
  EXPECT_EQ(r.input.kind, GenerationInput::Kind::kTokenIds);
  EXPECT_EQ(r.input.token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.input.sampling.max_tokens.has_value());  // no default given: the server's

  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": [[1], [2]]})").param, "prompt");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": [1, -2]})").param, "prompt");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": 5})").param, "prompt");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m"})").param, "prompt");
  EXPECT_EQ(Refused(kCompletions, R"({"prompt": "x"})").param, "model");
}

TEST(OpenAiRequest, SamplingFieldsAndExtrasMapOntoTheCore) {
  const OpenAiRequest r = Parse(kCompletions, R"({
      "model": "m", "prompt": "x", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "presence_penalty": 0.25, "frequency_penalty": -0.5, "stop": "END", "seed": 42,
      "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "ignore_eos": true,
      "priority": -3, "stop_token_ids": [7, 9], "user": "u1", "request_id": "r-1",
      "unknown_field": {"is": "ignored"}})");
  const SamplingInput& s = r.input.sampling;
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_FLOAT_EQ(*s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*s.top_p, 0.9f);
  EXPECT_FLOAT_EQ(*s.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(*s.frequency_penalty, -0.5f);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(*s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(*s.repetition_penalty, 1.1f);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(r.input.priority, -3);
  EXPECT_EQ(r.input.request_id, "r-1");
  EXPECT_EQ(r.user, "u1");
  // max_completion_tokens wins over max_tokens; vLLM's top_k -1 means off.
  const OpenAiRequest c =
      Parse(kChat, R"({"model": "m", "messages": [], "max_tokens": 5, "max_completion_tokens": 9,
                 "top_k": -1, "stop": ["a", "b"]})");
  EXPECT_EQ(c.input.sampling.max_tokens, 9);
  EXPECT_EQ(c.input.sampling.top_k, 0);
  EXPECT_EQ(c.input.sampling.stop, (std::vector<std::string>{"a", "b"}));
}

TEST(OpenAiRequest, WrongTypesNameTheField) {
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature"},
           {R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", "max_tokens"},
           {R"({"model": "m", "prompt": "x", "seed": "7"})", "seed"},
           {R"({"model": "m", "prompt": "x", "stop": [1]})", "stop"},
           {R"({"model": "m", "prompt": "x", "stream": "yes"})", "stream"},
           {R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": 1}})",
            "stream_options.include_usage"},
           {R"({"model": "m", "prompt": "x", "n": 2})", "n"},
           {R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of"},
           {R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
           {R"({"model": "m", "prompt": "x", "logit_bias": {"5": 1}})", "logit_bias"},
           {R"({"model": "m", "prompt": "x", "logprobs": 21})", "logprobs"},
           {R"({"model": 5, "prompt": "x"})", "model"},
       }) {
    const ApiError e = Refused(kCompletions, body);
    EXPECT_EQ(e.param, param) << body;
    EXPECT_NE(e.message.find(param.substr(0, param.find('.'))), std::string::npos) << e.message;
  }
  EXPECT_EQ(Refused(kCompletions, "{not json").param, "");
  EXPECT_EQ(Refused(kCompletions, "[1, 2]").param, "");
  // Harmless values of unsupported fields pass.
  Parse(kCompletions, R"({"model": "m", "prompt": "x", "n": 1, "echo": false, "logit_bias": {}})");
}

TEST(OpenAiRequest, ChatMessagesTakeStringsOrTextParts) {
  const OpenAiRequest r = Parse(kChat, R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}], "add_generation_prompt": false})");
  ASSERT_EQ(r.input.kind, GenerationInput::Kind::kChat);
  ASSERT_EQ(r.input.chat.size(), 3u);
  EXPECT_EQ(r.input.chat[0].role, "system");
  EXPECT_EQ(r.input.chat[1].content, "ab");
  EXPECT_EQ(r.input.chat[2].content, "");
  EXPECT_EQ(r.input.add_generation_prompt, false);
  EXPECT_EQ(
      Refused(kChat, R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})").param,
      "messages[0].tool_call_id");
  EXPECT_EQ(
      Refused(kChat, R"({"model": "m", "messages": [{"role": "function", "content": "x"}]})").param,
      "messages[0].role");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [{"role": "user", "content":
                [{"type": "image_url", "image_url": {"url": "x"}}]}]})")
                .param,
            "messages[0].content[0]");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [{"content": "x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": "hi"})").param, "messages");
  EXPECT_EQ(
      Refused(kChat, R"({"model": "m", "messages": [], "tools": [{"type": "function"}]})").param,
      "tools[0].function");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": "x", "tools": [{}]})").param,
            "tools");
}

TEST(OpenAiRequest, ToolsTurnIntoASystemTurnAFormatAndRenderedTurns) {
  const OpenAiRequest r = Parse(kChat, R"({"model": "m", "messages": [
      {"role": "user", "content": "weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}}}}],
      "tool_choice": "required"})");
  EXPECT_TRUE(r.tools.active());
  EXPECT_EQ(r.tools.choice, ToolRequest::Choice::kRequired);
  ASSERT_EQ(r.input.chat.size(), 4u);
  EXPECT_EQ(r.input.chat[0].role, "system");
  EXPECT_EQ(r.input.chat[2].role, "assistant");
  EXPECT_NE(r.input.chat[2].content.find(R"("tool_calls")"), std::string::npos);
  EXPECT_EQ(r.input.chat[3].role, "user");
  EXPECT_NE(r.input.chat[3].content.find("18 C"), std::string::npos);
  EXPECT_EQ(r.input.output_format.kind, OutputFormatInput::Kind::kJsonSchema);
  // A format of the client's own with tools in play is refused.
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [], "guided_regex": "a",
      "tools": [{"type": "function", "function": {"name": "f"}}]})")
                .param,
            "tools");
}

TEST(OpenAiRequest, OutputFormatsComeFromResponseFormatOrGuidedFields) {
  using Kind = OutputFormatInput::Kind;
  OpenAiRequest r = Parse(kChat, R"({"model": "m", "messages": [],
                                     "response_format": {"type": "json_object"}})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kJsonObject);
  r = Parse(kChat, R"({"model": "m", "messages": [], "response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "schema": {"type": "integer"}, "strict": false}}})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kJsonSchema);
  EXPECT_EQ(r.input.output_format.text, R"({"type":"integer"})");
  EXPECT_FALSE(r.input.output_format.strict);
  // Property order is the schema's, not sorted: outputs follow it.
  r = Parse(kChat, R"({"model": "m", "messages": [], "response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "schema": {"properties": {"zeta": {}, "alpha": {}}}}}})");
  EXPECT_LT(r.input.output_format.text.find("zeta"), r.input.output_format.text.find("alpha"));
  r = Parse(kChat, R"({"model": "m", "messages": [], "response_format": {"type": "text"}})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kNone);
  r = Parse(kCompletions,
            R"({"model": "m", "prompt": "x", "guided_json": "{\"type\": \"null\"}"})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kJsonSchema);
  EXPECT_EQ(r.input.output_format.text, R"({"type": "null"})");
  r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "guided_regex": "a+"})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kRegex);
  EXPECT_EQ(r.input.output_format.text, "a+");
  r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "guided_grammar": "root ::= \"a\""})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kGrammar);
  r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "guided_choice": ["yes", "no"]})");
  EXPECT_EQ(r.input.output_format.kind, Kind::kChoice);
  EXPECT_EQ(r.input.output_format.choices, (std::vector<std::string>{"yes", "no"}));

  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [], "response_format": "json"})").param,
            "response_format");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [],
                               "response_format": {"type": "xml"}})")
                .param,
            "response_format.type");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [],
                               "response_format": {"type": "json_schema"}})")
                .param,
            "response_format.json_schema");
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [], "response_format":
                {"type": "json_schema", "json_schema": {"name": "p", "schema": 3}}})")
                .param,
            "response_format.json_schema.schema");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": "x", "guided_choice": []})").param,
            "guided_choice");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": "x", "guided_choice": [1]})").param,
            "guided_choice");
  EXPECT_EQ(Refused(kCompletions, R"({"model": "m", "prompt": "x", "guided_regex": "a",
                                      "guided_choice": ["a"]})")
                .param,
            "response_format");
}

TEST(OpenAiRequest, LogprobsTakeEachEndpointsShape) {
  OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "logprobs": 3})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.input.sampling.logprobs, 3);
  r = Parse(kCompletions, R"({"model": "m", "prompt": "x", "logprobs": 0})");
  EXPECT_TRUE(r.logprobs);  // the chosen tokens' values, no alternatives
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_EQ(r.input.sampling.logprobs, 1);
  r = Parse(kChat, R"({"model": "m", "messages": [], "logprobs": true, "top_logprobs": 5})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  r = Parse(kChat, R"({"model": "m", "messages": []})");
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.input.sampling.logprobs, 0);
  EXPECT_EQ(Refused(kChat, R"({"model": "m", "messages": [], "top_logprobs": 2})").param,
            "top_logprobs");
}

TEST(OpenAiRequest, StreamOptions) {
  const OpenAiRequest r = Parse(kChat, R"({"model": "m", "messages": [], "stream": true,
                 "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ApiErrorFromStatus, RenamesTheCoresFieldsAndPicksTheHttpStatus) {
  ApiError e = ApiErrorFromStatus(
      InvalidArgumentError("sampling.top_p must be greater than 0 and at most 1, got 0"),
      kCompletions);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "top_p");
  EXPECT_EQ(e.message, "top_p must be greater than 0 and at most 1, got 0");
  e = ApiErrorFromStatus(InvalidArgumentError("sampling.logprobs must be at most 20, got 30"),
                         kChat);
  EXPECT_EQ(e.param, "top_logprobs");
  e = ApiErrorFromStatus(InvalidArgumentError("chat.messages[1].role must be system, user or "
                                              "assistant, got 'x'"),
                         kChat);
  EXPECT_EQ(e.param, "messages[1].role");
  e = ApiErrorFromStatus(InvalidArgumentError("token_ids.ids[3] must be in [0, 10), got 12"),
                         kCompletions);
  EXPECT_EQ(e.param, "prompt[3]");
  e = ApiErrorFromStatus(
      InvalidArgumentError("prompt (9000 tokens) + max_tokens (16) exceed the context"),
      kCompletions);
  EXPECT_EQ(e.param, "prompt");
  e = ApiErrorFromStatus(ResourceExhaustedError("the request queue is full"), kCompletions);
  EXPECT_EQ(e.http_status, 429);
  EXPECT_EQ(e.type, "rate_limit_error");
  EXPECT_EQ(ApiErrorFromStatus(UnavailableError("draining"), kChat).http_status, 503);
  EXPECT_EQ(ApiErrorFromStatus(NotFoundError("no model"), kChat).http_status, 404);
  EXPECT_EQ(ApiErrorFromStatus(InternalError("boom"), kChat).http_status, 500);
}

TEST(ApiErrorFromStatus, TheBodyIsOpenAisShapeWithNulls) {
  ApiError e;
  e.message = "bad \xff byte";  // invalid UTF-8 must not break the JSON
  e.param = "temperature";
  const std::string body = ErrorBody(e);
  EXPECT_NE(body.find(R"("param":"temperature")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("code":null)"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("type":"invalid_request_error")"), std::string::npos) << body;
  EXPECT_EQ(body.rfind(R"({"error":{)", 0), 0u) << body;
}

}  // namespace
}  // namespace strata::server::http
