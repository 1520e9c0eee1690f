#!/usr/bin/env python3
"""Registers, spills and shared memory of every CUDA kernel, as ptxas reports them; no device.

    bench/gpu/kernel_resources.py [--arch sm_80 --arch sm_90] [--out FILE.md] [--jobs N]

Compiles each kernels/*.cu with the build's flags (-O3, C++17) and `-Xptxas -v` for each
architecture, then prints one markdown row per kernel instantiation: registers, bytes of
stack frame, spill stores and loads, static shared memory. Rows with spills are marked and
listed again at the end. The exit status is 0 even with spills (this is a report, read beside
the device figures in docs/benchmarks.md); 2 when nvcc is missing or a file fails to compile.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def nvcc_path():
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def compile_one(nvcc, source, arch, scratch):
    out = Path(scratch) / f"{source.stem}.{arch}.o"
    cmd = [nvcc, "-std=c++17", "-O3", "-DNDEBUG", f"-I{ROOT / 'include'}", f"-I{ROOT / 'kernels'}",
           f"-arch={arch}", "-Xptxas", "-v", "-c", str(source), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return source.name, arch, proc.returncode, proc.stdout + proc.stderr


def parse(text):
    """Kernels in ptxas's order: (mangled name, arch, regs, frame, spill st, spill ld, smem)."""
    rows = []
    current = None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            current = {"name": m.group(1), "arch": m.group(2), "frame": 0, "st": 0, "ld": 0}
            continue
        if current is None:
            continue
        m = FRAME.search(line)
        if m:
            current["frame"], current["st"], current["ld"] = map(int, m.groups())
            continue
        m = USED.search(line)
        if m:
            current["regs"] = int(m.group(1))
            current["smem"] = int(m.group(2) or 0)
            rows.append(current)
            current = None
    return rows


def demangle(names):
    proc = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    if proc.returncode != 0:
        return names
    out = proc.stdout.splitlines()
    return out if len(out) == len(names) else names


def short(name):
    """The demangled name without namespaces, the anonymous namespace's tag or the parameters."""
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    name = re.sub(r"\bstrata::(kernels::)?(\w+::)*", "", name)
    depth = 0
    for i, ch in enumerate(name):  # cut the parameter list: the first '(' outside template args
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", help="sm_XX (repeatable; default sm_80, sm_90)")
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    archs = args.arch or ["sm_80", "sm_90"]
    nvcc = nvcc_path()
    if nvcc is None:
        print("no nvcc: install the CUDA toolkit", file=sys.stderr)
        return 2
    sources = sorted((ROOT / "kernels").glob("*.cu"))
    results = []
    with tempfile.TemporaryDirectory() as scratch, \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(compile_one, nvcc, s, a, scratch) for s in sources for a in archs]
        for f in futures:
            results.append(f.result())
    failed = [(name, arch, log) for name, arch, rc, log in results if rc != 0]
    for name, arch, log in failed:
        print(f"{name} ({arch}) failed to compile:\n{log}", file=sys.stderr)
    if failed:
        return 2
    kernels = []
    for name, arch, _, log in results:
        for row in parse(log):
            row["file"] = name
            kernels.append(row)
    for row, pretty in zip(kernels, demangle([k["name"] for k in kernels])):
        row["kernel"] = short(pretty)
    kernels.sort(key=lambda k: (k["file"], k["kernel"], k["arch"]))
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    lines = [f"nvcc: {version.splitlines()[-1]}", "",
             "| file | kernel | arch | registers | stack frame B | spill stores / loads B "
             "| smem B |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    spills = []
    for k in kernels:
        mark = " **spills**" if k["st"] or k["ld"] else ""
        lines.append(f"| {k['file']} | `{k['kernel']}` | {k['arch']} | {k['regs']} | {k['frame']} "
                     f"| {k['st']} / {k['ld']}{mark} | {k['smem']} |")
        if mark:
            spills.append(f"{k['kernel']} ({k['arch']}): {k['st']} B stored, {k['ld']} B loaded")
    lines.append("")
    lines.append(f"{len(kernels)} kernel instantiations; {len(spills)} with spills"
                 + (":" if spills else "."))
    lines.extend(f"- {s}" for s in spills)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
