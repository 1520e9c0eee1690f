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


def add_server_arguments(parser) -> None:
    """The options every benchmark that starts strata-server shares: --model, --build,
    --threads and --markdown (the report is also written there)."""
    parser.add_argument("--model", default="models/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--build", default="build")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--markdown", default="", help="also write the report here")


def use_build(args) -> None:
    """Points tests/integration/strata_server.py's Server at --build."""
    import os
    os.environ["STRATA_BUILD_DIR"] = str(resolve(args.build))


def publish(args, report: str) -> None:
    """Prints the report and writes it to --markdown when given."""
    print(report)
    if args.markdown:
        resolve(args.markdown).write_text(report)
