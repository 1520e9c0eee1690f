"""The response cache (--response-cache) on the real server and model: deterministic requests
answered from earlier identical ones over gRPC and HTTP (marked `cached`, same tokens), what is
not cacheable, opting out, namespaces, single-flight for concurrent identical requests (one
engine computation), and the cache's metrics."""
import concurrent.futures
import json
import time
import urllib.request

import pytest

from strata_server import Server, greedy, pb

PROMPT = "The three primary colours are"
MODEL = "gemma-3-270m-q4_k_m"


@pytest.fixture(scope="module")
def server():
    s = Server("--max-model-len", "2048", "--response-cache", "true",
               "--response-cache-ttl-seconds", "600")
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def lookups(server, tier, result):
    return server.metric("strata_cache_requests_total",
                         f'cache="response",result="{result}",tier="{tier}"')


def engine_tokens(server):
    """Tokens the engine has computed (prompt and generated) since start."""
    return server.metric("strata_iteration_tokens_sum")


def generate(server, prompt=PROMPT, sampling=None, **fields):
    return server.stub.Generate(
        pb.GenerateRequest(prompt=prompt, sampling=sampling or greedy(8), **fields), timeout=60)


def test_a_repeated_greedy_request_is_answered_from_the_cache(server):
    first = generate(server, prompt="A repeated greedy request:")
    hits = lookups(server, "l1", "hit")
    computed = server.settled(engine_tokens)
    second = generate(server, prompt="A repeated greedy request:")
    assert not first.usage.cached
    assert second.usage.cached
    assert list(second.token_ids) == list(first.token_ids)
    assert second.text == first.text
    assert second.finish_reason == first.finish_reason
    assert second.usage.completion_tokens == first.usage.completion_tokens == 8
    assert second.usage.prompt_tokens == first.usage.prompt_tokens
    assert lookups(server, "l1", "hit") == hits + 1
    assert engine_tokens(server) == computed, "the engine computed nothing for the hit"
    assert server.metric("strata_cache_tokens_served_total", 'cache="response"') >= 8
    assert server.metric("strata_cache_entries", 'cache="response",tier="l1"') >= 1


def test_streaming_hits_carry_the_same_tokens(server):
    req = pb.GenerateRequest(prompt="Streaming and the cache:", sampling=greedy(6))
    first = list(server.stub.GenerateStream(req, timeout=60))
    second = list(server.stub.GenerateStream(req, timeout=60))
    ids = lambda msgs: [t for m in msgs for t in m.token_ids]
    assert ids(second) == ids(first)
    assert not first[-1].usage.cached and second[-1].usage.cached


def test_only_deterministic_requests_are_cached(server):
    sampled = pb.SamplingParams(max_tokens=6, temperature=0.8, ignore_eos=True)
    a = generate(server, prompt="Sampling without a seed:", sampling=sampled)
    b = generate(server, prompt="Sampling without a seed:", sampling=sampled)
    assert not a.usage.cached and not b.usage.cached
    seeded = pb.SamplingParams(max_tokens=6, temperature=0.8, ignore_eos=True, seed=1234)
    c = generate(server, prompt="Sampling with a seed:", sampling=seeded)
    d = generate(server, prompt="Sampling with a seed:", sampling=seeded)
    assert not c.usage.cached and d.usage.cached
    assert list(c.token_ids) == list(d.token_ids)


def test_opting_out_and_namespaces(server):
    prompt = "Opting out of the cache:"
    generate(server, prompt=prompt)
    out = generate(server, prompt=prompt, cache=pb.CacheOptions(use=False))
    assert not out.usage.cached
    other = generate(server, prompt=prompt, cache=pb.CacheOptions(namespace="tenant-b"))
    assert not other.usage.cached, "another namespace does not see the default's entries"
    again = generate(server, prompt=prompt, cache=pb.CacheOptions(namespace="tenant-b"))
    assert again.usage.cached


def test_an_entry_expires_after_the_ttl_the_request_gave(server):
    prompt = "A short-lived answer:"
    short = pb.CacheOptions(ttl_seconds=1)
    generate(server, prompt=prompt, cache=short)
    assert generate(server, prompt=prompt, cache=short).usage.cached
    time.sleep(2.1)
    assert not generate(server, prompt=prompt, cache=short).usage.cached, "the entry expired"


def test_concurrent_identical_requests_compute_once(server):
    prompt = "Thirty-two clients ask the same thing:"
    joins = lookups(server, "inflight", "hit")
    computed = server.settled(engine_tokens)
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda _: generate(server, prompt=prompt, sampling=greedy(24)),
                                range(32)))
    assert len({tuple(r.token_ids) for r in results}) == 1
    fresh = [r for r in results if not r.usage.cached]
    assert len(fresh) == 1, "exactly one request computed"
    prompt_tokens = results[0].usage.prompt_tokens
    # One computation: the engine's tokens grew by one prompt and one completion (not 32).
    grown = engine_tokens(server) - computed
    assert grown <= prompt_tokens + 24, grown
    assert lookups(server, "inflight", "hit") + lookups(server, "l1", "hit") >= joins + 31


def test_http_marks_cached_answers(server):
    body = {"model": MODEL, "prompt": "HTTP and the cache:", "max_tokens": 5, "temperature": 0,
            "ignore_eos": True}

    def post(extra=None):
        data = json.dumps({**body, **(extra or {})}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/completions",
                                     data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    first = post()
    second = post()
    assert "cached" not in first
    assert second.get("cached") is True
    assert second["choices"][0]["text"] == first["choices"][0]["text"]
    assert post({"cache": False}).get("cached") is None
    # The same answer over gRPC is a hit too: one cache for every transport.
    g = generate(server, prompt="HTTP and the cache:", sampling=greedy(5))
    assert g.usage.cached and g.text == first["choices"][0]["text"]


def test_bad_cache_fields_are_invalid_argument(server):
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        generate(server, cache=pb.CacheOptions(namespace="x" * 129))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cache.namespace" in e.value.details()
