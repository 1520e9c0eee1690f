"""Three real strata-server replicas behind a real nginx configured by deploy/nginx/nginx.conf,
rendered for loopback by deploy/nginx/render.py (the replica addresses, listen ports and paths
change; balancing, retries, timeouts and passive health are the file's own).

- spread: calls through the balancer reach every replica;
- drain: SIGTERM on one replica under steady load fails no call, the replica exits 0 and the
  other two take over;
- kill: SIGKILL on one replica fails only the calls that were running on it; nginx passes
  later calls on to the other replicas;
- HTTP: the OpenAI-compatible API through the balancer (skipped until strata-server serves it).
"""
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

import grpc
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "deploy" / "nginx"))
import render  # noqa: E402
from strata_server import Server, build_dir, greedy, pb, pb_grpc  # noqa: E402

REPLICAS = 3
PROMPT = "Once upon a time, in a small village by the sea,"

# What a client of the balancer should do with UNAVAILABLE: Strata answers it before it starts a
# request (loading, draining), so retrying is safe, and nginx cannot do it (the code is in the
# grpc-status trailer of an HTTP 200 response, which nginx does not read).
RETRY_UNAVAILABLE = json.dumps({
    "methodConfig": [{
        "name": [{"service": "strata.v1.Generation"}],
        "retryPolicy": {
            "maxAttempts": 5, "initialBackoff": "0.5s", "maxBackoff": "4s",
            "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }]
})


@cache
def serves_http() -> bool:
    """Whether this strata-server build has the OpenAI-compatible HTTP API."""
    binary = build_dir() / "src" / "tools" / "strata-server"
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    return "--http-port" in out.stdout + out.stderr


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file()
                                      else None)
    assert found, "nginx is missing: run scripts/setup (Debian package nginx)"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def served(server: Server) -> float:
    """Requests the replica has ended, all finish reasons (its strata_requests_total)."""
    return sum(float(line.split()[-1]) for line in server.metrics_text().splitlines()
               if line.startswith("strata_requests_total{"))


def busy(server: Server) -> float:
    text = server.metrics_text()
    return sum(float(m.group(1)) for m in re.finditer(
        r"^strata_requests_(?:running|waiting) (\S+)$", text, re.M))


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Nginx:
    """nginx in the foreground on two free loopback ports, with the rendered config."""

    def __init__(self, grpc_upstreams: list[str], http_upstreams: list[str]):
        self.dir = Path(tempfile.mkdtemp(prefix="strata-nginx-"))
        self.conf = self.dir / "nginx.conf"
        self.proc = None
        for _ in range(3):  # a free port may be taken between choosing it and nginx binding it
            self.grpc_port, self.http_port = free_port(), free_port()
            self.conf.write_text(render.render(
                grpc_upstreams, http_upstreams, f"127.0.0.1:{self.grpc_port}",
                f"127.0.0.1:{self.http_port}", str(self.dir)))
            with open(self.dir / "stderr.log", "ab") as stderr:
                self.proc = subprocess.Popen(
                    [nginx_binary(), "-p", str(self.dir), "-c", str(self.conf), "-g",
                     "daemon off;"], stdout=subprocess.DEVNULL, stderr=stderr)
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                if listening(self.grpc_port) and listening(self.http_port):
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"nginx did not start:\n{self.errors()}")

    def errors(self) -> str:
        text = ""
        for name in ("stderr.log", "error.log"):
            if (self.dir / name).exists():
                text += (self.dir / name).read_text(errors="replace")
        return text[-4000:]

    def access_log(self) -> list[dict]:
        """One dict per logged call: its fields (deploy/nginx/nginx.conf, log_format strata)."""
        path = self.dir / "access.log"
        if not path.exists():
            return []
        return [{k: quoted or plain for k, quoted, plain in
                 re.findall(r'(\w+)=(?:"([^"]*)"|([^"\s]+))', line)}
                for line in path.read_text().splitlines()]

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Cluster:
    def __init__(self, replicas: list[Server], nginx: Nginx, http_ports: list[int]):
        self.replicas = replicas
        self.nginx = nginx
        self.http_ports = http_ports
        self.address = f"127.0.0.1:{nginx.grpc_port}"

    def channel(self, retry_unavailable: bool = False) -> grpc.Channel:
        options = [("grpc.service_config", RETRY_UNAVAILABLE)] if retry_unavailable else []
        return grpc.insecure_channel(self.address, options=options)

    def diagnostics(self) -> str:
        logs = "\n".join(f"--- replica {i} (grpc {r.grpc_port}) ---\n{r.log()[-1500:]}"
                         for i, r in enumerate(self.replicas))
        return f"{logs}\n--- nginx ---\n{self.nginx.errors()}"


@pytest.fixture
def cluster():
    flags = ["--http-port", "0"] if serves_http() else []
    replicas, nginx = [], None
    try:
        for _ in range(REPLICAS):
            replicas.append(Server(*flags, threads=1))
        for r in replicas:
            r.wait_serving()
        http_ports = [p for p in (json.loads((r.dir / "ports.json").read_text()).get("http_port")
                                  for r in replicas) if p]
        # Without the HTTP API the http upstream points at a port nothing listens on.
        http_upstreams = [f"127.0.0.1:{p}" for p in http_ports] or [f"127.0.0.1:{free_port()}"]
        nginx = Nginx([f"127.0.0.1:{r.grpc_port}" for r in replicas], http_upstreams)
        yield Cluster(replicas, nginx, http_ports)
    finally:
        if nginx is not None:
            nginx.stop()
            shutil.rmtree(nginx.dir, ignore_errors=True)
        for r in replicas:
            r.stop()


class Load:
    """Client threads calling through the balancer back to back until stopped. Each call carries
    its tag as x-request-id (nginx logs it) and is recorded with its start and end times
    (time.monotonic), status code and the number of tokens it received (before a failure too)."""

    def __init__(self, channel: grpc.Channel, threads: int, max_tokens: int, stream: bool):
        self.stub = pb_grpc.GenerationStub(channel)
        self.max_tokens = max_tokens
        self.stream = stream
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(t,)) for t in range(threads)]
        for t in self._threads:
            t.start()

    def _call(self, call: dict):
        """Runs one call, counting its tokens into call["tokens"] as they arrive."""
        request = pb.GenerateRequest(prompt=PROMPT, sampling=greedy(self.max_tokens))
        metadata = (("x-request-id", call["tag"]),)
        if not self.stream:
            response = self.stub.Generate(request, timeout=60, metadata=metadata)
            call["tokens"] = len(response.token_ids)
            return
        for message in self.stub.GenerateStream(request, timeout=60, metadata=metadata):
            call["tokens"] += len(message.token_ids)

    def _run(self, thread: int):
        n = 0
        while not self._stop.is_set():
            tag = f"t{thread}-{n}"
            n += 1
            call = {"tag": tag, "start": time.monotonic(), "code": grpc.StatusCode.OK,
                    "tokens": 0}
            try:
                self._call(call)
            except grpc.RpcError as e:
                call["code"] = e.code()
                call["details"] = e.details()
            call["end"] = time.monotonic()
            with self._lock:
                self.calls.append(call)

    def in_flight_at(self, t: float) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c["start"] < t < c["end"])

    def stop(self) -> list[dict]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=90)
        return self.calls


def passed_on(access_log: list[dict], first: str) -> list[str]:
    """Tags of the calls nginx sent to `first`, then on to another replica."""
    return [e.get("request_id", "") for e in access_log
            if e.get("upstream", "").startswith(first + ", ")]


def test_calls_through_nginx_reach_every_replica(cluster):
    # least_conn with ties going round robin spreads even sequential calls over all replicas;
    # a balancer that pins a client (hash $remote_addr) sends all of them to one.
    before = [served(r) for r in cluster.replicas]
    with cluster.channel() as channel:
        stub = pb_grpc.GenerationStub(channel)
        errors, lock = [], threading.Lock()

        def worker(k: int):
            for i in range(6):
                try:
                    r = stub.Generate(
                        pb.GenerateRequest(prompt=f"{PROMPT} {k}.{i}", sampling=greedy(4)),
                        timeout=60)
                    assert len(r.token_ids) == 4, r
                except grpc.RpcError as e:
                    with lock:
                        errors.append(f"{e.code()}: {e.details()}")

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert errors == [], f"calls through nginx failed: {errors}\n{cluster.diagnostics()}"
    per_replica = [served(r) - b for r, b in zip(cluster.replicas, before)]
    assert sum(per_replica) == 24, f"replicas counted {per_replica} requests, not 24"
    assert min(per_replica) >= 3, (
        f"24 calls through nginx spread as {per_replica} over the replicas: the balancer does "
        "not spread them")


def test_sigterm_drains_one_replica_without_a_failed_call(cluster):
    victim, survivors = cluster.replicas[0], cluster.replicas[1:]
    victim_upstream = f"127.0.0.1:{victim.grpc_port}"
    # No client retries: the drained replica closes its gRPC listener and sends GOAWAY at once,
    # so nginx opens the next calls on the other replicas itself.
    with cluster.channel(retry_unavailable=False) as channel:
        load = Load(channel, threads=6, max_tokens=6, stream=False)
        try:
            wait_for(lambda: all(served(r) >= 2 for r in cluster.replicas), 60,
                     "every replica to serve calls through nginx")
            # SIGTERM while the victim has calls to finish, so the drain has work to do.
            wait_for(lambda: busy(victim) >= 1, 30, "a call running on the victim")
            at_term = [served(r) for r in survivors]
            victim.signal(signal.SIGTERM)
            rc = victim.proc.wait(timeout=60)
            exited = time.monotonic()
            # After the exit nginx finds the victim's port closed: connection refused, passed
            # on to another replica (grpc_next_upstream error), then marked failed (max_fails).
            wait_for(lambda: time.monotonic() - exited > 3 and all(
                served(r) >= n + 3 for r, n in zip(survivors, at_term)), 60,
                "the other replicas to serve calls after the SIGTERM")
        finally:
            calls = load.stop()
    failed = [c for c in calls if c["code"] != grpc.StatusCode.OK]
    assert rc == 0, f"the drained replica exited with {rc}:\n{victim.log()[-3000:]}"
    drain = re.search(r"draining signal=SIGTERM in_flight=(\d+)", victim.log())
    assert drain and int(drain.group(1)) >= 1, (
        f"the replica had no call in flight at SIGTERM: the drain was not exercised\n"
        f"{victim.log()[-3000:]}")
    assert len(calls) >= 20 and failed == [], (
        f"{len(failed)} of {len(calls)} calls failed across the drain: {failed[:5]}\n"
        f"{cluster.diagnostics()}")
    # nginx passed back no error at all: connection errors to the draining replica were retried
    # on another one (grpc_next_upstream error), and no replica refused a call.
    log = cluster.nginx.access_log()
    assert log, "nginx logged no calls"
    bad = [e for e in log if e.get("status") != "200" or e.get("grpc_status") != "0"]
    assert bad == [], f"nginx passed back failed calls: {bad[:5]} (victim {victim_upstream})"


def test_sigkill_fails_only_the_calls_running_on_the_killed_replica(cluster):
    victim, survivors = cluster.replicas[0], cluster.replicas[1:]
    victim_upstream = f"127.0.0.1:{victim.grpc_port}"
    settle = 0.5  # seconds for nginx to see the victim's connections close
    with cluster.channel() as channel:  # no client retries: what fails here, nginx failed
        load = Load(channel, threads=6, max_tokens=32, stream=True)
        try:
            wait_for(lambda: all(served(r) >= 1 for r in cluster.replicas), 60,
                     "every replica to serve calls through nginx")
            wait_for(lambda: busy(victim) >= 1, 30, "a call running on the victim")
            at_kill = [served(r) for r in survivors]
            killed = time.monotonic()
            victim.signal(signal.SIGKILL)
            victim.proc.wait(timeout=30)
            wait_for(lambda: time.monotonic() - killed > 4 and all(
                served(r) >= n + 3 for r, n in zip(survivors, at_kill)), 60,
                "the other replicas to serve calls after the SIGKILL")
            # nginx tries the dead replica again (least_conn: it has no calls) until max_fails
            # takes it out for fail_timeout, then once more per fail_timeout; each such call is
            # passed on to another replica (grpc_next_upstream error). If the failed calls
            # already took it out, the first one comes after fail_timeout (10 s).
            wait_for(lambda: passed_on(cluster.nginx.access_log(), victim_upstream), 30,
                     "a call that nginx passed on from the dead replica to another one")
        finally:
            calls = load.stop()
    failed = [c for c in calls if c["code"] != grpc.StatusCode.OK]
    in_flight = load.in_flight_at(killed)
    wait_for(lambda: {c["tag"] for c in failed} <= {
        e.get("request_id") for e in cluster.nginx.access_log()}, 10,
        "nginx to log the failed calls")
    upstream_of = {e.get("request_id"): e.get("upstream", "")
                   for e in cluster.nginx.access_log()}
    summary = (f"{len(failed)} of {len(calls)} calls failed, {in_flight} were in flight at the "
               f"kill: {failed[:5]}\n{cluster.diagnostics()}")
    assert failed, f"no call failed: the kill hit no call running on the victim\n{summary}"
    assert len(failed) <= in_flight, summary
    late = [c for c in failed if c["start"] >= killed + settle]
    assert late == [], f"calls started after the kill failed: {late}\n{summary}"
    elsewhere = [(c["tag"], upstream_of.get(c["tag"])) for c in failed
                 if upstream_of.get(c["tag"]) != victim_upstream]
    assert elsewhere == [], f"failed calls that nginx had not sent to the victim: {elsewhere}"
    ok = {c["tag"] for c in calls if c["code"] == grpc.StatusCode.OK}
    retried = passed_on(cluster.nginx.access_log(), victim_upstream)
    assert retried and all(t in ok for t in retried), (
        f"calls passed on from the dead replica failed: {[t for t in retried if t not in ok]}")


def http_json(url: str, body: dict | None = None, timeout: float = 60):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return r.status, r.headers, r.read().decode()


def test_openai_http_api_through_nginx_reaches_every_replica(cluster):
    if not cluster.http_ports:
        pytest.skip("strata-server has no OpenAI-compatible HTTP API yet (no http_port in its "
                    "port file): the HTTP side of deploy/nginx/nginx.conf is not exercised")
    base = f"http://127.0.0.1:{cluster.nginx.http_port}"
    for _ in range(3):
        status, _, _ = http_json(f"{base}/health")
        assert status == 200
    try:
        _, _, text = http_json(f"{base}/v1/models")
        model = json.loads(text)["data"][0]["id"]
    except (urllib.error.HTTPError, KeyError, IndexError):
        with cluster.channel() as channel:
            model = pb_grpc.GenerationStub(channel).GetModelInfo(
                pb.GetModelInfoRequest(), timeout=10).name
    errors, lock = [], threading.Lock()

    def worker(k: int):
        for i in range(4):
            try:
                status, _, text = http_json(f"{base}/v1/completions", {
                    "model": model, "prompt": f"{PROMPT} {k}.{i}", "max_tokens": 4,
                    "temperature": 0})
                assert status == 200 and json.loads(text)["choices"], text
            except (urllib.error.URLError, AssertionError) as e:
                with lock:
                    errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [], f"completions through nginx failed: {errors}\n{cluster.diagnostics()}"
    per_replica = {f"127.0.0.1:{p}": 0 for p in cluster.http_ports}
    # nginx logs a call when it has finished it, which may be just after the client has read it.
    completions = lambda: [e for e in cluster.nginx.access_log()  # noqa: E731
                           if "/v1/completions" in e.get("request", "")]
    wait_for(lambda: len(completions()) >= 12, 10, "nginx to log 12 completions")
    for e in completions():
        if e.get("upstream") in per_replica:
            per_replica[e["upstream"]] += 1
    assert sum(per_replica.values()) == 12 and min(per_replica.values()) >= 2, (
        f"12 completions through nginx spread as {per_replica}")
    # Server-sent events pass through unbuffered and end with [DONE].
    status, headers, text = http_json(f"{base}/v1/completions", {
        "model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "stream": True})
    assert status == 200 and headers.get("Content-Type", "").startswith("text/event-stream")
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert len(events) >= 2 and events[-1] == "[DONE]", text
