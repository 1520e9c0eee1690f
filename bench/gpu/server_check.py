#!/usr/bin/env python3
"""The real strata-server on a GPU, driven over gRPC the way a client would drive it.

    server_check.py --bin DIR --model MODEL.gguf --label NAME --out RESULTS.json
                    [--backend cuda] [--reference-backend cpu] [--prompts 8] [--max-tokens 16]
                    [--streams 64] [--bench-concurrency 1,16,64] [--bench-requests N]
                    [--features [--draft-model DRAFT.gguf]] [--batch-fill-s S]

Steps, each recorded (ok / FAILED with the reason) and none stopping the ones after it:
  1. start `strata-server --backend BACKEND` from DIR in a clean environment (only PATH and
     LD_LIBRARY_PATH pass) on loopback ports, and wait for GetModelInfo to answer;
  2. greedy completions of --prompts fixed prompts (random token ids, so no tokenizer is
     involved; or, with --text-prompts, short English prompts for a real model), each token
     with its top-2 log-probabilities;
  3. --streams concurrent GenerateStream calls, each must end with a finish reason;
  4. the KV blocks back to idle: strata_kv_cache_free_blocks == strata_kv_cache_blocks on
     /metrics once the streams are done (prefix-cached blocks count as free);
  5. strata-bench (DIR/strata-bench) at each --bench-concurrency: TTFT/ITL P50/P99, tokens/s;
  6. the same greedy prompts on a second server with --reference-backend (cpu), and the tokens
     compared prompt by prompt; where they first differ, both sides' top-2 log-probabilities
     show whether it is a near-tie. With --random-weights a difference is reported but does
     not fail the step (random-weight models are full of near-ties).
With --features, also (issues 22 and 18):
  7. structured output on BACKEND (the token masks go to the device as a bitmask where the
     backend samples): a choice list, a regular expression and a JSON Schema, each on every
     prompt greedy and at temperature 1 with a seed; every output that ends with STOP must be
     in its format (checked here, without the server's grammar code); the greedy ones are
     compared with the reference backend's in step 6;
  8. speculative decoding on BACKEND: a server with `--speculative ngram`, then one with
     `--speculative draft` (--draft-model, default the model itself; 4 draft tokens every step,
     not adaptive, so that the mechanics run whatever the acceptance), each giving the plain
     server's greedy tokens (required for a real model, reported for random weights), with the
     proposed / accepted tokens from /metrics and strata-bench at one stream beside the plain
     server's. Acceptance means nothing on random weights: this checks mechanics and overhead.
With --batch-fill-s S, only (issue 21):
  9. bench/batch_fill.py's phases of S seconds on a server of its own with --jobs-db: 16
     greedy gRPC streams alone, a 2,000-line job alone, both at once; ok when the interactive
     TTFT P99 and ITL P99 rise by 10% at most and the job keeps 50% of its rate alone.
One JSON object per line goes to --out; a table is printed last. Exit 0 when every step passed.

The stubs of proto/strata/v1 come from DIR/py (generated where grpc_tools exists, with the
pure-Python protobuf they were generated against); grpcio comes from the machine.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROWS = []
RESULTS = []


def record(step, ok, detail, **data):
    ROWS.append((step, "ok" if ok else "FAILED", detail))
    RESULTS.append({"step": step, "ok": bool(ok), "detail": detail, **data})
    print(f"-- {step}: {'ok' if ok else 'FAILED'}: {detail}", flush=True)


class Server:
    def __init__(self, bin_dir, model, backend, label, extra):
        self.dir = Path(tempfile.mkdtemp(prefix=f"strata-{label}-"))
        port_file = self.dir / "ports.json"
        self.log_path = self.dir / "server.log"
        env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", "")}
        self.proc = subprocess.Popen(
            [str(bin_dir / "strata-server"), "--model", str(model), "--backend", backend,
             "--host", "127.0.0.1", "--grpc-port", "0", "--metrics-port", "0", "--http-port", "0", "--port-file",
             str(port_file), *extra],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("strata-server did not bind its ports: " + self.log_tail())
            time.sleep(0.05)
        ports = json.loads(port_file.read_text())
        self.grpc_port = ports["grpc_port"]
        self.metrics_port = ports["metrics_port"]
        self.http_port = ports.get("http_port")

    def log_tail(self, n=6):
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            values = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    name, _, value = line.rpartition(" ")
                    values[name] = float(value)
            return values

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def load_stubs(py_dir):
    # The bundled protobuf is pure Python; the machine's own C extension (another version)
    # must not be picked up through the shared `google` namespace.
    os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    sys.path.insert(0, str(py_dir))
    import grpc  # noqa: E402  (the machine's)
    from strata.v1 import generation_pb2 as pb  # noqa: E402
    return grpc, pb


def connect(grpc, pb, server, timeout=300):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    # Plain method handles with the generated messages: no generated service stubs, so the
    # grpcio version on the machine does not have to match the one that generated them.
    ser = lambda m: m.SerializeToString()  # noqa: E731
    calls = {
        "info": channel.unary_unary("/strata.v1.Generation/GetModelInfo", ser,
                                    pb.ModelInfo.FromString),
        "generate": channel.unary_unary("/strata.v1.Generation/Generate", ser,
                                        pb.GenerateResponse.FromString),
        "stream": channel.unary_stream("/strata.v1.Generation/GenerateStream", ser,
                                       pb.GenerateStreamResponse.FromString),
    }
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError("strata-server exited: " + server.log_tail())
        try:
            return calls, calls["info"](pb.GetModelInfoRequest(), timeout=5)
        except grpc.RpcError as e:  # UNAVAILABLE while the model loads
            last = e
            time.sleep(0.2)
    raise RuntimeError(f"no GetModelInfo answer in {timeout} s: {last}; " + server.log_tail())


def prompts(vocab, n, seed=7):
    rng = random.Random(seed)
    # Ids away from the special tokens at the start of every vocabulary we serve.
    lo, hi = min(1000, vocab // 4), vocab - 1
    return [[rng.randint(lo, hi) for _ in range(8 + 5 * i)] for i in range(n)]


TEXT_PROMPTS = [
    "The capital of France is",
    "Water boils at a temperature of",
    "The three primary colors are",
    "Once upon a time, in a small village by the sea, there lived",
    "To make a cup of tea, first",
    "The largest planet in our solar system is",
    "def fibonacci(n):",
    "Photosynthesis is the process by which plants",
]


def request(pb, p, sampling, **fields):
    return (pb.GenerateRequest(prompt=p, sampling=sampling, **fields) if isinstance(p, str) else
            pb.GenerateRequest(token_ids=pb.TokenIds(ids=p), sampling=sampling, **fields))


def greedy(calls, pb, prompts_list, max_tokens, kinds=("plain", "logprobs", "penalties")):
    """Per prompt: the greedy tokens as served without log-probabilities, the tokens again with
    top-2 log-probabilities, those top-2 lists per token, and the tokens of a greedy request
    with repetition, frequency and presence penalties (a backend that samples on the device
    does all three there); only the `kinds` asked for (the others' lists stay empty)."""
    out, with_logprobs, tops, penalized = [], [], [], []
    for p in prompts_list:
        for kind in kinds:
            sampling = pb.SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True,
                                         logprobs=2 if kind == "logprobs" else 0)
            if kind == "penalties":
                sampling.repetition_penalty = 1.3
                sampling.frequency_penalty = 0.5
                sampling.presence_penalty = 0.3
            # No response cache: each call is computed (the cache key ignores the backend path).
            r = calls["generate"](request(pb, p, sampling, cache=pb.CacheOptions(use=False)),
                                  timeout=300)
            if kind == "plain":
                out.append(list(r.token_ids))
            elif kind == "penalties":
                penalized.append(list(r.token_ids))
            else:
                with_logprobs.append(list(r.token_ids))
                tops.append([[(t.token_id, round(t.logprob, 4)) for t in lp.top]
                             for lp in r.logprobs])
    return out, with_logprobs, tops, penalized


# Formats whose outputs a few lines of Python can check, each short enough that a random-weight
# model finishes it within the step's max_tokens: (name, OutputFormat fields, check(text)).
CHOICES = ["alpha", "beta", "gamma delta"]
REGEX = r"(yes|no)-[0-9]{1,3}"
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n"],
          "properties": {"ok": {"type": "boolean"},
                         "n": {"type": "integer", "minimum": 0, "maximum": 99}}}


def schema_ok(text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return (isinstance(v, dict) and set(v) == {"ok", "n"} and isinstance(v["ok"], bool)
            and type(v["n"]) is int and 0 <= v["n"] <= 99)


FORMATS = [
    ("choice", lambda pb: pb.OutputFormat(choice=pb.Choices(choices=CHOICES)),
     lambda t: t in CHOICES),
    ("regex", lambda pb: pb.OutputFormat(regex=REGEX), lambda t: re.fullmatch(REGEX, t) is not None),
    ("json_schema", lambda pb: pb.OutputFormat(json_schema=json.dumps(SCHEMA)), schema_ok),
]


def structured(calls, pb, prompts_list, max_tokens=48):
    """Every format on every prompt, greedy and at temperature 1 (seed = prompt index): rows of
    (format, kind, prompt index, token ids, text, finish reason, in its format)."""
    rows = []
    for name, make, check in FORMATS:
        for i, p in enumerate(prompts_list):
            for kind in ("greedy", "sampled"):
                sampling = pb.SamplingParams(max_tokens=max_tokens,
                                             temperature=0 if kind == "greedy" else 1.0, seed=i)
                r = calls["generate"](request(pb, p, sampling, output_format=make(pb),
                                              cache=pb.CacheOptions(use=False)), timeout=300)
                rows.append((name, kind, i, list(r.token_ids), r.text, r.finish_reason,
                             check(r.text)))
    return rows


def structured_summary(pb, rows):
    """(ok, detail): every output that ended with STOP is in its format, and some did."""
    stopped = [r for r in rows if r[5] == pb.FINISH_REASON_STOP]
    bad = [r for r in stopped if not r[6]]
    by_format = {}
    for name, _, _, _, _, finish, valid in rows:
        done, good, total = by_format.get(name, (0, 0, 0))
        by_format[name] = (done + (finish == pb.FINISH_REASON_STOP),
                           good + (finish == pb.FINISH_REASON_STOP and valid), total + 1)
    detail = "; ".join(f"{n}: {g}/{d} stopped outputs valid of {t}"
                       for n, (d, g, t) in by_format.items())
    if bad:
        detail += f"; first invalid: {bad[0][0]} {bad[0][1]} prompt {bad[0][2]}: {bad[0][4]!r}"
    return bool(stopped) and not bad, detail


def metric_sum(values, name):
    return sum(v for k, v in values.items() if k == name or k.startswith(name + "{"))


def speculative(args, grpc, pb, ids_list, plain, plain_c1):
    """Step 8: per proposer, a server on BACKEND with it; greedy tokens against the plain
    server's, the proposer's counters, strata-bench at one stream."""
    draft = args.draft_model or args.model
    modes = [("ngram", ["--speculative", "ngram"]),
             # Every step drafts (no adaptive policy, which would turn drafts off where they
             # miss, as on random weights): the draft model's mechanics and cost are measured.
             ("draft", ["--speculative", "draft", "--speculative-draft-model", str(draft),
                        "--speculative-adaptive", "false", "--speculative-tokens", "4"])]
    for mode, flags in modes:
        step = f"{args.label}: speculative {mode} on {args.backend}"
        server = None
        try:
            server = Server(args.bin, args.model, args.backend, f"{args.label}-{mode}",
                            args.server_flags.split() + flags)
            calls, info = connect(grpc, pb, server)
            got = greedy(calls, pb, ids_list, args.max_tokens, kinds=("plain",))[0]
            same = sum(1 for a, b in zip(got, plain) if a == b)
            m = server.metrics()
            proposed = metric_sum(m, "strata_speculative_proposed_tokens_total")
            accepted = metric_sum(m, "strata_speculative_accepted_tokens_total")
            verifications = metric_sum(m, "strata_speculative_verifications_total")
            proc, lines = bench(args.bin, server, 1, 4, args.bench_prompt_tokens,
                                args.bench_output_tokens, info.vocab_size, seed=3000)
            tps = lines[-1]["results"]["output_tokens_per_s"] if lines else None
            ratio = (f"{tps / plain_c1:.2f}x the plain server's {plain_c1:.1f}"
                     if tps and plain_c1 else "no plain c=1 figure")
            ok = (same == len(plain) or args.random_weights) and verifications > 0 and                 proc.returncode == 0
            record(step, ok,
                   f"greedy {same}/{len(plain)} prompts identical to the plain server"
                   + (" (informational: random weights)" if args.random_weights and
                      same != len(plain) else "")
                   + f"; {verifications:.0f} verifications, {accepted:.0f}/{proposed:.0f} "
                   f"draft tokens accepted; strata-bench c=1: "
                   + (f"{tps:.1f} output tok/s, {ratio}" if tps else
                      (proc.stderr or proc.stdout)[-120:]),
                   mode=mode, tokens=got, proposed=proposed, accepted=accepted,
                   bench=lines[-1] if lines else None)
        except Exception as e:  # noqa: BLE001
            record(step, False, str(e)[:300])
        finally:
            if server:
                server.stop()


def batch_fill(args, grpc, pb):
    """Step 9 (issue 21): bench/batch_fill.py's three phases on BACKEND, on a server of its own
    with --jobs-db: 16 greedy gRPC streams alone, a 2,000-line job alone, both at once. The bar:
    interactive TTFT P99 and ITL P99 up by at most 10%, the job at 50% or more of its rate
    alone."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
    import batch_fill as bf
    step = f"{args.label}: batch job beside 16 streams on {args.backend}"
    server = None
    try:
        db = Path(tempfile.mkdtemp(prefix="strata-jobs-")) / "jobs.db"
        server = Server(args.bin, args.model, args.backend, f"{args.label}-batch",
                        args.server_flags.split() + ["--jobs-db", str(db)])
        calls, info = connect(grpc, pb, server)
        target = bf.Target(pb, lambda r: calls["stream"](r, timeout=600),
                           lambda name: server.metrics().get(name, 0.0), server.http_port,
                           chat=bool(info.chat_template))
        phase = args.batch_fill_s
        opts = argparse.Namespace(streams=16, max_tokens=48, lines=2000, batch_max_tokens=16,
                                  phase_s=phase, warmup_s=min(10.0, phase / 2), think_ms=0)
        m = bf.measure(target, opts)
        alone, both = m["alone"], m["both"]
        ok = m["ttft_rise"] <= 0.10 and m["itl_rise"] <= 0.10 and m["share"] >= 0.5
        record(step, ok,
               f"{phase:.0f} s phases: TTFT P99 {alone['ttft_p99'] * 1e3:.0f} -> "
               f"{both['ttft_p99'] * 1e3:.0f} ms ({m['ttft_rise'] * 100:+.0f}%), ITL P99 "
               f"{alone['itl_p99'] * 1e3:.1f} -> {both['itl_p99'] * 1e3:.1f} ms "
               f"({m['itl_rise'] * 100:+.0f}%), interactive calls {alone['calls']} -> "
               f"{both['calls']}; job lines {m['idle_lines']} alone, {m['lines']} beside "
               f"({m['share'] * 100:.0f}%); engine busy {alone['busy'] * 100:.0f}% with the "
               f"streams alone (bar: P99s +10% at most, job >= 50%)",
               batch_fill={k: v for k, v in m.items()})
    except Exception as e:  # noqa: BLE001
        record(step, False, str(e)[:300])
    finally:
        if server:
            server.stop()


def logprob_gap(tops_a, tops_b):
    """The largest |a - b| between the top-1 log-probabilities of the same token, over the
    positions before each prompt's first difference."""
    worst = 0.0
    for a_list, b_list in zip(tops_a, tops_b):
        for a, b in zip(a_list, b_list):
            if not a or not b or a[0][0] != b[0][0]:
                break
            worst = max(worst, abs(a[0][1] - b[0][1]))
    return worst


def streams(calls, pb, vocab, n, max_tokens):
    ids_list = prompts(vocab, n, seed=11)
    results = [None] * n

    def one(i):
        req = pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids_list[i][:24]),
                                 sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0.8,
                                                            seed=i, ignore_eos=True))
        tokens, finish = 0, 0
        try:
            for msg in calls["stream"](req, timeout=300):
                tokens += len(msg.token_ids)
                finish = msg.finish_reason or finish
            results[i] = (tokens, finish, None)
        except Exception as e:  # noqa: BLE001  (recorded, not raised)
            results[i] = (tokens, finish, str(e)[:200])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.monotonic() - t0


def bench(bin_dir, server, concurrency, requests, prompt_tokens, output_tokens, vocab,
          transport="grpc", seed=0):
    """strata-bench over gRPC or the OpenAI HTTP API; `seed` picks the prompts (a run with its
    own seed is not served from another run's prefix-cache hits)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        json_path = f.name
    target = (["--target", "strata", "--addr", f"127.0.0.1:{server.grpc_port}"]
              if transport == "grpc" else
              ["--target", "openai", "--url", f"http://127.0.0.1:{server.http_port}"])
    cmd = [str(bin_dir / "strata-bench"), *target, "--concurrency", str(concurrency),
           "--num-requests", str(requests), "--prompt-tokens", str(prompt_tokens),
           "--output-tokens", str(output_tokens), "--seed", str(seed),
           "--token-ids", f"{min(1000, vocab // 4)}:{min(vocab - 1, 29999)}", "--json", json_path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [json.loads(l) for l in Path(json_path).read_text().splitlines() if l.strip()] \
        if Path(json_path).exists() else []
    return proc, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, type=Path)
    ap.add_argument("--py", type=Path, default=None)
    ap.add_argument("--model", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--reference-backend", default="cpu")
    ap.add_argument("--server-flags", default="")
    ap.add_argument("--reference-flags", default="")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--text-prompts", action="store_true")
    ap.add_argument("--random-weights", action="store_true",
                    help="a synthetic model: token comparisons are reported, not required")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--stream-tokens", type=int, default=32)
    ap.add_argument("--bench-concurrency", default="1,16,64")
    ap.add_argument("--transport-concurrency", default="16,64",
                    help="gRPC and HTTP runs side by side at these concurrencies")
    ap.add_argument("--bench-requests", type=int, default=0, help="0: 2 x concurrency, >= 8")
    ap.add_argument("--bench-prompt-tokens", type=int, default=128)
    ap.add_argument("--bench-output-tokens", type=int, default=64)
    ap.add_argument("--features", action="store_true",
                    help="also structured output and speculative decoding (steps 7 and 8)")
    ap.add_argument("--draft-model", default="",
                    help="--features: the draft of --speculative draft (default: the model)")
    ap.add_argument("--batch-fill-s", type=float, default=0,
                    help="> 0: only step 9, the batch job beside interactive streams, with "
                    "phases of this many seconds")
    args = ap.parse_args()
    grpc, pb = load_stubs(args.py or args.bin / "py")
    label = args.label
    if args.batch_fill_s > 0:
        batch_fill(args, grpc, pb)
        return report(args)

    server = None
    served = None
    shaped = None  # step 7's rows
    plain_c1 = None  # output tokens/s of strata-bench c=1 on the plain server
    try:
        t0 = time.monotonic()
        server = Server(args.bin, args.model, args.backend, label, args.server_flags.split())
        calls, info = connect(grpc, pb, server)
        record(f"{label}: start --backend {args.backend}", True,
               f"{info.backend}; {info.kv_cache_tokens} KV tokens; "
               f"{time.monotonic() - t0:.1f} s to serve",
               backend=info.backend, kv_cache_tokens=info.kv_cache_tokens)
        vocab = info.vocab_size
        ids_list = (TEXT_PROMPTS[:args.prompts] if args.text_prompts else
                    prompts(vocab, args.prompts))
        try:
            served, served_host, served_tops, served_pen = greedy(calls, pb, ids_list,
                                                                      args.max_tokens)
            record(f"{label}: greedy {args.backend}", True,
                   f"{len(served)} prompts x {args.max_tokens} tokens", tokens=served)
            same = sum(1 for a, b in zip(served, served_host) if a == b)
            # The second request of a prompt hits the prefix cache, so its prefill runs on a
            # different matmul path (fewer new tokens): random weights' near-ties may flip.
            record(f"{label}: greedy without == with logprobs",
                   same == len(served) or args.random_weights,
                   f"{same}/{len(served)} prompts identical (with top-2 logprobs a backend that "
                   f"samples on the device computes them there too)"
                   + (" (informational: random weights)" if args.random_weights and
                      same != len(served) else ""))
        except Exception as e:  # noqa: BLE001
            record(f"{label}: greedy {args.backend}", False, str(e)[:200])
        try:
            results, secs = streams(calls, pb, vocab, args.streams, args.stream_tokens)
            done = sum(1 for t, f, e in results if e is None and f != 0)
            total = sum(t for t, _, _ in results)
            errors = [e for _, _, e in results if e]
            record(f"{label}: {args.streams} concurrent streams", done == args.streams,
                   f"{done}/{args.streams} finished, {total} tokens in {secs:.2f} s"
                   + (f"; first error: {errors[0]}" if errors else ""))
        except Exception as e:  # noqa: BLE001
            record(f"{label}: {args.streams} concurrent streams", False, str(e)[:200])
        try:
            time.sleep(0.5)  # one engine step publishes the gauges
            m = server.metrics()
            free = m.get("strata_kv_cache_free_blocks")
            total = m.get("strata_kv_cache_blocks")
            record(f"{label}: KV blocks back to idle", free is not None and free == total,
                   f"free {free} of {total}")
        except Exception as e:  # noqa: BLE001
            record(f"{label}: KV blocks back to idle", False, str(e)[:200])
        for c in [int(x) for x in args.bench_concurrency.split(",") if x]:
            step = f"{label}: strata-bench c={c}"
            try:
                n = args.bench_requests or max(8, 2 * c)
                proc, lines = bench(args.bin, server, c, n, args.bench_prompt_tokens,
                                    args.bench_output_tokens, vocab)
                if proc.returncode != 0 or not lines:
                    record(step, False, (proc.stderr or proc.stdout)[-200:])
                    continue
                r = lines[-1]
                record(step, True, summarize(r), bench=r)
                if c == 1:
                    plain_c1 = r.get("results", {}).get("output_tokens_per_s")
            except Exception as e:  # noqa: BLE001
                record(step, False, str(e)[:200])
        for c in [int(x) for x in args.transport_concurrency.split(",") if x]:
            step = f"{label}: gRPC vs HTTP c={c}"
            try:
                n = args.bench_requests or max(8, 2 * c)
                tps = {}
                for transport, seed in (("grpc", 1000 + c), ("http", 2000 + c)):
                    proc, lines = bench(args.bin, server, c, n, args.bench_prompt_tokens,
                                        args.bench_output_tokens, vocab, transport, seed)
                    if proc.returncode != 0 or not lines:
                        raise RuntimeError(f"{transport}: " + (proc.stderr or proc.stdout)[-200:])
                    tps[transport] = lines[-1]
                g = tps["grpc"]["results"]["output_tokens_per_s"]
                h = tps["http"]["results"]["output_tokens_per_s"]
                record(step, h >= 0.95 * g,
                       f"gRPC: {summarize(tps['grpc'])}; HTTP: {summarize(tps['http'])}; "
                       f"HTTP/gRPC {h / g:.3f}", grpc=tps["grpc"], http=tps["http"])
            except Exception as e:  # noqa: BLE001
                record(step, False, str(e)[:200])
        if args.features:
            step = f"{label}: structured output on {args.backend}"
            try:
                shaped = structured(calls, pb, ids_list)
                ok, detail = structured_summary(pb, shaped)
                record(step, ok, detail, rows=[r[:6] for r in shaped])
            except Exception as e:  # noqa: BLE001
                record(step, False, str(e)[:300])
    except Exception as e:  # noqa: BLE001
        record(f"{label}: start --backend {args.backend}", False, str(e)[:300])
    finally:
        if server:
            server.stop()

    if args.features and served is not None:
        speculative(args, grpc, pb, ids_list, served, plain_c1)

    if args.reference_backend and served is not None:
        ref = None
        step = f"{label}: greedy {args.backend} == {args.reference_backend}"
        try:
            ref = Server(args.bin, args.model, args.reference_backend, label + "-ref",
                         args.reference_flags.split())
            calls, info = connect(grpc, pb, ref)
            expected, _, expected_tops, expected_pen = greedy(calls, pb, ids_list,
                                                              args.max_tokens)
            same = sum(1 for a, b in zip(served, expected) if a == b)
            first = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
                     for a, b in zip(served, expected)]
            # At each first difference: the top-2 of both sides (a near-tie has a small gap).
            gaps = []
            for k, pos in enumerate(first):
                if pos is None:
                    continue
                a, b = served_tops[k][pos], expected_tops[k][pos]
                gap_a = a[0][1] - a[1][1] if len(a) > 1 else None
                gaps.append(f"prompt {k} @{pos}: {args.backend} top2 {a} (gap {gap_a}), "
                            f"{args.reference_backend} top2 {b}")
            ok = same == len(expected) or args.random_weights
            record(step, ok,
                   f"{same}/{len(expected)} prompts identical; first differing position per "
                   f"prompt: {first}" + ("; " + "; ".join(gaps) if gaps else "")
                   + (" (informational: random weights)" if args.random_weights and
                      same != len(expected) else ""),
                   reference_backend=info.backend, reference=expected,
                   served_top2=served_tops, reference_top2=expected_tops)
            pen_same = sum(1 for a, b in zip(served_pen, expected_pen) if a == b)
            record(f"{label}: penalized greedy {args.backend} == {args.reference_backend}",
                   pen_same == len(expected_pen) or args.random_weights,
                   f"{pen_same}/{len(expected_pen)} prompts identical (repetition 1.3, "
                   f"frequency 0.5, presence 0.3)"
                   + (" (informational: random weights)" if args.random_weights and
                      pen_same != len(expected_pen) else ""))
            gap = logprob_gap(served_tops, expected_tops)
            record(f"{label}: top-1 logprob {args.backend} vs {args.reference_backend}",
                   gap < 0.05, f"largest |difference| {gap:.4f} (same token, rounded to 1e-4)")
            if shaped is not None:
                greedy_rows = [r for r in shaped if r[1] == "greedy"]
                theirs = [r for r in structured(calls, pb, ids_list) if r[1] == "greedy"]
                same = sum(1 for a, b in zip(greedy_rows, theirs) if a[3] == b[3])
                record(f"{label}: structured greedy {args.backend} == {args.reference_backend}",
                       same == len(theirs) or args.random_weights,
                       f"{same}/{len(theirs)} constrained greedy outputs identical"
                       + (" (informational: random weights)" if args.random_weights and
                          same != len(theirs) else ""))
        except Exception as e:  # noqa: BLE001
            record(step, False, str(e)[:300])
        finally:
            if ref:
                ref.stop()

    return report(args)


def report(args):
    """Appends RESULTS to --out, prints the table; 0 when every step passed."""
    with open(args.out, "a") as f:
        for r in RESULTS:
            f.write(json.dumps({"label": args.label, **r}) + "\n")
    print(f"\n### strata-server ({args.label})\n")
    print("| step | status | detail |\n|---|---|---|")
    for step, status, detail in ROWS:
        print(f"| {step} | {status} | {detail.replace('|', '/')} |")
    return 0 if all(r["ok"] for r in RESULTS) else 1


def summarize(line):
    r = line.get("results", {})

    def ms(key, q):
        v = r.get(key, {}).get(q)
        return f"{v:.1f}" if isinstance(v, (int, float)) else "?"
    tput = r.get("output_tokens_per_s")
    tput = f"{tput:.1f}" if isinstance(tput, (int, float)) else "?"
    return (f"{r.get('completed', '?')} done, {r.get('errors', '?')} errors, "
            f"TTFT P50/P99 {ms('ttft_ms', 'p50')}/{ms('ttft_ms', 'p99')} ms, ITL P50/P99 "
            f"{ms('itl_ms', 'p50')}/{ms('itl_ms', 'p99')} ms, {tput} output tok/s")


if __name__ == "__main__":
    sys.exit(main())
