#!/usr/bin/env python3
"""Compares Strata's continuous-batching Engine with llama.cpp's llama-batched-bench on one GGUF
file: output tokens/s for N concurrent requests, Strata's latencies and KV use, and Strata's
prefix-cache TTFT gain.

For each round (default 1) and each N in --concurrency (default 1,2,4,8,16,32,64) it runs, one
process each and alternating so that both see the same machine state:
  1. strata-bench-batched --concurrency N --prompt-tokens P --gen-tokens G
       N distinct random prompts submitted at once to the Engine, G greedy tokens each
  2. llama-batched-bench -npl N -npp P -ntg G -c N*(P+G) -b 2048 -ub 512 --output-format jsonl
       N distinct random prompts decoded as one batch, then G single-token steps of all N
with the same thread count (default 2). Then, once, strata-bench-batched --prefix-test: TTFT of
a request with a 1,000-token system prompt + 16 tokens, cold and with the system prompt cached.

The two tools count differently, so the report gives both views:
  - Strata output tokens/s = all generated tokens / wall time from submit to the last token
    (prefill included, as a client sees it), against llama-batched-bench's S_TG (generated
    tokens / time of the decode steps only, prefill excluded). This is the headline ratio; it
    favours llama.cpp.
  - Like for like: Strata's decode-phase rate (tokens after the last request's first token /
    that time) against S_TG, and Strata's output tokens/s against llama.cpp's generated tokens
    / (prefill + decode time).
Goals: Strata >= 1.5x llama.cpp (headline) at N=16, and Strata's output tokens/s still rising
from N=16 to N=32; KV memory held / allocated >= 96%; cached-prefix TTFT >= 10x faster.

Usage (from the repository root; scripts/bench_batched builds everything first):
  .venv/bin/python bench/compare_batched.py [--concurrency 1,2,4] [--gen-tokens 128]
      [--rounds 1] [--threads 2] [--markdown FILE] [--strata-flags "--max-batched-tokens 1024"]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench_env import cpu_model, peer_source, resolve, strata_commit

THROUGHPUT_GOAL = 1.5  # Strata / llama.cpp output tokens/s at GOAL_N
GOAL_N = 16
RISING_FROM, RISING_TO = 16, 32
KV_USE_GOAL = 0.96
PREFIX_GOAL = 10.0
IDLE_LOAD = 0.5


class BenchError(RuntimeError):
    pass


@dataclass
class Samples:
    """Per-N results, one entry per round."""
    strata: list[dict] = field(default_factory=list)
    llama: list[dict] = field(default_factory=list)




def run(argv: list[str], timeout: float) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError(f"{' '.join(argv)}: {e}") from e
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise BenchError(f"{' '.join(argv)} exited with {done.returncode}:\n{tail}")
    return done.stdout


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def strata_argv(args: argparse.Namespace) -> list[str]:
    return [str(args.strata), "--model", str(args.model), "--threads", str(args.threads),
            *shlex.split(args.strata_flags)]


def run_strata(args: argparse.Namespace, n: int) -> dict:
    argv = strata_argv(args) + ["--concurrency", str(n), "--prompt-tokens",
                                str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens)]
    for r in json_lines(run(argv, args.timeout)):
        if r.get("test") == "batched" and r.get("concurrency") == n:
            if r.get("threads") != args.threads:
                raise BenchError(f"Strata ran {r.get('threads')} threads, not {args.threads}")
            return r
    raise BenchError(f"strata-bench-batched printed no result for N={n}")


def run_llama(args: argparse.Namespace, n: int) -> dict:
    pp, tg = args.prompt_tokens, args.gen_tokens
    # Without -kvu every sequence gets n_ctx / n_seq_max cells, so N * (P + G) fits exactly
    # (llama-batched-bench silently skips a test that does not fit).
    argv = [str(args.llama), "-m", str(args.model), "-t", str(args.threads), "-c",
            str(n * (pp + tg)), "-b", "2048", "-ub", "512", "-npp", str(pp), "-ntg", str(tg),
            "-npl", str(n), "--output-format", "jsonl"]
    for r in json_lines(run(argv, args.timeout)):
        if (r.get("pp"), r.get("tg"), r.get("pl")) == (pp, tg, n):
            if r.get("n_threads") != args.threads:
                raise BenchError(f"llama-batched-bench ran {r.get('n_threads')} threads, "
                                 f"not {args.threads}")
            # Generated tokens over prefill + decode time: the same definition as Strata's
            # output_tokens_per_s.
            r["output_over_total"] = n * tg / r["t"] if r["t"] > 0 else 0.0
            return r
    raise BenchError(f"llama-batched-bench printed no result for N={n} (context too small?)")








def med(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(values)) if values else None


def fmt(v: float | None, spec: str = ".1f", suffix: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{suffix}"


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def report(args: argparse.Namespace, levels: list[int], results: dict[int, Samples],
           prefix: dict | None, load: tuple[float, float, float]) -> str:
    first = results[levels[0]].strata[0]
    lines = [
        "## Strata vs llama.cpp: continuous batching on the CPU",
        "",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Model: `{args.model.name}`; prompts of {args.prompt_tokens} random tokens, distinct "
        f"per request; {args.gen_tokens} generated tokens each (greedy, EOS ignored)",
        f"- CPU: {cpu_model()}; {os.cpu_count()} logical CPUs; {args.threads} threads for each "
        f"engine; load average before the run {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}",
        f"- Strata: `strata-bench-batched`, commit {strata_commit()}; "
        + (f"static batching, token budget {first['max_batched_tokens']}/step"
           if first["batching"] == "static" else "adaptive batching (budget moved by the ITL "
           "target)")
        + f", max batch {first['max_batch_size']}, KV blocks of {first['block_size']} tokens "
        f"(f16) sized to the test" + (f"; flags `{args.strata_flags}`" if args.strata_flags
                                       else ""),
        f"- llama.cpp: `llama-batched-bench` from {peer_source(args.llama)}, "
        "`-b 2048 -ub 512 -c N*(P+G)`, f16 KV, distinct prompts (no `-pps`)",
        f"- Rounds: {args.rounds}, one process per tool and N, alternating; medians over rounds",
        "",
        "| N | Strata output tokens/s | llama.cpp S_TG tokens/s | Strata / llama.cpp | "
        "Strata TTFT P99 ms | Strata ITL P50 ms | Strata KV held / allocated (peak; mean) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    tps = {}
    for n in levels:
        s, ll = results[n].strata, results[n].llama
        tps[n] = med(s, "output_tokens_per_s")
        stg = med(ll, "speed_tg")
        preempt = max(r["preemptions"] for r in s)
        kv = f"{pct(med(s, 'kv_peak_use_ratio'))}; {pct(med(s, 'kv_mean_use_ratio'))}"
        if preempt:
            kv += f" ({preempt} preemptions)"
        lines.append(f"| {n} | {fmt(tps[n])} | {fmt(stg)} | {fmt(ratio(tps[n], stg), '.2f', 'x')} "
                     f"| {fmt(med(s, 'ttft_ms_p99'), '.0f')} | {fmt(med(s, 'itl_ms_p50'))} "
                     f"| {kv} |")

    lines += [
        "",
        "Strata output tokens/s: all generated tokens / wall time from submit to the last token "
        "(prefill included). llama.cpp S_TG: generated tokens / time of its decode steps only "
        "(prefill excluded), so the ratio leans towards llama.cpp. KV: tokens whose KV the "
        "running sequences hold / used blocks x block size, at the peak and averaged over steps.",
        "",
        "Like for like (same definition on both sides):",
        "",
        "| N | Strata decode-phase tokens/s | llama.cpp S_TG | ratio | "
        "Strata output / wall | llama.cpp output / (prefill + decode) | ratio | "
        "Strata decode step ms (batch) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in levels:
        s, ll = results[n].strata, results[n].llama
        sd, stg = med(s, "decode_tokens_per_s"), med(ll, "speed_tg")
        lo = med(ll, "output_over_total")
        step = f"{fmt(med(s, 'decode_step_ms_mean'))} ({fmt(med(s, 'decode_batch_mean'), '.0f')})"
        lines.append(f"| {n} | {fmt(sd)} | {fmt(stg)} | {fmt(ratio(sd, stg), '.2f', 'x')} "
                     f"| {fmt(tps[n])} | {fmt(lo)} | {fmt(ratio(tps[n], lo), '.2f', 'x')} "
                     f"| {step} |")

    lines += ["", "Goals:", ""]
    if GOAL_N in results:
        r = ratio(tps[GOAL_N], med(results[GOAL_N].llama, "speed_tg"))
        met = "met" if r is not None and r >= THROUGHPUT_GOAL else "not met"
        lines.append(f"- N={GOAL_N}: Strata / llama.cpp = {fmt(r, '.2f', 'x')} "
                     f"(goal >= {THROUGHPUT_GOAL:.1f}x): {met}")
    else:
        lines.append(f"- N={GOAL_N}: not measured")
    if RISING_FROM in results and RISING_TO in results:
        a, b = tps[RISING_FROM], tps[RISING_TO]
        met = "met" if a is not None and b is not None and b > a else "not met"
        lines.append(f"- Strata still rising from N={RISING_FROM} to N={RISING_TO}: "
                     f"{fmt(a)} -> {fmt(b)} tokens/s: {met}")
    else:
        lines.append(f"- Strata rising from N={RISING_FROM} to N={RISING_TO}: not measured")
    kv_peaks = [med(results[n].strata, "kv_peak_use_ratio") for n in levels]
    kv_peaks = [k for k in kv_peaks if k is not None]
    if kv_peaks:
        worst = min(kv_peaks)
        lines.append(f"- KV held / allocated at the peak, worst N: {pct(worst)} (goal >= "
                     f"{100 * KV_USE_GOAL:.0f}%): {'met' if worst >= KV_USE_GOAL else 'not met'}")
    if prefix is not None:
        sp = prefix.get("speedup")
        met = "met" if sp is not None and sp >= PREFIX_GOAL else "not met"
        lines.append(
            f"- Prefix cache: TTFT of a {prefix['system_tokens']}-token system prompt + "
            f"{prefix['suffix_tokens']} tokens, cold {fmt(prefix['ttft_cold_ms_median'], '.0f')} "
            f"ms, cached {fmt(prefix['ttft_cached_ms_median'], '.0f')} ms "
            f"({prefix['cached_hit_tokens_mean']:.0f} tokens hit; median of {prefix['reps']}): "
            f"{fmt(sp, '.1f', 'x')} (goal >= {PREFIX_GOAL:.0f}x): {met}")
    if args.rounds > 1:
        lines += ["", "Per round, output tokens/s (Strata / llama.cpp S_TG):", ""]
        for n in levels:
            cells = ", ".join(f"{a['output_tokens_per_s']:.1f} / {b['speed_tg']:.1f}"
                              for a, b in zip(results[n].strata, results[n].llama))
            lines.append(f"- N={n}: {cells}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build",
                        help="Strata build directory holding bench/strata-bench-batched")
    parser.add_argument("--llama-batched-bench", default=".cache/peer/bin/llama-batched-bench",
                        help="llama.cpp's llama-batched-bench (scripts/setup_peer builds it)")
    parser.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64",
                        help="comma-separated numbers of concurrent requests")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--strata-flags", default="",
                        help="extra strata-bench-batched flags, e.g. '--max-batched-tokens 1024'")
    parser.add_argument("--no-prefix-test", action="store_true",
                        help="skip Strata's prefix-cache TTFT test")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one process may run")
    parser.add_argument("--markdown", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    try:
        levels = [int(x) for x in args.concurrency.split(",")]
    except ValueError:
        parser.error(f"--concurrency must be comma-separated integers, got {args.concurrency!r}")
    if (args.rounds < 1 or args.threads < 1 or args.prompt_tokens < 1 or args.gen_tokens < 1
            or min(levels) < 1):
        parser.error("--rounds, --threads, --prompt-tokens, --gen-tokens and every N must be >= 1")

    args.model = resolve(args.model)
    args.strata = resolve(args.build_dir) / "bench" / "strata-bench-batched"
    args.llama = resolve(args.llama_batched_bench)
    for path, hint in ((args.model, "run scripts/setup"),
                       (args.strata, "run scripts/build release"),
                       (args.llama, "run scripts/setup_peer")):
        if not path.exists():
            print(f"compare_batched: {path} not found ({hint})", file=sys.stderr)
            return 1

    load = os.getloadavg()
    if load[0] > IDLE_LOAD:
        print(f"compare_batched: warning: load average {load[0]:.2f} > {IDLE_LOAD}: other work "
              "skews both sides", file=sys.stderr)
    results = {n: Samples() for n in levels}
    prefix = None
    try:
        for rnd in range(args.rounds):
            for n in levels:
                s = run_strata(args, n)
                results[n].strata.append(s)
                ll = run_llama(args, n)
                results[n].llama.append(ll)
                print(f"[round {rnd + 1}/{args.rounds}] N={n:3}  Strata "
                      f"{s['output_tokens_per_s']:7.1f} tokens/s (decode "
                      f"{s['decode_tokens_per_s'] or 0:7.1f})  llama.cpp S_TG "
                      f"{ll['speed_tg']:7.1f} tokens/s", file=sys.stderr, flush=True)
        if not args.no_prefix_test:
            for r in json_lines(run(strata_argv(args) + ["--prefix-test"], args.timeout)):
                if r.get("test") == "prefix":
                    prefix = r
            if prefix is None:
                raise BenchError("strata-bench-batched --prefix-test printed no result")
            print(f"[prefix] cold {prefix['ttft_cold_ms_median']:.0f} ms, cached "
                  f"{prefix['ttft_cached_ms_median']:.0f} ms", file=sys.stderr, flush=True)
    except BenchError as e:
        print(f"compare_batched: {e}", file=sys.stderr)
        return 1

    text = report(args, levels, results, prefix, load)
    sys.stdout.write(text)
    if args.markdown:
        out = Path(args.markdown)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
