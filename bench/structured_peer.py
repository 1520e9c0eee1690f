#!/usr/bin/env python3
"""Structured output beside llama.cpp (issue 22): what a JSON Schema costs to compile and to
decode under, in strata-server and llama.cpp's llama-server, on the same GGUF and machine, one
server at a time, over the same OpenAI HTTP API (`response_format` of type `json_schema`).

    .venv/bin/python bench/structured_peer.py               # ~3 min on 2 cores
    .venv/bin/python bench/structured_peer.py --quick       # smoke run: few schemas and calls
    .venv/bin/python bench/structured_peer.py --skip-peer --out /tmp/so.md

Per server:
  compile  for every schema of the integration tests' corpus (tests/integration/
           test_structured_output.py, 50+ schemas) and bench/grammar's two: a free call, a call
           with the schema (its first), and the same schema again, each max_tokens 1 with a
           prompt no other call shares. cold = first schema call - free call, warm = second -
           free: what compiling (and, for Strata, the first position's mask) adds to a request.
           Schemas the server refuses are counted.
  decode   closed-loop streaming calls at 1 and 16 streams, free and under
           bench/grammar/person.schema.json, greedy, max_tokens --max-tokens: inter-token gap
           (mean, P50, P99) and output tokens/s; the constrained calls that finish are checked
           with the `jsonschema` package.
The decode cost is the constrained phase's mean gap over the free phase's, at the same streams.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from bench_env import ROOT, cpu_model, peer_source, resolve, strata_commit  # noqa: E402
from speculative import (Request, Server, itl_gaps, percentile, start_llama,  # noqa: E402
                         start_strata, stream_chat, wait_ready)

DECODE_PROMPTS = [
    "Describe a person from Lisbon as JSON.",
    "Give a JSON record for a retired teacher.",
    "Make up a JSON profile of a young chess player.",
    "Write JSON about a baker who loves cycling.",
]


def corpus() -> list[tuple[str, dict]]:
    """(name, schema): the integration tests' corpus, then bench/grammar's schemas."""
    from test_structured_output import SCHEMAS  # the tests' module: imports pytest, openai

    named = [(f"corpus {i}", s) for i, s in enumerate(SCHEMAS)]
    for path in sorted((ROOT / "bench" / "grammar").glob("*.schema.json")):
        named.append((path.name, json.loads(path.read_text())))
    return named


def response_format(name: str, schema: dict) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": name.replace(" ", "_").replace(".", "_"), "schema": schema, "strict": True}}}


def call(server: Server, prompt: str, extra: dict | None, timeout: float) -> tuple[float, int, str]:
    """One non-streaming greedy chat call of max_tokens 1: (seconds, HTTP status, error text)."""
    body = {"model": server.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 1, "temperature": 0, **(extra or {})}
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=timeout)
    try:
        start = time.monotonic()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read()
        return time.monotonic() - start, resp.status, \
            "" if resp.status == 200 else text[:200].decode(errors="replace")
    finally:
        conn.close()


def compile_phase(server: Server, schemas: list[tuple[str, dict]], args) -> dict:
    """Free, first and second schema calls per schema, interleaved so that drift cancels. The
    prompts differ from their first character on, so no call reuses another's cached prefix."""
    cold, warm, refused, slowest = [], [], [], []
    for k, (name, schema) in enumerate(schemas):
        nonce = f"{server.name} {k} {time.monotonic_ns()}"
        base, status, _ = call(server, f"[a {nonce}] Answer in JSON.", None, args.request_timeout)
        assert status == 200, f"{server.name}: a free call failed with {status}"
        fmt = response_format(name, schema)
        first, status, error = call(server, f"[b {nonce}] Answer in JSON.", fmt,
                                    args.request_timeout)
        if status != 200:
            refused.append(f"{name}: {status} {error}")
            continue
        second, status, _ = call(server, f"[c {nonce}] Answer in JSON.", fmt, args.request_timeout)
        cold.append(first - base)
        slowest.append((first - base, name))
        if status == 200:
            warm.append(second - base)
    ms = lambda xs, q: round(percentile(xs, q) * 1e3, 1) if xs else None  # noqa: E731
    return {"schemas": len(schemas), "accepted": len(cold), "refused": refused,
            "cold_ms": {"p50": ms(cold, 50), "p90": ms(cold, 90), "max": ms(cold, 100)},
            "warm_ms": {"p50": ms(warm, 50), "p90": ms(warm, 90), "max": ms(warm, 100)},
            "slowest_cold": [f"{name}: {t * 1e3:.1f} ms" for t, name in sorted(slowest)[-3:]]}


def valid(text: str, schema: dict) -> bool:
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema, cls=jsonschema.Draft202012Validator,
                            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def decode_phase(server: Server, streams: int, calls: int, schema: dict | None, args) -> dict:
    extra = response_format("person", schema) if schema is not None else None
    requests = [Request(f"{streams}-{i}", "decode", "decode",
                        f"{DECODE_PROMPTS[i % len(DECODE_PROMPTS)]} (request {i} of "
                        f"{server.name} at {streams} streams, {time.monotonic_ns()})")
                for i in range(calls)]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        results = list(pool.map(lambda r: stream_chat(server, r, args.max_tokens,
                                                      args.request_timeout, extra), requests))
    wall = time.monotonic() - start
    ok = [r for r in results if r.error is None]
    gaps = [g for r in ok for g in itl_gaps(r)]
    tokens = sum(r.completion_tokens for r in ok)
    row = {"streams": streams, "format": "JSON Schema" if schema else "free",
           "calls": len(results), "errors": len(results) - len(ok),
           "output_tokens_per_s": round(tokens / wall, 1),
           "tokens_per_call": round(tokens / max(len(ok), 1), 1),
           "gap_ms": {"mean": round(statistics.fmean(gaps) * 1e3, 2) if gaps else None,
                      "p50": round(percentile(gaps, 50) * 1e3, 2) if gaps else None,
                      "p99": round(percentile(gaps, 99) * 1e3, 2) if gaps else None}}
    if schema is not None:
        finished = [r for r in ok if r.finish_reason == "stop"]
        row["finished"] = len(finished)
        invalid = [r.text for r in finished if not valid(r.text, schema)]
        row["valid"] = len(finished) - len(invalid)
        row["first_output"] = ok[0].text[:400] if ok else ""
        row["invalid_outputs"] = [text[:400] for text in invalid]
    if len(ok) < len(results):
        row["first_error"] = next(r.error for r in results if r.error)
    return row


def run_server(server: Server, schemas, person: dict, args) -> dict:
    try:
        wait_ready(server)
        print(f"[structured] {server.name} ready (log {server.log})", flush=True)
        result = {"server": server.name, "compile": compile_phase(server, schemas, args),
                  "decode": []}
        print(f"[structured] {server.name} compile: {json.dumps(result['compile'])[:400]}",
              flush=True)
        for streams in args.concurrency:
            calls = max(args.calls, 2 * streams)
            for schema in (None, person):
                row = decode_phase(server, streams, calls, schema, args)
                result["decode"].append(row)
                print(f"[structured] {server.name} decode: {json.dumps(row)}", flush=True)
        return result
    finally:
        server.stop()


def fmt(x) -> str:
    return "-" if x is None else f"{x}"


def markdown(report: dict) -> str:
    lines = [f"# Structured output beside llama.cpp ({report['date']})", "",
             f"Machine: {report['cpu']}, {report['threads']} threads per server. Strata commit "
             f"{report['commit']}; llama.cpp's llama-server from {report['peer']}. Model "
             f"`{report['model']}`. Command: `{report['command']}`.", "",
             "## Compiling a schema", "",
             "Extra time of a request of max_tokens 1 with a JSON Schema over the same request "
             "without one: the first time the server sees the schema (cold) and the second "
             "(warm).", "",
             "| server | schemas accepted | cold P50 / P90 / max, ms | warm P50 / P90 / max, ms |",
             "| --- | --- | --- | --- |"]
    for r in report["servers"]:
        c = r["compile"]
        lines.append(f"| {r['server']} | {c['accepted']} of {c['schemas']} | "
                     f"{fmt(c['cold_ms']['p50'])} / {fmt(c['cold_ms']['p90'])} / "
                     f"{fmt(c['cold_ms']['max'])} | {fmt(c['warm_ms']['p50'])} / "
                     f"{fmt(c['warm_ms']['p90'])} / {fmt(c['warm_ms']['max'])} |")
    for r in report["servers"]:
        lines.append(f"- {r['server']}, slowest first calls: "
                     + "; ".join(r["compile"]["slowest_cold"]))
        for line in r["compile"]["refused"]:
            lines.append(f"- {r['server']} refused {line}")
    lines += ["", "## Decoding under a schema", "",
              "| server | streams | format | calls | output tok/s | tokens a call | gap mean / "
              "P50 / P99, ms | valid / finished | mean gap vs free |",
              "| --- | ---: | --- | ---: | ---: | ---: | --- | --- | ---: |"]
    for r in report["servers"]:
        free = {}
        for d in r["decode"]:
            g = d["gap_ms"]
            if d["format"] == "free":
                free[d["streams"]] = g["mean"]
                cost = "-"
            else:
                base = free.get(d["streams"])
                cost = f"{(g['mean'] / base - 1) * 100:+.1f}%" if base and g["mean"] else "-"
            checked = f"{d['valid']} / {d['finished']}" if "valid" in d else "-"
            lines.append(f"| {r['server']} | {d['streams']} | {d['format']} | {d['calls']} | "
                         f"{d['output_tokens_per_s']} | {d['tokens_per_call']} | "
                         f"{fmt(g['mean'])} / {fmt(g['p50'])} / {fmt(g['p99'])} | {checked} | "
                         f"{cost} |")
            for text in d.get("invalid_outputs", []):
                lines.append(f"| | | does not validate: `{json.dumps(text)[:300]}` | | | | | | |")
            if d.get("errors"):
                lines.append(f"| | | {d['errors']} errors: {d.get('first_error', '')[:120]} |"
                             " | | | | | |")
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="8 schemas, 4 calls per decode phase")
    p.add_argument("--skip-peer", action="store_true", help="leave llama-server out")
    p.add_argument("--concurrency", default="1,16", help="streams of the decode phases (1,16)")
    p.add_argument("--calls", type=int, default=8,
                   help="calls per decode phase at least; 2 x streams when more (8)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--build", default="build")
    p.add_argument("--llama-server", default=".cache/peer/bin/llama-server")
    p.add_argument("--peer-template-flags", default="--no-jinja --chat-template gemma",
                   help="llama-server's chat template (the GGUF has none)")
    p.add_argument("--strata-flags", default="", help="extra strata-server flags")
    p.add_argument("--request-timeout", type=float, default=600)
    p.add_argument("--out", default=None,
                   help="Markdown report (bench/results/structured-peer-<date>-<time>.md)")
    args = p.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    if args.quick:
        args.calls = 4
    for name in ("model", "build", "llama_server"):
        setattr(args, name, resolve(getattr(args, name)))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    args.out = resolve(args.out) if args.out else ROOT / f"bench/results/structured-peer-{stamp}.md"
    return args


def main() -> int:
    args = parse_args()
    if not (args.build / "src/tools/strata-server").exists():
        raise SystemExit(f"{args.build}/src/tools/strata-server not found: scripts/build release")
    if not args.skip_peer and not args.llama_server.exists():
        raise SystemExit(f"{args.llama_server} not found: run scripts/setup_peer (or --skip-peer)")
    schemas = corpus()
    if args.quick:
        schemas = schemas[::8]
    person = json.loads((ROOT / "bench/grammar/person.schema.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="strata-structured-bench-"))
    max_streams = max(args.concurrency)
    # start_strata and start_llama size their KV for prompts plus max_tokens, and read
    # speculative.py's options: no speculation here.
    args.strata_modes, args.speculative_tokens = ["none"], None
    args.speculative_ngram_min = args.speculative_ngram_max = None
    servers = [lambda: start_strata(args, "none", max_streams, work)]
    if not args.skip_peer:
        servers.append(lambda: start_llama(args, None, max_streams, work))
    report = {"date": datetime.date.today().isoformat(), "cpu": cpu_model(),
              "threads": args.threads, "commit": strata_commit(), "model": args.model.name,
              "peer": peer_source(args.llama_server) if not args.skip_peer else "-",
              "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
              "servers": []}
    failed = False
    for start in servers:
        try:
            report["servers"].append(run_server(start(), schemas, person, args))
        except (RuntimeError, AssertionError, OSError) as e:
            print(f"[structured] {e}", file=sys.stderr, flush=True)
            failed = True
    text = markdown(report)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"[structured] report in {args.out}; logs in {work}")
    return 1 if failed or any(d.get("errors") for r in report["servers"]
                              for d in r["decode"]) else 0


if __name__ == "__main__":
    sys.exit(main())
