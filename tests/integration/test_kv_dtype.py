"""--kv-dtype q8_0 on the real server: the cache holds ~1.94x the tokens of f16 in the same
budget (GetModelInfo, the start-up line, the backend description), concurrent requests are
answered, a batch of them gives each request the tokens it gets alone on the same server, and a
dtype the CPU backend lacks is refused at start-up with a message naming it."""
import concurrent.futures
import subprocess

import pytest

from strata_server import BATCH_INVARIANT, Server, build_dir, greedy, pb

PROMPTS = ["The capital of France is", "Water boils at", "Once upon a time, in a village",
           "The three primary colours are", "A haiku about the sea:", "def fibonacci(n):"]


@pytest.fixture(scope="module")
def servers():
    f16 = Server()
    q8 = Server("--kv-dtype", "q8_0", *BATCH_INVARIANT)
    f16.wait_serving()
    q8.wait_serving()
    yield f16, q8
    assert f16.stop() == 0, f16.log()
    assert q8.stop() == 0, q8.log()


def generate(server, prompt):
    req = pb.GenerateRequest(prompt=prompt, sampling=greedy(24))
    return list(server.stub.Generate(req, timeout=300).token_ids)


def test_q8_holds_more_tokens_in_the_same_budget_and_says_so(servers):
    f16, q8 = servers
    info16 = f16.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    info8 = q8.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    assert info8.kv_cache_tokens >= 1.9 * info16.kv_cache_tokens
    assert "f16 KV" in info16.backend and "q8_0 KV" in info8.backend
    log = q8.log()  # the start-up line
    assert "q8_0 KV" in log and str(info8.kv_cache_tokens) in log


def test_q8_requests_are_the_same_alone_and_concurrent(servers):
    _, q8 = servers
    alone = [generate(q8, p) for p in PROMPTS]
    assert all(len(t) == 24 for t in alone)
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda p: generate(q8, p), PROMPTS))
    assert together == alone


def test_an_unknown_kv_dtype_is_refused_naming_it():
    proc = subprocess.run([str(build_dir() / "src/tools/strata-server"), "--model", "unused",
                           "--kv-dtype", "q4_0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "kv_dtype" in proc.stderr.replace("-", "_") and "q4_0" in proc.stderr
