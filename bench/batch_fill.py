"""Does a batch job fill idle capacity without hurting interactive traffic? (issue 21)

One strata-server with --jobs-db, three phases on the same model:
  1. interactive alone: --streams gRPC clients loop streamed generations (--max-tokens greedy
     tokens); time to first token and inter-token gaps measured at the client;
  2. batch alone: a job of --lines chat lines (--batch-max-tokens each) runs on the idle server:
     its tokens per second are the idle capacity the job can use;
  3. both: the interactive load again while a fresh job of the same lines runs.
It reports interactive TTFT P99 and ITL P99 alone and with the job (the rise, in %), and the
job's tokens per second with interactive load as a share of its idle rate. Issue 21's bar: the
P99s rise by at most 10% while the job uses at least 50% of the idle capacity.

With --think-ms, each stream waits a random (exponential) think time of that mean between its
calls, so the interactive load leaves the server idle part of the time, as real users do. The
interactive phase's busy share (the rate of strata_engine_busy_seconds_total: time in steps
that ran a batch) is reported beside the table.

  .venv/bin/python bench/batch_fill.py                    # ~4 minutes on 2 cores
  .venv/bin/python bench/batch_fill.py --phase-s 90 --markdown out.md
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))


class Target:
    """What the phases need of a running strata-server, so that bench/gpu/server_check.py can
    run them on the device (stdlib, grpcio and the bundle's stubs only) as this script does
    through tests/integration/strata_server.py: the generation stubs `pb`, `stream(request)`
    (GenerateStream's messages), `metric(name)` (a sample of /metrics, 0 when absent), the
    HTTP port, and the job lines' endpoint (`chat`: /v1/chat/completions, which needs a chat
    template; else /v1/completions)."""

    def __init__(self, pb, stream, metric, http_port: int, chat: bool = True):
        self.pb, self.stream, self.metric = pb, stream, metric
        self.http_port, self.chat = http_port, chat

PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator moves heat from inside to outside, step by step.",
    "List five ways to make a small apartment feel larger, with a sentence on each.",
    "Summarize the rules of chess for someone who has never played a board game.",
]


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def interactive(server: Target, args, seconds: float) -> dict:
    ttft, itl = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def client(k: int):
        i = k
        rng = random.Random(k)
        while not stop.is_set():
            if args.think_ms > 0 and stop.wait(rng.expovariate(1000.0 / args.think_ms)):
                break
            pb = server.pb
            request = pb.GenerateRequest(
                prompt=PROMPTS[i % len(PROMPTS)],
                sampling=pb.SamplingParams(max_tokens=args.max_tokens, temperature=0.0,
                                           ignore_eos=True))
            i += 1
            start = last = time.monotonic()
            first, gaps = None, []
            for message in server.stream(request):
                now = time.monotonic()
                n = len(message.token_ids)
                if n == 0:
                    continue
                if first is None:
                    first = now - start
                else:
                    gaps += [(now - last) / n] * n
                last = now
            with lock:
                if first is not None:
                    ttft.append(first)
                itl.extend(gaps)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.streams)]
    busy_before, start = server.metric("strata_engine_busy_seconds_total"), time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    busy = (server.metric("strata_engine_busy_seconds_total") - busy_before) / (
        time.monotonic() - start)
    return {"ttft_p99": p99(ttft), "itl_p99": p99(itl), "calls": len(ttft),
            "busy": min(max(busy, 0.0), 1.0)}


def post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def start_job(server: Target, args, tag: str) -> str:
    base = f"http://127.0.0.1:{server.http_port}/v1"
    endpoint = "/v1/chat/completions" if server.chat else "/v1/completions"
    with urllib.request.urlopen(f"{base}/models", timeout=30) as r:
        model = json.loads(r.read())["data"][0]["id"]  # a line naming another model fails

    def body(i: int) -> dict:
        # The tag keeps one job's prompts from being the other's (prefix-cache hits).
        text = f"{PROMPTS[i % len(PROMPTS)]} ({tag} {i})"
        b = {"model": model, "max_tokens": args.batch_max_tokens, "temperature": 0}
        if server.chat:
            b["messages"] = [{"role": "user", "content": text}]
        else:
            b["prompt"] = text
        return b

    lines = "".join(json.dumps({"custom_id": f"{tag}-{i}", "method": "POST", "url": endpoint,
                                "body": body(i)}) + "\n" for i in range(args.lines)).encode()
    boundary = "strata-bench-boundary"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{tag}.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n").encode()
    form += lines + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"{base}/files", data=form,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=60) as r:
        file_id = json.loads(r.read())["id"]
    batch = post_json(f"{base}/batches", {"input_file_id": file_id, "endpoint": endpoint,
                                          "completion_window": "24h"})
    return batch["id"]


def batch_counts(server: Target, batch_id: str) -> dict:
    with urllib.request.urlopen(
            f"http://127.0.0.1:{server.http_port}/v1/batches/{batch_id}", timeout=30) as r:
        return json.loads(r.read())


def job_rate(server: Target, batch_id: str, seconds: float) -> float:
    """The job's generated tokens per second over `seconds` (lines done x tokens per line)."""
    before = batch_counts(server, batch_id)["request_counts"]["completed"]
    time.sleep(seconds)
    after = batch_counts(server, batch_id)["request_counts"]["completed"]
    return after - before


def measure(server: Target, args) -> dict:
    """The three phases on a serving `server` started with --jobs-db (args: streams, max_tokens,
    lines, batch_max_tokens, phase_s, warmup_s, think_ms): {"alone", "both"} (interactive()'s
    dicts), "idle_lines" (job lines done in a phase alone), "lines" (the same beside the
    interactive load), "share" (lines / idle_lines), "ttft_rise" and "itl_rise" (both / alone
    - 1)."""
    interactive(server, args, args.warmup_s)
    alone = interactive(server, args, args.phase_s)
    idle_job = start_job(server, args, "idle")
    time.sleep(args.warmup_s)
    idle_lines = job_rate(server, idle_job, args.phase_s)
    urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{server.http_port}/v1/batches/{idle_job}/cancel", data=b"",
        method="POST"), timeout=30).read()
    busy_job = start_job(server, args, "busy")
    rate = {}
    watcher = threading.Thread(
        target=lambda: rate.update(lines=job_rate(server, busy_job, args.phase_s)))
    watcher.start()
    both = interactive(server, args, args.phase_s)
    watcher.join()

    def rise(key):
        return both[key] / alone[key] - 1 if alone[key] > 0 else float("nan")
    return {"alone": alone, "both": both, "idle_lines": idle_lines, "lines": rate["lines"],
            "share": rate["lines"] / idle_lines if idle_lines else float("nan"),
            "ttft_rise": rise("ttft_p99"), "itl_rise": rise("itl_p99")}


def main() -> int:
    from bench_env import add_server_arguments
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_server_arguments(p)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--batch-max-tokens", type=int, default=16)
    p.add_argument("--phase-s", type=float, default=60)
    p.add_argument("--warmup-s", type=float, default=10)
    p.add_argument("--think-ms", type=float, default=0,
                   help="mean think time between a stream's calls (0: closed loop)")
    p.add_argument("--server-flags", default="", help="more strata-server flags, space-separated")
    args = p.parse_args()
    from bench_env import cpu_model, publish, resolve, strata_commit, use_build
    use_build(args)
    from strata_server import Server, pb
    db = Path(tempfile.mkdtemp(prefix="batch-fill-")) / "jobs.db"
    server = Server("--jobs-db", str(db), *args.server_flags.split(), threads=args.threads,
                    model=resolve(args.model))
    try:
        server.wait_serving()
        m = measure(Target(pb, lambda r: server.stub.GenerateStream(r, timeout=600),
                           server.metric, server.http_port), args)
    finally:
        assert server.stop() == 0, server.log()
    alone, both = m["alone"], m["both"]
    load = ("closed loop" if args.think_ms <= 0 else
            f"each waiting {args.think_ms:.0f} ms (mean, exponential) between calls")
    report = "\n".join([
        f"Batch fill: {args.streams} interactive gRPC streams ({args.max_tokens} greedy tokens "
        f"each, {load}) for {args.phase_s:.0f} s, alone and beside a {args.lines}-line chat job "
        f"({args.batch_max_tokens} tokens a line). CPU: {cpu_model()}, {args.threads} threads; "
        f"Strata {strata_commit()}; flags: --jobs-db {args.server_flags}.",
        "",
        "| phase | interactive calls | TTFT P99, ms | ITL P99, ms | job lines in the phase |",
        "| --- | --- | --- | --- | --- |",
        f"| interactive alone | {alone['calls']} | {alone['ttft_p99'] * 1000:.0f} | "
        f"{alone['itl_p99'] * 1000:.0f} | - |",
        f"| job alone | - | - | - | {m['idle_lines']} |",
        f"| both | {both['calls']} | {both['ttft_p99'] * 1000:.0f} "
        f"({m['ttft_rise'] * 100:+.0f}%) | {both['itl_p99'] * 1000:.0f} "
        f"({m['itl_rise'] * 100:+.0f}%) | {m['lines']} ({m['share'] * 100:.0f}% of idle) |",
        "",
        f"Interactive load alone kept the engine stepping {alone['busy'] * 100:.0f}% of the "
        f"time (strata_engine_busy_seconds_total); the idle capacity it leaves is then in the "
        f"batch rows its steps do not fill, not in idle time.",
    ]) + "\n"
    publish(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
