#!/usr/bin/env python3
"""Bounded, loopback-only soak and chaos run against one real strata-server.

What it does and checks:

1. Starts one strata-server (tests/integration/strata_server.py) and waits until it serves.
2. Measures capacity (closed-loop short greedy Generate calls at concurrency 8), then offers
   open-loop traffic at --load-factor x that rate for --phases phases: a seeded mix of unary
   and streaming calls, cancelled streams, short deadlines, client processes killed mid-stream
   (SIGKILL), unparsable messages, oversize prompts, bursts past the queue limit, garbage bytes
   on the gRPC, HTTP and metrics ports, slow readers and slow (trickling) HTTP senders.
3. Every call has a timeout and its outcome is recorded; asserted: no call is lost or hangs
   past its timeout, and each kind ends only with the codes expected of it (never INTERNAL,
   never UNAVAILABLE while the server is up).
4. A monitor scrapes /metrics once a second (every scrape < 100 ms) and samples the server's
   RSS and open fds.
5. After each phase the server must drain to idle: strata_requests_running == 0 and every KV
   block free.
6. At the end: the server is still alive and exits 0 on SIGTERM; RSS grows <= 5% between the
   first and the last window of traffic; open fds stay flat (last mean <= first mean + 8).

Writes report.md and report.json under --out; exits 0 only when every assertion holds.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from strata_server import Server, greedy, idle_kv, pb  # noqa: E402

GENERATE = "/strata.v1.Generation/Generate"
GENERATE_STREAM = "/strata.v1.Generation/GenerateStream"
MODEL_NAME = "gemma-3-270m-q4_k_m"
CALL_TIMEOUT_S = 120.0       # every ordinary call's deadline
HANG_SLACK_S = 10.0          # how far past its timeout a call may end before it counts as hung
MAX_IN_FLIGHT = 48           # client-side bound on concurrent calls (excess arrivals are shed)
METRICS_LIMIT_S = 0.100
PROMPTS = ["Hello", "The capital of France is", "Count to ten:", "Write a haiku about rain",
           "Once upon a time", "List three colours:"]

C = grpc.StatusCode
# The outcomes each kind of call may end with.
EXPECTED = {
    "unary": {"OK", "RESOURCE_EXHAUSTED"},
    "stream": {"OK", "RESOURCE_EXHAUSTED"},
    "stream_cancel": {"CANCELLED", "OK", "RESOURCE_EXHAUSTED"},
    "deadline": {"DEADLINE_EXCEEDED", "OK", "RESOURCE_EXHAUSTED"},
    "killed_client": {"KILLED", "RESOURCE_EXHAUSTED"},
    "invalid": {"INVALID_ARGUMENT"},
    "oversize": {"RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"},
    "burst": {"OK", "RESOURCE_EXHAUSTED"},
    "garbage": {"SENT"},
    "slow_reader": {"OK", "RESOURCE_EXHAUSTED"},
    "slow_sender": {"HTTP_200", "HTTP_429"},
}
WEIGHTS = {"unary": 20, "stream": 15, "stream_cancel": 8, "deadline": 6, "killed_client": 3,
           "invalid": 6, "oversize": 2, "burst": 1, "garbage": 6, "slow_reader": 4,
           "slow_sender": 3}
KILLED_CHILD = r"""
import sys, grpc
ch = grpc.insecure_channel(sys.argv[1])
call = ch.unary_stream("/strata.v1.Generation/GenerateStream",
                       request_serializer=lambda b: b, response_deserializer=lambda b: b)
it = call(bytes.fromhex(sys.argv[2]), timeout=120)
try:
    next(it)
except grpc.RpcError as e:  # refused before its first token (a full queue)
    print("code", e.code().name, flush=True)
    sys.exit(0)
print("started", flush=True)
for _ in it:
    pass
"""


# ---------------------------------------------------------------- accounting

class Ledger:
    """Every call: kind, outcome, seconds taken, its timeout."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = Counter()
        self.records = []

    def start(self, kind):
        with self.lock:
            self.started[kind] += 1

    def end(self, kind, outcome, seconds, timeout):
        with self.lock:
            self.records.append((kind, outcome, seconds, timeout))


def code_name(err):
    return err.code().name if isinstance(err, grpc.RpcError) and err.code() else "UNKNOWN_ERROR"


def timed(ledger, kind, timeout, fn):
    """Runs fn() -> outcome name, recording it (an exception's gRPC code otherwise)."""
    ledger.start(kind)
    start = time.monotonic()
    try:
        outcome = fn()
    except grpc.RpcError as e:
        outcome = code_name(e)
    except Exception as e:  # a harness-side failure is an outcome too, never a lost call
        outcome = f"EXC_{type(e).__name__}"
    ledger.end(kind, outcome, time.monotonic() - start, timeout)


# ---------------------------------------------------------------- call kinds

def request(rng, max_tokens):
    return pb.GenerateRequest(prompt=rng.choice(PROMPTS), sampling=greedy(max_tokens))


def do_unary(server, rng):
    server.stub.Generate(request(rng, rng.randint(4, 24)), timeout=CALL_TIMEOUT_S)
    return "OK"


def do_stream(server, rng):
    for _ in server.stub.GenerateStream(request(rng, rng.randint(4, 24)), timeout=CALL_TIMEOUT_S):
        pass
    return "OK"


def do_stream_cancel(server, rng):
    call = server.stub.GenerateStream(request(rng, 200), timeout=CALL_TIMEOUT_S)
    stop_after = rng.randint(1, 4)
    for i, _ in enumerate(call):
        if i + 1 >= stop_after:
            call.cancel()
    return "OK"  # it ended before the cancel


def do_deadline(server, rng):
    server.stub.Generate(request(rng, 400), timeout=rng.uniform(0.2, 1.0))
    return "OK"


def do_killed_client(server, rng):
    payload = request(rng, 400).SerializeToString().hex()
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, f"127.0.0.1:{server.grpc_port}",
                              payload], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = [b""]

    def read_line():
        line[0] = child.stdout.readline()
    reader = threading.Thread(target=read_line, daemon=True)
    reader.start()
    reader.join(timeout=60)
    time.sleep(0.3)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    if line[0].startswith(b"started"):
        return "KILLED"
    if line[0].startswith(b"code "):
        return line[0].split()[1].decode()
    return "CHILD_NEVER_STREAMED"


def do_invalid(server, rng):
    raw = server.channel.unary_unary(GENERATE, request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
    raw(b"\x0a\x02\xff\xfe", timeout=30)
    return "OK"


def do_oversize(server, rng):
    server.stub.Generate(pb.GenerateRequest(prompt="x" * (5 << 20), sampling=greedy(2)),
                         timeout=60)
    return "OK"


def do_burst(server, rng, ledger, size=60):
    """size calls at once; each is its own ledger entry."""
    futures = []
    for _ in range(size):
        ledger.start("burst")
        futures.append((time.monotonic(), server.stub.Generate.future(
            request(rng, 8), timeout=CALL_TIMEOUT_S)))
    for t0, f in futures:
        try:
            f.result(timeout=CALL_TIMEOUT_S + HANG_SLACK_S)
            outcome = "OK"
        except grpc.RpcError as e:
            outcome = code_name(e)
        except Exception as e:
            outcome = f"EXC_{type(e).__name__}"
        ledger.end("burst", outcome, time.monotonic() - t0, CALL_TIMEOUT_S)


def do_garbage(server, rng):
    port = rng.choice([server.grpc_port, server.http_port, server.metrics_port])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(rng.randbytes(rng.randint(1, 4096)))
            time.sleep(rng.uniform(0, 0.2))
        except (ConnectionResetError, BrokenPipeError):
            pass  # the server may hang up on garbage at once
    return "SENT"


def do_slow_reader(server, rng):
    for _ in server.stub.GenerateStream(request(rng, 16), timeout=CALL_TIMEOUT_S):
        time.sleep(0.2)
    return "OK"


def do_slow_sender(server, rng):
    body = json.dumps({"model": MODEL_NAME, "prompt": rng.choice(PROMPTS), "max_tokens": 8,
                       "temperature": 0}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=CALL_TIMEOUT_S) as s:
        s.sendall(head)
        gap = 2.0 / len(body)
        for b in body:
            s.sendall(bytes([b]))
            time.sleep(gap)
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
    return f"HTTP_{m.group(1).decode()}" if m else "HTTP_NO_STATUS"


KINDS = {"unary": do_unary, "stream": do_stream, "stream_cancel": do_stream_cancel,
         "deadline": do_deadline, "killed_client": do_killed_client, "invalid": do_invalid,
         "oversize": do_oversize, "garbage": do_garbage, "slow_reader": do_slow_reader,
         "slow_sender": do_slow_sender}
TIMEOUTS = {"killed_client": 75.0, "invalid": 30.0, "oversize": 60.0, "garbage": 10.0,
            "deadline": 1.0}


# ---------------------------------------------------------------- monitor

class Monitor(threading.Thread):
    """Once a second: time a /metrics GET, sample the server's RSS (kB) and open fds, and read
    the C heap's allocated and free kB from the scrape (to tell a leak from fragmentation)."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server
        # (t, scrape seconds or None, rss kB, fds, heap allocated kB, heap free kB)
        self.samples = []
        self.stop_event = threading.Event()

    def run(self):
        url = f"http://127.0.0.1:{self.server.metrics_port}/metrics"
        pid = self.server.proc.pid
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            heap = (None, None)
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    text = r.read().decode(errors="replace")
                scrape = time.monotonic() - t0
                heap = (sample_kb(text, "strata_heap_allocated_bytes"),
                        sample_kb(text, "strata_heap_free_bytes"))
            except Exception:
                scrape = None
            self.samples.append((time.monotonic(), scrape, rss_kb(pid), fd_count(pid), *heap))
            self.stop_event.wait(max(0.0, 1.0 - (time.monotonic() - t0)))


def sample_kb(text, name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) / 1024 if m else None


def rss_kb(pid):
    try:
        m = re.search(r"^VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


# ---------------------------------------------------------------- phases

def warm_up(server, seed=7, per_request=1800):
    """Brings the server to its steady memory footprint before traffic, so that the RSS check
    measures leaks rather than first use: the KV pool's memory is committed lazily, on each
    block's first use (distinct random-token prompts that together need about the whole pool
    touch every block), and the engine's per-batch buffers grow to the largest batch seen (a
    burst of 60 short calls)."""
    info = server.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    tokens = int(server.metric("strata_kv_cache_blocks")) * 16  # --kv-block-size 16
    rng = random.Random(seed)
    futures = [server.stub.Generate.future(pb.GenerateRequest(
        token_ids=pb.TokenIds(ids=[rng.randrange(1000, info.vocab_size)
                                   for _ in range(per_request)]),
        sampling=greedy(8)), timeout=300) for _ in range(max(1, tokens // (per_request + 8)))]
    for f in futures:
        f.result()
    do_burst(server, rng, Ledger())


def wait_for_calls(slots):
    """Returns once every call in flight has ended (each holds a slot; each is bounded)."""
    for _ in range(MAX_IN_FLIGHT):
        slots.acquire()
    for _ in range(MAX_IN_FLIGHT):
        slots.release()


def measure_capacity(server, seconds=8.0, concurrency=8):
    """Completed short greedy requests per second, closed loop."""
    done = Counter()
    end = time.monotonic() + seconds

    def worker(i):
        rng = random.Random(i)
        while time.monotonic() < end:
            try:
                server.stub.Generate(request(rng, 16), timeout=60)
                done["ok"] += 1
            except grpc.RpcError:
                done["err"] += 1
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done["ok"] / (time.monotonic() - start)


def run_phase(server, ledger, rng, rate, seconds, pool, slots, shed):
    """Open-loop arrivals (Poisson at `rate`/s) of a weighted random mix of call kinds."""
    names, weights = zip(*WEIGHTS.items())
    end = time.monotonic() + seconds
    next_at = time.monotonic()
    while next_at < end:
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at += rng.expovariate(rate)
        kind = rng.choices(names, weights)[0]
        if not slots.acquire(blocking=False):
            shed[kind] += 1
            continue
        call_rng = random.Random(rng.getrandbits(32))
        pool.submit(run_one, server, ledger, kind, call_rng, slots)


def run_one(server, ledger, kind, rng, slots):
    try:
        if kind == "burst":
            do_burst(server, rng, ledger)
        else:
            timed(ledger, kind, TIMEOUTS.get(kind, CALL_TIMEOUT_S),
                  lambda: KINDS[kind](server, rng))
    finally:
        slots.release()


def wait_idle(server, timeout=60.0):
    """Whether running == 0 and every KV block is free within timeout; and the last values."""
    deadline = time.monotonic() + timeout
    start = time.monotonic()
    while True:
        running = server.metric("strata_requests_running")
        kv_idle = idle_kv(server)
        if running == 0 and kv_idle:
            return True, time.monotonic() - start, running
        if time.monotonic() > deadline:
            return False, time.monotonic() - start, running
        time.sleep(0.25)


# ---------------------------------------------------------------- report

def window_means(samples, t0, t1, index):
    """Means of sample column `index` over the first and last window of [t0, t1]."""
    span = t1 - t0
    width = 60.0 if span >= 180 else span / 3
    first = [s[index] for s in samples if t0 <= s[0] <= t0 + width and s[index] is not None]
    last = [s[index] for s in samples if t1 - width <= s[0] <= t1 and s[index] is not None]
    return (statistics.mean(first) if first else None,
            statistics.mean(last) if last else None, width)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def build_report(args, ctx, ledger, monitor, checks):
    counts = defaultdict(Counter)
    for kind, outcome, _, _ in ledger.records:
        counts[kind][outcome] += 1
    scrapes = [s[1] for s in monitor.samples if s[1] is not None]
    return {
        "duration_s": args.duration_s, "phases": args.phases, "load_factor": args.load_factor,
        "seed": args.seed, "capacity_rps": ctx["capacity"], "offered_rps": ctx["rate"],
        "calls_started": sum(ledger.started.values()), "calls_ended": len(ledger.records),
        "shed_by_client": dict(ctx["shed"]),
        "counts": {k: dict(v) for k, v in sorted(counts.items())},
        "metrics_scrapes": len(scrapes),
        "metrics_failed_scrapes": sum(1 for s in monitor.samples if s[1] is None),
        "metrics_latency_max_ms": max(scrapes) * 1000 if scrapes else None,
        "metrics_latency_p99_ms": percentile(scrapes, 0.99) * 1000 if scrapes else None,
        "rss_first_kb": ctx["rss"][0], "rss_last_kb": ctx["rss"][1],
        "rss_growth_pct": ctx["rss_growth"], "rss_window_s": ctx["rss"][2],
        "fds_first": ctx["fds"][0], "fds_last": ctx["fds"][1],
        "heap_allocated_first_kb": ctx["heap_allocated"][0],
        "heap_allocated_last_kb": ctx["heap_allocated"][1],
        "heap_free_first_kb": ctx["heap_free"][0], "heap_free_last_kb": ctx["heap_free"][1],
        "idle_checks": ctx["idle"], "server_exit_code": ctx.get("exit_code"),
        "checks": checks, "passed": all(c["pass"] for c in checks),
        "samples": [{"t": round(t - ctx["t0"], 2), "scrape_ms": None if sc is None else
                     round(sc * 1000, 2), "rss_kb": rss, "fds": fds, "heap_allocated_kb":
                     heap, "heap_free_kb": free}
                    for t, sc, rss, fds, heap, free in monitor.samples],
    }


def markdown(rep):
    def f(x, fmt="{:.1f}"):
        return "n/a" if x is None else fmt.format(x)
    lines = [f"# Strata soak report: {'PASS' if rep['passed'] else 'FAIL'}", "",
             f"- traffic: {rep['duration_s']} s in {rep['phases']} phases, seed {rep['seed']}",
             f"- capacity: {rep['capacity_rps']:.2f} req/s; offered: {rep['offered_rps']:.2f} "
             f"arrivals/s (x{rep['load_factor']})",
             f"- calls: {rep['calls_started']} started, {rep['calls_ended']} ended; shed by the "
             f"client's in-flight bound: {rep['shed_by_client'] or 'none'}",
             f"- /metrics: {rep['metrics_scrapes']} scrapes ({rep['metrics_failed_scrapes']} "
             f"failed), max {f(rep['metrics_latency_max_ms'])} ms, "
             f"p99 {f(rep['metrics_latency_p99_ms'])} ms",
             f"- RSS: first {f(rep['rss_first_kb'], '{:.0f}')} kB, last "
             f"{f(rep['rss_last_kb'], '{:.0f}')} kB, growth {f(rep['rss_growth_pct'], '{:.2f}')}% "
             f"(windows of {rep['rss_window_s']:.0f} s)",
             f"- C heap (not asserted): allocated first "
             f"{f(rep['heap_allocated_first_kb'], '{:.0f}')} kB, last "
             f"{f(rep['heap_allocated_last_kb'], '{:.0f}')} kB; free in the arenas first "
             f"{f(rep['heap_free_first_kb'], '{:.0f}')} kB, last "
             f"{f(rep['heap_free_last_kb'], '{:.0f}')} kB",
             f"- open fds: first {f(rep['fds_first'])}, last {f(rep['fds_last'])}",
             f"- server exit code on SIGTERM: {rep['server_exit_code']}", "",
             "## Calls by kind and outcome", "", "| kind | outcomes |", "| --- | --- |"]
    for kind, outcomes in rep["counts"].items():
        lines.append(f"| {kind} | " + ", ".join(f"{o}: {n}" for o, n in sorted(outcomes.items()))
                     + " |")
    lines += ["", "## Idle after each phase", "", "| phase | idle | seconds |", "| --- | --- | --- |"]
    for p in rep["idle_checks"]:
        lines.append(f"| {p['phase']} | {p['idle']} | {p['seconds']:.1f} |")
    lines += ["", "## Assertions", "", "| assertion | result | detail |", "| --- | --- | --- |"]
    for c in rep["checks"]:
        lines.append(f"| {c['name']} | {'PASS' if c['pass'] else 'FAIL'} | {c['detail']} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- checks

def call_checks(ledger):
    checks = []
    lost = sum(ledger.started.values()) - len(ledger.records)
    checks.append(check("no call lost", lost == 0, f"{lost} started without an outcome"))
    hung = [r for r in ledger.records if r[2] > r[3] + HANG_SLACK_S]
    checks.append(check("every call ended within its timeout", not hung,
                        f"{len(hung)} over; worst {max((r[2] for r in hung), default=0):.1f} s"))
    bad = Counter((k, o) for k, o, _, _ in ledger.records if o not in EXPECTED[k])
    checks.append(check("only expected outcomes per kind", not bad,
                        ", ".join(f"{k}:{o}x{n}" for (k, o), n in bad.items()) or "all expected"))
    for code in ("INTERNAL", "UNAVAILABLE"):
        n = sum(1 for r in ledger.records if r[1] == code)
        checks.append(check(f"no {code}", n == 0, f"{n} calls"))
    return checks


def check(name, ok, detail):
    return {"name": name, "pass": bool(ok), "detail": detail}


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=120)
    ap.add_argument("--phases", type=int, default=2)
    ap.add_argument("--load-factor", type=float, default=1.5)
    ap.add_argument("--out", type=Path, default=Path("soak-out"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup-s", type=float, default=20,
                    help="seconds of the traffic mix before the measured phases (its calls are "
                         "checked like the rest; the RSS and fd windows start after it)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    server = Server("--max-queued-requests", "32", "--max-model-len", "2048",
                    threads=args.threads)
    server.wait_serving()
    print(f"server pid {server.proc.pid}, log {server.log_path}", flush=True)
    monitor = Monitor(server)
    monitor.start()
    ledger, rng, shed = Ledger(), random.Random(args.seed), Counter()
    ctx = {"shed": shed, "idle": [], "t0": time.monotonic()}
    checks = []
    try:
        warm_up(server)
        print(f"warmed up, server RSS {rss_kb(server.proc.pid)} kB", flush=True)
        ctx["capacity"] = measure_capacity(server)
        ctx["rate"] = max(0.5, args.load_factor * ctx["capacity"])
        print(f"capacity {ctx['capacity']:.2f} req/s, offering {ctx['rate']:.2f}/s", flush=True)
        slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        with ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT) as pool:
            if args.warmup_s > 0:
                # The mix itself once before the windows: gRPC's buffers and the allocator's
                # arenas and thresholds reach their working set (large messages, many threads).
                run_phase(server, ledger, rng, ctx["rate"], args.warmup_s, pool, slots, shed)
                wait_for_calls(slots)
                print(f"traffic warm-up done, server RSS {rss_kb(server.proc.pid)} kB", flush=True)
            traffic_start = time.monotonic()
            for phase in range(1, args.phases + 1):
                run_phase(server, ledger, rng, ctx["rate"], args.duration_s / args.phases,
                          pool, slots, shed)
                traffic_end = time.monotonic()
                wait_for_calls(slots)  # the phase's calls end before the idle check
                idle, secs, running = wait_idle(server)
                ctx["idle"].append({"phase": phase, "idle": idle, "seconds": secs,
                                    "running": running})
                print(f"phase {phase}: idle={idle} after {secs:.1f} s", flush=True)
        alive = server.proc.poll() is None
    finally:
        monitor.stop_event.set()
        monitor.join(timeout=10)
        ctx["exit_code"] = server.stop()

    samples = [s for s in monitor.samples if traffic_start <= s[0] <= traffic_end]
    ctx["rss"] = window_means(samples, traffic_start, traffic_end, 2)
    ctx["fds"] = window_means(samples, traffic_start, traffic_end, 3)
    ctx["heap_allocated"] = window_means(samples, traffic_start, traffic_end, 4)
    ctx["heap_free"] = window_means(samples, traffic_start, traffic_end, 5)
    first, last = ctx["rss"][0], ctx["rss"][1]
    ctx["rss_growth"] = (last - first) * 100 / first if first and last else None

    checks += call_checks(ledger)
    scrapes = [s[1] for s in monitor.samples]
    slow = [s for s in scrapes if s is None or s >= METRICS_LIMIT_S]
    checks.append(check("every /metrics scrape < 100 ms", scrapes and not slow,
                        f"{len(slow)} of {len(scrapes)} slow or failed"))
    for p in ctx["idle"]:
        checks.append(check(f"idle after phase {p['phase']}", p["idle"],
                            f"running={p['running']:.0f} after {p['seconds']:.1f} s"))
    checks.append(check("server alive after traffic", alive, "no crash" if alive else "died"))
    checks.append(check("exit 0 on SIGTERM", ctx["exit_code"] == 0, f"rc={ctx['exit_code']}"))
    growth = ctx["rss_growth"]
    checks.append(check("RSS growth <= 5%", growth is not None and growth <= 5.0,
                        f"{growth:.2f}%" if growth is not None else "no samples"))
    fd0, fd1 = ctx["fds"][0], ctx["fds"][1]
    checks.append(check("open fds flat", fd0 is not None and fd1 is not None and fd1 <= fd0 + 8,
                        f"{fd0} -> {fd1}"))

    rep = build_report(args, ctx, ledger, monitor, checks)
    (args.out / "report.json").write_text(json.dumps(rep, indent=2))
    text = markdown(rep)
    (args.out / "report.md").write_text(text)
    print(text)
    if not rep["passed"]:
        print(f"server log: {server.log_path}")
    return 0 if rep["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
