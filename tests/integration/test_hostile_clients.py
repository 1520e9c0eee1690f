"""Connection-level defences of the real server against clients that connect and then stall.

- /metrics: silent and trickling TCP connections (more of them than civetweb had workers
  before) do not hold a scrape up, and are cut off once the request timeout passes.
- gRPC: connections that send a truncated HTTP/2 preface and nothing more are closed once the
  handshake timeout passes, and calls keep working meanwhile; idle connections are closed after
  --grpc-max-connection-idle-s.
- --max-connections: a port that holds its limit takes no more connections (they wait in the
  listen backlog) until one closes, on gRPC and on HTTP, and says so in the metrics.
"""
import socket
import time
import urllib.error
import urllib.request

import grpc
import pytest

from strata_server import Server, greedy, pb, pb_grpc

METRICS_REQUEST_TIMEOUT_S = 5    # kMetricsRequestTimeoutMs in src/server/server_app.cc
GRPC_HANDSHAKE_TIMEOUT_S = 10    # kGrpcHandshakeTimeoutMs


@pytest.fixture(scope="module")
def server():
    s = Server("--grpc-max-connection-idle-s", "3")
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_within(sock, seconds):
    """Whether the server closes `sock` (EOF or reset) within `seconds`."""
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def scrape_seconds(server):
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                timeout=30) as r:
        assert r.status == 200 and b"strata_" in r.read()
    return time.monotonic() - start


def test_silent_and_trickling_metrics_clients_do_not_block_scrapes(server):
    silent = [connect(server.metrics_port) for _ in range(4)]
    trickling = [connect(server.metrics_port) for _ in range(2)]
    for sock in trickling:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest
    time.sleep(0.3)
    assert scrape_seconds(server) < 2.0
    # They are cut off once the request timeout passes.
    for sock in silent + trickling:
        assert closed_within(sock, METRICS_REQUEST_TIMEOUT_S + 5)
        sock.close()


def test_half_open_grpc_connections_are_closed_and_calls_go_on(server):
    half_open = []
    for _ in range(50):
        sock = connect(server.grpc_port)
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\n")  # the preface without "SM\r\n\r\n" or SETTINGS
        half_open.append(sock)
    reply = server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(4)),
                                 timeout=60)
    assert len(reply.token_ids) == 4
    start = time.monotonic()
    for sock in half_open:
        assert closed_within(sock, max(1.0, GRPC_HANDSHAKE_TIMEOUT_S + 5 -
                                       (time.monotonic() - start)))
        sock.close()


def test_idle_grpc_connections_are_closed_after_the_idle_limit(server):
    # A real HTTP/2 client that finished one call and then stays silent.
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    client = pb_grpc.GenerationStub(channel)
    client.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    state_seen = []
    channel.subscribe(lambda s: state_seen.append(s), try_to_connect=False)
    deadline = time.monotonic() + 3 + 10
    while time.monotonic() < deadline:
        if grpc.ChannelConnectivity.IDLE in state_seen[1:]:
            break
        time.sleep(0.1)
    channel.close()
    assert grpc.ChannelConnectivity.IDLE in state_seen[1:], state_seen


MAX_CONNECTIONS = 4


@pytest.fixture(scope="module")
def capped():
    s = Server("--max-connections", str(MAX_CONNECTIONS))
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def wait_for_metric(server, name, labels, value, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        seen = server.metric(name, labels)
        if seen == value or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def test_a_full_grpc_port_takes_no_connection_until_one_closes(capped):
    # The harness's channel (closed gRPC connections are noticed within a second).
    held = int(capped.settled(lambda s: s.metric("strata_connections", 'port="grpc"'),
                              quiet=1.5))
    assert 1 <= held < MAX_CONNECTIONS
    silent = [connect(capped.grpc_port) for _ in range(MAX_CONNECTIONS - held)]
    assert wait_for_metric(capped, "strata_connections", 'port="grpc"', MAX_CONNECTIONS) == \
        MAX_CONNECTIONS
    full_before = capped.metric("strata_connections_full_total", 'port="grpc"')
    # Its own connection: by default channels in one process share them.
    channel = grpc.insecure_channel(f"127.0.0.1:{capped.grpc_port}",
                                    options=[("grpc.use_local_subchannel_pool", 1)])
    stub = pb_grpc.GenerationStub(channel)
    with pytest.raises(grpc.RpcError) as waited:
        stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=1.5)
    assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, waited.value
    assert capped.metric("strata_connections_full_total", 'port="grpc"') > full_before
    # The connections the port holds keep working.
    capped.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
    for sock in silent:
        sock.close()
    # The waiting connection is taken once the silent ones are gone.
    assert stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10).name
    channel.close()


def test_a_full_http_port_takes_no_connection_until_one_closes(capped):
    url = f"http://127.0.0.1:{capped.http_port}/health"
    silent = [connect(capped.http_port) for _ in range(MAX_CONNECTIONS)]
    assert wait_for_metric(capped, "strata_connections", 'port="http"', MAX_CONNECTIONS) == \
        MAX_CONNECTIONS
    full_before = capped.metric("strata_connections_full_total", 'port="http"')
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        urllib.request.urlopen(url, timeout=1.0)
    assert capped.metric("strata_connections_full_total", 'port="http"') > full_before
    for sock in silent:
        sock.close()
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
