"""The strata_client package (clients/python) against the real server: installed with pip from a
copy of its folder, it gives the raw stubs' results for generate, stream, tokenize and model
info; closing a stream cancels the call; gRPC errors arrive as the right exception classes; the
asyncio client agrees; and its committed stubs are what proto/ generates today."""
import asyncio
import hashlib
import importlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import grpc
import pytest

from strata_server import ROOT, Server, greedy, idle_kv, pb

PACKAGE_DIR = ROOT / "clients" / "python"
PROMPT = "Once upon a time, in a small village by the sea,"
MAX_MESSAGE = 65536


@pytest.fixture(scope="module")
def sc():
    """strata_client as pip installs it (into a temporary --target), imported from there."""
    work = Path(tempfile.mkdtemp(prefix="strata-client-"))
    # pip builds in the folder it is given; a copy keeps build/ and *.egg-info out of the tree
    # and shows that the package needs nothing outside clients/python.
    source = work / "src"
    shutil.copytree(PACKAGE_DIR, source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
         "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(target),
         str(source)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(target))
    try:
        module = importlib.import_module("strata_client")
    finally:
        sys.path.remove(str(target))
    assert Path(module.__file__).resolve().is_relative_to(target.resolve()), module.__file__
    for marker in ("py.typed", "_proto/strata/v1/generation_pb2.pyi"):
        assert (target / "strata_client" / marker).is_file(), f"{marker} is not installed"
    yield module
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    s = Server("--max-message-bytes", str(MAX_MESSAGE))
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture()
def client(sc, server):
    with sc.Client(f"127.0.0.1:{server.grpc_port}", timeout=120) as c:
        yield c


def test_committed_stubs_are_what_the_proto_generates():
    run = subprocess.run([sys.executable, str(PACKAGE_DIR / "generate_stubs.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_declared_dependencies_satisfy_the_stubs_version_checks():
    stubs = PACKAGE_DIR / "strata_client" / "_proto" / "strata" / "v1"
    grpc_version = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'",
                             (stubs / "generation_pb2_grpc.py").read_text()).group(1)
    major, minor, patch = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*\S+,\s*(\d+),\s*(\d+),\s*(\d+),",
        (stubs / "generation_pb2.py").read_text()).groups()
    project = tomllib.loads((PACKAGE_DIR / "pyproject.toml").read_text())["project"]
    assert project["name"] == "strata-client"
    assert f"grpcio>={grpc_version}" in project["dependencies"]
    assert f"protobuf>={major}.{minor}.{patch},<{int(major) + 1}" in project["dependencies"]


def test_greedy_generate_repeats_and_matches_the_raw_stub(client, server):
    first = client.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True,
                            request_id="client-1")
    second = client.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
    raw = server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(8)),
                               timeout=120)
    assert first.text and len(first.token_ids) == 8
    assert (second.text, second.token_ids) == (first.text, first.token_ids)
    assert (raw.text, list(raw.token_ids)) == (first.text, first.token_ids)
    assert first.finish_reason == "length"
    assert first.request_id == "client-1"
    assert first.usage.prompt_tokens == raw.usage.prompt_tokens
    assert first.usage.completion_tokens == 8 and first.usage.total_tokens > 8
    assert 0 < first.timing.total_seconds and first.seed != 0
    assert 0 < first.timing.decode_seconds < first.timing.total_seconds
    assert len(first.trace_id) == 32 and first.trace_id != second.trace_id
    with_logprobs = client.generate(PROMPT, max_tokens=2, temperature=0, logprobs=2)
    assert [lp.chosen.token_id for lp in with_logprobs.logprobs] == first.token_ids[:2]
    assert all(len(lp.top) == 2 and lp.chosen.logprob <= 0 for lp in with_logprobs.logprobs)


def test_stream_chunks_add_up_to_the_unary_result(client):
    unary = client.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
    stream = client.stream(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
    chunks = list(stream)
    assert len(chunks) >= 2
    assert "".join(c.text for c in chunks) == unary.text
    assert [t for c in chunks for t in c.token_ids] == unary.token_ids
    assert all(c.finish_reason is None and c.usage is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.is_last and last.finish_reason == "length"
    assert last.usage.completion_tokens == 8
    assert last.usage.prompt_tokens == unary.usage.prompt_tokens
    assert stream.finish_reason == "length" and stream.usage == last.usage


def test_closing_a_stream_cancels_the_call(sc, client, server):
    def cancelled():
        return server.metric("strata_requests_total", 'finish_reason="cancelled"')

    for how in ("close", "with"):
        assert server.wait_metric(idle_kv), server.metrics_text()
        before = cancelled()
        stream = client.stream(PROMPT, max_tokens=1000, temperature=0, ignore_eos=True)
        if how == "close":
            got = sum(len(next(stream).token_ids) for _ in range(3))
            assert not idle_kv(server)  # the request holds KV blocks while it runs
            stream.close()
        else:
            with stream:
                got = sum(len(next(stream).token_ids) for _ in range(3))
                assert not idle_kv(server)
        assert got >= 3
        assert server.wait_metric(idle_kv), (how, server.metrics_text())
        assert server.wait_metric(lambda s: cancelled() == before + 1), how
        with pytest.raises(sc.CancelledError):
            next(stream)
    # The server goes on serving.
    assert client.generate(PROMPT, max_tokens=2, temperature=0).usage.completion_tokens == 2


def test_tokenize_detokenize_round_trip(client, server):
    ids = client.tokenize("Hello world")
    raw = server.stub.Tokenize(pb.TokenizeRequest(text="Hello world"), timeout=30)
    assert ids == list(raw.token_ids) and ids
    assert client.detokenize(ids) == "Hello world"
    with_bos = client.tokenize("Hello world", add_special=True)
    assert len(with_bos) == len(ids) + 1 and with_bos[1:] == ids
    chat = client.tokenize(messages=[{"role": "user", "content": "Hi"}], add_special=True)
    assert client.detokenize(chat, render_special=True).endswith("<start_of_turn>model\n")


def test_model_info_reports_the_served_model(client, server):
    info = client.model_info()
    raw = server.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    assert info.architecture == "gemma3" and info.quantization == "Q4_K_M"
    assert info.vocab_size == 262144 and info.chat_template == "gemma"
    assert info.context_length == raw.context_length > 0
    assert info.kv_cache_tokens == raw.kv_cache_tokens > 0
    assert info.max_batch_size == raw.max_batch_size > 0
    assert info.backend == raw.backend and info.backend.startswith("cpu")
    assert info.name == raw.name and info.version == raw.version and info.parameters > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health(sc, client):
    assert client.health() == "SERVING"
    assert client.health("strata.v1.Generation") == "SERVING"
    assert client.is_serving()
    with sc.Client(f"127.0.0.1:{free_port()}", timeout=10) as nobody:
        assert not nobody.is_serving()
        with pytest.raises(sc.UnavailableError) as e:
            nobody.health()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE


def test_errors_arrive_as_their_exception_classes(sc, client):
    for call in (lambda: client.generate(PROMPT, temperature=-0.5),
                 lambda: list(client.stream(PROMPT, temperature=-0.5))):
        with pytest.raises(sc.InvalidRequestError) as e:
            call()
        assert isinstance(e.value, sc.StrataError)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.field == "sampling.temperature"
        assert "temperature" in e.value.message and "-0.5" in e.value.message
    with pytest.raises(sc.InvalidRequestError) as e:
        client.detokenize([262144])
    assert e.value.field == "token_ids[0]", e.value.message
    # Past the server's --max-message-bytes.
    with pytest.raises(sc.QueueFullError) as e:
        client.generate("x" * (2 * MAX_MESSAGE), max_tokens=1)
    assert sc.QueueFullError is sc.ResourceExhaustedError
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(sc.DeadlineExceededError):
        client.generate(PROMPT, max_tokens=1000, ignore_eos=True, timeout=0.3)
    # The client refuses an ambiguous input before any call.
    with pytest.raises(ValueError):
        client.generate(PROMPT, token_ids=[2, 3])
    with pytest.raises(ValueError):
        client.generate()


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def test_every_status_code_maps_to_one_class(sc):
    expected = {
        grpc.StatusCode.INVALID_ARGUMENT: sc.InvalidRequestError,
        grpc.StatusCode.OUT_OF_RANGE: sc.InvalidRequestError,
        grpc.StatusCode.RESOURCE_EXHAUSTED: sc.QueueFullError,
        grpc.StatusCode.UNAVAILABLE: sc.UnavailableError,
        grpc.StatusCode.DEADLINE_EXCEEDED: sc.DeadlineExceededError,
        grpc.StatusCode.CANCELLED: sc.CancelledError,
        grpc.StatusCode.INTERNAL: sc.InternalError,
        grpc.StatusCode.UNKNOWN: sc.InternalError,
        grpc.StatusCode.DATA_LOSS: sc.InternalError,
        grpc.StatusCode.UNAUTHENTICATED: sc.AuthenticationError,
    }
    for code in grpc.StatusCode:
        if code == grpc.StatusCode.OK:
            continue
        error = sc.from_rpc_error(FakeRpcError(code, "words"))
        assert type(error) is expected.get(code, sc.StrataError), code
        assert error.code == code and error.message == "words"
    unnamed = sc.from_rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "bad input"))
    assert unnamed.field is None


def test_an_api_key_is_sent_with_every_call(sc, tmp_path):
    key = "sk-client-test-0123456789"
    keys_file = tmp_path / "api_keys"
    keys_file.write_text(f"client {hashlib.sha256(key.encode()).hexdigest()}\n")
    keyed = Server("--api-keys-file", str(keys_file))
    try:
        keyed.wait_serving()
        target = f"127.0.0.1:{keyed.grpc_port}"
        with sc.Client(target, timeout=60) as anonymous:
            with pytest.raises(sc.AuthenticationError):
                anonymous.generate(PROMPT, max_tokens=2)
        with sc.Client(target, timeout=60, api_key=key) as c:
            assert c.generate(PROMPT, max_tokens=2, temperature=0).usage.completion_tokens == 2
            assert [t.text for t in c.stream(PROMPT, max_tokens=2, temperature=0)]
            assert c.tokenize("hello")
    finally:
        assert keyed.stop() == 0, keyed.log()


def test_async_client_generates_and_streams(sc, client, server):
    expected = client.generate(PROMPT, max_tokens=6, temperature=0, ignore_eos=True)

    async def main():
        async with sc.AsyncClient(f"127.0.0.1:{server.grpc_port}", timeout=120) as aclient:
            assert await aclient.health() == "SERVING"
            unary = await aclient.generate(PROMPT, max_tokens=6, temperature=0,
                                           ignore_eos=True)
            stream = aclient.stream(PROMPT, max_tokens=6, temperature=0, ignore_eos=True)
            chunks = [chunk async for chunk in stream]
            with pytest.raises(sc.InvalidRequestError) as e:
                async for _ in aclient.stream(PROMPT, temperature=-0.5):
                    pass
            assert e.value.field == "sampling.temperature"
            ids = await aclient.tokenize("Hello world")
            text = await aclient.detokenize(ids)
            info = await aclient.model_info()
            return unary, chunks, stream, text, info

    unary, chunks, stream, text, info = asyncio.run(main())
    assert (unary.text, unary.token_ids) == (expected.text, expected.token_ids)
    assert "".join(c.text for c in chunks) == expected.text
    assert [t for c in chunks for t in c.token_ids] == expected.token_ids
    assert chunks[-1].finish_reason == "length" and stream.usage.completion_tokens == 6
    assert text == "Hello world" and info.architecture == "gemma3"


def test_cache_options_reach_the_server_and_cached_answers_are_marked(sc):
    s = Server("--response-cache", "true")
    try:
        s.wait_serving()
        with sc.Client(f"127.0.0.1:{s.grpc_port}", timeout=120) as c:
            args = dict(max_tokens=4, temperature=0, cache_namespace="client-test",
                        cache_tags=["docs"], cache_ttl_seconds=60, cache_semantic=True)
            first = c.generate("A question for the cache:", **args)
            second = c.generate("A question for the cache:", **args)
            assert not first.usage.cached and second.usage.cached
            assert second.token_ids == first.token_ids
            other_namespace = c.generate("A question for the cache:",
                                         **{**args, "cache_namespace": "another"})
            assert not other_namespace.usage.cached
            opted_out = c.generate("A question for the cache:", cache=False, **args)
            assert not opted_out.usage.cached
            with pytest.raises(TypeError):
                c.generate("Tags as one string:", max_tokens=2, cache_tags="docs")
            with pytest.raises(sc.InvalidRequestError) as e:
                c.generate("An empty tag:", max_tokens=2, temperature=0, cache_tags=[""])
            assert "cache.tags[0]" in str(e.value)
    finally:
        assert s.stop() == 0, s.log()
