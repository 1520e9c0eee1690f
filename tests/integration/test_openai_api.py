"""The OpenAI-compatible HTTP API with the real clients: the `openai` SDK (sync and async,
streaming and not, completions and chat, logprobs, stop, seed, errors as the SDK's exception
types) and curl, against the same server and model the gRPC tests use. HTTP answers must
equal what the gRPC API gives for the same request."""
import asyncio
import json
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from strata_server import Server, greedy, idle_kv, pb

PROMPT = "Once upon a time, in a small village by the sea,"
MODEL = "gemma-3-270m-q4_k_m"


@pytest.fixture(scope="module")
def server():
    s = Server("--max-model-len", "2048")
    s.wait_serving()
    assert s.http_port, "the port file has no http_port"
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key="unused",
                       max_retries=0, timeout=120) as c:
        yield c


def http_get(server, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_models_and_health(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")
    assert http_get(server, "/health") == (200, '{"status":"serving"}')
    status, text = http_get(server, "/metrics")
    assert status == 200 and "strata_build_info" in text


def test_completion_equals_grpc_greedy(server, client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0,
                                  extra_body={"ignore_eos": True})
    g = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(12)), timeout=60)
    assert r.choices[0].text == g.text
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert r.usage.prompt_tokens == g.usage.prompt_tokens
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    assert r.object == "text_completion" and r.model == MODEL


def test_token_id_prompt_and_default_max_tokens(server, client):
    ids = list(server.stub.Tokenize(pb.TokenizeRequest(text=PROMPT, add_special=True),
                                    timeout=10).token_ids)
    r = client.completions.create(model=MODEL, prompt=ids, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.completion_tokens == 16  # OpenAI's default for completions


def test_streamed_completion_concatenates_to_the_unary_one(client):
    kwargs = dict(model=MODEL, prompt=PROMPT, max_tokens=16, temperature=0)
    unary = client.completions.create(**kwargs)
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True},
                                            **kwargs))
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == unary.usage.completion_tokens
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == unary.choices[0].text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == unary.choices[0].finish_reason and set(finishes[:-1]) == {None}
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_equals_grpc_chat_streamed_or_not(server, client):
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Name a color."}]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10,
                                       temperature=0)
    chat = pb.ChatMessages(messages=[pb.ChatMessage(role=m["role"], content=m["content"])
                                     for m in messages])
    g = server.stub.Generate(pb.GenerateRequest(chat=chat, sampling=pb.SamplingParams(
        max_tokens=10, temperature=0)), timeout=60)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == g.text
    assert r.object == "chat.completion"
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10,
                                                 temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == g.text
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason


def test_content_parts_and_developer_role(client):
    plain = client.chat.completions.create(
        model=MODEL, max_tokens=6, temperature=0,
        messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}])
    parts = client.chat.completions.create(
        model=MODEL, max_tokens=6, temperature=0,
        messages=[{"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
                  {"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    assert parts.choices[0].message.content == plain.choices[0].message.content


def test_logprobs_match_grpc(server, client):
    g = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=pb.SamplingParams(
        max_tokens=5, temperature=0, ignore_eos=True, logprobs=3)), timeout=60)
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0,
                                  logprobs=3, extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == 5 and len(lp.top_logprobs) == 5
    for k, (want, got) in enumerate(zip(g.logprobs, lp.token_logprobs)):
        assert got == pytest.approx(want.chosen.logprob, abs=1e-6), k
    assert all(len(t) <= 3 for t in lp.top_logprobs)
    assert lp.text_offset[0] == 0
    c = client.chat.completions.create(model=MODEL, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=2,
                                       messages=[{"role": "user", "content": "Hello"}])
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 2
        assert entry.logprob <= 0
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob
        assert bytes(entry.bytes).decode(errors="replace") == entry.token or entry.bytes


def test_stop_and_seed(client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0)
    text = r.choices[0].text
    cut = text.split()[2]
    s = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0,
                                  stop=[cut])
    assert s.choices[0].finish_reason == "stop"
    assert cut not in s.choices[0].text and text.startswith(s.choices[0].text)
    kwargs = dict(model=MODEL, prompt=PROMPT, max_tokens=20, temperature=1.0)
    a = client.completions.create(seed=7, **kwargs).choices[0].text
    b = client.completions.create(seed=7, **kwargs).choices[0].text
    c = client.completions.create(seed=8, **kwargs).choices[0].text
    assert a == b
    assert a != c


@pytest.mark.parametrize("kwargs,param", [
    (dict(temperature=-1), "temperature"),
    (dict(top_p=0), "top_p"),
    (dict(max_tokens=0), "max_tokens"),
    (dict(n=2), "n"),
    (dict(presence_penalty=9), "presence_penalty"),
    (dict(extra_body={"top_k": "many"}), "top_k"),
    (dict(extra_body={"echo": True}), "echo"),
    (dict(logprobs=30), "logprobs"),
])
def test_bad_fields_are_400_naming_the_param(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt=PROMPT, **kwargs)
    assert e.value.status_code == 400
    body = e.value.body
    assert body["param"] == param, body
    assert body["type"] == "invalid_request_error"
    assert param.split(".")[0] in body["message"]


def test_unknown_model_is_404_and_bad_json_is_400(server, client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert e.value.body["code"] == "model_not_found"
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/completions",
                                 data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400
    assert "error" in json.loads(e.value.read())


def test_async_client_streams(server):
    async def run():
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1",
                                      api_key="unused", max_retries=0) as c:
            unary = await c.chat.completions.create(
                model=MODEL, max_tokens=8, temperature=0,
                messages=[{"role": "user", "content": "Count to three."}])
            stream = await c.chat.completions.create(
                model=MODEL, max_tokens=8, temperature=0, stream=True,
                messages=[{"role": "user", "content": "Count to three."}])
            text = ""
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
            return unary.choices[0].message.content, text
    unary, streamed = asyncio.run(run())
    assert unary == streamed


def test_curl_streams_server_sent_events(server):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": 4, "stream": True})
    r = subprocess.run([curl, "-sN", "-H", "Content-Type: application/json", "-d", body,
                        f"http://127.0.0.1:{server.http_port}/v1/completions"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events = [line[6:] for line in r.stdout.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"


def test_a_client_that_disconnects_mid_stream_frees_its_blocks(server):
    assert server.wait_metric(idle_kv)
    cancelled_before = server.metric("strata_requests_total", 'finish_reason="cancelled"')
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": 1000, "stream": True,
                       "ignore_eos": True}).encode()
    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while received.count(b"data: ") < 3:
        received += sock.recv(4096)
    assert not idle_kv(server)  # the request holds blocks while it runs
    sock.close()
    assert server.wait_metric(idle_kv, timeout=10), server.metrics_text()
    assert server.wait_metric(lambda s: s.metric(
        "strata_requests_total", 'finish_reason="cancelled"') == cancelled_before + 1)


def test_a_full_queue_is_429_with_retry_after():
    s = Server("--max-queued-requests", "1", "--max-batch-size", "1", "--max-model-len", "1024")
    try:
        s.wait_serving()
        url = f"http://127.0.0.1:{s.http_port}/v1/completions"
        body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": 200,
                           "ignore_eos": True}).encode()
        results = []

        def one():
            req = urllib.request.Request(url, data=body, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    results.append((r.status, None))
            except urllib.error.HTTPError as e:
                results.append((e.code, (e.headers.get("Retry-After"), json.loads(e.read()))))
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [r for r in results if r[0] == 429]
        assert refused, results
        retry_after, err = refused[0][1]
        assert retry_after == "1" and err["error"]["type"] == "rate_limit_error"
        assert any(code == 200 for code, _ in results)
    finally:
        assert s.stop() == 0, s.log()


def test_draining_answers_503_and_finishes_what_runs():
    s = Server("--drain-grace-seconds", "30")
    try:
        s.wait_serving()
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{s.http_port}/v1", api_key="unused",
                          max_retries=0, timeout=120)
        stream = c.completions.create(model=MODEL, prompt=PROMPT, max_tokens=60, stream=True,
                                      extra_body={"ignore_eos": True})
        first = next(iter(stream))
        s.signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while http_get(s, "/health")[0] != 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http_get(s, "/health") == (503, '{"status":"draining"}')
        with pytest.raises(openai.InternalServerError) as e:
            c.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2)
        assert e.value.status_code == 503
        rest = list(stream)  # the running request finishes
        assert rest[-1].choices[0].finish_reason == "length"
        assert first.choices[0].text is not None
        c.close()
        assert s.proc.wait(timeout=60) == 0
    finally:
        s.stop()


def test_64_concurrent_streams_all_complete_and_the_backlog_holds_them(server):
    ss = shutil.which("ss")
    if ss is not None:  # the listen backlog (Send-Q of a listening socket), not cpp-httplib's 5
        out = subprocess.run([ss, "-ltnH", f"sport = :{server.http_port}"], capture_output=True,
                             text=True, timeout=10).stdout.split()
        assert out and int(out[2]) >= 128, out
    url = f"http://127.0.0.1:{server.http_port}/v1/completions"
    results = [None] * 64
    barrier = threading.Barrier(64)

    def one(i):
        body = json.dumps({"model": MODEL, "prompt": f"{PROMPT} {i}", "max_tokens": 4,
                           "stream": True, "ignore_eos": True}).encode()
        barrier.wait()  # all connect at once
        try:
            req = urllib.request.Request(url, data=body, method="POST")
            with urllib.request.urlopen(req, timeout=120) as r:
                events = [line for line in r.read().decode().splitlines()
                          if line.startswith("data: ")]
            results[i] = events[-1] == "data: [DONE]"
        except Exception as e:  # noqa: BLE001  (recorded)
            results[i] = repr(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 64, [r for r in results if r is not True][:5]
    assert server.wait_metric(idle_kv)
