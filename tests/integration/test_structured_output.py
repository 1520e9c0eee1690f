"""Structured output on the real server and model: JSON Schema, JSON object, regex, grammar and
choice formats over the OpenAI API (response_format, vLLM's guided_* fields, the SDK's parse
helper) and gRPC (GenerateRequest.output_format).

Sampled outputs (temperature 1, fixed seeds) that end with finish_reason "stop" must validate
with the `jsonschema` package (Draft 2020-12), fully match the regex or be one of the choices;
outputs cut by max_tokens are counted and must be rare. Bad formats are refused with 400 /
INVALID_ARGUMENT naming the problem before anything runs.
"""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import grpc
import jsonschema
import openai
import pydantic
import pytest

from strata_server import Server, pb, sanitized

MODEL = "gemma-3-270m-q4_k_m"

# Schemas a client might send: every supported keyword, alone and together.
SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 130}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    {"type": "object", "properties": {"v": {"type": "null"}}, "required": ["v"]},
    {"type": "integer", "minimum": -50, "maximum": -3},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
    {"type": "number", "minimum": -1.5, "maximum": 2.25},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "string", "maxLength": 12},
    {"type": "string", "minLength": 3, "maxLength": 5},
    {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    {"type": "string", "enum": ["red", "reddish", "redder", "blue"]},
    {"enum": ["caf\u00e9", "\u00fcber", "\u65e5\u672c", 3, None, True]},
    {"const": {"fixed": [1, 2]}},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
     "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string", "maxLength": 8}, {"type": "boolean"}],
     "items": False},
    {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 30},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "ab", "abc"]},
                 "maxItems": 3},
        "score": {"type": "number", "minimum": 0, "maximum": 10}},
     "required": ["title"]},
    {"type": "object", "properties": {
        "user": {"type": "object", "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 99999},
            "email": {"type": "string", "format": "email"}},
            "required": ["id", "email"]},
        "active": {"type": "boolean"}},
     "required": ["user", "active"]},
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5},
               {"type": "string", "enum": ["none", "many"]}]},
    {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
    {"type": ["string", "integer"], "maxLength": 6, "minimum": 0, "maximum": 100},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "date-time"},
    {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        "required": ["v", "next"]}},
     "$ref": "#/$defs/node"},
    {"definitions": {"leaf": {"type": "string", "enum": ["x", "y"]}},
     "type": "object", "properties": {"a": {"$ref": "#/definitions/leaf"},
                                      "b": {"$ref": "#/definitions/leaf"}},
     "required": ["a"]},
    {"type": "object", "properties": {"p": {"type": "integer", "minimum": 0, "maximum": 3}},
     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 3}},
    {"allOf": [{"type": "object", "properties": {"k": {"type": "string", "maxLength": 4}},
                "required": ["k"]}]},
    {"type": "object", "properties": {"q": {"type": "string", "maxLength": 10,
                                            "description": "ignored annotation"}},
     "title": "annotated", "required": ["q"]},
    {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99},
                                         "label": {"type": "string", "maxLength": 6}},
        "required": ["id"]}},
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                      "b": {"type": "boolean"}, "c": {"type": "null"}}},
    {"type": "string", "enum": ["app", "apple", "applesauce", "application", "apply"]},
    {"type": "string", "minLength": 1, "maxLength": 1},
    {"type": "integer", "minimum": 1000000, "maximum": 1000005},
    {"type": "number", "minimum": -0.5, "exclusiveMaximum": 0},
    {"type": "array", "maxItems": 3,
     "items": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
    {"anyOf": [{"type": "object", "properties": {"kind": {"const": "a"},
                                                 "x": {"type": "integer", "minimum": 0,
                                                       "maximum": 5}},
                "required": ["kind", "x"]},
               {"type": "object", "properties": {"kind": {"const": "b"},
                                                 "y": {"type": "string", "maxLength": 4}},
                "required": ["kind"]}]},
    {"$defs": {"t": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 5},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}},
        "required": ["name"]}},
     "$ref": "#/$defs/t"},
    {"type": "string", "format": "time"},
    {"type": "string", "pattern": "^[\u03b1-\u03c9]{2,4}$"},
    {"enum": [1, 2.5, -3, "three"]},
    {"const": "fixed"},
    {"type": ["null", "boolean"]},
    {"type": "object", "additionalProperties": False, "required": ["a", "c", "e"],
     "properties": {k: {"type": "integer", "minimum": 0, "maximum": 9} for k in "abcde"}},
    {"type": "array", "maxItems": 0},
    {"type": "string", "enum": ["a\"b", "c\\d", "line\nbreak", "tab\there"]},
    {"oneOf": [{"const": "left"}, {"const": "right"}, {"const": 0}]},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"definitions": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
     "type": "object", "properties": {"fg": {"$ref": "#/definitions/color"},
                                      "bg": {"$ref": "#/definitions/color"}},
     "required": ["fg", "bg"], "additionalProperties": False},
    {"anyOf": [{"type": "string", "maxLength": 8},
               {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                "maxItems": 3}]},
    {"type": "object", "properties": {"\u043a\u043b\u044e\u0447": {"type": "integer",
                                                                      "minimum": 0,
                                                                      "maximum": 9},
                                      "\u540d\u524d": {"type": "string", "maxLength": 6}},
     "required": ["\u043a\u043b\u044e\u0447"]},
    {"type": "array", "maxItems": 4, "items": {"anyOf": [{"type": "integer", "minimum": 0,
                                                          "maximum": 9},
                                                         {"type": "null"}]}},
    {"type": "array", "prefixItems": [{"const": "head"}],
     "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
    {"type": "array", "maxItems": 2, "items": {"type": "string", "format": "email"}},
]


@pytest.fixture(scope="module")
def server():
    s = Server()
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key="x",
                       max_retries=0) as c:
        yield c


def sample(client, body_extra, seed, prompt="Answer in JSON.", max_tokens=300, **kwargs):
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
        temperature=1.0, seed=seed, extra_body=body_extra, **kwargs)
    return r.choices[0].message.content, r.choices[0].finish_reason


def test_the_corpus_has_at_least_fifty_schemas():
    assert len(SCHEMAS) >= 50


def test_sampled_outputs_validate_against_their_json_schemas(client):
    def one(args):
        i, schema = args
        fmt = {"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema,
                                                      "strict": True}}
        text, finish = sample(client, None, seed=100 + i, response_format=fmt)
        return i, schema, text, finish

    # Under the sanitizers every fourth schema (the release run samples them all).
    chosen = [(i, s) for i, s in enumerate(SCHEMAS) if not sanitized() or i % 4 == 0]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, chosen))
    cut = 0
    for i, schema, text, finish in results:
        if finish == "length":
            cut += 1
            continue
        assert finish == "stop", (i, finish)
        value = json.loads(text)
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator,
                            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert cut <= max(1, len(chosen) // 10), f"{cut} of {len(chosen)} outputs hit max_tokens"


def test_json_object_regex_grammar_and_choice_formats(client):
    text, finish = sample(client, None, seed=1, max_tokens=400,
                          response_format={"type": "json_object"})
    if finish == "stop":
        assert isinstance(json.loads(text), dict)
    else:
        assert text.startswith("{")
    for seed in range(1 if sanitized() else 4):
        r = client.completions.create(model=MODEL, prompt="Call me at", max_tokens=30, seed=seed,
                                      temperature=1.0,
                                      extra_body={"guided_regex": r"\(\d{3}\) \d{3}-\d{4}"})
        assert r.choices[0].finish_reason == "stop"
        assert re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", r.choices[0].text), r.choices[0].text
        r = client.completions.create(model=MODEL, prompt="Is the sky green?", max_tokens=10,
                                      seed=seed, temperature=1.0,
                                      extra_body={"guided_choice": ["yes", "no", "not sure"]})
        assert r.choices[0].text in ("yes", "no", "not sure")
        grammar = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]?'
        r = client.completions.create(model=MODEL, prompt="A sum:", max_tokens=40, seed=seed,
                                      temperature=1.0, extra_body={"guided_grammar": grammar})
        if r.choices[0].finish_reason == "stop":
            assert re.fullmatch(r"\([1-9][0-9]?(\+[1-9][0-9]?)*\)", r.choices[0].text)


def test_the_sdks_parse_helper_gets_a_model_instance(client):
    class City(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        population: int = pydantic.Field(ge=0, le=50_000_000)
        coastal: bool

    r = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Describe Lisbon."}],
        response_format=City, max_tokens=200, temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(r.choices[0].message.parsed, City)


def test_bad_formats_are_refused_naming_the_problem(client, server):
    cases = [
        ({"response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "not": {}}}}}, "not"),
        ({"guided_regex": "(a"}, "regex"),
        ({"guided_grammar": "root ::= missing"}, "missing"),
        ({"guided_json": {"$ref": "#/$defs/nowhere"}}, "nowhere"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"guided_regex": "a", "ignore_eos": True}, "ignore_eos"),
    ]
    for extra, word in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model=MODEL, prompt="x", max_tokens=4, extra_body=extra)
        assert word in e.value.body["message"], (extra, e.value.body)
    # Nothing ran.
    assert server.metric("strata_requests_total", 'finish_reason="error"') == 0


def test_grpc_output_format(server):
    greedy_to_eos = pb.SamplingParams(temperature=0, max_tokens=10)
    request = pb.GenerateRequest(prompt="Pick one:", sampling=greedy_to_eos,
                                 output_format=pb.OutputFormat(
                                     choice=pb.Choices(choices=["alpha", "beta", "gamma"])))
    reply = server.stub.Generate(request, timeout=60)
    assert reply.text in ("alpha", "beta", "gamma")
    assert reply.finish_reason == pb.FINISH_REASON_STOP
    request = pb.GenerateRequest(prompt="x", sampling=greedy_to_eos,
                                 output_format=pb.OutputFormat(json_schema='{"type": 7}'))
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details().startswith("output_format.json_schema: ")


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string",
                                                                 "maxLength": 30}},
                       "required": ["city"]}}},
]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_calls(calls, allowed):
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in allowed
        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name])


def test_tool_calls_in_openais_shape(client):
    for seed in range(1 if sanitized() else 3):
        r = client.chat.completions.create(model=MODEL, messages=WEATHER, tools=TOOLS,
                                           tool_choice="required", max_tokens=300,
                                           temperature=1.0, seed=seed)
        assert r.choices[0].finish_reason == "tool_calls"
        assert r.choices[0].message.content is None
        check_calls(r.choices[0].message.tool_calls, {"get_weather", "get_time"})
    r = client.chat.completions.create(
        model=MODEL, messages=WEATHER, tools=TOOLS, max_tokens=300, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False)
    assert r.choices[0].finish_reason == "tool_calls"
    assert len(r.choices[0].message.tool_calls) == 1
    check_calls(r.choices[0].message.tool_calls, {"get_time"})
    # auto: a call or an answer in words, never anything else.
    r = client.chat.completions.create(model=MODEL, messages=WEATHER, tools=TOOLS,
                                       max_tokens=200, temperature=0)
    if r.choices[0].finish_reason == "tool_calls":
        check_calls(r.choices[0].message.tool_calls, {"get_weather", "get_time"})
    elif r.choices[0].finish_reason == "stop":
        assert isinstance(r.choices[0].message.content, str)
    # tool_choice none: plain text.
    r = client.chat.completions.create(model=MODEL, messages=WEATHER, tools=TOOLS,
                                       tool_choice="none", max_tokens=8, temperature=0)
    assert r.choices[0].message.tool_calls is None


def test_streamed_tool_calls_and_a_follow_up_turn(client):
    stream = client.chat.completions.create(model=MODEL, messages=WEATHER, tools=TOOLS,
                                            tool_choice="required", max_tokens=300,
                                            temperature=0, stream=True)
    calls, finish = {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        for delta in chunk.choices[0].delta.tool_calls or []:
            calls[delta.index] = delta
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and calls
    check_calls(list(calls.values()), {"get_weather", "get_time"})
    first = calls[0]
    follow = WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": first.id, "type": "function",
            "function": {"name": first.function.name, "arguments": first.function.arguments}}]},
        {"role": "tool", "tool_call_id": first.id, "content": "18 C and sunny"}]
    r = client.chat.completions.create(model=MODEL, messages=follow, tools=TOOLS,
                                       max_tokens=150, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "tool_calls", "length")


def test_an_answer_in_words_streams_as_content(client):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hello to Ana in one sentence."}],
        tools=TOOLS, max_tokens=60, temperature=0, stream=True)
    pieces, calls = [], 0
    for chunk in stream:
        if chunk.choices:
            if chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
            calls += len(chunk.choices[0].delta.tool_calls or [])
    # tool_choice auto: either calls (whole, at the end) or words, streamed as they come and
    # without the reply object's JSON around them.
    text = "".join(pieces)
    if calls == 0 and not text.startswith('{"tool_calls"'):  # (a call cut by max_tokens)
        assert len(pieces) > 1, pieces
        assert not text.startswith("{"), text
