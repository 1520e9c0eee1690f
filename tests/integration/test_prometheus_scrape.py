"""A real Prometheus scrapes a real strata-server: the exposition parses, the target is up, and
an operator's queries (P99 from the histograms with histogram_quantile, P99 straight from the
summaries) answer with numbers."""
import json
import math
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from strata_server import Server, greedy, pb

PROMPT_FOR_METRICS = "Once upon a time, in a small village by the sea,"

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port: int, expr: str):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def scalar(port: int, expr: str):
    result = query(port, expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (scripts/setup)")
def test_prometheus_scrapes_the_server_and_computes_p99():
    server = Server()
    prom = None
    work = Path(tempfile.mkdtemp(prefix="strata-prometheus-"))
    try:
        server.wait_serving()
        (work / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: strata\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{server.metrics_port}']\n")
        port = free_port()
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=open(work / "prometheus.log", "wb"))

        def wait_for(expr, check, timeout=60):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    value = scalar(port, expr)
                    if value is not None and check(value):
                        return value
                except OSError:
                    pass
                time.sleep(0.5)
            pytest.fail(f"{expr} never satisfied the check; prometheus log:\n"
                        f"{(work / 'prometheus.log').read_text(errors='replace')[-3000:]}")

        assert wait_for('up{job="strata"}', lambda v: v == 1) == 1
        # Traffic over several scrapes, so rate() sees the histograms grow.
        for i in range(6):
            server.stub.Generate(pb.GenerateRequest(prompt=f"{PROMPT_FOR_METRICS} {i}",
                                                    sampling=greedy(8)), timeout=60)
            time.sleep(0.5)
        p99 = wait_for(
            "histogram_quantile(0.99, sum by (le) "
            "(rate(strata_time_to_first_token_seconds_bucket[1m])))",
            lambda v: math.isfinite(v) and v > 0)
        assert p99 < 60
        itl = wait_for(
            "histogram_quantile(0.5, sum by (le) "
            "(rate(strata_inter_token_latency_seconds_bucket[1m])))",
            lambda v: math.isfinite(v) and v > 0)
        assert itl < 10
        summary_p99 = wait_for('strata_time_to_first_token_quantiles_seconds{quantile="0.99"}',
                               lambda v: math.isfinite(v) and v > 0)
        assert summary_p99 < 60
        assert wait_for("sum(strata_generation_tokens_total)", lambda v: v >= 48) >= 48
        assert wait_for('strata_requests_total{finish_reason="length"}', lambda v: v >= 6) >= 6
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        assert server.stop() == 0
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_the_shipped_scrape_config_and_rules_are_valid():
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(["promtool", "check", "config",
                        str(root / "deploy" / "prometheus" / "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
