"""Request-level defences of the real server, each found by an outside probe.

- Bytes that do not parse as the request message (invalid UTF-8 in a string field, a truncated
  message) get INVALID_ARGUMENT naming the field, on unary and streaming calls, and protobuf
  writes nothing to the log in its own format.
- A prompt too long for the context by its size alone is refused before it is encoded.
- An expired deadline is counted as DEADLINE_EXCEEDED, not CANCELLED.
- Tokenize checks chat input as Generate does (at most 1,024 messages).
- Admission counts the batch slots the scheduler can fill, not only the queue's backlog.
"""
import time

import grpc
import pytest

from strata_server import Server, greedy, idle_kv, pb

GENERATE = "/strata.v1.Generation/Generate"
GENERATE_STREAM = "/strata.v1.Generation/GenerateStream"
TOKENIZE = "/strata.v1.Generation/Tokenize"


@pytest.fixture(scope="module")
def server():
    s = Server()
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def raw_unary(server, method):
    return server.channel.unary_unary(method, request_serializer=lambda b: b,
                                      response_deserializer=lambda b: b)


def test_unparsable_bytes_get_invalid_argument_naming_the_field(server):
    good = pb.GenerateRequest(prompt="hi", sampling=greedy(2)).SerializeToString()
    bad_utf8 = good.replace(b"hi", b"h\xff")
    with pytest.raises(grpc.RpcError) as e:
        raw_unary(server, GENERATE)(bad_utf8, timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "field 'prompt' is not valid UTF-8" in e.value.details(), e.value.details()

    chat = pb.GenerateRequest(chat=pb.ChatMessages(messages=[
        pb.ChatMessage(role="user", content="hello"),
        pb.ChatMessage(role="assistant", content="hey")])).SerializeToString()
    stream = server.channel.unary_stream(GENERATE_STREAM, request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        list(stream(chat.replace(b"hey", b"he\xc3"), timeout=10))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "chat.messages[1].content" in e.value.details(), e.value.details()

    with pytest.raises(grpc.RpcError) as e:
        raw_unary(server, TOKENIZE)(pb.TokenizeRequest(text="abcdef").SerializeToString()[:-2],
                                    timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "field 'text' is truncated" in e.value.details(), e.value.details()

    # The server still answers, and wrote no line in protobuf's own format.
    assert server.stub.Generate(pb.GenerateRequest(prompt="hi", sampling=greedy(2)),
                                timeout=30).usage.completion_tokens == 2
    assert "[libprotobuf" not in server.log()
    assert server.metric("strata_request_errors_total", 'code="INVALID_ARGUMENT"') >= 3


def test_a_prompt_too_long_by_its_size_is_refused_before_encoding(server):
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(prompt="hello world " * 300000,
                                                sampling=greedy(2)), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # "at least": the bound from the byte count, known before the prompt is encoded.
    assert "bytes: at least" in e.value.details(), e.value.details()
    assert "exceed the model's context of 32768 tokens" in e.value.details()


def test_an_expired_deadline_is_counted_as_deadline_exceeded(server):
    before_cancelled = server.metric("strata_request_errors_total", 'code="CANCELLED"')
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(prompt="Tell me a story", sampling=greedy(400)),
                             timeout=0.5)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert server.wait_metric(
        lambda s: s.metric("strata_request_errors_total", 'code="DEADLINE_EXCEEDED"') >= 1,
        timeout=30)
    assert server.metric("strata_request_errors_total", 'code="CANCELLED"') == before_cancelled
    assert server.wait_metric(idle_kv)


def test_tokenize_checks_chat_input_as_generate_does(server):
    many = pb.ChatMessages(messages=[pb.ChatMessage(role="user", content="x")] * 10000)
    for call in (lambda: server.stub.Tokenize(pb.TokenizeRequest(chat=many), timeout=30),
                 lambda: server.stub.Generate(pb.GenerateRequest(chat=many), timeout=30)):
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "chat.messages must hold at most 1024, got 10000" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatMessages(
            messages=[pb.ChatMessage(role="robot", content="x")])), timeout=30)
    assert "chat.messages[0].role must be system, user or assistant" in e.value.details()


def test_admission_counts_the_free_batch_slots_not_only_the_queue():
    # 100 calls at once with 8 queue places and 64 batch slots: the scheduler can take 64 of
    # them, so 64 + 8 are accepted (before: about 20, the rest refused with slots free).
    s = Server("--max-queued-requests", "8", "--max-batch-size", "64")
    try:
        s.wait_serving()
        futures = [s.stub.Generate.future(pb.GenerateRequest(prompt="Count to ten",
                                                             sampling=greedy(200)), timeout=120)
                   for _ in range(100)]
        time.sleep(3)
        refused = [f for f in futures if f.done() and f.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        accepted = 100 - len(refused)
        assert 64 <= accepted <= 72, accepted
        assert "every batch slot taken" in refused[0].details()
        for f in futures:
            f.cancel()
        assert s.wait_metric(idle_kv, timeout=30)
    finally:
        assert s.stop() == 0, s.log()
