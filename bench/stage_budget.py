"""Where a request's time goes under load, stage by stage, and what exporting traces costs.

Runs strata-server twice on the same model and load: without tracing, then with
--otlp-endpoint pointing at a collector in this process (it decodes nothing, only counts the
spans it is sent). Each run: --streams gRPC clients loop GenerateStream calls (prompts from a
fixed set, --max-tokens greedy tokens, ignore_eos) for --duration-s after --warmup-s. From
every call's Timing (the same numbers the spans carry) it reports P50 and P99 per stage:
tokenize, queue, prefill, decode, detokenize, and the call's total, plus generated tokens per
second, so the two runs show the tracing overhead side by side.

  .venv/bin/python bench/stage_budget.py                       # ~2.5 minutes on 2 cores
  .venv/bin/python bench/stage_budget.py --streams 16 --duration-s 60 --markdown out.md
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from bench_env import (add_server_arguments, cpu_model, publish, resolve,  # noqa: E402
                       strata_commit, use_build)
from strata_server import Server, greedy, pb  # noqa: E402

STAGES = ["tokenize_seconds", "queue_seconds", "prefill_seconds", "decode_seconds",
          "detokenize_seconds", "total_seconds"]
PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator moves heat from inside to outside, step by step.",
    "List five ways to make a small apartment feel larger, with a sentence on each.",
    "Summarize the rules of chess for someone who has never played a board game.",
    "Describe the water cycle to a ten-year-old, using an everyday example.",
    "What should a beginner know before planting a vegetable garden in spring?",
]


class CountingCollector:
    """An OTLP/HTTP endpoint that takes every export and counts its bytes."""

    def __init__(self):
        self.posts = 0
        self.bytes = 0
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector.lock:
                    collector.posts += 1
                    collector.bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run(server: Server, args) -> dict:
    timings = []
    tokens = 0
    lock = threading.Lock()
    measuring = threading.Event()
    stop = threading.Event()

    def client(k: int):
        nonlocal tokens
        i = k
        while not stop.is_set():
            request = pb.GenerateRequest(prompt=PROMPTS[i % len(PROMPTS)],
                                         sampling=greedy(args.max_tokens))
            i += 1
            last = None
            for message in server.stub.GenerateStream(request, timeout=300):
                last = message
            if measuring.is_set() and not stop.is_set():
                with lock:
                    timings.append(last.timing)
                    tokens += last.usage.completion_tokens

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.streams)]
    for t in threads:
        t.start()
    time.sleep(args.warmup_s)
    measuring.set()
    start = time.monotonic()
    time.sleep(args.duration_s)
    stop.set()
    elapsed = time.monotonic() - start
    for t in threads:
        t.join()
    return {"timings": timings, "tokens_per_s": tokens / elapsed}


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_server_arguments(p)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--warmup-s", type=float, default=15)
    p.add_argument("--duration-s", type=float, default=45)
    args = p.parse_args()
    use_build(args)
    model = resolve(args.model)
    results = {}
    collector = CountingCollector()
    try:
        for variant, flags in (("traces off", []),
                               ("traces exported", ["--otlp-endpoint", collector.url])):
            server = Server(*flags, threads=args.threads, model=model)
            try:
                server.wait_serving()
                results[variant] = run(server, args)
                if flags:
                    server.wait_metric(
                        lambda s: s.metric("strata_trace_spans_total", 'result="exported"') > 0)
                    results[variant]["spans"] = {
                        r: server.metric("strata_trace_spans_total", f'result="{r}"')
                        for r in ("exported", "dropped", "failed")}
            finally:
                assert server.stop() == 0, server.log()
    finally:
        collector.close()

    lines = [
        f"Stage budget: {args.streams} gRPC streams looping {args.max_tokens}-token greedy "
        f"generations ({args.warmup_s:.0f} s warm-up, {args.duration_s:.0f} s measured), "
        f"per-stage time from each call's Timing, P50 / P99 in ms. CPU: {cpu_model()}, "
        f"{args.threads} threads; Strata {strata_commit()}.",
        "",
        "| run | calls | tokens/s | " + " | ".join(s.replace("_seconds", "") for s in STAGES) +
        " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in STAGES) + " |",
    ]
    for variant, r in results.items():
        cells = []
        for stage in STAGES:
            values = [getattr(t, stage) * 1000 for t in r["timings"]]
            cells.append(f"{statistics.median(values):.1f} / {percentile(values, 0.99):.1f}")
        lines.append(f"| {variant} | {len(r['timings'])} | {r['tokens_per_s']:.1f} | " +
                     " | ".join(cells) + " |")
    spans = results.get("traces exported", {}).get("spans")
    if spans:
        lines += ["", f"Spans: {spans['exported']:.0f} exported, {spans['dropped']:.0f} dropped, "
                      f"{spans['failed']:.0f} failed; the collector took {collector.posts} "
                      f"posts, {collector.bytes / 1024:.0f} KiB."]
    report = "\n".join(lines) + "\n"
    publish(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
