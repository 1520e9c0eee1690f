"""Batch-size, concurrency and request-rate sweeps of strata-server and llama.cpp's llama-server,
side by side in one run, measured by the same load generator (strata-bench).

For each batch size B (Strata: --max-batch-size B; llama-server: --parallel B slots, the same
context per sequence) the script starts each server once, alternating systems, and runs
strata-bench at every concurrency C (closed loop); then, at one batch size, an open-loop sweep
of request rates. Every run appends one JSON record to results.jsonl; the script then writes
results.csv and the plots:
  tradeoff.png      output tokens/s against P99 inter-token latency, one line per system
  latency_vs_batch.png  P50/P90/P95/P99 TTFT and ITL against batch size (concurrency = B)
  throughput_vs_concurrency.png  output tokens/s against concurrency, per system
and prints a Markdown summary (also summary.md) with the Strata / llama.cpp ratios.

  .venv/bin/python bench/sweep_batch.py --quick            # under 5 minutes on 2 cores
  .venv/bin/python bench/sweep_batch.py                    # the full grid (hours on 2 cores)
  .venv/bin/python bench/sweep_batch.py --systems strata --batch-sizes 8,16 --concurrency 16
  .venv/bin/python bench/sweep_batch.py --strata-transport http ...  # both over OpenAI HTTP

scripts/bench_sweep builds what it needs first. Run on a quiet machine: both systems share it.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import ROOT, cpu_model, peer_source, resolve, strata_commit  # noqa: E402

FULL_BATCH = [1, 2, 4, 8, 16, 32, 64]
FULL_CONCURRENCY = [1, 2, 4, 8, 16, 32, 64]
FULL_RATES = [0.25, 0.5, 1, 2, 4]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} never answered 200")


class Running:
    """A server process for one configuration; stop() ends it."""

    def __init__(self, proc: subprocess.Popen, target_args: list[str], log: Path):
        self.proc = proc
        self.target_args = target_args
        self.log = log
        self.grpc_addr: str | None = None  # strata-server's gRPC address, when it is one

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_strata(args, batch: int, ctx_per_seq: int, work: Path) -> Running:
    port_file = work / f"strata-b{batch}.ports"
    port_file.unlink(missing_ok=True)
    log = work / f"strata-b{batch}.log"
    kv_tokens = max(batch, 1) * ctx_per_seq
    # 18 layers x 1 KV head x 256 x (K+V) x 2 bytes = 18 KiB per token for Gemma 3 270M; the
    # budget is sized generously from the file instead of hard-coding the model.
    kv_bytes = max(64 << 20, kv_tokens * 20 * 1024)
    cmd = [str(args.build / "src/tools/strata-server"), "--model", str(args.model),
           "--grpc-port", "0", "--metrics-port", "0", "--http-port", "0",
           "--port-file", str(port_file),
           "--threads", str(args.threads), "--max-batch-size", str(batch),
           "--kv-budget-bytes", str(kv_bytes), "--max-queued-requests", "4096",
           "--log-level", "warn", *args.strata_flags.split()]
    return launch_strata(args, cmd, port_file, log)


def launch_strata(args, cmd: list[str], port_file: Path, log: Path,
                  env: dict | None = None) -> Running:
    """Starts `cmd` (a strata-server writing `port_file`) and waits until it serves; the bench
    target is its gRPC port, or its HTTP port with --strata-transport http."""
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"strata-server did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    ports = json.loads(port_file.read_text())
    wait_http(f"http://127.0.0.1:{ports['metrics_port']}/metrics", proc)
    # Health: wait until a trivial call succeeds (the model is loaded).
    cli = args.build / "src/tools/strata-cli"
    addr = f"127.0.0.1:{ports['grpc_port']}"
    deadline = time.monotonic() + 120
    while subprocess.run([str(cli), "--addr", addr, "--timeout", "2", "health"],
                         capture_output=True).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"strata-server never became SERVING:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    if args.strata_transport == "http":  # the same protocol and client as llama-server gets
        running = Running(proc, ["--target", "openai", "--url",
                                 f"http://127.0.0.1:{ports['http_port']}"], log)
    else:
        running = Running(proc, ["--target", "strata", "--addr", addr], log)
    running.grpc_addr = addr
    return running


def start_llama(args, batch: int, ctx_per_seq: int, work: Path) -> Running:
    port = free_port()
    log = work / f"llama-b{batch}.log"
    cmd = [str(args.llama_server), "-m", str(args.model), "--host", "127.0.0.1",
           "--port", str(port), "-t", str(args.threads), "-tb", str(args.threads),
           "-c", str(max(batch, 1) * ctx_per_seq), "-np", str(batch), "-cb",
           "--no-cache-prompt", "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
    except RuntimeError as e:
        raise RuntimeError(f"llama-server: {e}\n{log.read_text()[-2000:]}") from None
    return Running(proc, ["--target", "openai", "--url", f"http://127.0.0.1:{port}"], log)


def run_bench(args, server: Running, label: str, load: list[str], requests: int,
              results: Path) -> dict | None:
    cmd = [str(args.build / "bench/strata-bench"), *server.target_args, *load,
           "--num-requests", str(requests), "--warmup-requests", str(args.warmup),
           "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.output_tokens),
           "--seed", str(args.seed), "--json", str(results), "--label", label]
    if getattr(args, "temperature", 0) > 0:  # sampled, a seed per request (default: greedy)
        cmd += ["--temperature", str(args.temperature), "--top-p", str(args.top_p)]
        for flag, value in (("--top-k", getattr(args, "top_k", None)),
                            ("--min-p", getattr(args, "min_p", None))):
            if value is not None:
                cmd += [flag, str(value)]
    before = results.read_text().count("\n") if results.exists() else 0
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"[sweep] {label}: strata-bench failed ({r.returncode}):\n{r.stderr[-1500:]}",
              file=sys.stderr)
        return None
    lines = results.read_text().splitlines()
    if len(lines) <= before:
        return None
    record = json.loads(lines[-1])
    res = record["results"]
    print(f"[sweep] {label}: {res['output_tokens_per_s']:.1f} out tok/s, TTFT p99 "
          f"{res['ttft_ms']['p99']:.0f} ms, ITL p99 {res['itl_ms']['p99']:.0f} ms", flush=True)
    return record


def flatten(record: dict) -> dict:
    meta = record.get("sweep", {})
    res = record["results"]
    row = {"system": meta.get("system"), "batch_size": meta.get("batch_size"),
           "concurrency": meta.get("concurrency"), "request_rate": meta.get("request_rate"),
           "completed": res.get("completed"), "errors": res.get("errors"),
           "requests_per_s": res.get("requests_per_s"),
           "output_tokens_per_s": res.get("output_tokens_per_s"),
           "total_tokens_per_s": res.get("total_tokens_per_s")}
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        for q in ("mean", "p50", "p90", "p95", "p99", "max"):
            row[f"{metric}_{q}"] = res.get(metric, {}).get(q)
    return row


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = sorted({r["system"] for r in rows})
    closed = [r for r in rows if r["request_rate"] is None]

    fig, ax = plt.subplots(figsize=(6, 4), dpi=80)
    for s in systems:
        pts = sorted((r["itl_ms_p99"], r["output_tokens_per_s"]) for r in closed
                     if r["system"] == s and r["batch_size"] == r["concurrency"])
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
    ax.set_xlabel("P99 inter-token latency (ms)")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput against latency (batch = concurrency)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "tradeoff.png")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=80)
    for ax, metric, title in ((axes[0], "ttft_ms", "TTFT"), (axes[1], "itl_ms", "ITL")):
        for s in systems:
            pts = sorted((r["batch_size"], r) for r in closed
                         if r["system"] == s and r["batch_size"] == r["concurrency"])
            if not pts:
                continue
            xs = [p[0] for p in pts]
            for q, style in (("p50", "-"), ("p90", "--"), ("p95", "-."), ("p99", ":")):
                ax.plot(xs, [p[1][f"{metric}_{q}"] for p in pts], style, marker=".",
                        label=f"{s} {q}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size (= concurrency)")
        ax.set_ylabel(f"{title} (ms)")
        ax.set_title(f"{title} percentiles against batch size")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "latency_vs_batch.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4), dpi=80)
    for s in systems:
        biggest = max((r["batch_size"] for r in closed if r["system"] == s), default=None)
        pts = sorted((r["concurrency"], r["output_tokens_per_s"]) for r in closed
                     if r["system"] == s and r["batch_size"] == biggest)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    label=f"{s} (batch {biggest})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput against concurrency")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "throughput_vs_concurrency.png")
    plt.close(fig)


def latency_cells(r: dict) -> str:
    """A row's "rate | out tok/s | TTFT p50 / p99 | ITL p50 / p99 | E2E p99" table cells."""
    rate = "closed" if r["request_rate"] is None else f"{r['request_rate']:g}"
    return (f"{rate} | {r['output_tokens_per_s']:.1f} | {r['ttft_ms_p50']:.0f} / "
            f"{r['ttft_ms_p99']:.0f} | {r['itl_ms_p50']:.0f} / {r['itl_ms_p99']:.0f} | "
            f"{r['e2e_ms_p99']:.0f} |")


def summary(rows: list[dict], args) -> str:
    lines = [f"Sweep on {cpu_model()}, Strata {strata_commit()}, llama.cpp from "
             f"{peer_source(args.llama_server)}; {args.threads} threads each, "
             f"{args.prompt_tokens}-token random-id prompts, {args.output_tokens} output tokens, "
             f"greedy, EOS ignored, load average at start {os.getloadavg()[0]:.2f}.", "",
             "| system | batch | concurrency | rate (req/s) | out tok/s | TTFT p50 / p99 (ms) "
             "| ITL p50 / p99 (ms) | E2E p99 (ms) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['batch_size']} | {r['concurrency'] or '-'} | "
                     f"{latency_cells(r)}")
    ratio_lines = []
    for r in rows:
        if r["system"] != "strata" or r["request_rate"] is not None:
            continue
        peer = next((p for p in rows if p["system"] == "llama" and p["request_rate"] is None
                     and p["batch_size"] == r["batch_size"]
                     and p["concurrency"] == r["concurrency"]), None)
        if peer and peer["output_tokens_per_s"]:
            ratio_lines.append(
                f"| {r['batch_size']} | {r['concurrency']} | "
                f"{r['output_tokens_per_s'] / peer['output_tokens_per_s']:.2f}x | "
                f"{peer['ttft_ms_p99'] / max(r['ttft_ms_p99'], 1e-9):.2f}x | "
                f"{peer['itl_ms_p99'] / max(r['itl_ms_p99'], 1e-9):.2f}x |")
    if ratio_lines:
        lines += ["", "Strata / llama.cpp (throughput: higher is better for Strata; latency "
                  "columns are llama.cpp's P99 over Strata's, so > 1 means Strata is faster):", "",
                  "| batch | concurrency | output tok/s | TTFT p99 | ITL p99 |",
                  "| ---: | ---: | ---: | ---: | ---: |", *ratio_lines]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="batch sizes 1,8 x concurrency 1,8, short prompts/outputs (< 5 min)")
    p.add_argument("--systems", default="strata,llama")
    p.add_argument("--batch-sizes", default=None)
    p.add_argument("--concurrency", default=None,
                   help="closed-loop levels (default: every level; 'match' = batch size only)")
    p.add_argument("--request-rates", default=None, help="open-loop rates at --rate-batch-size")
    p.add_argument("--rate-batch-size", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--requests-per-slot", type=int, default=2,
                   help="requests per run = this x concurrency (at least 4)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--build", default="build")
    p.add_argument("--llama-server", default=".cache/peer/bin/llama-server")
    p.add_argument("--strata-flags", default="", help="extra strata-server flags")
    p.add_argument("--strata-transport", choices=["grpc", "http"], default="grpc",
                   help="drive strata-server over gRPC, or over its OpenAI HTTP API as "
                        "llama-server is driven")
    p.add_argument("--out", default=None, help="results folder (default: a new temp folder)")
    args = p.parse_args()

    if args.quick:
        batch = [1, 8]
        conc = [1, 8]
        rates = [2.0]
        args.prompt_tokens, args.output_tokens = 64, 32
        args.requests_per_slot = 1
        args.rate_batch_size = 8
    else:
        batch, conc, rates = FULL_BATCH, FULL_CONCURRENCY, FULL_RATES
    if args.batch_sizes:
        batch = [int(x) for x in args.batch_sizes.split(",")]
    match_only = args.concurrency == "match"
    if args.concurrency and not match_only:
        conc = [int(x) for x in args.concurrency.split(",")]
    if args.request_rates is not None:
        rates = [float(x) for x in args.request_rates.split(",") if x]
    args.model = resolve(args.model)
    args.build = resolve(args.build)
    args.llama_server = resolve(args.llama_server)
    systems = args.systems.split(",")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="strata-sweep-"))
    out.mkdir(parents=True, exist_ok=True)
    work = out / "logs"
    work.mkdir(exist_ok=True)
    results = out / "results.jsonl"
    ctx_per_seq = args.prompt_tokens + args.output_tokens + 64
    starters = {"strata": start_strata, "llama": start_llama}

    records = []

    def tag(record, system, b, c, rate):
        if record is not None:
            record["sweep"] = {"system": system, "batch_size": b, "concurrency": c,
                               "request_rate": rate}
            records.append(record)

    for b in batch:
        for system in systems:  # alternating: both systems at one batch size, then the next
            server = starters[system](args, b, ctx_per_seq, work)
            try:
                for c in ([b] if match_only else conc):
                    n = max(4, args.requests_per_slot * c)
                    tag(run_bench(args, server, f"{system} b{b} c{c}", ["--concurrency", str(c)],
                                  n, results), system, b, c, None)
                if b == args.rate_batch_size:
                    for rate in rates:
                        n = max(4, int(rate * 20)) if not args.quick else 6
                        tag(run_bench(args, server, f"{system} b{b} rate{rate:g}",
                                      ["--request-rate", str(rate)], n, results),
                            system, b, None, rate)
            finally:
                server.stop()

    rows = [flatten(r) for r in records]
    (out / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if rows:
        with open(out / "results.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        plot(rows, out)
    text = summary(rows, args)
    (out / "summary.md").write_text(text)
    print(text)
    print(f"[sweep] results, CSV, plots and logs in {out}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
