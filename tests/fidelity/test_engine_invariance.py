"""Greedy output of a request does not depend on how the engine serves it (real model).

Each of 16 requests (a shared 50-odd-token system text + one of the logit tests' prompts) is
run alone, then all together in one batch, with chunked prefill at chunk sizes 1, 7 and 64,
with prefix-cache hits (the whole batch a second time), and in a KV cache so small that
sequences are preempted and recomputed. Every run must give every request the same tokens as
its solo run; the engine's counters prove that the chunking, hits and preemptions happened.
"""
import re
import subprocess

import pytest

from conftest import tool
from test_model_logits import PROMPTS

MAX_TOKENS = 24
SYSTEM = ("You are a careful assistant. Answer briefly and truthfully, say when you do not "
          "know, and never invent facts, names or numbers. Keep to the user's language.\n\n")


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory, model_path):
    import llama_cpp

    vocab = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    path = tmp_path_factory.mktemp("engine") / "prompts.txt"
    lines = []
    for p in PROMPTS[:16]:
        ids = vocab.tokenize((SYSTEM + p).encode(), add_bos=True, special=True)
        lines.append(" ".join(map(str, ids)))
    path.write_text("\n".join(lines) + "\n")
    return path


def run(build_dir, model_path, prompts_file, *args):
    cmd = [str(tool(build_dir, "strata-batch")), str(model_path), "--prompts", str(prompts_file),
           "--max-tokens", str(MAX_TOKENS), "--threads", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    outputs = {}
    for line in proc.stdout.splitlines():
        index, finish, *tokens = line.split()
        assert finish == "length", line
        outputs[int(index)] = [int(t) for t in tokens]
    counters = dict((k, int(v)) for k, v in re.findall(
        r"(steps|preemptions|prefix hit tokens|speculative proposed|speculative accepted) (\d+)",
        proc.stderr))
    return outputs, counters


@pytest.fixture(scope="module")
def alone(build_dir, model_path, prompts_file):
    outputs, _ = run(build_dir, model_path, prompts_file, "--mode", "alone")
    assert len(outputs) == 16 and all(len(t) == MAX_TOKENS for t in outputs.values())
    return outputs


@pytest.mark.parametrize("label,args,check", [
    ("one batch of 16", ["--mode", "together", "--max-batched-tokens", "2048",
                         "--no-prefix-caching"], lambda c: c["steps"] == MAX_TOKENS),
    ("chunks of 1", ["--long-prefill-chunk", "1", "--no-prefix-caching"],
     lambda c: c["steps"] > 60),
    ("chunks of 7", ["--long-prefill-chunk", "7", "--no-prefix-caching"],
     lambda c: c["steps"] > MAX_TOKENS + 5),
    ("chunks of 64", ["--long-prefill-chunk", "64", "--max-batched-tokens", "64",
                      "--no-prefix-caching"],
     lambda c: c["steps"] > MAX_TOKENS + 5),
    ("prefix-cache hits", ["--mode", "twice"], lambda c: c["prefix hit tokens"] >= 16 * 32),
    ("preempted and recomputed", ["--kv-budget-bytes", "4000000", "--no-prefix-caching"],
     lambda c: c["preemptions"] > 0),
])
def test_greedy_output_is_the_same_however_the_engine_serves_it(build_dir, model_path,
                                                                  prompts_file, alone, label,
                                                                  args, check):
    outputs, counters = run(build_dir, model_path, prompts_file, *args)
    assert check(counters), (label, counters)
    for i, tokens in alone.items():
        assert outputs[i] == tokens, f"{label}: request {i} differs from its solo run"


# ---- speculative decoding -------------------------------------------------------------------
# Prompt-lookup drafts of 5 tokens every step a match exists (--speculative-ngram 5, fixed
# length): drafts verified in batches, beside prefill chunks, over prefix hits and through
# preemptions still give every request its solo tokens.
SPEC = ["--speculative-ngram", "5"]


def drafted(c):
    return c["speculative proposed"] > 0 and c["speculative accepted"] > 0


@pytest.mark.parametrize("label,args,check", [
    ("speculative, one batch of 16", ["--mode", "together", "--max-batched-tokens", "2048",
                                      "--no-prefix-caching"], drafted),
    ("speculative, alone", ["--mode", "alone", "--no-prefix-caching"], drafted),
    ("speculative, chunks of 7", ["--long-prefill-chunk", "7", "--no-prefix-caching"],
     drafted),
    ("speculative, prefix-cache hits", ["--mode", "twice"],
     lambda c: drafted(c) and c["prefix hit tokens"] >= 16 * 32),
    ("speculative, preempted", ["--kv-budget-bytes", "4000000", "--no-prefix-caching"],
     lambda c: drafted(c) and c["preemptions"] > 0),
])
def test_speculative_greedy_output_is_the_solo_output(build_dir, model_path, prompts_file,
                                                      alone, label, args, check):
    outputs, counters = run(build_dir, model_path, prompts_file, *args, *SPEC)
    assert check(counters), (label, counters)
    for i, tokens in alone.items():
        assert outputs[i] == tokens, f"{label}: request {i} differs from its solo run"


# ---- int8 matmul precision and q8_0 KV --------------------------------------------------------
# With --matmul-precision int8 a token's matmul rows are bit-identical whatever the batch (see
# include/strata/backend/cpu/matmul.h); q8_0 KV rows are quantized once when written and
# dequantized the same way by every attention tile. So the same invariance holds in both: each
# request alone (with the variant's flags) against all 16 together, in prefill chunks of 7 and,
# for q8_0, over prefix hits and through preemptions.
INT8 = ["--matmul-precision", "int8"]
Q8 = ["--kv-dtype", "q8_0"]
_solo_runs = {}


def alone_with(build_dir, model_path, prompts_file, flags):
    key = tuple(flags)
    if key not in _solo_runs:
        outputs, _ = run(build_dir, model_path, prompts_file, "--mode", "alone", *flags)
        assert len(outputs) == 16 and all(len(t) == MAX_TOKENS for t in outputs.values())
        _solo_runs[key] = outputs
    return _solo_runs[key]


@pytest.mark.parametrize("label,flags,args,check", [
    ("int8, one batch of 16", INT8, ["--mode", "together", "--max-batched-tokens", "2048",
                                     "--no-prefix-caching"], lambda c: c["steps"] == MAX_TOKENS),
    ("int8, chunks of 7", INT8, ["--long-prefill-chunk", "7", "--no-prefix-caching"],
     lambda c: c["steps"] > MAX_TOKENS + 5),
    ("q8_0, one batch of 16", Q8, ["--mode", "together", "--max-batched-tokens", "2048",
                                   "--no-prefix-caching"], lambda c: c["steps"] == MAX_TOKENS),
    ("q8_0, chunks of 7", Q8, ["--long-prefill-chunk", "7", "--no-prefix-caching"],
     lambda c: c["steps"] > MAX_TOKENS + 5),
    ("q8_0, prefix-cache hits", Q8, ["--mode", "twice"],
     lambda c: c["prefix hit tokens"] >= 16 * 32),
    ("q8_0, preempted and recomputed", Q8, ["--kv-budget-bytes", "2000000",
                                            "--no-prefix-caching"],
     lambda c: c["preemptions"] > 0),
])
def test_variant_greedy_output_is_the_same_alone_and_batched(build_dir, model_path, prompts_file,
                                                             label, flags, args, check):
    alone = alone_with(build_dir, model_path, prompts_file, flags)
    outputs, counters = run(build_dir, model_path, prompts_file, *args, *flags)
    assert check(counters), (label, counters)
    for i, tokens in alone.items():
        assert outputs[i] == tokens, f"{label}: request {i} differs from its solo run"
