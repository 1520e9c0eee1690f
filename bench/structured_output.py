"""What does structured output cost? (issue 22: constrained decoding <= 10% of decode time at
batch 16)

One strata-server, --streams closed-loop gRPC streams of greedy chat generations, in phases:
  1. free: no format, --max-tokens tokens each (EOS ignored, so every call decodes as many);
  2. constrained: the same prompts with a JSON Schema (bench/grammar/person.schema.json), which
     the model fills in a few dozen tokens;
  3. new schemas: --streams - 1 free streams, and one stream whose every call brings a JSON
     Schema the server has not seen (cold mask caches); the gaps are the free streams' only, so
     they show whether first visits of grammar positions hold other requests' steps up
     (compare with --server-flags "--constraint-mask-threads 0");
then, on a fresh schema, the first call alone (cold mask caches) against a second one (warm).
It reports output tokens/s and the inter-token gap (mean, P50, P99, max) per phase: the mean gap
is the step time every stream sees, so its rise is what the masks cost at this batch size.

  .venv/bin/python bench/structured_output.py                    # ~2 minutes on 2 cores
  .venv/bin/python bench/structured_output.py --phase-s 60 --markdown out.md
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from bench_env import (add_server_arguments, cpu_model, publish, resolve,  # noqa: E402
                       strata_commit, use_build)
from strata_server import Server, pb  # noqa: E402

PROMPTS = [
    "Describe a person from Lisbon as JSON.",
    "Give a JSON record for a retired teacher.",
    "Make up a JSON profile of a young chess player.",
    "Write JSON about a baker who loves cycling.",
]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run_phase(server: Server, args, seconds: float, schema: str | None,
              fresh_schemas: bool = False) -> dict:
    """Closed-loop streams for `seconds`. With `fresh_schemas`, stream 0 sends a schema the
    server has not seen with every call and the others run free; gaps are the free streams'."""
    gaps, tokens, calls, fresh_calls = [], [0], [0], [0]
    lock = threading.Lock()
    stop = threading.Event()

    def client(k: int):
        i = k
        novel = fresh_schemas and k == 0
        while not stop.is_set():
            format_schema = fresh_schema(schema, f"{k}_{i}_{time.monotonic_ns()}") if novel \
                else (None if fresh_schemas else schema)
            sampling = pb.SamplingParams(temperature=0, max_tokens=args.max_tokens,
                                         ignore_eos=format_schema is None)
            request = pb.GenerateRequest(
                chat=pb.ChatMessages(messages=[pb.ChatMessage(
                    role="user", content=PROMPTS[i % len(PROMPTS)])]),
                sampling=sampling, cache=pb.CacheOptions(use=False))
            if format_schema is not None:
                request.output_format.json_schema = format_schema
            i += 1
            last, mine, count = None, [], 0
            for message in server.stub.GenerateStream(request, timeout=600):
                now = time.monotonic()
                n = len(message.token_ids)
                if n == 0:
                    continue
                if last is not None:
                    mine += [(now - last) / n] * n
                last = now
                count += n
            with lock:
                if novel:
                    fresh_calls[0] += 1
                    continue
                gaps.extend(mine)
                tokens[0] += count
                calls[0] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.streams)]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    return {"calls": calls[0], "tokens_per_s": tokens[0] / elapsed,
            "tokens_per_call": tokens[0] / max(calls[0], 1), "fresh_calls": fresh_calls[0],
            "gap_mean": statistics.fmean(gaps) if gaps else float("nan"),
            "gap_p50": percentile(gaps, 0.5), "gap_p99": percentile(gaps, 0.99),
            "gap_max": max(gaps) if gaps else float("nan")}


def fresh_schema(schema: str, tag: str) -> str:
    """`schema` with one more optional property: a format the server has not compiled."""
    fresh = json.loads(schema)
    fresh.setdefault("properties", {})[f"note_{tag}"] = {"type": "string", "maxLength": 8}
    return json.dumps(fresh)


def one_call(server: Server, schema: str) -> tuple[float, float, int]:
    """(time to first token, total seconds, tokens) of one constrained call alone."""
    request = pb.GenerateRequest(
        chat=pb.ChatMessages(messages=[pb.ChatMessage(role="user", content=PROMPTS[0])]),
        sampling=pb.SamplingParams(temperature=0, max_tokens=128),
        cache=pb.CacheOptions(use=False))
    request.output_format.json_schema = schema
    start = time.monotonic()
    first, count = None, 0
    for message in server.stub.GenerateStream(request, timeout=600):
        if message.token_ids and first is None:
            first = time.monotonic() - start
        count += len(message.token_ids)
    return first or float("nan"), time.monotonic() - start, count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_server_arguments(p)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--schema", default="bench/grammar/person.schema.json")
    p.add_argument("--phase-s", type=float, default=40)
    p.add_argument("--warmup-s", type=float, default=8)
    p.add_argument("--server-flags", default="", help="more strata-server flags, space-separated")
    args = p.parse_args()
    use_build(args)
    schema = json.dumps(json.loads(resolve(args.schema).read_text()))
    fresh = fresh_schema(schema, "bench")
    server = Server(*args.server_flags.split(), threads=args.threads, model=resolve(args.model))
    try:
        server.wait_serving()
        run_phase(server, args, args.warmup_s, None)
        free = run_phase(server, args, args.phase_s, None)
        run_phase(server, args, args.warmup_s, schema)
        constrained = run_phase(server, args, args.phase_s, schema)
        novel = run_phase(server, args, args.phase_s, schema, fresh_schemas=True)
        cold = one_call(server, fresh)
        warm = one_call(server, fresh)
    finally:
        assert server.stop() == 0, server.log()

    def row(name, r):
        return (f"| {name} | {r['calls']} | {r['tokens_per_call']:.1f} | {r['tokens_per_s']:.1f} | "
                f"{r['gap_mean'] * 1000:.1f} | {r['gap_p50'] * 1000:.1f} | "
                f"{r['gap_p99'] * 1000:.1f} | {r['gap_max'] * 1000:.1f} |")

    rise = (constrained["gap_mean"] / free["gap_mean"] - 1) * 100
    report = "\n".join([
        f"Structured output cost: {args.streams} closed-loop gRPC streams of greedy chat calls for "
        f"{args.phase_s:.0f} s per phase, free ({args.max_tokens} tokens, EOS ignored) and under "
        f"the JSON Schema {args.schema}. CPU: {cpu_model()}, {args.threads} threads; Strata "
        f"{strata_commit()}; flags: {args.server_flags or '(defaults)'}.",
        "",
        "| phase | calls | tokens a call | output tokens/s | gap mean, ms | gap P50, ms | "
        "gap P99, ms | gap max, ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        row("free", free),
        row("JSON Schema", constrained),
        row(f"free beside new schemas ({novel['fresh_calls']} calls)", novel),
        "",
        f"Mean inter-token gap under the schema: {rise:+.1f}% against free decoding.",
        "",
        f"A schema the server has not seen, one call alone: first call TTFT "
        f"{cold[0] * 1000:.0f} ms, then {(cold[1] - cold[0]) * 1000:.0f} ms for its other "
        f"{cold[2] - 1} tokens; second call TTFT {warm[0] * 1000:.0f} ms, then "
        f"{(warm[1] - warm[0]) * 1000:.0f} ms for {warm[2] - 1} tokens. (Time after the first "
        f"token is engine time: what a first visit costs there, every other request waits for.)",
    ]) + "\n"
    publish(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
