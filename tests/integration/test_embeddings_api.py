"""Embeddings on the real server and model (all-MiniLM-L6-v2 beside Gemma 3 270M): the OpenAI
SDK's `embeddings.create` (float and base64), raw HTTP and the gRPC `Embed` give the vectors
`strata-embed` computes for the same texts, concurrent callers each get their own, bad inputs
are refused with clear messages while the server keeps serving, and a server without an
embedding model answers 404 / UNIMPLEMENTED."""
import base64
import json
import math
import os
import struct
import subprocess
import threading
import urllib.error
import urllib.request

import grpc
import openai
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from strata_server import ROOT, Server, _stubs, build_dir, model_path

emb_pb, emb_pb_grpc = _stubs["embedding"]

EMBEDDING_MODEL = os.environ.get("STRATA_EMBEDDING_MODEL",
                                 str(ROOT / "models" / "all-minilm-l6-v2"))
NAME = os.path.basename(EMBEDDING_MODEL.rstrip("/"))
DIM = 384
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A fast auburn fox leapt over a sleepy hound",
    "How do I reset my password?",
    "Café naïve résumé — déjà vu",
    "你好，世界",
    "emoji 🙂 and tabs\tand\nnewlines",
    "",
    " ".join(["a long text that goes past the model's limit of 256 tokens"] * 40),
]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def strata_embed(texts, *flags):
    """strata-embed's output for `texts` (one JSON value per text)."""
    binary = build_dir() / "src" / "tools" / "strata-embed"
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    out = subprocess.run([str(binary), EMBEDDING_MODEL, "--jsonl", "--threads", "2", *flags],
                         input=lines.encode(), capture_output=True, check=True, timeout=300)
    return [json.loads(line) for line in out.stdout.decode().splitlines()]


@pytest.fixture(scope="module")
def reference():
    if not os.path.isfile(os.path.join(EMBEDDING_MODEL, "model.safetensors")):
        pytest.skip(f"{EMBEDDING_MODEL} is missing: run scripts/setup")
    vectors = strata_embed(TEXTS)
    tokens = [len(ids) for ids in strata_embed(TEXTS, "--tokenize")]
    return vectors, tokens


@pytest.fixture(scope="module")
def server(reference):
    s = Server("--max-model-len", "1024", "--embedding-model", EMBEDDING_MODEL)
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key="unused",
                       max_retries=0, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def stub(server):
    return emb_pb_grpc.EmbeddingStub(server.channel)


def post(port, body, path="/v1/embeddings"):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def assert_same(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == DIM
        assert cosine(g, w) >= 0.99999, f"text {i}: cosine {cosine(g, w)}"


def test_sdk_floats_equal_strata_embed(client, reference):
    vectors, tokens = reference
    r = client.embeddings.create(model=NAME, input=TEXTS, encoding_format="float")
    assert r.object == "list" and r.model == NAME
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    assert all(d.object == "embedding" for d in r.data)
    assert_same([d.embedding for d in r.data], vectors)
    # [CLS] and [SEP] included; the long text is cut at 256.
    assert tokens[-1] == 256
    assert r.usage.prompt_tokens == sum(tokens)
    assert r.usage.total_tokens == sum(tokens)
    one = client.embeddings.create(model=NAME, input=TEXTS[2], encoding_format="float")
    assert_same([one.data[0].embedding], [vectors[2]])
    assert one.usage.prompt_tokens == tokens[2]


def test_base64_decodes_to_the_same_vectors(server, client, reference):
    vectors, _ = reference
    # The SDK asks for base64 unless told otherwise, and decodes it.
    r = client.embeddings.create(model=NAME, input=TEXTS)
    assert_same([d.embedding for d in r.data], vectors)
    status, body = post(server.http_port,
                        {"model": NAME, "input": TEXTS, "encoding_format": "base64"})
    assert status == 200, body
    decoded = []
    for d in body["data"]:
        raw = base64.b64decode(d["embedding"])
        assert len(raw) == 4 * DIM
        decoded.append(list(struct.unpack(f"<{DIM}f", raw)))
    assert_same(decoded, vectors)
    # The float answer of the same texts agrees to the float32 rounding of a batch.
    status, floats = post(server.http_port, {"model": NAME, "input": TEXTS, "dimensions": DIM,
                                             "user": "someone", "unknown_field": 1})
    assert status == 200, floats
    for got, want in zip(decoded, (d["embedding"] for d in floats["data"])):
        assert max(abs(a - b) for a, b in zip(got, want)) < 1e-5


def test_grpc_embed_equals_strata_embed(stub, reference):
    vectors, tokens = reference
    r = stub.Embed(emb_pb.EmbedRequest(texts=TEXTS, request_id="emb-1"), timeout=60)
    assert r.request_id == "emb-1"
    assert r.model == NAME
    assert r.dimension == DIM
    assert r.prompt_tokens == sum(tokens)
    assert_same([list(e.values) for e in r.embeddings], vectors)


def test_concurrent_callers_each_get_their_own(server, client, stub, reference):
    vectors, _ = reference
    passes_before = server.metric("strata_embedding_batch_texts_count")
    errors = []
    barrier = threading.Barrier(16)

    def call(k):
        try:
            picks = [(k + j) % len(TEXTS) for j in range(1 + k % 3)]
            texts = [TEXTS[p] for p in picks]
            barrier.wait(timeout=30)
            if k % 2 == 0:
                r = client.embeddings.create(model=NAME, input=texts, encoding_format="float")
                got = [d.embedding for d in r.data]
            else:
                r = stub.Embed(emb_pb.EmbedRequest(texts=texts), timeout=60)
                got = [list(e.values) for e in r.embeddings]
            assert_same(got, [vectors[p] for p in picks])
        except Exception as e:  # reported below, with the caller
            errors.append(f"caller {k}: {e!r}")

    threads = [threading.Thread(target=call, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # The 16 calls shared encoder passes.
    passes = server.metric("strata_embedding_batch_texts_count") - passes_before
    assert 1 <= passes < 16, passes


def test_bad_inputs_are_refused_clearly_and_the_server_keeps_serving(server, client, stub):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=NAME, input=[])
    assert "empty" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=NAME, input=[[101, 7592, 102]])
    assert "token ids" in str(e.value) and "tokenizer" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=NAME, input=[1, 2, 3])
    assert "token ids" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=NAME, input=["x"] * 2049)
    assert "at most 2048" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=NAME, input="x", dimensions=128)
    assert "dimensions" in str(e.value)
    with pytest.raises(openai.NotFoundError) as e:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert NAME in str(e.value)
    status, body = post(server.http_port, {"model": NAME, "input": "x", "encoding_format": "hex"})
    assert status == 400 and body["error"]["param"] == "encoding_format"
    status, body = post(server.http_port, {"input": "x"})
    assert status == 400 and body["error"]["param"] == "model"

    for texts, words in (([], "got 0"), (["x"] * 2049, "got 2049")):
        with pytest.raises(grpc.RpcError) as e:
            stub.Embed(emb_pb.EmbedRequest(texts=texts), timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert words in e.value.details()

    # Still serving, on both transports.
    assert len(client.embeddings.create(model=NAME, input="still here").data) == 1
    assert len(stub.Embed(emb_pb.EmbedRequest(texts=["still here"]), timeout=60).embeddings) == 1
    assert server.metric("strata_embedding_requests_total",
                         'code="INVALID_ARGUMENT",transport="grpc"') >= 2
    assert server.metric("strata_embedding_requests_total",
                         'code="NOT_FOUND",transport="http"') >= 1


def test_metrics_health_and_reflection(server):
    assert server.metric("strata_embedding_requests_total", 'code="OK",transport="http"') > 0
    assert server.metric("strata_embedding_requests_total", 'code="OK",transport="grpc"') > 0
    assert server.metric("strata_embedding_texts_total") > 0
    assert server.metric("strata_embedding_tokens_total") > 0
    assert server.metric("strata_embedding_seconds_count") > 0
    assert server.health_status("strata.v1.Embedding") == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert "strata.v1.Embedding" in names
    assert "embedding model loaded" in server.log()


def test_a_server_without_an_embedding_model_answers_404_and_unimplemented():
    s = Server("--max-model-len", "512")
    try:
        s.wait_serving()
        status, body = post(s.http_port, {"model": NAME, "input": "x"})
        assert status == 404, body
        assert "no embedding model" in body["error"]["message"]
        with pytest.raises(grpc.RpcError) as e:
            emb_pb_grpc.EmbeddingStub(s.channel).Embed(emb_pb.EmbedRequest(texts=["x"]),
                                                       timeout=30)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # Generation is unaffected.
        status, _ = post(s.http_port, {"model": "x", "prompt": "hi"}, path="/v1/completions")
        assert status == 404
    finally:
        assert s.stop() == 0, s.log()


def test_a_folder_that_cannot_be_loaded_stops_the_server_with_one_line(tmp_path):
    binary = build_dir() / "src" / "tools" / "strata-server"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    out = subprocess.run(
        [str(binary), "--model", str(model_path()), "--grpc-port", "0", "--metrics-port", "0",
         "--http-port", "0", "--embedding-model", str(tmp_path / "nothing-here")],
        capture_output=True, timeout=120, env=env)
    assert out.returncode == 1
    text = out.stdout.decode() + out.stderr.decode()
    assert "cannot load the embedding model" in text
    assert "nothing-here" in text
