"""Default strata-server against llama-server, in one run: what a user of `scripts/run` gets.

Issue 19's benchmark. Three servers on the same GGUF, one at a time, measured by the same load
generator (strata-bench; Strata over gRPC unless --strata-transport http, llama-server over its
OpenAI API):
  strata     strata-server with default settings (only ports, --threads and the model given)
  strata-q8  the same with --kv-dtype q8_0
  llama      llama-server -t T -c N*ctx -np N -cb, started per concurrency N (its best setting
             for that N: one slot per stream)
Closed loop at each --concurrency (default 1,4,16,64; requests = --requests-per-stream x N,
at least 4), then an open-loop sweep of --request-rates (Poisson arrivals) against strata and
llama (-np --rate-slots). Random-id prompts of --prompt-tokens, --output-tokens greedy tokens
(or sampled with --temperature and --top-p, each request with its own seed), EOS ignored.

Goals checked (issue 19): at 16 streams Strata >= 3x llama's output tokens/s, TTFT P99 <= 0.5 s,
ITL P99 <= llama's; at 64 streams Strata's throughput >= its 16-stream figure; with q8_0 KV the
cache holds >= 1.9x the sequences of f16 in the same budget and gives >= f16's throughput at
64 streams. Prints a Markdown report (also written to --markdown) and keeps every strata-bench
record in results.jsonl under --out.

  .venv/bin/python bench/serving_defaults.py                     # ~10 minutes on 2 cores
  .venv/bin/python bench/serving_defaults.py --concurrency 16 --request-rates ""
  .venv/bin/python bench/serving_defaults.py --systems strata --strata-flags "--speculative ngram"
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import cpu_model, peer_source, resolve, strata_commit  # noqa: E402
from sweep_batch import (Running, flatten, latency_cells, launch_strata, run_bench,  # noqa: E402
                         start_llama)

THROUGHPUT_GOAL = 3.0  # strata / llama output tokens/s at GOAL_STREAMS
TTFT_P99_GOAL_MS = 500.0
GOAL_STREAMS = 16
Q8_SEQUENCES_GOAL = 1.9


def start_strata(args, label: str, extra: list[str], work: Path) -> tuple[Running, dict]:
    """strata-server with its defaults plus `extra`; returns the server and its ModelInfo."""
    port_file = work / f"{label}.ports"
    port_file.unlink(missing_ok=True)
    log = work / f"{label}.log"
    cmd = [str(args.build / "src/tools/strata-server"), "--model", str(args.model),
           "--grpc-port", "0", "--metrics-port", "0", "--http-port", "0",
           "--port-file", str(port_file), "--threads", str(args.threads),
           "--max-queued-requests", "4096", "--log-level", "warn", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    server = launch_strata(args, cmd, port_file, log, env)
    r = subprocess.run([str(args.build / "src/tools/strata-cli"), "--addr", server.grpc_addr,
                        "--timeout", "10", "info"], capture_output=True, text=True)
    info = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(" ")
        info[key] = value.strip()
    return server, info


def report(rows: list[dict], infos: dict, args) -> tuple[str, bool]:
    def cell(system, c=None, rate=None):
        return next((r for r in rows if r["system"] == system and r["concurrency"] == c
                     and r["request_rate"] == rate), None)

    sampling = ("greedy" if args.temperature <= 0 else
                f"sampled (temperature {args.temperature:g}, top_p {args.top_p:g}"
                + (f", top_k {args.top_k}" if args.top_k is not None else "")
                + (f", min_p {args.min_p:g}" if args.min_p is not None else "")
                + ", a seed per request)")
    lines = [f"{cpu_model()}, Strata {strata_commit()}, llama.cpp from "
             f"{peer_source(args.llama_server)}; {args.threads} threads each, "
             f"{args.prompt_tokens}-token random-id prompts, {args.output_tokens} {sampling} "
             f"output tokens (EOS ignored), Strata over {args.strata_transport}; load average at start "
             f"{args.load_at_start:.2f}. Strata runs with default settings"
             f"{' plus ' + args.strata_flags if args.strata_flags else ''}; llama-server with "
             f"-np N -c N x {args.prompt_tokens + args.output_tokens + 64} per concurrency N.", "",
             "| server | streams | rate (req/s) | out tok/s | TTFT p50 / p99 (ms) "
             "| ITL p50 / p99 (ms) | E2E p99 (ms) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['concurrency'] or '-'} | {latency_cells(r)}")
    lines += ["", "Goals:", ""]
    ok = True

    def goal(text, passed):
        nonlocal ok
        ok &= bool(passed)
        lines.append(f"- {text}: {'met' if passed else 'NOT met'}")

    s16, l16 = cell("strata", GOAL_STREAMS), cell("llama", GOAL_STREAMS)
    if s16 and l16:
        ratio = s16["output_tokens_per_s"] / l16["output_tokens_per_s"]
        goal(f"{GOAL_STREAMS} streams: output tokens/s {ratio:.2f}x llama-server's "
             f"(goal >= {THROUGHPUT_GOAL}x)", ratio >= THROUGHPUT_GOAL)
        goal(f"{GOAL_STREAMS} streams: TTFT P99 {s16['ttft_ms_p99']:.0f} ms (llama-server "
             f"{l16['ttft_ms_p99']:.0f} ms; goal <= {TTFT_P99_GOAL_MS:.0f} ms)",
             s16["ttft_ms_p99"] <= TTFT_P99_GOAL_MS)
        goal(f"{GOAL_STREAMS} streams: ITL P99 {s16['itl_ms_p99']:.0f} ms against llama-server's "
             f"{l16['itl_ms_p99']:.0f} ms (goal: no worse)", s16["itl_ms_p99"] <= l16["itl_ms_p99"])
    s64 = cell("strata", 64)
    if s16 and s64:
        goal(f"64 streams: {s64['output_tokens_per_s']:.1f} tok/s against "
             f"{s16['output_tokens_per_s']:.1f} at 16 (goal: no collapse, >=)",
             s64["output_tokens_per_s"] >= s16["output_tokens_per_s"])
    f16_tokens = int(infos.get("strata", {}).get("kv_cache_tokens", 0) or 0)
    q8_tokens = int(infos.get("strata-q8", {}).get("kv_cache_tokens", 0) or 0)
    if f16_tokens and q8_tokens:
        per_seq = args.prompt_tokens + args.output_tokens
        f16_seqs, q8_seqs = f16_tokens // per_seq, q8_tokens // per_seq
        goal(f"q8_0 KV: {q8_tokens} tokens ({q8_seqs} sequences of {per_seq}) against f16's "
             f"{f16_tokens} ({f16_seqs}) in the default budget, {q8_seqs / max(f16_seqs, 1):.2f}x "
             f"(goal >= {Q8_SEQUENCES_GOAL}x)", q8_seqs >= Q8_SEQUENCES_GOAL * f16_seqs)
    q64 = cell("strata-q8", 64)
    if s64 and q64:
        goal(f"q8_0 KV at 64 streams: {q64['output_tokens_per_s']:.1f} tok/s against f16's "
             f"{s64['output_tokens_per_s']:.1f} (goal >=)",
             q64["output_tokens_per_s"] >= s64["output_tokens_per_s"])
    return "\n".join(lines) + "\n", ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--request-rates", default="0.5,1,2",
                   help="open-loop rates (requests/s); empty: none")
    p.add_argument("--rate-slots", type=int, default=16, help="llama-server -np for the rates")
    p.add_argument("--requests-per-stream", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--temperature", type=float, default=0,
                   help="sample with this temperature, a seed per request (0: greedy)")
    p.add_argument("--top-p", type=float, default=1.0, help="with --temperature")
    p.add_argument("--top-k", type=int, default=None,
                   help="with --temperature, sent to both servers (default: not sent, so each "
                   "applies its own: llama-server top_k 40 and min_p 0.05, Strata neither)")
    p.add_argument("--min-p", type=float, default=None, help="with --temperature, as --top-k")
    p.add_argument("--systems", default="strata,strata-q8,llama")
    p.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--build", default="build")
    p.add_argument("--llama-server", default=".cache/peer/bin/llama-server")
    p.add_argument("--strata-transport", choices=["grpc", "http"], default="grpc")
    p.add_argument("--strata-flags", default="",
                   help="more strata-server flags for every Strata system, space-separated "
                        "(to measure a setting against the defaults)")
    p.add_argument("--out", default=None, help="results folder (default: a new temp folder)")
    p.add_argument("--markdown", default=None, help="also write the report here")
    args = p.parse_args()
    args.load_at_start = os.getloadavg()[0]
    args.model = resolve(args.model)
    args.build = resolve(args.build)
    args.llama_server = resolve(args.llama_server)
    concurrency = [int(x) for x in args.concurrency.split(",") if x]
    rates = [float(x) for x in args.request_rates.split(",") if x]
    systems = args.systems.split(",")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="strata-defaults-"))
    work = out / "logs"
    work.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    ctx_per_seq = args.prompt_tokens + args.output_tokens + 64
    more = args.strata_flags.split()
    extra = {"strata": more, "strata-q8": [*more, "--kv-dtype", "q8_0"]}
    records, infos = [], {}

    def tag(record, system, c, rate):
        if record is not None:
            record["sweep"] = {"system": system, "batch_size": None, "concurrency": c,
                               "request_rate": rate}
            records.append(record)

    def bench(system, server, c, rate):
        load = ["--concurrency", str(c)] if rate is None else ["--request-rate", str(rate)]
        n = max(4, args.requests_per_stream * c) if rate is None else max(6, int(rate * 20))
        label = f"{system} c{c}" if rate is None else f"{system} rate{rate:g}"
        tag(run_bench(args, server, label, load, n, results), system, c, rate)

    # Strata's servers do not depend on the concurrency: one server per system runs every cell.
    for system in [s for s in systems if s != "llama"]:
        server, infos[system] = start_strata(args, system, extra[system], work)
        try:
            print(f"[defaults] {system}: {infos[system].get('backend')}, "
                  f"{infos[system].get('kv_cache_tokens')} KV tokens", flush=True)
            for c in concurrency:
                bench(system, server, c, None)
            if system == "strata":
                for rate in rates:
                    bench(system, server, None, rate)
        finally:
            server.stop()
    if "llama" in systems:
        for c in concurrency + ([None] if rates else []):
            slots = c if c is not None else args.rate_slots
            server = start_llama(args, slots, ctx_per_seq, work)
            try:
                if c is not None:
                    bench("llama", server, c, None)
                else:
                    for rate in rates:
                        bench("llama", server, None, rate)
            finally:
                server.stop()

    rows = [flatten(r) for r in records]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    text, ok = report(rows, infos, args)
    if args.markdown:
        Path(args.markdown).write_text(text)
    print(text)
    print(f"[defaults] records and logs in {out}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
