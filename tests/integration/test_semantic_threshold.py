"""The semantic response cache's default similarity threshold against the shipped evaluation set.

A semantic hit needs the cosine of the two texts' all-MiniLM-L6-v2 embeddings at or above
--semantic-cache-threshold AND the semantic guard's consent (SemanticGuardAllows,
include/strata/embedding/semantic_guard.h); strata-embed --pairs computes both with the server's
code. strata-server's --help gives the threshold's default; at that threshold, with the guard,
bench/data/semantic_pairs.jsonl must show precision >= 0.95 and no near-miss pair (one entity,
number, direction or constraint apart) taken for the same request (bench/semantic_threshold.py
--check). The set itself must keep its size by kind; "capital of France" must not be served
"capital of Germany"'s answer, and the guard must veto the near-misses that cosine alone cannot
tell apart (the direction swaps that score 0.98 and more).
Environment: STRATA_BUILD_DIR, STRATA_EMBEDDING_MODEL (set by CTest).
"""
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "bench" / "data" / "semantic_pairs.jsonl"
SCRIPT = ROOT / "bench" / "semantic_threshold.py"
MIN_PAIRS = {"paraphrase": 120, "near_miss": 100, "related": 40}
FRANCE = "What is the capital of France?"
GERMANY = "What is the capital of Germany?"
# Near-misses whose cosine is above every paraphrase's: only the guard keeps them apart.
DIRECTION_SWAPS = (
    ("I'm flying from London to New York next week, how bad will the jet lag be?",
     "I'm flying from New York to London next week, how bad will the jet lag be?"),
    ("How do I convert a number to a string in Python?",
     "How do I convert a string to a number in Python?"),
    ("Convert 5 km to miles.", "Convert 5 miles to km."),
)


def build_dir() -> Path:
    return Path(os.environ.get("STRATA_BUILD_DIR", ROOT / "build"))


def embedding_model() -> Path:
    path = Path(os.environ.get("STRATA_EMBEDDING_MODEL", ROOT / "models" / "all-minilm-l6-v2"))
    if not (path / "model.safetensors").is_file():
        pytest.skip(f"the embedding model {path} is missing: run scripts/setup")
    return path


def tool(name: str) -> Path:
    path = build_dir() / "src" / "tools" / name
    assert path.is_file(), f"{path} is missing: run scripts/build"
    return path


def default_threshold() -> float:
    """The [DEFAULT] at the end of --semantic-cache-threshold's line in strata-server --help."""
    proc = subprocess.run([str(tool("strata-server")), "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    help_text = proc.stdout + proc.stderr
    line = next((line for line in help_text.splitlines()
                 if re.match(r"\s*--semantic-cache-threshold(\s|$)", line)), None)
    assert line is not None, \
        "strata-server --help has no --semantic-cache-threshold flag (the semantic cache's " \
        "cosine threshold; its default must pass bench/semantic_threshold.py --check)"
    match = re.search(r"\[([0-9.]+)\]\s*$", line)
    assert match, f"no [DEFAULT] at the end of --semantic-cache-threshold's help line: {line!r}"
    return float(match.group(1))


def load_pairs() -> list:
    with open(PAIRS, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_pairs_file_meets_the_size_rules():
    pairs = load_pairs()
    counts = collections.Counter(p["kind"] for p in pairs)
    for kind, least in MIN_PAIRS.items():
        assert counts[kind] >= least, f"{PAIRS.name}: {counts[kind]} {kind} pairs, want >= {least}"
    assert sum(counts.values()) >= 260, f"{PAIRS.name}: {len(pairs)} pairs, want >= 260"
    assert set(counts) == set(MIN_PAIRS), f"unknown kinds: {set(counts) - set(MIN_PAIRS)}"
    seen = set()
    for p in pairs:
        assert p["a"].strip() and p["b"].strip(), f"empty text in {p}"
        assert p["same"] is (p["kind"] == "paraphrase"), f"label does not match the kind: {p}"
        key = frozenset((p["a"].casefold(), p["b"].casefold()))
        assert len(key) == 2, f"a pair of one text: {p}"
        assert key not in seen, f"pair listed twice: {p}"
        seen.add(key)
    assert any({p["a"], p["b"]} == {FRANCE, GERMANY} and p["kind"] == "near_miss"
               for p in pairs), f"the pair {FRANCE!r} / {GERMANY!r} is missing"


def run_script(threshold=None) -> tuple:
    """(exit code, the --json result, stderr) of semantic_threshold.py [--check threshold]."""
    check = [] if threshold is None else ["--check", str(threshold)]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--embed", str(tool("strata-embed")),
         "--model", str(embedding_model()), "--pairs", str(PAIRS), "--json", *check],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1), f"semantic_threshold.py failed:\n{proc.stderr}"
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def find_pair(result: dict, a: str, b: str) -> dict:
    return next(p for p in result["pairs"] if {p["a"], p["b"]} == {a, b})


def test_default_threshold_meets_precision_on_the_evaluation_set():
    threshold = default_threshold()
    code, result, stderr = run_script(threshold)
    france = find_pair(result, FRANCE, GERMANY)
    assert not (france["cosine"] >= threshold and france["guard"]), \
        f"{FRANCE!r} and {GERMANY!r} would share an answer: cosine {france['cosine']:.3f} >= " \
        f"the default {threshold} and the guard allows them"
    assert code == 0, \
        f"the default --semantic-cache-threshold {threshold} with the guard does not meet the " \
        f"bar:\n{stderr.strip()}"


def test_guard_vetoes_the_swaps_that_cosine_cannot_see():
    _, result, _ = run_script()
    paraphrase_max = max(p["cosine"] for p in result["pairs"] if p["same"])
    for a, b in DIRECTION_SWAPS:
        pair = find_pair(result, a, b)
        assert pair["cosine"] > paraphrase_max - 0.05, \
            f"{a!r} / {b!r}: cosine {pair['cosine']:.3f} no longer near the top paraphrase " \
            f"({paraphrase_max:.3f}); pick another example of what cosine cannot see"
        assert not pair["guard"] and pair["vetoes"], f"the guard allows {a!r} / {b!r}"
    # What the guard decides is what the script counts.
    for p in result["pairs"]:
        assert p["guard"] == (not p["vetoes"]), p
