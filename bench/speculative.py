#!/usr/bin/env python3
"""Speculative decoding in one run: strata-server without speculation and with its prompt-lookup
n-gram proposer, and llama.cpp's llama-server without and with its own prompt lookup, on the same
GGUF, the same machine and the same requests, one server at a time.

    .venv/bin/python bench/speculative.py             # full run (15-30 min on 2 cores)
    .venv/bin/python bench/speculative.py --quick     # smoke run: short outputs, few requests
    .venv/bin/python bench/speculative.py --workloads grounded --concurrency 1 --skip-peer

Every request is a streaming chat completion over the OpenAI HTTP API (the server applies the
chat template), greedy (temperature 0), EOS honoured, max_tokens --max-tokens. Workloads:
  grounded  a ~400-token passage (bench/data/grounded_passages.jsonl) and an instruction to
            repeat it, to rewrite it replacing one word, or to quote one paragraph of it;
  free      open-ended prompts (stories, explanations, essays) and random words to continue.
Streams: a closed loop at each --concurrency level (1,4,16). Each (workload, streams) cell has
requests of its own (no prefix-cache hit from another cell), the same in every server.

Reported per (server, workload, streams): output tokens/s and requests/s (over the wall time from
the first send to the last response; tokens from `usage`), TTFT and ITL P50/P99, accepted /
proposed draft tokens (Strata: its /metrics counters across the cell; llama.cpp: the `timings`
of each response), the share of output words that repeat an earlier 4-gram; then the ngram /
none speedups, the issue's goals, and the greedy-equality check (every strata ngram output must
equal its strata none output). bench/README.md has the details.

Exit codes: 0 done, 1 a server or some requests failed, 2 speculation changed a greedy output.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import ROOT, cpu_model, peer_source, resolve, strata_commit  # noqa: E402
from speculative_workload import (Request, build_cells, load_passages,  # noqa: E402
                                  requests_per_cell)

GROUNDED_GOAL = 2.0  # strata ngram / none output tokens/s, grounded, one stream
FREE_GOAL = 0.95  # strata ngram / none output tokens/s, free generation, every concurrency
KV_BYTES_PER_TOKEN = 20 * 1024  # Gemma 3 270M: 18 KiB per token (f16), rounded up
PROMPT_TOKENS_MAX = 1024  # room for the longest grounded prompt (passage + instruction + template)

# ----------------------------------------------------------------------------------------------
# Servers
# ----------------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str  # "strata none", "strata ngram", "llama.cpp none", "llama.cpp spec"
    speculative: bool
    proc: subprocess.Popen
    log: Path
    host: str = "127.0.0.1"
    http_port: int = 0
    metrics_port: int | None = None  # strata only
    model: str = ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def spawn(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def help_text(binary: Path) -> str:
    try:
        r = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
        return r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def strata_has_speculation(binary: Path) -> bool:
    return re.search(r"--speculative(?![-\w])", help_text(binary)) is not None


def strata_speculation_settings(args) -> dict[str, str]:
    """flag -> value of strata ngram's speculation settings: the defaults --help prints, and
    the ones given to this script."""
    binary = args.build / "src/tools/strata-server"
    settings = {flag: value for flag, value in
                re.findall(r"^\s*--(speculative-[\w-]+)\s.*\[([^\]]*)\]\s*$",
                           help_text(binary), re.M)
                if flag in ("speculative-tokens", "speculative-adaptive",
                            "speculative-ngram-min", "speculative-ngram-max")}
    for flag in ("speculative_tokens", "speculative_ngram_min", "speculative_ngram_max"):
        if getattr(args, flag) is not None:
            settings[flag.replace("_", "-")] = str(getattr(args, flag))
    return settings


def wait_ready(server: Server, timeout: float = 180) -> None:
    """Until /v1/models answers 200 (the model is loaded), then a short warm-up request."""
    deadline = time.monotonic() + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n"
                               f"{server.log.read_text()[-2000:]}")
        status, body = http_get(f"http://{server.host}:{server.http_port}/v1/models")
        if status == 200:
            server.model = json.loads(body)["data"][0]["id"]
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} never became ready:\n"
                               f"{server.log.read_text()[-2000:]}")
        time.sleep(0.2)
    warm = stream_chat(server, Request("warmup", "warmup", "warmup", "Say hello."), 8, 300)
    if warm.error:
        raise RuntimeError(f"{server.name}: the warm-up request failed: {warm.error}")


def start_strata(args, mode: str, max_streams: int, work: Path) -> Server:
    binary = args.build / "src/tools/strata-server"
    port_file = work / f"strata-{mode}.ports"
    port_file.unlink(missing_ok=True)
    log = work / f"strata-{mode}.log"
    kv_bytes = max(256 << 20, max_streams * (PROMPT_TOKENS_MAX + args.max_tokens)
                   * KV_BYTES_PER_TOKEN)
    cmd = [str(binary), "--model", str(args.model), "--grpc-port", "0", "--metrics-port", "0",
           "--http-port", "0", "--port-file", str(port_file), "--threads", str(args.threads),
           "--kv-budget-bytes", str(kv_bytes), "--max-queued-requests", "4096",
           "--log-level", "warn"]
    if mode == "ngram" or strata_has_speculation(binary):
        cmd += ["--speculative", mode]
    if mode == "ngram":
        for flag in ("speculative_tokens", "speculative_ngram_min", "speculative_ngram_max"):
            value = getattr(args, flag)
            if value is not None:
                cmd += ["--" + flag.replace("_", "-"), str(value)]
    cmd += shlex.split(args.strata_flags)
    server = Server(f"strata {mode}", mode != "none", spawn(cmd, log), log)
    deadline = time.monotonic() + 120
    while True:  # the port file appears once the ports are bound, before the model has loaded
        try:
            ports = json.loads(port_file.read_text())
            break
        except (OSError, json.JSONDecodeError):  # not there yet, or half written
            if server.proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"strata-server ({mode}) did not start: {shlex.join(cmd)}\n"
                                   f"{log.read_text()[-2000:]}") from None
            time.sleep(0.05)
    server.http_port, server.metrics_port = ports["http_port"], ports["metrics_port"]
    return server


def start_llama(args, spec_flags: list[str] | None, max_streams: int, work: Path) -> Server:
    mode = "spec" if spec_flags else "none"
    port = free_port()
    log = work / f"llama-{mode}.log"
    cmd = [str(args.llama_server), "-m", str(args.model), "--host", "127.0.0.1",
           "--port", str(port), "-t", str(args.threads), "-tb", str(args.threads),
           "-c", str(max_streams * (PROMPT_TOKENS_MAX + args.max_tokens)),
           "-np", str(max_streams), "-cb", "--no-webui", *shlex.split(args.peer_template_flags),
           *(spec_flags or [])]
    return Server(f"llama.cpp {mode}", bool(spec_flags), spawn(cmd, log), log, http_port=port)


def peer_speculation(args) -> tuple[list[str] | None, str]:
    """The llama-server flags for its prompt-lookup speculation, or None, and a sentence for the
    report saying what was used and why."""
    if args.peer_spec_flags:
        return shlex.split(args.peer_spec_flags), f"`{args.peer_spec_flags}` (as given)"
    text = help_text(args.llama_server)
    if "--spec-type" in text and "ngram-simple" in text:
        k = strata_speculation_settings(args).get("speculative-tokens", "6")
        n = args.peer_ngram_size
        flags = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(n),
                 "--spec-ngram-simple-size-m", str(k)]
        return flags, (f"`{shlex.join(flags)}`: llama.cpp's prompt lookup (the last {n} tokens "
                       f"looked up in the prompt and the output so far, the {k} tokens that "
                       f"followed proposed)")
    if re.search(r"--lookup-ngram|--spec-ngram|--lookup\b", text):
        return None, ("this llama-server lists n-gram lookup options this script does not know; "
                      "pass them with --peer-spec-flags")
    if "--model-draft" in text or re.search(r"(^|\s)-md[\s,]", text):
        return None, ("this llama-server speculates only with a draft model (-md); no draft "
                      "GGUF with the same vocabulary is at hand, so llama.cpp runs without "
                      "speculation")
    return None, "this llama-server lists no speculation options"


# ----------------------------------------------------------------------------------------------
# Client
# ----------------------------------------------------------------------------------------------


@dataclass
class Result:
    key: str
    text: str = ""
    completion_tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None
    sent: float = 0.0  # time.monotonic() seconds
    done: float = 0.0
    ttft: float | None = None  # seconds
    event_times: list[float] = field(default_factory=list)  # content events, monotonic seconds
    event_chars: list[int] = field(default_factory=list)
    draft_n: int = 0  # llama.cpp's timings, when it speculated
    draft_accepted: int = 0
    error: str | None = None


def chat_body(model: str, prompt: str, max_tokens: int, extra: dict | None = None) -> bytes:
    """A greedy streaming chat completion; `extra` adds fields (a response_format, say)."""
    return json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, **(extra or {})}).encode()


def read_event(result: Result, data: dict, now: float) -> None:
    """Folds one streamed chat.completion.chunk (or llama.cpp's final chunk) into result."""
    if "error" in data:
        result.error = json.dumps(data["error"])[:300]
        return
    for choice in data.get("choices") or []:
        content = (choice.get("delta") or {}).get("content")
        if content:
            if result.ttft is None:
                result.ttft = now - result.sent
            result.text += content
            result.event_times.append(now)
            result.event_chars.append(len(content))
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]
    usage = data.get("usage")
    if usage:
        result.completion_tokens = usage.get("completion_tokens", 0)
        result.prompt_tokens = usage.get("prompt_tokens", 0)
    timings = data.get("timings")
    if timings and "draft_n" in timings:
        result.draft_n = timings["draft_n"]
        result.draft_accepted = timings.get("draft_n_accepted", 0)


def stream_chat(server: Server, request: Request, max_tokens: int, timeout: float,
                extra: dict | None = None) -> Result:
    """One streaming chat completion, each Server-Sent Event timed as its line arrives."""
    result = Result(request.key)
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=timeout)
    try:
        result.sent = time.monotonic()
        conn.request("POST", "/v1/chat/completions",
                     body=chat_body(server.model, request.prompt, max_tokens, extra),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            result.error = f"http_{resp.status}: {resp.read()[:300].decode(errors='replace')}"
            return result
        while True:
            line = resp.readline()
            if not line:
                break
            now = time.monotonic()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            read_event(result, json.loads(payload), now)
        if result.finish_reason is None and result.error is None:
            result.error = "the stream ended without a finish_reason"
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        result.done = time.monotonic()
        conn.close()
    return result


def run_cell(server: Server, requests: list[Request], streams: int, args) -> list[Result]:
    """Closed loop: `streams` requests in flight until every request has been answered."""
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        return list(pool.map(
            lambda r: stream_chat(server, r, args.max_tokens, args.request_timeout), requests))


def scrape_speculation(server: Server) -> tuple[float, float]:
    """(proposed, accepted) draft tokens so far, all proposers, from strata-server's /metrics."""
    status, text = http_get(f"http://{server.host}:{server.metrics_port}/metrics")
    if status != 200:
        raise RuntimeError(f"{server.name}: GET /metrics answered {status}")
    totals = {"proposed": 0.0, "accepted": 0.0}
    pattern = re.compile(r"^strata_speculative_(proposed|accepted)_tokens_total(\{[^}]*\})?"
                         r"\s+(\S+)")
    for line in text.splitlines():
        if m := pattern.match(line):
            totals[m.group(1)] += float(m.group(3))
    return totals["proposed"], totals["accepted"]


# ----------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """numpy.percentile's default (linear between closest ranks, Hyndman & Fan type 7)."""
    if not values:
        return None
    xs = sorted(values)
    h = (len(xs) - 1) * q / 100
    lo = int(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def tokens_per_event(chars: list[int], tokens: int) -> list[int]:
    """Shares `tokens` out over events: one each, the rest in proportion to their characters
    (largest remainder). Exact when the server sends one token per event."""
    m = len(chars)
    if m == 0 or tokens <= m:
        return [1] * m
    extra = tokens - m
    total = sum(chars)
    shares = [extra * c / total if total else extra / m for c in chars]
    counts = [int(s) for s in shares]
    by_remainder = sorted(range(m), key=lambda i: shares[i] - counts[i], reverse=True)
    for i in by_remainder[:extra - sum(counts)]:
        counts[i] += 1
    return [1 + c for c in counts]


def itl_gaps(result: Result) -> list[float]:
    """The request's inter-token gaps in seconds (strata-bench's convention for k-token events)."""
    counts = tokens_per_event(result.event_chars, result.completion_tokens)
    if not counts:
        return []
    gaps = [0.0] * (counts[0] - 1)
    for i in range(1, len(counts)):
        gap = result.event_times[i] - result.event_times[i - 1]
        gaps += [gap / counts[i]] * counts[i]
    return gaps


def repeated_words(prompt: str, output: str, n: int = 4) -> tuple[int, int]:
    """(output words that end an n-gram of words seen earlier in the prompt or the output, output
    words): how much of the output a prompt-lookup proposer could have found."""
    words = prompt.split()
    start = len(words)
    words += output.split()
    seen: set[tuple[str, ...]] = set()
    hits = 0
    for i in range(n - 1, len(words)):
        gram = tuple(words[i - n + 1:i + 1])
        hits += i >= start and gram in seen
        seen.add(gram)
    return hits, len(words) - start


def ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1e3, 2)


def summarize(server: Server, workload: str, streams: int, requests: list[Request],
              results: list[Result], spec_delta: tuple[float, float] | None) -> dict:
    ok = [r for r in results if r.error is None]
    repeats = [repeated_words(q.prompt, r.text) for q, r in zip(requests, results) if not r.error]
    repeated, words = (sum(h for h, _ in repeats), sum(n for _, n in repeats))
    wall = (max(r.done for r in results) - min(r.sent for r in results)) if results else 0.0
    tokens = sum(r.completion_tokens for r in ok)
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    gaps = [g for r in ok for g in itl_gaps(r)]
    row = {"server": server.name, "workload": workload, "streams": streams,
           "requests": len(results), "completed": len(ok), "errors": len(results) - len(ok),
           "wall_s": round(wall, 3), "output_tokens": tokens,
           "prompt_tokens": sum(r.prompt_tokens for r in ok),
           "output_tokens_per_s": round(tokens / wall, 2) if wall else None,
           "requests_per_s": round(len(ok) / wall, 4) if wall else None,
           "mean_output_tokens": round(tokens / len(ok), 1) if ok else None,
           "ttft_ms": {"p50": ms(percentile(ttfts, 50)), "p99": ms(percentile(ttfts, 99))},
           "itl_ms": {"p50": ms(percentile(gaps, 50)), "p99": ms(percentile(gaps, 99))},
           "repeated_4gram_share": round(repeated / words, 3) if words else None,
           "proposed_tokens": None, "accepted_tokens": None, "acceptance": None}
    if spec_delta is not None:  # strata: /metrics across the cell
        proposed, accepted = spec_delta
    else:  # llama.cpp: each request's timings
        proposed = sum(r.draft_n for r in ok)
        accepted = sum(r.draft_accepted for r in ok)
    if server.speculative:
        row["proposed_tokens"], row["accepted_tokens"] = int(proposed), int(accepted)
        row["acceptance"] = round(accepted / proposed, 4) if proposed else None
    errors = [r for r in results if r.error]
    if errors:
        row["first_error"] = f"{errors[0].key}: {errors[0].error}"
    return row


# ----------------------------------------------------------------------------------------------
# One server through every cell
# ----------------------------------------------------------------------------------------------


def run_server(server: Server, cells: dict[tuple[str, int], list[Request]], args,
               rows: list[dict], outputs: dict[str, dict[str, Result]]) -> None:
    try:
        wait_ready(server)
        print(f"[spec] {server.name} ready (model {server.model}, log {server.log})", flush=True)
        for (workload, streams), requests in cells.items():
            strata = server.metrics_port is not None
            before = scrape_speculation(server) if strata else None
            results = run_cell(server, requests, streams, args)
            delta = None
            if strata:
                after = scrape_speculation(server)
                delta = (after[0] - before[0], after[1] - before[1])
            row = summarize(server, workload, streams, requests, results, delta)
            rows.append(row)
            outputs.setdefault(server.name, {}).update({r.key: r for r in results})
            print(progress_line(row), flush=True)
    finally:
        server.stop()


def progress_line(row: dict) -> str:
    line = (f"[spec] {row['server']:15s} {row['workload']:8s} x{row['streams']:<3d} "
            f"{fmt(row['output_tokens_per_s']):>7s} out tok/s, TTFT p50 "
            f"{fmt(row['ttft_ms']['p50'], '.0f')} ms, ITL p50 {fmt(row['itl_ms']['p50'])} ms")
    if row["acceptance"] is not None:
        line += f", acceptance {row['acceptance']:.2f}"
    if row["errors"]:
        line += f", {row['errors']} errors ({row['first_error']})"
    return line


# ----------------------------------------------------------------------------------------------
# Checks and report
# ----------------------------------------------------------------------------------------------


def first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def compare_outputs(base: dict[str, Result], other: dict[str, Result]) -> dict:
    """Requests both servers answered whose text or token count differ."""
    mismatches = []
    compared = 0
    for key, a in base.items():
        b = other.get(key)
        if b is None or a.error or b.error:
            continue
        compared += 1
        if a.text != b.text or a.completion_tokens != b.completion_tokens:
            at = first_difference(a.text, b.text)
            mismatches.append({"key": key, "at_char": at,
                               "tokens": [a.completion_tokens, b.completion_tokens],
                               "base": a.text[max(0, at - 40):at + 60],
                               "other": b.text[max(0, at - 40):at + 60]})
    return {"compared": compared, "mismatches": mismatches}


def prompt_agreement(outputs: dict[str, dict[str, Result]]) -> dict[str, list[int]]:
    """server -> [requests whose usage.prompt_tokens equal strata none's, requests compared]:
    the servers rendered and tokenized the same prompts (the same chat template)."""
    base = outputs.get("strata none") or next(iter(outputs.values()), {})
    agreement = {}
    for name, results in outputs.items():
        pairs = [(base[k].prompt_tokens, r.prompt_tokens) for k, r in results.items()
                 if k in base and not r.error and not base[k].error]
        agreement[name] = [sum(a == b for a, b in pairs), len(pairs)]
    return agreement


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def speedups(rows: list[dict]) -> list[dict]:
    by = {(r["server"], r["workload"], r["streams"]): r for r in rows}
    out = []
    for workload, streams in dict.fromkeys((r["workload"], r["streams"]) for r in rows):
        tps = {name: (by.get((name, workload, streams)) or {}).get("output_tokens_per_s")
               for name in ("strata none", "strata ngram", "llama.cpp none", "llama.cpp spec")}
        out.append({"workload": workload, "streams": streams,
                    "strata_ngram_over_none": ratio(tps["strata ngram"], tps["strata none"]),
                    "llama_spec_over_none": ratio(tps["llama.cpp spec"], tps["llama.cpp none"]),
                    "strata_ngram_over_llama_spec": ratio(tps["strata ngram"],
                                                          tps["llama.cpp spec"]),
                    "strata_none_over_llama_none": ratio(tps["strata none"],
                                                         tps["llama.cpp none"])})
    return out


def goals(speedup_rows: list[dict]) -> list[str]:
    lines = []
    for s in speedup_rows:
        r = s["strata_ngram_over_none"]
        if r is None:
            continue
        if s["workload"] == "grounded" and s["streams"] == 1:
            lines.append(f"- grounded, 1 stream: strata ngram / none = {r:.2f}x "
                         f"(goal >= {GROUNDED_GOAL}x): {'met' if r >= GROUNDED_GOAL else 'MISSED'}")
        if s["workload"] == "free":
            streams = f"{s['streams']} stream" + ("s" if s["streams"] != 1 else "")
            lines.append(f"- free, {streams}: strata ngram / none = {r:.2f}x "
                         f"(goal >= {FREE_GOAL}x): {'met' if r >= FREE_GOAL else 'MISSED'}")
    return lines


def fmt(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(report: dict) -> str:
    m = report["meta"]
    lines = [
        "# Speculative decoding: strata-server and llama-server", "",
        f"{m['date']}; {m['cpu']}; Strata {m['strata_commit']}; llama.cpp "
        f"{m['peer_source']}; model `{m['model']}`; {m['threads']} threads each; greedy, EOS "
        f"honoured, max_tokens {m['max_tokens']}; requests per cell (streams: requests) "
        f"{', '.join(f'{c}: {n}' for c, n in m['requests_per_cell'].items())}; load average "
        f"at start {m['load_average']:.2f}.", "",
        "- Strata ngram: "
        + (" ".join(f"`--{k} {v}`" for k, v in m["strata_ngram_settings"].items()) or "-") + ".",
        f"- llama.cpp speculation: {m['peer_note']}.", "",
        "| workload | streams | server | out tok/s | req/s | TTFT p50 / p99 (ms) "
        "| ITL p50 / p99 (ms) | accepted / proposed | acceptance | repeated 4-grams "
        "| mean out tokens | errors |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(report["rows"], key=lambda r: (r["workload"], r["streams"])):
        drafts = ("-" if r["proposed_tokens"] is None
                  else f"{r['accepted_tokens']} / {r['proposed_tokens']}")
        lines.append(
            f"| {r['workload']} | {r['streams']} | {r['server']} | "
            f"{fmt(r['output_tokens_per_s'])} | {fmt(r['requests_per_s'], '.2f')} | "
            f"{fmt(r['ttft_ms']['p50'], '.0f')} / {fmt(r['ttft_ms']['p99'], '.0f')} | "
            f"{fmt(r['itl_ms']['p50'])} / {fmt(r['itl_ms']['p99'])} | {drafts} | "
            f"{fmt(r['acceptance'], '.2f')} | {fmt(r['repeated_4gram_share'], '.2f')} | "
            f"{fmt(r['mean_output_tokens'])} | {r['errors']} |")
    lines += ["", "Output tokens/s ratios:", "",
              "| workload | streams | strata ngram / none | llama.cpp spec / none "
              "| strata ngram / llama.cpp spec | strata none / llama.cpp none |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in report["speedups"]:
        lines.append(f"| {s['workload']} | {s['streams']} | "
                     f"{fmt(s['strata_ngram_over_none'], '.2f')} | "
                     f"{fmt(s['llama_spec_over_none'], '.2f')} | "
                     f"{fmt(s['strata_ngram_over_llama_spec'], '.2f')} | "
                     f"{fmt(s['strata_none_over_llama_none'], '.2f')} |")
    if report["goals"]:
        lines += ["", "Goals (issue 18):", "", *report["goals"]]
    lines += ["", "Repeated 4-grams: the share of output words that end a 4-word sequence "
              "already seen in the prompt or earlier in the output (what prompt lookup can "
              "find).", ""]
    agree = report["prompt_tokens_agree"]
    if len(agree) > 1:
        lines.append("Same prompts everywhere (usage.prompt_tokens equal to strata none's): "
                     + ", ".join(f"{name} {a[0]} of {a[1]}" for name, a in agree.items()) + ".")
    lines += ["", "Greedy equality (strata ngram against strata none, every request):", ""]
    eq = report["equality"].get("strata")
    if eq is None:
        lines.append("- not checked: both strata modes are needed.")
    else:
        lines.append(f"- {eq['compared']} requests compared, {len(eq['mismatches'])} differ"
                     + (": speculation is NOT exact." if eq["mismatches"] else "."))
        lines += [mismatch_line(x) for x in eq["mismatches"]]
    peer_eq = report["equality"].get("llama.cpp")
    if peer_eq is not None:
        lines.append(f"- for information, llama.cpp spec against llama.cpp none: "
                     f"{peer_eq['compared']} compared, {len(peer_eq['mismatches'])} differ.")
    return "\n".join(lines) + "\n"


def mismatch_line(x: dict) -> str:
    return (f"  - `{x['key']}` at character {x['at_char']}, tokens {x['tokens'][0]} / "
            f"{x['tokens'][1]}: none {x['base']!r} / ngram {x['other']!r}")


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: max(2, streams) requests per cell, max_tokens 64")
    p.add_argument("--concurrency", default="1,4,16", help="streams in flight (1,4,16)")
    p.add_argument("--workloads", default="grounded,free", help="grounded,free")
    p.add_argument("--skip-peer", action="store_true", help="leave llama-server out")
    p.add_argument("--requests", type=int, default=12,
                   help="requests per cell at least; 2 x streams when more (12)")
    p.add_argument("--max-tokens", type=int, default=None, help="per request (384; --quick: 64)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--speculative-tokens", type=int, default=None,
                   help="strata ngram's --speculative-tokens and llama.cpp's draft length "
                        "(default: strata's default; 6 for llama.cpp)")
    p.add_argument("--speculative-ngram-min", type=int, default=None)
    p.add_argument("--speculative-ngram-max", type=int, default=None)
    p.add_argument("--peer-ngram-size", type=int, default=3,
                   help="llama.cpp's --spec-ngram-simple-size-n (3)")
    p.add_argument("--peer-spec-flags", default="",
                   help="llama-server's speculation flags instead of the ones found in --help")
    p.add_argument("--peer-modes", default="none,spec", help="llama.cpp runs: none,spec")
    p.add_argument("--peer-template-flags", default="--no-jinja --chat-template gemma",
                   help="llama-server's chat template: the GGUF has none, and llama-server would "
                        "fall back to ChatML where strata-server uses Gemma's ('' for the GGUF's)")
    p.add_argument("--strata-modes", default="none,ngram", help=argparse.SUPPRESS)
    p.add_argument("--strata-flags", default="", help="extra strata-server flags (both modes)")
    p.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--passages", default="bench/data/grounded_passages.jsonl")
    p.add_argument("--build", default="build")
    p.add_argument("--llama-server", default=".cache/peer/bin/llama-server")
    p.add_argument("--request-timeout", type=float, default=600, help="seconds per socket wait")
    p.add_argument("--out", default=None,
                   help="Markdown report (bench/results/speculative-<date>-<time>.md)")
    p.add_argument("--json", default=None, help="JSON report (beside --out, .json)")
    p.add_argument("--outputs", default=None,
                   help="also write every request's output here (JSONL: server, key, kind, "
                        "tokens, text)")
    args = p.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.strata_modes = [m for m in args.strata_modes.split(",") if m]
    args.peer_modes = [] if args.skip_peer else [m for m in args.peer_modes.split(",") if m]
    for w in args.workloads:
        if w not in ("grounded", "free"):
            p.error(f"unknown workload {w!r}: grounded or free")
    if args.max_tokens is None:
        args.max_tokens = 64 if args.quick else 384
    for name in ("model", "passages", "build", "llama_server"):
        setattr(args, name, resolve(getattr(args, name)))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    args.out = resolve(args.out) if args.out else ROOT / f"bench/results/speculative-{stamp}.md"
    args.json = resolve(args.json) if args.json else args.out.with_suffix(".json")
    args.outputs = resolve(args.outputs) if args.outputs else None
    return args


def write_outputs(path: Path, cells: dict[tuple[str, int], list[Request]],
                  outputs: dict[str, dict[str, Result]]) -> None:
    kinds = {r.key: r.kind for requests in cells.values() for r in requests}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for server, results in outputs.items():
            for key, r in results.items():
                f.write(json.dumps({"server": server, "key": key, "kind": kinds.get(key),
                                    "prompt_tokens": r.prompt_tokens,
                                    "completion_tokens": r.completion_tokens,
                                    "finish_reason": r.finish_reason, "error": r.error,
                                    "text": r.text}, ensure_ascii=False) + "\n")


@dataclass
class Planned:
    name: str  # as the report names the server
    system: str  # strata or llama.cpp
    mode: str  # strata: none or ngram; llama.cpp: none or spec
    flags: list[str] | None = None  # llama.cpp spec: its speculation flags


def plan_servers(args) -> tuple[list[Planned], str]:
    """The servers in run order, and the report's note on llama.cpp's speculation."""
    plan = [Planned(f"strata {m}", "strata", m) for m in args.strata_modes]
    note = "not run (--skip-peer)"
    if args.peer_modes:
        if not args.llama_server.exists():
            raise SystemExit(f"{args.llama_server} not found: run scripts/setup_peer, or pass "
                             f"--skip-peer")
        spec_flags, note = peer_speculation(args)
        modes = list(args.peer_modes)
        if spec_flags is None and "spec" in modes:  # the baseline peer still runs
            modes = ["none"]
        for mode in modes:
            plan.append(Planned(f"llama.cpp {mode}", "llama.cpp", mode,
                                spec_flags if mode == "spec" else None))
    return plan, note


def build_report(args, plan: list[Planned], peer_note: str, load: float, rows: list[dict],
                 outputs: dict[str, dict[str, Result]]) -> dict:
    equality = {}
    if "strata none" in outputs and "strata ngram" in outputs:
        equality["strata"] = compare_outputs(outputs["strata none"], outputs["strata ngram"])
    if "llama.cpp none" in outputs and "llama.cpp spec" in outputs:
        equality["llama.cpp"] = compare_outputs(outputs["llama.cpp none"],
                                                outputs["llama.cpp spec"])
    ngram_settings = (strata_speculation_settings(args)
                      if any(p.name == "strata ngram" for p in plan) else {})
    speedup_rows = speedups(rows)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpu": cpu_model(), "strata_commit": strata_commit(),
            "peer_source": peer_source(args.llama_server) if args.peer_modes else "not run",
            "model": args.model.name, "threads": args.threads, "max_tokens": args.max_tokens,
            "quick": args.quick, "seed": args.seed, "concurrency": args.concurrency,
            "workloads": args.workloads,
            "requests_per_cell": {c: requests_per_cell(args, c) for c in args.concurrency},
            "load_average": load, "strata_ngram_settings": ngram_settings,
            "strata_flags": args.strata_flags, "peer_note": peer_note,
            "servers": [asdict(p) for p in plan]}
    return {"meta": meta, "rows": rows, "speedups": speedup_rows, "goals": goals(speedup_rows),
            "equality": equality, "prompt_tokens_agree": prompt_agreement(outputs)}


def main() -> int:
    args = parse_args()
    if not args.model.exists():
        raise SystemExit(f"{args.model} not found: run scripts/setup")
    if not (args.build / "src/tools/strata-server").exists():
        raise SystemExit(f"{args.build}/src/tools/strata-server not found: build it first "
                         f"(scripts/build release)")
    cells = build_cells(args, load_passages(args.passages))
    plan, peer_note = plan_servers(args)
    work = Path(tempfile.mkdtemp(prefix="strata-spec-bench-"))
    max_streams = max(args.concurrency)
    print(f"[spec] {len(cells)} cells, {sum(len(v) for v in cells.values())} requests per "
          f"server; servers: {', '.join(p.name for p in plan)}; llama.cpp speculation: "
          f"{peer_note}; logs in {work}", flush=True)
    load = os.getloadavg()[0]
    rows: list[dict] = []
    outputs: dict[str, dict[str, Result]] = {}
    failed = False
    for planned in plan:
        try:
            if planned.system == "strata":
                server = start_strata(args, planned.mode, max_streams, work)
            else:
                server = start_llama(args, planned.flags, max_streams, work)
            run_server(server, cells, args, rows, outputs)
        except RuntimeError as e:
            print(f"[spec] {e}", file=sys.stderr, flush=True)
            failed = True
    report = build_report(args, plan, peer_note, load, rows, outputs)
    text = markdown(report)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.outputs:
        write_outputs(args.outputs, cells, outputs)
    print(f"[spec] report in {args.out} and {args.json}; logs in {work}")
    strata_equality = report["equality"].get("strata")
    if strata_equality and strata_equality["mismatches"]:
        return 2
    return 1 if failed or any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
