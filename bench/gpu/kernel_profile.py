#!/usr/bin/env python3
"""Per-kernel GPU time of Strata's decode steps, read with Nsight Compute.

    kernel_profile.py --ncu NCU --bench STRATA_BENCH_GPU --model MODEL.gguf [--batches 1,32]
                      [--context 512] [--out results.jsonl]

Runs strata-bench-gpu once per batch size under `ncu --clock-control none` (METHOD: the clocks
stay as they are) with one metric, gpu__time_duration.sum, over 2 decode steps after its warm-up,
then prints one table per batch: each kernel's share of a step, calls per step and time per
call, largest first, and the launches per decode step. The bench runs tiny copy and attention tests
and no prefill, so the decode steps are the last kernels it launches: launches per step is the
shortest period of the kernel names over the last `steps` steps, and only those count.
"""
import argparse
import collections
import csv
import io
import json
import subprocess
import sys


def run_ncu(args, batch):
    cmd = [args.ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--print-units", "base", "--kernel-name-base", "demangled",
           args.bench, "--model", args.model, "--copy-mib", "8", "--attn-seqs", "1",
           "--attn-context", "16", "--decode-batches", str(batch), "--decode-context",
           str(args.context), "--decode-steps", str(args.steps), "--prefill-tokens", "0",
           "--reps", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    rows = []
    start = proc.stdout.find('"ID"')
    if start < 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"ncu printed no CSV (rc {proc.returncode})")
    for row in csv.DictReader(io.StringIO(proc.stdout[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            ns = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        rows.append((short(row["Kernel Name"]), ns))
    return rows


def short(name):
    """Kernel name with its template arguments, without the return type, the parameter list and
    the namespaces but the last."""
    for anon in ("(anonymous namespace)::", "<unnamed>::", "(anonymous namespace)", "<unnamed>"):
        name = name.replace(anon, "")
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            name = name[:i]
            break
    head, _, args = name.partition("<")
    head = head.split(" ")[-1]
    head = "::".join(head.split("::")[-2:])
    return head + ("<" + args if args else "")


def step_launches(names, steps):
    """Launches per decode step: the largest period p whose last (steps + 1) x p names repeat
    with period p (the bench runs 3 warm-up steps first, so the decode region is 3 + steps
    periods long; a multiple of the true period would reach into the kernels before it)."""
    for p in range(len(names) // (steps + 1), 0, -1):
        tail = names[-(steps + 1) * p:]
        if all(tail[i] == tail[i + p] for i in range(len(tail) - p)):
            return p
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--bench", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None
    for batch in [int(b) for b in args.batches.split(",")]:
        rows = run_ncu(args, batch)
        names = [n for n, _ in rows]
        per_step = step_launches(names, args.steps)
        if per_step == 0:
            print(f"batch {batch}: could not find the decode step's launches in {len(rows)}")
            continue
        tail = rows[-args.steps * per_step:]
        total = collections.Counter()
        calls = collections.Counter()
        for n, ns in tail:
            total[n] += ns / args.steps
            calls[n] += 1 / args.steps
        step_ns = sum(total.values())
        print(f"\n#### decode step, batch {batch} @ ctx {args.context}: "
              f"{step_ns / 1e3:.1f} us of kernel time, {per_step} launches per step\n")
        print("| kernel | share | calls/step | us/step | us/call |")
        print("|---|---|---|---|---|")
        for n, ns in total.most_common():
            print(f"| {n} | {100 * ns / step_ns:.1f}% | {calls[n]:.0f} | {ns / 1e3:.1f} | "
                  f"{ns / 1e3 / calls[n]:.2f} |")
        if out:
            out.write(json.dumps({"test": "kernel_profile", "batch": batch,
                                  "context": args.context, "launches_per_step": per_step,
                                  "kernel_us_per_step": round(step_ns / 1e3, 1),
                                  "kernels": {n: round(ns / 1e3, 2) for n, ns in total.items()}})
                      + "\n")


if __name__ == "__main__":
    main()
