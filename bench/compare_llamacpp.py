#!/usr/bin/env python3
"""Compares Strata with llama.cpp on one GGUF file: single-stream prefill and decode speed and
the peak RSS of each process.

For each round (default 5) it runs, alternating so that both see the same machine state:
  1. strata-bench-generate -p 512 -n 0           (prefill: a 512-token prompt)
  2. llama-bench           -p 512 -n 0
  3. strata-bench-generate -p 0 -n 128 -d 128    (decode: 128 steps after a 128-token prompt)
  4. llama-bench           -p 0 -n 128 -d 128
each as its own process with one timed repetition (after each tool's own warmup run), with the
same thread count. A process's peak RSS is its ru_maxrss from wait4. The report gives the
medians over rounds, the Strata/llama.cpp ratios against the goals (decode >= 1.3x, prefill
>= 1.0x), and each process's peak RSS against the budget model file + Strata KV budget + 150 MiB.

Usage (from the repository root; scripts/bench builds everything first):
  .venv/bin/python bench/compare_llamacpp.py [--rounds 5] [--threads 2] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench_env import cpu_model, peer_source, resolve, strata_commit

MIB = 1 << 20
RSS_OVERHEAD_BYTES = 150 * MIB
DECODE_GOAL = 1.3
PREFILL_GOAL = 1.0


@dataclass
class Test:
    name: str  # as strata-bench-generate names it
    n_prompt: int
    n_gen: int
    depth: int
    goal: float  # minimum Strata / llama.cpp ratio of tokens/s

    def args(self) -> list[str]:
        """The test's flags; strata-bench-generate and llama-bench spell them the same."""
        return ["-p", str(self.n_prompt), "-n", str(self.n_gen), "-d", str(self.depth)]


@dataclass
class Samples:
    tokens_per_s: list[float] = field(default_factory=list)
    peak_rss_bytes: list[int] = field(default_factory=list)


class BenchError(RuntimeError):
    pass




def run_measured(argv: list[str]) -> tuple[str, int]:
    """Runs argv to completion; returns (stdout, peak RSS in bytes). Raises BenchError on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
            (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
        ]
        try:
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        except OSError as e:
            raise BenchError(f"cannot start {argv[0]}: {e}") from e
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if code != 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise BenchError(f"{' '.join(argv)} exited with {code}:\n{tail}")
    # Linux reports ru_maxrss in KiB.
    return stdout, int(usage.ru_maxrss) * 1024


def run_strata(binary: Path, args: argparse.Namespace, test: Test) -> tuple[float, int]:
    argv = [str(binary), "--model", str(args.model), "--threads", str(args.threads),
            "--reps", "1", "--kv-budget-bytes", str(args.kv_budget_bytes), *test.args()]
    stdout, rss = run_measured(argv)
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        result = json.loads(line)
        if result.get("test") == test.name:
            if result.get("threads") != args.threads:
                raise BenchError(f"Strata ran {result.get('threads')} threads, not {args.threads}")
            return float(result["tokens_per_s_median"]), rss
    raise BenchError(f"strata-bench-generate printed no result for {test.name}: {stdout!r}")


def run_llama(binary: Path, args: argparse.Namespace, test: Test, info: dict) -> tuple[float, int]:
    argv = [str(binary), "-m", str(args.model), "-t", str(args.threads), "-r", "1", "-o", "json",
            *test.args()]
    stdout, rss = run_measured(argv)
    try:
        results = json.loads(stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"llama-bench printed no JSON: {e}: {stdout[:200]!r}") from e
    for r in results:
        if (r.get("n_prompt"), r.get("n_gen"), r.get("n_depth")) == (
                test.n_prompt, test.n_gen, test.depth):
            if r.get("n_threads") != args.threads:
                raise BenchError(f"llama-bench ran {r.get('n_threads')} threads, not {args.threads}")
            for key in ("build_commit", "build_number", "type_k"):
                if key in r:
                    info[key] = r[key]
            return float(r["avg_ts"]), rss
    raise BenchError(f"llama-bench printed no result for {test.name}: {stdout[:200]!r}")


def llama_supports_depth(binary: Path) -> bool:
    try:
        usage = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--n-depth" in usage








def mib(n: float) -> str:
    return f"{n / MIB:.0f} MiB"


def report(args: argparse.Namespace, tests: list[Test], results: dict, info: dict) -> str:
    model_bytes = args.model.stat().st_size
    budget = model_bytes + args.kv_budget_bytes + RSS_OVERHEAD_BYTES
    lines = [
        "## Strata vs llama.cpp: single-stream CPU speed",
        "",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Model: `{args.model.name}` ({mib(model_bytes)})",
        f"- CPU: {cpu_model()}; {os.cpu_count()} logical CPUs; "
        f"{args.threads} threads for each engine",
        f"- Strata: `strata-bench-generate`, commit {strata_commit()}, KV budget "
        f"{mib(args.kv_budget_bytes)} (f16)",
        f"- llama.cpp: `llama-bench` from {peer_source(args.llama_bench)} (build "
        f"{info.get('build_number', '?')}, commit {info.get('build_commit', '?')}), "
        f"KV {info.get('type_k', 'f16')} sized by llama-bench to the test's context",
        f"- Rounds: {args.rounds}, alternating Strata and llama.cpp; one process and one timed "
        "repetition per run, after each tool's warmup",
        "",
        "| test | Strata tokens/s | llama.cpp tokens/s | Strata / llama.cpp | goal | met |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in tests:
        s = float(np.median(results[("strata", t.name)].tokens_per_s))
        ll = float(np.median(results[("llama", t.name)].tokens_per_s))
        ratio = s / ll if ll > 0 else float("nan")
        met = "met" if ratio >= t.goal else "not met"
        lines.append(f"| {t.name} | {s:.1f} | {ll:.1f} | {ratio:.2f}x | >= {t.goal:.1f}x | {met} |")
    lines += [
        "",
        "tokens/s: median over rounds. pp512: a 512-token prompt until the last token's logits; "
        "tg128@d128: 128 single-token decode steps after a 128-token prompt.",
        "",
        f"Peak RSS (largest ru_maxrss over the rounds) against the budget model file + KV budget "
        f"+ {mib(RSS_OVERHEAD_BYTES)} = {mib(budget)}:",
        "",
        "| process | peak RSS | budget | within |",
        "| --- | ---: | ---: | --- |",
    ]
    for t in tests:
        for tool, label in (("strata", "Strata"), ("llama", "llama.cpp")):
            rss = max(results[(tool, t.name)].peak_rss_bytes)
            within = "yes" if rss <= budget else "no"
            lines.append(f"| {label} {t.name} | {mib(rss)} | {mib(budget)} | {within} |")
    lines += [
        "",
        "Per round, tokens/s (Strata / llama.cpp):",
        "",
        "| test | " + " | ".join(f"round {i + 1}" for i in range(args.rounds)) + " |",
        "| --- |" + " ---: |" * args.rounds,
    ]
    for t in tests:
        s = results[("strata", t.name)].tokens_per_s
        ll = results[("llama", t.name)].tokens_per_s
        cells = " | ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(s, ll))
        lines.append(f"| {t.name} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build",
                        help="Strata build directory holding bench/strata-bench-generate")
    parser.add_argument("--llama-bench", default=".cache/peer/bin/llama-bench",
                        help="llama.cpp's llama-bench (scripts/setup_peer builds it)")
    parser.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kv-budget-bytes", type=int, default=64 * MIB,
                        help="Strata's KV cache memory (default 64 MiB)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1")

    args.model = resolve(args.model)
    strata = resolve(args.build_dir) / "bench" / "strata-bench-generate"
    llama = args.llama_bench = resolve(args.llama_bench)
    for path, hint in ((args.model, "run scripts/setup"),
                       (strata, "run scripts/build release"),
                       (llama, "run scripts/setup_peer")):
        if not path.exists():
            print(f"compare_llamacpp: {path} not found ({hint})", file=sys.stderr)
            return 1
    if not llama_supports_depth(llama):
        print(f"compare_llamacpp: {llama} has no -d/--n-depth; rebuild it with "
              "scripts/setup_peer", file=sys.stderr)
        return 1

    tests = [Test("pp512", 512, 0, 0, PREFILL_GOAL), Test("tg128@d128", 0, 128, 128, DECODE_GOAL)]
    results = {(tool, t.name): Samples() for tool in ("strata", "llama") for t in tests}
    info: dict = {}
    try:
        for rnd in range(args.rounds):
            for t in tests:
                for tool in ("strata", "llama"):
                    if tool == "strata":
                        tps, rss = run_strata(strata, args, t)
                    else:
                        tps, rss = run_llama(llama, args, t, info)
                    results[(tool, t.name)].tokens_per_s.append(tps)
                    results[(tool, t.name)].peak_rss_bytes.append(rss)
                    print(f"[round {rnd + 1}/{args.rounds}] {tool:6} {t.name:10} "
                          f"{tps:8.1f} tokens/s  peak RSS {mib(rss)}", file=sys.stderr, flush=True)
    except BenchError as e:
        print(f"compare_llamacpp: {e}", file=sys.stderr)
        return 1

    text = report(args, tests, results, info)
    sys.stdout.write(text)
    if args.markdown:
        out = Path(args.markdown)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
