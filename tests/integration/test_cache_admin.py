"""The operator's cache controls on the real server: cache tags on requests, invalidation by tag,
namespace or all and epoch bumps over gRPC (CacheAdmin) and HTTP (/admin/cache/*), the admin
token they need, clear errors for bad calls, and the endpoints absent without a token file."""
import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.request

import grpc
import pytest

from strata_server import Server, admin_pb, admin_pb_grpc, build_dir, greedy, model_path, pb

TOKEN = "admin-token-for-tests-0123456789"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def clean_env():
    """The environment without STRATA_* settings (CTest sets some the server also reads)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}


def token_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".token", delete=False)
    f.write(text)
    f.close()
    return f.name


@pytest.fixture(scope="module")
def server():
    s = Server("--max-model-len", "1024", "--response-cache", "true", "--admin-token-file",
               token_file(TOKEN + "\n"))
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def generate(server, prompt, tags=(), namespace=""):
    return server.stub.Generate(
        pb.GenerateRequest(prompt=prompt, sampling=greedy(4),
                           cache=pb.CacheOptions(tags=tags, namespace=namespace)),
        timeout=60)


def admin(server):
    return admin_pb_grpc.CacheAdminStub(server.channel)


def post(server, path, body, token=TOKEN):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}",
                                 data=json.dumps(body).encode() if body is not None else b"",
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_invalidating_a_tag_drops_only_its_answers(server):
    generate(server, "Tagged one:", tags=["pricing", "v1"])
    generate(server, "Tagged two:", tags=["v2"])
    assert generate(server, "Tagged one:", tags=["pricing", "v1"]).usage.cached
    reply = admin(server).Invalidate(admin_pb.InvalidateRequest(tag="pricing"), metadata=AUTH,
                                     timeout=10)
    assert reply.entries_removed == 1
    assert not generate(server, "Tagged one:", tags=["pricing", "v1"]).usage.cached
    assert generate(server, "Tagged two:", tags=["v2"]).usage.cached


def test_http_invalidates_a_namespace_and_everything(server):
    generate(server, "Namespaced:", namespace="tenant-a")
    generate(server, "Namespaced:", namespace="tenant-b")
    status, body = post(server, "/admin/cache/invalidate", {"namespace": "tenant-a"})
    assert status == 200 and body["entries_removed"] == 1
    assert not generate(server, "Namespaced:", namespace="tenant-a").usage.cached
    assert generate(server, "Namespaced:", namespace="tenant-b").usage.cached
    status, body = post(server, "/admin/cache/invalidate", {"all": True})
    assert status == 200 and body["entries_removed"] >= 2
    assert not generate(server, "Namespaced:", namespace="tenant-b").usage.cached


def test_bumping_the_epoch_retires_every_answer(server):
    generate(server, "Before the bump:")
    assert generate(server, "Before the bump:").usage.cached
    first = admin(server).BumpEpoch(admin_pb.BumpEpochRequest(), metadata=AUTH, timeout=10).epoch
    status, body = post(server, "/admin/cache/epoch", None)
    assert status == 200 and body["epoch"] == first + 1
    assert not generate(server, "Before the bump:").usage.cached


def test_calls_without_the_token_are_refused(server):
    with pytest.raises(grpc.RpcError) as e:
        admin(server).Invalidate(admin_pb.InvalidateRequest(all=True), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as e:
        admin(server).BumpEpoch(admin_pb.BumpEpochRequest(),
                                metadata=(("authorization", "Bearer wrong-token-0123456789"),),
                                timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    status, body = post(server, "/admin/cache/invalidate", {"all": True}, token=None)
    assert status == 401 and "admin token" in body["error"]["message"]
    status, _ = post(server, "/admin/cache/epoch", None, token="nope")
    assert status == 401


def test_bad_selectors_get_clear_errors(server):
    with pytest.raises(grpc.RpcError) as e:
        admin(server).Invalidate(admin_pb.InvalidateRequest(), metadata=AUTH, timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "selector" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        admin(server).Invalidate(admin_pb.InvalidateRequest(all=False), metadata=AUTH, timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for body in ({}, {"tag": "a", "namespace": "b"}, {"tag": 3}, {"all": False}, {"colour": "x"},
                 {"tag": ""}, [1, 2]):
        status, reply = post(server, "/admin/cache/invalidate", body)
        assert status == 400, (body, reply)
        assert reply["error"]["message"]
    # Tags on a request are checked too.
    with pytest.raises(grpc.RpcError) as e:
        generate(server, "Bad tags:", tags=[""])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cache.tags[0]" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        generate(server, "Too many tags:", tags=[f"t{i}" for i in range(17)])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert generate(server, "Still serving:").usage.completion_tokens == 4


def test_without_a_token_file_the_admin_endpoints_do_not_exist():
    s = Server("--max-model-len", "1024", "--response-cache", "true")
    try:
        s.wait_serving()
        with pytest.raises(grpc.RpcError) as e:
            admin(s).Invalidate(admin_pb.InvalidateRequest(all=True), metadata=AUTH, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        status, _ = post(s, "/admin/cache/invalidate", {"all": True})
        assert status == 404
    finally:
        assert s.stop() == 0, s.log()


def test_a_short_or_missing_token_file_stops_the_server_with_one_clear_line():
    binary = build_dir() / "src" / "tools" / "strata-server"
    for path in (token_file("short\n"), "/nonexistent/admin.token"):
        out = subprocess.run([str(binary), "--model", str(model_path()), "--grpc-port", "0",
                              "--metrics-port", "0", "--http-port", "0", "--admin-token-file",
                              path], capture_output=True, text=True, timeout=60,
                             env=clean_env())
        assert out.returncode == 1
        assert "admin token file" in out.stdout + out.stderr
