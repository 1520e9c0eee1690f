"""Overload and shutdown of the real strata-server: a full queue refuses at once, SIGTERM drains
(health NOT_SERVING, new calls UNAVAILABLE, in-flight calls finish, exit 0), and a drain past
its grace period cancels what is left."""
import signal
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2

from strata_server import Server, greedy, pb, sanitized

PROMPT = "Once upon a time, in a small village by the sea,"


def start_stream(server, max_tokens, out, key):
    """Runs a GenerateStream call on a thread, storing (tokens, finish reason, status code)."""

    def run():
        tokens, finish, code = [], None, grpc.StatusCode.OK
        try:
            for m in server.stub.GenerateStream(
                    pb.GenerateRequest(prompt=PROMPT, sampling=greedy(max_tokens)), timeout=300):
                tokens += m.token_ids
                if m.finish_reason:
                    finish = m.finish_reason
        except grpc.RpcError as e:
            code = e.code()
        out[key] = (tokens, finish, code)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_full_queue_gets_resource_exhausted_at_once():
    # One request runs (batch size 1), one waits in the scheduler, two fill the queue; every
    # further call is refused at once. The accepted ones end at their deadline.
    server = Server("--max-batch-size", "1", "--max-queued-requests", "2")
    try:
        server.wait_serving()
        codes = []
        lock = threading.Lock()

        def call():
            try:
                server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(400)),
                                     timeout=4)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            with lock:
                codes.append(code)

        threads = []
        for _ in range(8):
            threads.append(threading.Thread(target=call))
            threads[-1].start()
            time.sleep(0.1)
        for t in threads:
            t.join()
        assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) >= 4, codes
        assert server.metric("strata_request_errors_total", 'code="RESOURCE_EXHAUSTED"') >= 4
    finally:
        assert server.stop() == 0


def test_sigterm_drains_in_flight_requests_and_exits_zero():
    server = Server("--drain-grace-seconds", "60")
    server.wait_serving()
    results = {}
    thread = start_stream(server, 48, results, "in_flight")
    assert server.wait_metric(lambda s: s.metric("strata_requests_running") == 1)
    server.signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while server.health_status() == health_pb2.HealthCheckResponse.SERVING:
        assert time.monotonic() < deadline, "health stayed SERVING after SIGTERM"
        time.sleep(0.02)
    if server.proc.poll() is None:
        with pytest.raises(grpc.RpcError) as e:
            server.stub.Generate(pb.GenerateRequest(prompt=PROMPT, sampling=greedy(2)),
                                 timeout=10)
        # UNAVAILABLE when the call reaches the draining service; CANCELLED when it races the
        # gRPC listener's shutdown (the server stops taking calls at SIGTERM). Refused either way.
        assert e.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    thread.join(timeout=120)
    tokens, finish, code = results["in_flight"]
    assert code == grpc.StatusCode.OK
    assert finish == pb.FINISH_REASON_LENGTH and len(tokens) == 48
    assert server.proc.wait(timeout=60) == 0
    log = server.log()
    assert "draining" in log and "stopped" in log
    server.stop()


def test_a_drain_past_its_grace_cancels_what_is_left():
    server = Server("--drain-grace-seconds", "0.5", "--log-format", "json")
    server.wait_serving()
    results = {}
    thread = start_stream(server, 2000, results, "long")
    assert server.wait_metric(lambda s: s.metric("strata_requests_running") == 1)
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.proc.wait(timeout=60) == 0
    assert time.monotonic() - started < 15
    thread.join(timeout=30)
    tokens, finish, code = results["long"]
    assert code == grpc.StatusCode.UNAVAILABLE
    assert 0 < len(tokens) < 2000
    # JSON logs: one object per line, with the request id as a field.
    lines = [line for line in server.log().splitlines() if line.startswith("{")]
    assert any('"msg":"request finished"' in line and '"request_id":"strata-' in line
               for line in lines), server.log()
    server.stop()


def test_a_bad_setting_exits_with_a_clear_message():
    import subprocess
    from strata_server import build_dir
    binary = build_dir() / "src" / "tools" / "strata-server"
    r = subprocess.run([str(binary), "--model", "x.gguf", "--max-batch-size", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "max_batch_size" in r.stderr and "[1," in r.stderr
    r = subprocess.run([str(binary), "--model", "/nonexistent.gguf", "--grpc-port", "0",
                        "--metrics-port", "0", "--http-port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "cannot load the model" in r.stderr


def _cuda_device_visible():
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def test_backend_cuda_without_a_device_is_one_line_and_exit_1_before_binding():
    if _cuda_device_visible():
        pytest.skip("this machine has a CUDA device")
    import socket
    import subprocess
    from strata_server import build_dir, model_path
    binary = build_dir() / "src" / "tools" / "strata-server"
    with socket.socket() as s:  # a port the server would bind if it got that far
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run([str(binary), "--model", str(model_path()), "--backend", "cuda",
                        "--grpc-port", str(port), "--metrics-port", "0", "--http-port", "0",
                        "--log-format", "text"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert "backend cuda" in lines[0] and ("no CUDA device" in lines[0]
                                           or "no CUDA backend" in lines[0]), lines[0]
    assert "listening" not in r.stderr


def test_backend_auto_on_a_cpu_machine_serves_on_the_cpu_and_says_so():
    if _cuda_device_visible():
        pytest.skip("this machine has a CUDA device")
    server = Server("--backend", "auto")
    try:
        server.wait_serving()
        info = server.stub.GetModelInfo(pb.GetModelInfoRequest())
        assert info.backend.startswith("cpu ("), info.backend
        assert 'backend="cpu"' in server.metrics_text(), "strata_build_info{backend} is not cpu"
        # The default --matmul-precision auto times each weight type both ways at start-up where
        # the CPU has the int8 kernels (AVX-512 VNNI), and runs fp32 elsewhere. (The sanitized
        # run's harness asks for int8, which runs fp32 without the kernels.)
        with open("/proc/cpuinfo") as f:
            vnni = "avx512_vnni" in f.read()
        if not vnni:
            assert "fp32 matmul" in info.backend, info.backend
        elif sanitized():
            assert "int8 matmul" in info.backend, info.backend
        else:
            for part in ("matmul, measured (", "Q8_0 ", "Q4_K ", "Q6_K "):
                assert part in info.backend, info.backend
    finally:
        server.stop()
