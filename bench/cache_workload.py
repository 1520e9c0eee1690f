#!/usr/bin/env python3
"""Response cache on a workload with repeats: the same request sequence against a fresh
strata-server with the cache off, the exact cache on, and the exact + semantic cache on, in one
run, over the OpenAI HTTP API (streaming, so TTFT is the first content event).

    bench/cache_workload.py [--requests 240] [--concurrency 16] [--repeat 0.35]
                            [--paraphrase 0.15] [--max-tokens 32] [--json OUT.jsonl]
                            [--configs off,exact,semantic] [--semantic-threshold T]

The sequence (seeded): a `repeat` share of the requests repeat an earlier request exactly, a
`paraphrase` share ask an earlier question in other words (an exact cache cannot match them;
they are for the semantic cache), the rest are new questions. Every request is greedy. Prints,
per configuration, delivered completion tokens/s, TTFT P50/P99, how many answers came from the
cache, and how many cached answers were wrong: every request belongs to one question (its
original wording and its paraphrase), and a cached answer is right when its text is the answer
the cache-off run computed for that question's original or paraphrase (greedy answers do not
depend on the batch), wrong otherwise (another question's answer). Run `off` first for that
check (the default order)."""
import argparse
import concurrent.futures
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[1]

TOPICS = ["photosynthesis", "the French Revolution", "black holes", "the water cycle", "jazz",
          "volcanoes", "the Roman Empire", "machine learning", "coral reefs", "the printing press",
          "glaciers", "the immune system", "chess openings", "solar panels", "the Silk Road",
          "honey bees", "earthquakes", "the Renaissance", "compilers", "tides", "the Moon landing",
          "rainforests", "vaccines", "the stock market", "origami", "deserts", "DNA",
          "the Great Wall of China", "hurricanes", "the internet", "dinosaurs", "bread baking",
          "electric cars", "the Nile", "opera", "antibiotics", "submarines", "the Olympic Games",
          "quantum computing", "penguins", "wind turbines", "the Cold War", "mushrooms",
          "lighthouses", "the Amazon river", "typography", "nuclear fusion", "tea ceremonies"]
FORMS = [("Explain {t} in two sentences.", "In two sentences, what should I know about {t}?"),
         ("What is the most surprising fact about {t}?", "Tell me one surprising fact about {t}."),
         ("Why does {t} matter today?", "How is {t} still important now?"),
         ("Give a short history of {t}.", "Summarize the history of {t} briefly.")]


def workload(n, repeat, paraphrase, seed):
    rng = random.Random(seed)
    questions = [(t, f) for t in TOPICS for f in range(len(FORMS))]
    rng.shuffle(questions)
    issued, out, fresh = [], [], iter(questions)
    for _ in range(n):
        r = rng.random()
        if issued and r < repeat:
            out.append(("repeat", rng.choice(issued)))
        elif issued and r < repeat + paraphrase:
            t, f = rng.choice(issued)[1]
            out.append(("paraphrase", FORMS[f][1].format(t=t)))
        else:
            t, f = next(fresh)
            prompt = FORMS[f][0].format(t=t)
            issued.append((prompt, (t, f)))
            out.append(("new", issued[-1]))
    # (kind, prompt, question): a paraphrase and a repeat belong to the question they reword.
    rows = []
    for kind, p in out:
        if kind == "paraphrase":
            rows.append((kind, p, None))
        else:
            rows.append((kind, p[0], p[1]))
    # A paraphrase's question: the one whose paraphrase form it is.
    by_paraphrase = {FORMS[f][1].format(t=t): (t, f) for t in TOPICS for f in range(len(FORMS))}
    return [(k, p, q if q is not None else by_paraphrase[p]) for k, p, q in rows]


def start_server(args, work, cache):
    port_file = work / f"ports-{cache}.json"
    log = open(work / f"server-{cache}.log", "wb")
    cmd = [str(args.build / "src/tools/strata-server"), "--model", str(args.model),
           "--grpc-port", "0", "--metrics-port", "0", "--http-port", "0", "--port-file",
           str(port_file), "--threads", str(args.threads), "--log-level", "warn",
           "--response-cache", "false" if cache == "off" else "true"]
    if cache == "semantic":
        cmd += ["--semantic-cache", "true", "--embedding-model", str(args.embedding_model)]
        if args.semantic_threshold is not None:
            cmd += ["--semantic-cache-threshold", str(args.semantic_threshold)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit((work / f"server-{cache}.log").read_text())
        time.sleep(0.05)
    return proc, json.loads(port_file.read_text())["http_port"]


def one(client, model, prompt, max_tokens, semantic):
    t0 = time.monotonic()
    ttft, tokens, cached, text = None, 0, False, ""
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
        temperature=0, stream=True, stream_options={"include_usage": True},
        extra_body={"cache_semantic": True} if semantic else None)
    for ev in stream:
        if ev.choices and ev.choices[0].delta.content:
            text += ev.choices[0].delta.content
            if ttft is None:
                ttft = time.monotonic() - t0
        if getattr(ev, "cached", None) or (ev.model_extra or {}).get("cached"):
            cached = True
        if ev.usage is not None:
            tokens = ev.usage.completion_tokens
    return ttft if ttft is not None else time.monotonic() - t0, tokens, cached, text


def run(args, work, cache, requests):
    proc, port = start_server(args, work, cache)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                               max_retries=0, timeout=600)
        deadline = time.monotonic() + 120
        while True:  # the ports are bound before the model has loaded
            try:
                model = client.models.list().data[0].id
                one(client, model, "Warm up.", 4, False)
                break
            except openai.APIStatusError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(
                lambda kp: one(client, model, kp[1], args.max_tokens, cache == "semantic"),
                requests))
        wall = time.monotonic() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    ttfts = sorted(r[0] for r in results)
    pct = lambda q: ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))] * 1e3
    cached_by_kind = {k: sum(1 for (kind, _, _), r in zip(requests, results)
                             if kind == k and r[2]) for k in ("new", "repeat", "paraphrase")}
    row = {"cache": cache, "requests": len(results), "seconds": round(wall, 2),
           "completion_tokens_per_s": round(sum(r[1] for r in results) / wall, 1),
           "ttft_ms": {"p50": round(pct(0.5), 1), "p99": round(pct(0.99), 1)},
           "cached_answers": sum(1 for r in results if r[2]), "cached_by_kind": cached_by_kind}
    hit_ttfts = sorted(r[0] for r in results if r[2])
    if hit_ttfts:
        row["ttft_cached_ms_p50"] = round(hit_ttfts[len(hit_ttfts) // 2] * 1e3, 1)
    row["answers"] = [(q, r[3], r[2]) for (_, _, q), r in zip(requests, results)]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeat", type=float, default=0.35)
    ap.add_argument("--paraphrase", type=float, default=0.15)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--embedding-model", type=Path, default=ROOT / "models" / "all-minilm-l6-v2")
    ap.add_argument("--semantic-threshold", type=float, default=None,
                    help="--semantic-cache-threshold of the semantic run (default: the server's)")
    ap.add_argument("--configs", default="off,exact,semantic",
                    help="comma-separated: off, exact, semantic")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    requests = workload(args.requests, args.repeat, args.paraphrase, args.seed)
    kinds = {k: sum(1 for kind, _, _ in requests if kind == k)
             for k in ("new", "repeat", "paraphrase")}
    print(f"workload: {len(requests)} requests, {kinds}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="strata-cache-bench-"))
    rows = []
    for cache in args.configs.split(","):
        row = run(args, work, cache, requests)
        row["workload"] = kinds
        answers = row.pop("answers")
        if cache == "off":
            truth = {}
            for question, text, _ in answers:
                truth.setdefault(question, set()).add(text)
        elif rows and rows[0]["cache"] == "off":
            wrong = [(q, t) for q, t, cached in answers if cached and t not in truth[q]]
            row["wrong_cached_answers"] = len(wrong)
            for q, t in wrong[:5]:
                print(f"  wrong: {q} got {t[:60]!r}", flush=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    by = {r["cache"]: r for r in rows}
    off = by.get("off")
    for name in ("exact", "semantic"):
        on = by.get(name)
        if off is None or on is None:
            continue
        print(f"{name} vs off: "
              f"{on['completion_tokens_per_s'] / off['completion_tokens_per_s']:.2f}x tokens/s, "
              f"TTFT P50 {off['ttft_ms']['p50'] / max(on['ttft_ms']['p50'], 1e-3):.1f}x lower, "
              f"{on['cached_answers']} of {on['requests']} answers cached")


if __name__ == "__main__":
    main()
