"""The semantic cache on the real server and models (Gemma 3 270M, all-MiniLM-L6-v2): a request
that asks for it gets the answer of an earlier request with a similar text and equal parameters,
marked cached and counted under cache="semantic"; near-misses, other parameters, requests that do
not ask, and invalidated answers are computed; a server without an embedding model refuses the
flag."""
import os
import subprocess

import pytest

from strata_server import ROOT, Server, build_dir, greedy, model_path, pb

EMBEDDING_MODEL = ROOT / "models" / "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def server():
    if not (EMBEDDING_MODEL / "model.safetensors").is_file():
        pytest.skip("models/all-minilm-l6-v2 is missing: run scripts/setup")
    s = Server("--max-model-len", "1024", "--response-cache", "true", "--semantic-cache", "true",
               "--embedding-model", str(EMBEDDING_MODEL))
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def clean_env():
    """The environment without STRATA_* settings (CTest sets some the server also reads)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}


def ask(server, prompt, semantic=True, max_tokens=6, chat=False, system=None):
    sampling = greedy(max_tokens)
    cache = pb.CacheOptions(semantic=semantic)
    if chat:
        turns = ([pb.ChatMessage(role="system", content=system)] if system else []) + [
            pb.ChatMessage(role="user", content=prompt)]
        req = pb.GenerateRequest(chat=pb.ChatMessages(messages=turns), sampling=sampling,
                                 cache=cache)
    else:
        req = pb.GenerateRequest(prompt=prompt, sampling=sampling, cache=cache)
    return server.stub.Generate(req, timeout=60)


def semantic(server, result):
    return sum(server.metric("strata_cache_requests_total",
                             f'cache="semantic",result="{result}",tier="{tier}"')
               for tier in ("l1",))


def test_a_reworded_request_gets_the_earlier_answer(server):
    first = ask(server, "What is the capital of France?", chat=True)
    assert not first.usage.cached
    hits = semantic(server, "hit")
    # Stored (and indexed) off the request's thread: the next call may come a moment early.
    for _ in range(50):
        again = ask(server, "what is the capital of france", chat=True)
        if again.usage.cached:
            break
    assert again.usage.cached
    assert list(again.token_ids) == list(first.token_ids)
    assert semantic(server, "hit") == hits + 1
    assert server.metric("strata_cache_entries", 'cache="semantic",tier="l1"') >= 1


def test_near_misses_and_other_parameters_are_computed(server):
    ask(server, "What is the capital of Spain?", chat=True)
    near = ask(server, "What is the capital of Portugal?", chat=True)
    assert not near.usage.cached
    longer = ask(server, "What is the capital of Spain?", chat=True, max_tokens=7)
    assert not longer.usage.cached, "another max_tokens is another context"
    system = ask(server, "What is the capital of Spain?", chat=True, system="Answer in French.")
    assert not system.usage.cached, "other earlier turns are another context"


def test_requests_that_do_not_ask_are_matched_exactly_only(server):
    ask(server, "Name a primary colour.", chat=True)
    plain = ask(server, "name a primary colour", chat=True, semantic=False)
    assert not plain.usage.cached


def test_the_flag_needs_an_embedding_model():
    binary = build_dir() / "src" / "tools" / "strata-server"
    out = subprocess.run([str(binary), "--model", str(model_path()), "--response-cache", "true",
                          "--semantic-cache", "true"], capture_output=True, text=True,
                         timeout=60, env=clean_env())
    assert out.returncode != 0
    assert "embedding" in out.stdout + out.stderr
