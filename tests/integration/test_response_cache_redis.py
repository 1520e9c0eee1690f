"""The response cache's shared tier: two strata-server replicas and one real redis-server on
loopback. Replica B answers from what replica A computed; an invalidation or an epoch bump on
one replica reaches the other's in-process tier; a Redis killed mid-run costs no request
(served uncached, counted), and the replicas use it again once it is back."""
import json
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

from strata_server import Server, admin_pb, admin_pb_grpc, greedy, model_path, pb

TOKEN = "replica-admin-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self):
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def keys(self):
        """The response entries Strata stored (redis-cli, which comes with redis-server)."""
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--scan", "--pattern",
                              "strata:resp:*"], capture_output=True, text=True, timeout=10)
        return out.stdout.split()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def redis():
    r = Redis()
    yield r
    r.kill()


@pytest.fixture(scope="module")
def replicas(redis):
    token_file = tempfile.NamedTemporaryFile("w", suffix=".token", delete=False)
    token_file.write(TOKEN + "\n")
    token_file.close()
    flags = ("--max-model-len", "1024", "--response-cache", "true", "--response-cache-redis",
             f"127.0.0.1:{redis.port}", "--response-cache-redis-timeout-ms", "100",
             "--admin-token-file", token_file.name)
    a, b = Server(*flags), Server(*flags)
    a.wait_serving()
    b.wait_serving()
    yield a, b
    assert a.stop() == 0, a.log()
    assert b.stop() == 0, b.log()


def generate(server, prompt, tags=()):
    return server.stub.Generate(
        pb.GenerateRequest(prompt=prompt, sampling=greedy(6), cache=pb.CacheOptions(tags=tags)),
        timeout=60)


def admin(server):
    return admin_pb_grpc.CacheAdminStub(server.channel)


AUTH = (("authorization", f"Bearer {TOKEN}"),)


def l2(server, result):
    return server.metric("strata_cache_requests_total",
                         f'cache="response",result="{result}",tier="l2"')


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_a_replica_answers_from_what_another_computed(replicas, redis):
    a, b = replicas
    before = len(redis.keys())
    first = generate(a, "Shared between replicas:")
    assert not first.usage.cached
    # A's store into Redis runs on its writer thread: wait until it has landed.
    assert wait_for(lambda: len(redis.keys()) > before)
    hits = l2(b, "hit")
    shared = generate(b, "Shared between replicas:")
    assert shared.usage.cached
    assert list(shared.token_ids) == list(first.token_ids)
    assert l2(b, "hit") == hits + 1, "B's answer came from Redis"
    again = generate(b, "Shared between replicas:")  # now from B's own in-process tier
    assert again.usage.cached and l2(b, "hit") == hits + 1


def test_an_invalidation_on_one_replica_reaches_the_others(replicas, redis):
    a, b = replicas
    first = generate(a, "Tagged and shared:", tags=["release-1"])
    other = generate(a, "Untagged and shared:")
    assert wait_for(lambda: len(redis.keys()) >= 2)
    # B copies both into its own in-process tier.
    assert generate(b, "Tagged and shared:", tags=["release-1"]).usage.cached
    assert generate(b, "Untagged and shared:").usage.cached
    removed = admin(a).Invalidate(admin_pb.InvalidateRequest(tag="release-1"), metadata=AUTH,
                                  timeout=10)
    assert removed.entries_removed >= 1
    # The invalidation reaches B over Redis pub/sub: its copy is dropped too.
    again = lambda: generate(b, "Tagged and shared:", tags=["release-1"])
    assert wait_for(lambda: not again().usage.cached), "B still served the invalidated answer"
    assert generate(b, "Untagged and shared:").usage.cached
    assert list(again().token_ids) == list(first.token_ids)
    assert other.usage.completion_tokens == 6


def test_an_epoch_bump_reaches_every_replica(replicas, redis):
    a, b = replicas
    generate(a, "Before the epoch bump:")
    assert wait_for(lambda: generate(b, "Before the epoch bump:").usage.cached)
    req = urllib.request.Request(f"http://127.0.0.1:{b.http_port}/admin/cache/epoch", data=b"",
                                 headers={"Authorization": f"Bearer {TOKEN}"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        epoch = json.loads(r.read())["epoch"]
    assert epoch >= 1
    assert not generate(b, "Before the epoch bump:").usage.cached
    # A adopts the new epoch (pub/sub): its own copy under the old one is unreachable, and it
    # finds what B just computed under the new one in Redis.
    l2_hits = l2(a, "hit")
    assert wait_for(lambda: generate(a, "Before the epoch bump:").usage.cached and
                    l2(a, "hit") > l2_hits)
    # Both replicas now key by the new epoch: what one computes, the other finds.
    generate(a, "After the epoch bump:")
    assert wait_for(lambda: generate(b, "After the epoch bump:").usage.cached)


def test_another_model_file_never_shares_entries(replicas, redis, tmp_path):
    """A replica serving a changed model file (one byte of its last tensor differs: another
    SHA-256) on the same Redis never gets the others' answers."""
    a, _ = replicas
    first = generate(a, "Which model answered this:")
    assert wait_for(lambda: len(redis.keys()) >= 1)
    changed = tmp_path / "changed.gguf"
    data = bytearray(model_path().read_bytes())
    data[-1] ^= 1
    changed.write_bytes(bytes(data))
    c = Server("--max-model-len", "1024", "--response-cache", "true", "--response-cache-redis",
               f"127.0.0.1:{redis.port}", model=changed)
    try:
        c.wait_serving()
        other = generate(c, "Which model answered this:")
        assert not other.usage.cached, "a changed model file must not serve another's answers"
        assert generate(c, "Which model answered this:").usage.cached, "its own entry is used"
        assert first.usage.completion_tokens == 6
    finally:
        assert c.stop() == 0, c.log()


def test_a_dead_redis_costs_no_request(replicas, redis):
    a, b = replicas
    redis.kill()
    errors = a.metric("strata_cache_errors_total", 'cache="response",tier="l2"')
    t0 = time.monotonic()
    for i in range(5):
        r = generate(a, f"While Redis is down, request {i}:")
        assert r.usage.completion_tokens == 6 and not r.usage.cached
    assert time.monotonic() - t0 < 30
    assert a.metric("strata_cache_errors_total", 'cache="response",tier="l2"') > errors
    assert "response cache tier failed" in a.log()
    # Back again: after the retry period the replicas share entries once more.
    redis.start()
    time.sleep(1.2)
    generate(a, "After Redis came back:")
    assert wait_for(lambda: len(redis.keys()) == 1), "A stores into the new Redis"
