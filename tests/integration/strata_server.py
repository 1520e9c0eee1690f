"""Runs the real strata-server on loopback ports and talks to it like any client would.

The Python stubs of proto/strata/v1 are generated with grpc_tools into a temporary folder at
import time, so the tests always use the wire contract as it is in the tree.
"""
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]


def _generate_stubs():
    out = Path(tempfile.mkdtemp(prefix="strata-stubs-"))
    proto_dir = ROOT / "proto"
    protos = sorted((proto_dir / "strata" / "v1").glob("*.proto"))
    rc = protoc.main([
        "grpc_tools.protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
        *[str(p) for p in protos]
    ])
    assert rc == 0, "protoc failed on proto/strata/v1"
    sys.path.insert(0, str(out))
    return {p.stem: (importlib.import_module(f"strata.v1.{p.stem}_pb2"),
                     importlib.import_module(f"strata.v1.{p.stem}_pb2_grpc")) for p in protos}


_stubs = _generate_stubs()
pb, pb_grpc = _stubs["generation"]
admin_pb, admin_pb_grpc = _stubs["cache_admin"]
jobs_pb, jobs_pb_grpc = _stubs["jobs"]


def build_dir() -> Path:
    return Path(os.environ.get("STRATA_BUILD_DIR", ROOT / "build"))


def sanitized() -> bool:
    """The server under test is the ASan/UBSan build (scripts/test sets STRATA_TEST_SANITIZED):
    it runs several times slower, so the heaviest tests sample less there; the release run
    does the whole of every test."""
    return os.environ.get("STRATA_TEST_SANITIZED") == "1"


# For a server whose tests compare outputs across batchings (alone against batched, plain against
# speculative): int8 matmuls give a token the same bits in any batch; fp32's kernels for a few
# tokens and for many differ in the last bits. The sanitized run serves with fp32 otherwise.
BATCH_INVARIANT = ("--matmul-precision", "int8")


def model_path() -> Path:
    return Path(os.environ.get("STRATA_MODEL", ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"))


class Server:
    """One strata-server process; `stub` is a Generation client on a real channel."""

    def __init__(self, *flags: str, threads: int = 2, model: Path | None = None):
        binary = build_dir() / "src" / "tools" / "strata-server"
        assert binary.is_file(), f"{binary} is missing: run scripts/build"
        self.dir = Path(tempfile.mkdtemp(prefix="strata-server-"))
        port_file = self.dir / "ports.json"
        self.log_path = self.dir / "server.log"
        self._log = open(self.log_path, "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
        if sanitized() and not any(f.startswith("--matmul-precision") for f in flags):
            # The default (auto) would time both precisions at start-up, slow under the
            # sanitizers; int8 is the faster there too (its passes check their ranges once per
            # call: matmul_int8_avx512.cc), and is what auto picks on a VNNI CPU. On a CPU without
            # the int8 kernels it runs fp32.
            flags = ("--matmul-precision", "int8", *flags)
        self.proc = subprocess.Popen(
            [str(binary), "--model", str(model or model_path()), "--host", "127.0.0.1", "--grpc-port", "0",
             "--metrics-port", "0", "--http-port", "0", "--port-file", str(port_file),
             "--threads", str(threads), *flags],
            stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"strata-server did not start:\n{self.log()}")
            time.sleep(0.02)
        ports = json.loads(port_file.read_text())
        self.grpc_port = ports["grpc_port"]
        self.metrics_port = ports.get("metrics_port")  # None with --metrics-port -1
        self.http_port = ports.get("http_port")  # None with --http-port -1
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.stub = pb_grpc.GenerationStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)

    def wait_serving(self, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health_status() == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.05)
        raise RuntimeError(f"strata-server never became SERVING:\n{self.log()}")

    def health_status(self, service: str = ""):
        try:
            return self.health.Check(health_pb2.HealthCheckRequest(service=service),
                                     timeout=2).status
        except grpc.RpcError:
            return None

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            return r.read().decode()

    def metric(self, name: str, labels: str = "") -> float:
        """The value of one sample (`labels` as in the exposition, e.g. 'code="CANCELLED"');
        0 when absent."""
        key = name + ("{" + labels + "}" if labels else "")
        for line in self.metrics_text().splitlines():
            if line.startswith(key + " "):
                return float(line.split()[-1])
        return 0.0

    def settled(self, read, quiet: float = 0.3, timeout: float = 30.0):
        """`read(self)` once two reads `quiet` seconds apart agree: the engine publishes a step's
        statistics after the step's tokens have reached the caller, so a value read right after
        a call returns may still move."""
        last = read(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = read(self)
            if now == last:
                return now
            last = now
        raise AssertionError("the metric never settled")

    def wait_metric(self, predicate, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.05)
        return False

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.channel.close()
        self._log.close()
        return self.proc.returncode


def greedy(max_tokens: int, **extra):
    return pb.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **extra)


def idle_kv(server: Server) -> bool:
    """True when no request holds a KV block (the free-block gauge is back at the pool size)."""
    text = server.metrics_text()
    values = {}
    for name in ("strata_kv_cache_free_blocks", "strata_kv_cache_blocks"):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        values[name] = float(m.group(1)) if m else -1
    return values["strata_kv_cache_blocks"] > 0 and (
        values["strata_kv_cache_free_blocks"] == values["strata_kv_cache_blocks"])
