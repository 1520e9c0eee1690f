"""What the benchmark reports record about where they ran: CPU, Strata's commit, the peer's
source. Shared by compare_llamacpp.py and compare_batched.py (stdlib only)."""
from __future__ import annotations

import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def resolve(path: str) -> Path:
    """A path given on the command line, relative to the repository root unless absolute."""
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def strata_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def peer_source(binary: Path) -> str:
    """The registry package scripts/setup_peer built the llama.cpp binary from (its SOURCE file)."""
    try:
        return "`" + (binary.parent / "SOURCE").read_text().strip() + "`"
    except OSError:
        return "an unknown source"
