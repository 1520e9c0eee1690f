"""Per-stage tracing on the real server (--otlp-endpoint), received by a collector on loopback.

The collector decodes each OTLP/HTTP export with the `opentelemetry-proto` package's messages.
A streamed gRPC call that carries a W3C `traceparent` joins the caller's trace: one server span
whose parent is the caller's, with children for tokenize, cache lookup, queue, each prefill
chunk, decode, detokenize and the response, inside the call's span and in order. A response-
cache hit has no engine stages; an HTTP call without `traceparent` starts a new trace whose id
the response names; an unsampled caller's trace is not exported; a collector that is down or
slow costs spans (counted), never requests.
"""
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import openai
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from strata_server import Server, greedy, pb

MODEL = "gemma-3-270m-q4_k_m"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
# About 120 prompt tokens: with --long-prefill-chunk 32 the prompt runs in four chunks.
LONG_PROMPT = " ".join(f"item{i}" for i in range(60))


class Collector:
    """An OTLP/HTTP trace receiver: keeps every span it is sent, with its resource."""

    def __init__(self, delay_s: float = 0.0):
        self.spans = []  # (resource attributes, span)
        self.posts = []  # (path, content type)
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(delay_s)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with collector.lock:
                    collector.posts.append((self.path, self.headers["Content-Type"]))
                    for rs in request.resource_spans:
                        resource = {kv.key: kv.value for kv in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                collector.spans.append((resource, span))
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def trace(self, trace_id: str, timeout: float = 20.0):
        """The spans of `trace_id` once its server span has arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                spans = [s for _, s in self.spans if s.trace_id.hex() == trace_id]
            if any(s.kind == trace_pb2.Span.SPAN_KIND_SERVER for s in spans):
                return spans
            time.sleep(0.05)
        raise AssertionError(f"no server span of trace {trace_id} arrived")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def tree(spans):
    """(the server span, its children by name)."""
    roots = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
    assert len(roots) == 1, spans
    root = roots[0]
    children = {}
    for s in spans:
        if s is root:
            continue
        assert s.parent_span_id == root.span_id, s
        assert s.trace_id == root.trace_id
        assert root.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano \
            <= root.end_time_unix_nano, (s.name, s, root)
        children.setdefault(s.name, []).append(s)
    return root, children


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture(scope="module")
def server(collector):
    s = Server("--otlp-endpoint", collector.url, "--otlp-service-name", "strata-test",
               "--long-prefill-chunk", "32", "--response-cache", "true", "--max-model-len", "2048")
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def test_streamed_call_joins_the_callers_trace_with_a_span_per_stage(server, collector):
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    request = pb.GenerateRequest(prompt=LONG_PROMPT, sampling=greedy(6))
    messages = list(server.stub.GenerateStream(request, metadata=(("traceparent", traceparent),),
                                               timeout=60))
    last = messages[-1]
    assert last.trace_id == TRACE_ID
    assert last.timing.tokenize_seconds > 0
    assert last.timing.cache_lookup_seconds > 0  # cacheable (greedy) with --response-cache
    assert last.timing.prefill_seconds > 0 and last.timing.decode_seconds > 0
    assert last.timing.detokenize_seconds > 0
    assert last.timing.detokenize_seconds < last.timing.total_seconds

    spans = collector.trace(TRACE_ID)
    with collector.lock:
        resource_of = {s.span_id: r for r, s in collector.spans}
    root, children = tree(spans)
    assert root.name == "strata.v1.Generation/GenerateStream"
    assert root.parent_span_id.hex() == PARENT_ID
    assert root.status.code != trace_pb2.Status.STATUS_CODE_ERROR
    a = attrs(root)
    assert a["rpc.system"] == "grpc" and a["rpc.method"] == "GenerateStream"
    assert a["strata.request_id"] == last.request_id
    assert a["gen_ai.usage.input_tokens"] == last.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == 6
    assert a["strata.finish_reason"] == "length"
    assert resource_of[root.span_id]["service.name"].string_value == "strata-test"

    assert set(children) == {"tokenize", "cache_lookup", "queue", "prefill", "decode",
                             "detokenize", "response"}, sorted(children)
    assert all(len(children[n]) == 1 for n in children if n != "prefill")
    assert attrs(children["cache_lookup"][0])["strata.cache.hit"] is False
    # The prompt ran in chunks of at most 32 positions, contiguous and in order, after the queue
    # and before the first token.
    prefill = sorted(children["prefill"], key=lambda s: s.start_time_unix_nano)
    assert len(prefill) >= 3
    position = 0
    for chunk in prefill:
        c = attrs(chunk)
        assert c["strata.prefill.start_position"] == position
        assert 1 <= c["strata.prefill.tokens"] <= 32
        position += c["strata.prefill.tokens"]
    assert position == last.usage.prompt_tokens
    queue, decode = children["queue"][0], children["decode"][0]
    assert children["tokenize"][0].end_time_unix_nano <= queue.start_time_unix_nano
    assert queue.end_time_unix_nano <= prefill[0].start_time_unix_nano
    assert prefill[-1].end_time_unix_nano <= decode.start_time_unix_nano
    assert attrs(decode)["strata.decode.tokens"] == 6
    assert attrs(children["detokenize"][0])["strata.busy_seconds"] > 0
    assert decode.end_time_unix_nano <= children["response"][0].end_time_unix_nano
    assert f"trace_id={TRACE_ID}" in server.log()


def test_a_cache_hit_has_a_lookup_and_no_engine_stages(server, collector):
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    request = pb.GenerateRequest(prompt="The sky is", sampling=greedy(4))
    server.stub.Generate(request, timeout=60)  # computed, then stored
    reply = server.stub.Generate(
        request, metadata=(("traceparent", f"00-{trace_id}-b7ad6b7169203331-01"),), timeout=60)
    assert reply.usage.cached and reply.trace_id == trace_id
    assert reply.timing.prefill_seconds == 0 and reply.timing.decode_seconds == 0
    root, children = tree(collector.trace(trace_id))
    assert root.name == "strata.v1.Generation/Generate"
    assert set(children) == {"tokenize", "cache_lookup", "response"}, sorted(children)
    assert attrs(children["cache_lookup"][0])["strata.cache.hit"] is True
    assert attrs(root)["strata.from_cache"] is True


def test_http_call_without_traceparent_starts_a_trace_named_in_the_response(server, collector):
    with openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key="unused",
                       max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "Say hi"}], max_tokens=3,
            temperature=0.7)
        raw.parse()
        trace_id = raw.headers["x-trace-id"]
    assert len(trace_id) == 32 and int(trace_id, 16) != 0
    root, children = tree(collector.trace(trace_id))
    assert root.name == "POST /v1/chat/completions"
    assert root.parent_span_id == b""
    assert attrs(root)["http.request.method"] == "POST"
    assert {"tokenize", "queue", "prefill", "decode", "response"} <= set(children)
    assert "cache_lookup" not in children  # sampled at temperature 0.7 without a seed


def test_a_refused_call_is_a_span_with_an_error(server, collector):
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.http_port}/v1/completions",
        data=b'{"model": "no-such-model", "prompt": "x", "max_tokens": 1}',
        headers={"Content-Type": "application/json",
                 "traceparent": f"00-{'1' * 32}-{'2' * 16}-01"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=30)
    assert e.value.code == 404
    assert e.value.headers["X-Trace-Id"] == "1" * 32
    root, children = tree(collector.trace("1" * 32))
    assert root.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert "NOT_FOUND" in root.status.message
    assert set(children) <= {"tokenize", "response"}


def test_unsampled_and_malformed_traceparents(server, collector):
    unsampled = "5" * 32
    reply = server.stub.Generate(
        pb.GenerateRequest(prompt="One", sampling=greedy(1)),
        metadata=(("traceparent", f"00-{unsampled}-{'6' * 16}-00"),), timeout=60)
    assert reply.trace_id == unsampled  # the caller's trace, not recorded
    malformed = f"00-{'A' * 32}-{'6' * 16}-01"  # uppercase hex is invalid
    reply = server.stub.Generate(pb.GenerateRequest(prompt="Two", sampling=greedy(1)),
                                 metadata=(("traceparent", malformed),), timeout=60)
    assert reply.trace_id not in ("a" * 32, "A" * 32) and len(reply.trace_id) == 32
    collector.trace(reply.trace_id)  # a new trace, exported after the unsampled call ended
    with collector.lock:
        assert not [s for _, s in collector.spans if s.trace_id.hex() == unsampled]
    assert all(path == "/v1/traces" and ctype == "application/x-protobuf"
               for path, ctype in collector.posts)


def test_a_down_or_slow_collector_costs_spans_not_requests():
    slow = Collector(delay_s=3.0)
    closed = Collector()
    down_port = closed.port  # nobody listens there once it is closed
    closed.close()
    servers = []
    try:
        for endpoint in (f"http://127.0.0.1:{down_port}/v1/traces", slow.url):
            s = Server("--otlp-endpoint", endpoint, "--otlp-max-queue-spans", "16")
            servers.append(s)
        for s in servers:
            s.wait_serving()
        for s in servers:
            start = time.monotonic()
            for i in range(8):
                reply = s.stub.Generate(pb.GenerateRequest(prompt=f"Count {i}", sampling=greedy(1)),
                                        timeout=30)
                assert reply.finish_reason == pb.FINISH_REASON_LENGTH
            assert time.monotonic() - start < 25
        down, slow_server = servers
        assert down.wait_metric(lambda s: s.metric("strata_trace_spans_total",
                                                   'result="failed"') > 0)
        assert slow_server.wait_metric(lambda s: s.metric("strata_trace_spans_total",
                                                          'result="dropped"') > 0)
    finally:
        for s in servers:
            assert s.stop() == 0, s.log()
        slow.close()
