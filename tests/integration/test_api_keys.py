"""API keys on the real server (--api-keys-file), over gRPC and the OpenAI SDK.

A call without a key, with a wrong one or with a malformed header is UNAUTHENTICATED / 401 with
one message that reveals nothing else; health stays open and reflection is off. A key's limits
(calls per minute, generation calls at once) refuse with RESOURCE_EXHAUSTED / 429 and a retry
delay. Per-key usage is in /metrics by the key's name, and no key appears in the log or metrics.
With --jobs-db, each key sees only the batch files and jobs it created.
"""
import hashlib
import json
import signal
import threading
import time
import urllib.error
import urllib.request

import grpc
import openai
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from strata_server import Server, greedy, idle_kv, jobs_pb, jobs_pb_grpc, pb

MODEL = "gemma-3-270m-q4_k_m"
KEYS = {"alice": "sk-alice-0123456789abcdef", "bob": "sk-bob-fedcba9876543210",
        "carol": "sk-carol-5555555555555555"}


def sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    keys_file = tmp_path_factory.mktemp("keys") / "api_keys"
    keys_file.write_text(f"# name hash limits\n"
                         f"alice {sha256(KEYS['alice'])}\n"
                         f"bob {sha256(KEYS['bob'])} rpm=3\n"
                         f"carol {sha256(KEYS['carol'])} streams=1\n")
    s = Server("--api-keys-file", str(keys_file))
    s.wait_serving()
    yield s
    log = s.log()
    assert s.stop() == 0, log
    for key in KEYS.values():
        assert key not in log


def bearer(key):
    return (("authorization", f"Bearer {key}"),)


def test_calls_without_a_valid_key_are_unauthenticated_alike(server):
    request = pb.GenerateRequest(prompt="Hello", sampling=greedy(2))
    messages = set()
    for metadata in [(), bearer("sk-wrong"), (("authorization", KEYS["alice"]),),
                     (("authorization", "Basic YWxpY2U="),)]:
        with pytest.raises(grpc.RpcError) as e:
            server.stub.Generate(request, metadata=metadata, timeout=30)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        messages.add(e.value.details())
        with pytest.raises(grpc.RpcError) as e:
            server.stub.Tokenize(pb.TokenizeRequest(text="hi"), metadata=metadata, timeout=30)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert len(messages) == 1 and "alice" not in messages.pop()
    # Unparsable bytes from a caller without a key: still only UNAUTHENTICATED.
    raw = server.channel.unary_unary("/strata.v1.Generation/Generate",
                                     request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        raw(b"\x0a\x02\xff\xfe", timeout=30)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED

    # With the key, the same call works; health needs none; reflection is off.
    response = server.stub.Generate(request, metadata=bearer(KEYS["alice"]), timeout=60)
    assert response.usage.completion_tokens == 2
    assert server.health_status() == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    with pytest.raises(grpc.RpcError) as e:
        list(stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_the_openai_sdk_gets_401_without_a_key_and_serves_with_one(server):
    base = f"http://127.0.0.1:{server.http_port}/v1"
    with openai.OpenAI(base_url=base, api_key="sk-wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError) as e:
            wrong.completions.create(model=MODEL, prompt="Hello", max_tokens=2)
        assert e.value.status_code == 401
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
    with openai.OpenAI(base_url=base, api_key=KEYS["alice"], max_retries=0) as good:
        c = good.completions.create(model=MODEL, prompt="Hello", max_tokens=2, temperature=0)
        assert c.usage.completion_tokens == 2
        assert [m.id for m in good.models.list()] == [MODEL]
    # /health is open; /metrics on the HTTP port is not.
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health", timeout=10) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/metrics", timeout=10)
    assert e.value.code == 401 and e.value.headers["WWW-Authenticate"] == "Bearer"


def test_a_key_over_its_calls_per_minute_is_refused_with_a_retry_delay(server):
    codes = []
    for _ in range(3):  # rpm=3: the bucket starts full
        server.stub.Tokenize(pb.TokenizeRequest(text="hi"), metadata=bearer(KEYS["bob"]),
                             timeout=30)
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Tokenize(pb.TokenizeRequest(text="hi"), metadata=bearer(KEYS["bob"]),
                             timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "3 calls per minute" in e.value.details()
    trailing = dict(e.value.trailing_metadata())
    assert 1 <= int(trailing["retry-after"]) <= 20, trailing
    # The same key over HTTP: 429 with Retry-After, as the SDK sees it.
    base = f"http://127.0.0.1:{server.http_port}/v1"
    with openai.OpenAI(base_url=base, api_key=KEYS["bob"], max_retries=0) as bob:
        with pytest.raises(openai.RateLimitError) as e:
            bob.completions.create(model=MODEL, prompt="Hello", max_tokens=2)
        assert int(e.value.response.headers["Retry-After"]) >= 1
        assert e.value.code == "rate_limit_exceeded"
    assert server.metric("strata_api_key_rate_limited_total", 'key="bob",limit="requests"') >= 2


def test_a_key_with_one_stream_is_refused_a_second_until_the_first_ends(server):
    results = {}

    def long_call():
        results["first"] = server.stub.Generate(
            pb.GenerateRequest(prompt="Count to ten", sampling=greedy(48)),
            metadata=bearer(KEYS["carol"]), timeout=120)

    thread = threading.Thread(target=long_call)
    thread.start()
    assert server.wait_metric(lambda s: s.metric("strata_requests_running") == 1)
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(2)),
                             metadata=bearer(KEYS["carol"]), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1 calls at once" in e.value.details()
    # Another key is not held back by carol's limit.
    server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(2)),
                         metadata=bearer(KEYS["alice"]), timeout=60)
    thread.join()
    assert results["first"].usage.completion_tokens == 48
    server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(2)),
                         metadata=bearer(KEYS["carol"]), timeout=60)
    assert server.wait_metric(idle_kv)


def test_usage_is_counted_by_key_name_and_no_key_is_exposed(server):
    before = server.metric("strata_api_key_tokens_total", 'key="alice",kind="completion"')
    server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(3)),
                         metadata=bearer(KEYS["alice"]), timeout=60)
    assert server.wait_metric(lambda s: s.metric(
        "strata_api_key_tokens_total", 'key="alice",kind="completion"') == before + 3)
    assert server.metric("strata_api_key_requests_total", 'key="alice"') >= 1
    text = server.metrics_text()
    for key in KEYS.values():
        assert key not in text and sha256(key) not in text


def test_the_keys_file_is_reloaded_when_it_changes_and_on_sighup(tmp_path):
    keys_file = tmp_path / "api_keys"
    keys_file.write_text(f"alice {sha256(KEYS['alice'])}\n")
    s = Server("--api-keys-file", str(keys_file))
    try:
        s.wait_serving()
        request = pb.GenerateRequest(prompt="Hi", sampling=greedy(1))

        def code(key):
            try:
                s.stub.Generate(request, metadata=bearer(key), timeout=30)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

        assert code(KEYS["alice"]) == grpc.StatusCode.OK
        assert code(KEYS["bob"]) == grpc.StatusCode.UNAUTHENTICATED
        # A changed file is picked up without a signal (a mounted secret's update sends none).
        keys_file.write_text(f"bob {sha256(KEYS['bob'])}\n")
        deadline = time.monotonic() + 15
        while code(KEYS["bob"]) != grpc.StatusCode.OK and time.monotonic() < deadline:
            time.sleep(0.2)
        assert code(KEYS["bob"]) == grpc.StatusCode.OK
        assert code(KEYS["alice"]) == grpc.StatusCode.UNAUTHENTICATED
        # A broken file keeps the keys there are.
        keys_file.write_text("bob not-a-hash\n")
        s.signal(signal.SIGHUP)
        assert s.wait_metric(lambda _: "API keys reload failed" in s.log())
        assert code(KEYS["bob"]) == grpc.StatusCode.OK
        keys_file.write_text(f"alice {sha256(KEYS['alice'])}\nbob {sha256(KEYS['bob'])}\n")
        s.signal(signal.SIGHUP)
        assert s.wait_metric(lambda _: "reason=SIGHUP keys=2" in s.log())
        assert code(KEYS["alice"]) == grpc.StatusCode.OK
    finally:
        log = s.log()
        assert s.stop() == 0, log
    for key in KEYS.values():
        assert key not in log


def test_each_key_sees_only_its_own_batch_files_and_jobs(tmp_path):
    keys_file = tmp_path / "api_keys"
    keys_file.write_text(f"alice {sha256(KEYS['alice'])}\nbob {sha256(KEYS['bob'])}\n")
    s = Server("--api-keys-file", str(keys_file), "--jobs-db", str(tmp_path / "jobs.db"))
    try:
        s.wait_serving()
        base = f"http://127.0.0.1:{s.http_port}/v1"
        line = ('{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": '
                f'{{"model": "{MODEL}", "prompt": "Hi", "max_tokens": 2, "temperature": 0}}}}\n')
        with openai.OpenAI(base_url=base, api_key=KEYS["alice"], max_retries=0) as alice, \
                openai.OpenAI(base_url=base, api_key=KEYS["bob"], max_retries=0) as bob:
            file = alice.files.create(file=("in.jsonl", line.encode()), purpose="batch")
            batch = alice.batches.create(input_file_id=file.id, endpoint="/v1/completions",
                                         completion_window="24h")
            # Bob cannot see, read, use, cancel or delete Alice's: each is "not found", as an
            # id that does not exist.
            for call in [lambda: bob.files.retrieve(file.id),
                         lambda: bob.files.content(file.id),
                         lambda: bob.files.delete(file.id),
                         lambda: bob.batches.retrieve(batch.id),
                         lambda: bob.batches.cancel(batch.id),
                         lambda: bob.batches.create(input_file_id=file.id,
                                                    endpoint="/v1/completions",
                                                    completion_window="24h")]:
                with pytest.raises(openai.NotFoundError):
                    call()
            assert [b.id for b in bob.batches.list()] == []
            assert [f.id for f in bob.files.list()] == []
            # Over gRPC too.
            jobs = jobs_pb_grpc.JobsStub(s.channel)
            with pytest.raises(grpc.RpcError) as e:
                jobs.GetBatch(jobs_pb.BatchId(id=batch.id), metadata=bearer(KEYS["bob"]),
                              timeout=30)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            assert jobs.GetBatch(jobs_pb.BatchId(id=batch.id), metadata=bearer(KEYS["alice"]),
                                 timeout=30).id == batch.id
            # Alice's job runs and its output is hers alone.
            deadline = time.monotonic() + 120
            while (got := alice.batches.retrieve(batch.id)).status != "completed":
                assert time.monotonic() < deadline, got
                time.sleep(0.2)
            assert [b.id for b in alice.batches.list()] == [batch.id]
            output = alice.files.content(got.output_file_id).content.decode().splitlines()
            assert [json.loads(x)["custom_id"] for x in output] == ["a"]
            with pytest.raises(openai.NotFoundError):
                bob.files.content(got.output_file_id)
    finally:
        log = s.log()
        assert s.stop() == 0, log
