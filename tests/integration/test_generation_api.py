"""The Generation service through a real gRPC channel: unary and streaming agree, chat renders
through the template, every invalid field is INVALID_ARGUMENT naming it, cancels and deadlines
free their KV blocks, health and reflection answer."""
import math
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from strata_server import BATCH_INVARIANT, Server, greedy, idle_kv, pb

PROMPT = "Once upon a time, in a small village by the sea,"
MAX_MESSAGE = 65536


@pytest.fixture(scope="module")
def server():
    s = Server("--max-message-bytes", str(MAX_MESSAGE), "--max-model-len", "2048",
               *BATCH_INVARIANT)
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def test_unary_and_streaming_agree(server):
    # Long enough for two full KV blocks of 16 tokens, which the second call reuses.
    prompt = " ".join([PROMPT] * 3)
    request = pb.GenerateRequest(prompt=prompt, sampling=greedy(24), request_id="agree-1")
    unary = server.stub.Generate(request, timeout=60)
    assert unary.request_id == "agree-1"
    assert unary.finish_reason == pb.FINISH_REASON_LENGTH
    assert len(unary.token_ids) == 24
    assert unary.usage.completion_tokens == 24
    assert unary.usage.prompt_tokens > 5
    assert 0 <= unary.timing.queue_seconds <= unary.timing.time_to_first_token_seconds
    assert unary.timing.time_to_first_token_seconds <= unary.timing.total_seconds

    messages = list(server.stub.GenerateStream(request, timeout=60))
    assert len(messages) >= 2
    tokens = [t for m in messages for t in m.token_ids]
    text = "".join(m.text for m in messages)
    assert tokens == list(unary.token_ids)
    assert text == unary.text
    assert all(m.finish_reason == pb.FINISH_REASON_UNSPECIFIED for m in messages[:-1])
    last = messages[-1]
    assert last.finish_reason == pb.FINISH_REASON_LENGTH
    assert last.usage.completion_tokens == 24
    assert last.usage.prompt_tokens == unary.usage.prompt_tokens
    # The second run of the same prompt reuses the first one's full KV blocks.
    assert last.usage.cached_prompt_tokens > 0
    assert last.request_id == "agree-1"


def test_token_ids_input_matches_the_prompt(server):
    tokens = server.stub.Tokenize(pb.TokenizeRequest(text=PROMPT, add_special=True)).token_ids
    by_ids = server.stub.Generate(
        pb.GenerateRequest(token_ids=pb.TokenIds(ids=tokens), sampling=greedy(8)), timeout=60)
    by_text = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(8)),
                                   timeout=60)
    assert list(by_ids.token_ids) == list(by_text.token_ids)


def test_chat_messages_render_through_the_template(server):
    chat = pb.ChatMessages(messages=[pb.ChatMessage(role="user", content="Say hello.")])
    tokenized = server.stub.Tokenize(pb.TokenizeRequest(chat=chat, add_special=True))
    pieces = "".join(tokenized.pieces)
    assert "<start_of_turn>user" in pieces and pieces.endswith("<start_of_turn>model\n")
    reply = server.stub.Generate(pb.GenerateRequest(chat=chat, sampling=greedy(4)), timeout=60)
    assert reply.usage.prompt_tokens == len(tokenized.token_ids)
    # Roles the template refuses are the client's error.
    bad = pb.ChatMessages(messages=[pb.ChatMessage(role="assistant", content="first")])
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(chat=bad, sampling=greedy(4)), timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_seeded_sampling_repeats_and_reports_the_seed(server):
    sampling = pb.SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=1234)
    a = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=sampling), timeout=60)
    b = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=sampling), timeout=60)
    assert list(a.token_ids) == list(b.token_ids)
    assert a.seed == 1234
    drawn = server.stub.Generate(
        pb.GenerateRequest(prompt=PROMPT, sampling=pb.SamplingParams(max_tokens=2)), timeout=60)
    assert drawn.seed != 0


def test_logprobs_come_with_each_token(server):
    reply = server.stub.Generate(
        pb.GenerateRequest(prompt=PROMPT, sampling=greedy(3, logprobs=2)), timeout=60)
    assert len(reply.logprobs) == 3
    for token, lp in zip(reply.token_ids, reply.logprobs):
        assert lp.chosen.token_id == token
        assert lp.chosen.logprob <= 0
        assert len(lp.top) == 2 and lp.top[0].token_id == token  # greedy picks the top one


def test_tokenize_detokenize_and_model_info(server):
    ids = server.stub.Tokenize(pb.TokenizeRequest(text="Hello world")).token_ids
    assert server.stub.Detokenize(pb.DetokenizeRequest(token_ids=ids)).text == "Hello world"
    info = server.stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.architecture == "gemma3"
    assert info.quantization == "Q4_K_M"
    assert info.vocab_size == 262144
    assert info.context_length == 2048
    assert info.chat_template == "gemma"
    assert info.kv_cache_tokens > 0 and info.max_batch_size > 0
    assert info.backend.startswith("cpu")
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Detokenize(pb.DetokenizeRequest(token_ids=[262144]))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "token_ids[0]" in e.value.details()


# (request fields, words the error message must contain)
INVALID = [
    ({}, "one of prompt"),
    ({"prompt": ""}, "prompt"),
    ({"token_ids": pb.TokenIds(ids=[])}, "token_ids"),
    ({"token_ids": pb.TokenIds(ids=[5, 999999])}, "token_ids.ids[1]"),
    ({"sampling": pb.SamplingParams(temperature=-0.5)}, "temperature"),
    ({"sampling": pb.SamplingParams(temperature=math.nan)}, "temperature"),
    ({"sampling": pb.SamplingParams(temperature=math.inf)}, "temperature"),
    ({"sampling": pb.SamplingParams(top_p=0.0)}, "top_p"),
    ({"sampling": pb.SamplingParams(top_p=1.5)}, "top_p"),
    ({"sampling": pb.SamplingParams(top_k=-1)}, "top_k"),
    ({"sampling": pb.SamplingParams(min_p=1.5)}, "min_p"),
    ({"sampling": pb.SamplingParams(repetition_penalty=0.0)}, "repetition_penalty"),
    ({"sampling": pb.SamplingParams(presence_penalty=3.0)}, "presence_penalty"),
    ({"sampling": pb.SamplingParams(frequency_penalty=-3.0)}, "frequency_penalty"),
    ({"sampling": pb.SamplingParams(max_tokens=0)}, "max_tokens"),
    ({"sampling": pb.SamplingParams(max_tokens=2048)}, "context"),
    ({"sampling": pb.SamplingParams(stop=["x"] * 17)}, "stop"),
    ({"sampling": pb.SamplingParams(stop=["x" * 257])}, "stop"),
    ({"sampling": pb.SamplingParams(stop=[""])}, "stop"),
    ({"sampling": pb.SamplingParams(stop_token_ids=[-1])}, "stop_token_ids"),
    ({"sampling": pb.SamplingParams(logprobs=21)}, "logprobs"),
    ({"priority": 100000}, "priority"),
    ({"request_id": "r" * 129}, "request_id"),
    ({"prompt": "x" * (MAX_MESSAGE + 1)}, "prompt"),
    ({"chat": pb.ChatMessages()}, "chat"),
    ({"chat": pb.ChatMessages(messages=[pb.ChatMessage(role="robot", content="hi")])}, "role"),
]


@pytest.mark.parametrize("fields,words", INVALID, ids=[w + str(i) for i, (_, w) in
                                                       enumerate(INVALID)])
def test_every_invalid_field_is_invalid_argument_naming_it(server, fields, words):
    fields = dict(fields)
    if not any(k in fields for k in ("prompt", "token_ids", "chat")) and fields != {}:
        fields["prompt"] = PROMPT
    request = pb.GenerateRequest(**fields)
    for call in (lambda: server.stub.Generate(request, timeout=30),
                 lambda: list(server.stub.GenerateStream(request, timeout=30))):
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
        assert words in e.value.details(), e.value.details()


def test_invalid_utf8_is_refused_and_the_server_goes_on(server):
    # Clients' proto libraries refuse to build such a message: send the bytes by hand
    # (field 1 "prompt", length 2, then two bytes that are not UTF-8). The server's protobuf
    # parser refuses proto3 strings that are not UTF-8, before the translator's own check
    # (which guards token text and chat content built in other ways); the parse failure is
    # INVALID_ARGUMENT naming the field (request_parse.h), not gRPC's bare UNIMPLEMENTED.
    raw = server.channel.unary_unary("/strata.v1.Generation/Generate",
                                     request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        raw(b"\x0a\x02\xff\xfe", timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.code()
    assert "field 'prompt' is not valid UTF-8" in e.value.details(), e.value.details()
    assert server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(1)),
                                timeout=30).usage.completion_tokens == 1


def test_a_message_past_the_transport_limit_is_resource_exhausted(server):
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(prompt="x" * (2 * MAX_MESSAGE)), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_errors_are_counted_by_code(server):
    before = server.metric("strata_request_errors_total", 'code="INVALID_ARGUMENT"')
    with pytest.raises(grpc.RpcError):
        server.stub.Generate(pb.GenerateRequest(prompt=""), timeout=30)
    assert server.metric("strata_request_errors_total", 'code="INVALID_ARGUMENT"') == before + 1


def test_a_cancelled_stream_frees_its_blocks(server):
    assert server.wait_metric(idle_kv)
    cancelled_before = server.metric("strata_requests_total", 'finish_reason="cancelled"')
    call = server.stub.GenerateStream(
        pb.GenerateRequest(prompt=PROMPT, sampling=greedy(1000)), timeout=120)
    got = 0
    for message in call:
        got += len(message.token_ids)
        if got >= 3:
            break
    assert not idle_kv(server)  # the request holds blocks while it runs
    call.cancel()
    assert server.wait_metric(idle_kv), server.metrics_text()
    assert server.wait_metric(lambda s: s.metric(
        "strata_requests_total", 'finish_reason="cancelled"') == cancelled_before + 1)


def test_an_expired_deadline_frees_its_blocks(server):
    assert server.wait_metric(idle_kv)
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(1000)),
                             timeout=0.5)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert server.wait_metric(idle_kv), server.metrics_text()


def test_concurrent_streams_all_complete(server):
    results = {}

    def run(i):
        request = pb.GenerateRequest(prompt=f"{PROMPT} Story {i}:", sampling=greedy(16))
        results[i] = [t for m in server.stub.GenerateStream(request, timeout=120)
                      for t in m.token_ids]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == list(range(8))
    assert all(len(tokens) == 16 for tokens in results.values())
    # Each one alone gives the same tokens (batch invariance through the server).
    alone = server.stub.Generate(
        pb.GenerateRequest(prompt=f"{PROMPT} Story 3:", sampling=greedy(16)), timeout=60)
    assert list(alone.token_ids) == results[3]


def test_health_and_reflection_answer(server):
    assert server.health_status() == health_pb2.HealthCheckResponse.SERVING
    assert server.health_status("strata.v1.Generation") == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert "strata.v1.Generation" in names
    assert "grpc.health.v1.Health" in names


def test_metrics_record_latencies_and_tokens(server):
    text = server.metrics_text()
    for name in ("strata_time_to_first_token_seconds_count", "strata_e2e_request_latency_seconds_count",
                 "strata_inter_token_latency_seconds_count", "strata_request_queue_time_seconds_count",
                 "strata_generation_tokens_total", "strata_prompt_tokens_total"):
        assert server.metric(name) > 0, name
    assert 'strata_time_to_first_token_quantiles_seconds{quantile="0.99"}' in text
    assert server.metric("strata_iteration_tokens_count") > 0
    assert server.metric("strata_prefix_cache_hits_total") > 0
