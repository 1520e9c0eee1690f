"""A flood of huge prompts against strata-server and llama-server: does a normal request suffer?

Issue 20's probe, side by side on the same GGUF. Each server in turn: --flooders clients POST
/v1/completions with a prompt of --flood-bytes of English-like text (too long for the context
once encoded, but not by its byte count alone) in a loop, while one client measures the time to
the first streamed token of a short completion, --samples times. The same measurement on the
idle server comes first. Both servers get the same HTTP requests (the OpenAI completions API).

  .venv/bin/python bench/prompt_flood.py                          # ~2 minutes on 2 cores
  .venv/bin/python bench/prompt_flood.py --systems strata --flooders 16
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import cpu_model, peer_source, resolve, strata_commit  # noqa: E402
from sweep_batch import free_port, wait_http  # noqa: E402


MODEL_NAME = "gemma-3-270m-q4_k_m"  # set from --model in main()


def post(port: int, body: dict, timeout: float) -> http.client.HTTPResponse:
    body = {"model": MODEL_NAME, **body}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    return conn.getresponse()


def ttft_ms(port: int) -> float:
    """Milliseconds to the first streamed text of a short greedy completion."""
    start = time.monotonic()
    response = post(port, {"prompt": "Hello there, how are", "max_tokens": 4, "temperature": 0,
                           "stream": True}, timeout=120)
    for line in response:
        if line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line:
            elapsed = (time.monotonic() - start) * 1000
            response.read()
            return elapsed
    raise RuntimeError(f"no streamed text (HTTP {response.status})")


def measure(port: int, args) -> dict:
    idle = [ttft_ms(port) for _ in range(args.samples)]
    text = ("the quick brown fox jumps over the lazy dog " * (args.flood_bytes // 44 + 1))[
        :args.flood_bytes]
    stop = threading.Event()
    refusals = []
    lock = threading.Lock()

    def flood():
        while not stop.is_set():
            start = time.monotonic()
            try:
                response = post(port, {"prompt": text, "max_tokens": 2}, timeout=300)
                response.read()
                status = response.status
            except OSError:
                status = -1
            with lock:
                refusals.append((status, time.monotonic() - start))

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(args.flooders)]
    for t in threads:
        t.start()
    time.sleep(args.warmup_s)
    flooded = [ttft_ms(port) for _ in range(args.samples)]
    stop.set()
    for t in threads:
        t.join(timeout=300)
    statuses = sorted({s for s, _ in refusals})
    return {"idle": idle, "flooded": flooded, "flood_answers": len(refusals),
            "flood_statuses": statuses,
            "flood_answer_s": statistics.mean(d for _, d in refusals) if refusals else None}


def start(cmd: list[str], log: Path, health: str) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    wait_http(health, proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--build", default="build")
    p.add_argument("--llama-server", default=".cache/peer/bin/llama-server")
    p.add_argument("--systems", default="strata,llama")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--flooders", type=int, default=16)
    p.add_argument("--flood-bytes", type=int, default=1_500_000)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--warmup-s", type=float, default=2.0)
    p.add_argument("--markdown", default="")
    args = p.parse_args()
    model, build = resolve(args.model), resolve(args.build)
    global MODEL_NAME
    MODEL_NAME = model.stem
    work = Path(tempfile.mkdtemp(prefix="prompt-flood-"))
    results = {}
    for system in args.systems.split(","):
        port = free_port()
        if system == "strata":
            cmd = [str(build / "src/tools/strata-server"), "--model", str(model), "--host",
                   "127.0.0.1", "--grpc-port", "0", "--metrics-port", "0", "--http-port",
                   str(port), "--threads", str(args.threads)]
        elif system == "llama":
            cmd = [str(resolve(args.llama_server)), "-m", str(model), "--host", "127.0.0.1",
                   "--port", str(port), "-t", str(args.threads), "-c", "32768", "-np", "1",
                   "--no-webui"]
        else:
            raise SystemExit(f"unknown system {system}")
        proc = start(cmd, work / f"{system}.log", f"http://127.0.0.1:{port}/health")
        try:
            results[system] = measure(port, args)
        finally:
            stop(proc)

    def cell(values):
        return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"

    lines = [
        f"Prompt flood: {args.flooders} clients looping {args.flood_bytes:,}-byte prompts "
        f"(max_tokens 2) over HTTP; a short streamed completion's time to first token, median "
        f"(min-max) of {args.samples}. CPU: {cpu_model()}, {args.threads} threads; Strata "
        f"{strata_commit()}; llama-server from {peer_source(resolve(args.llama_server))}.",
        "",
        "| server | TTFT idle, ms | TTFT under the flood, ms | flood answers | their statuses | "
        "mean time to answer a flood prompt, s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for system, r in results.items():
        answer_s = f"{r['flood_answer_s']:.2f}" if r["flood_answer_s"] is not None else "-"
        lines.append(f"| {system} | {cell(r['idle'])} | {cell(r['flooded'])} | "
                     f"{r['flood_answers']} | {', '.join(map(str, r['flood_statuses']))} | "
                     f"{answer_s} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.markdown:
        resolve(args.markdown).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
