"""Every query of the Grafana dashboard and every alert expression, run by a real Prometheus
against a real strata-server (the real model on loopback ports) that has served a few unary
and streaming requests: each query must parse and evaluate, and the core panels (latency
percentiles, generated tokens/s, queue depth, KV usage) must show numbers."""
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import time
import types
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from strata_server import Server, greedy, pb  # noqa: E402

PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "strata-dashboard.json"
PROMETHEUS = shutil.which("prometheus")
# What Grafana would put in for its variables: a 1 s scrape makes a 1 m rate window plenty.
GRAFANA_VARIABLES = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m",
                     "instance": ".*"}
# Series that must hold numbers once the server has served requests (substrings of queries).
CORE = ("strata_time_to_first_token_seconds_bucket", "strata_inter_token_latency_seconds_bucket",
        "strata_e2e_request_latency_seconds_bucket", "rate(strata_generation_tokens_total",
        "strata_requests_waiting", "strata_kv_cache_usage_ratio")
# Longer than two KV blocks of 16 tokens, sent twice: the second request hits the prefix cache.
SHARED_PROMPT = ("You are a careful assistant who answers in one short sentence. The user asks "
                 "about the weather, the sea, the mountains and the long road home; answer "
                 "kindly and briefly. Question:")


def grafana_to_promql(expr: str) -> str:
    out = re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_VARIABLES[m.group(1)], expr)
    assert "$" not in out, out
    return out


def dashboard_queries():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [pytest.param(grafana_to_promql(t["expr"]), id=f"{p['title']}/{t['refId']}")
            for p in panels for t in p["targets"]]


def alert_expressions():
    doc = yaml.safe_load((PROMETHEUS_DIR / "strata_alerts.yml").read_text())
    return [pytest.param(r["expr"], id=r["alert"])
            for g in doc["groups"] for r in g["rules"] if "alert" in r]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port: int, path: str, **params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:  # a bad query answers 400 with a JSON error
        return json.loads(e.read())


def query(port: int, expr: str):
    body = api(port, "query", query=expr)
    assert body["status"] == "success", f"{expr}: {body.get('error')}"
    return body["data"]["result"]


def wait_for(what: str, check, log: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, AssertionError, KeyError, IndexError):
            pass
        time.sleep(0.25)
    pytest.fail(f"{what} never happened; prometheus log:\n"
                f"{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A strata-server that has served requests and a Prometheus that scraped it since."""
    if PROMETHEUS is None:
        pytest.fail("prometheus is not installed: run scripts/setup")
    work = tmp_path_factory.mktemp("prometheus")
    log = work / "prometheus.log"
    server = Server()
    prom = None
    stopped = None
    try:
        server.wait_serving()
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(PROMETHEUS_DIR / "strata_rules.yml"),
                           str(PROMETHEUS_DIR / "strata_alerts.yml")],
            "scrape_configs": [{"job_name": "strata", "static_configs": [
                {"targets": [f"127.0.0.1:{server.metrics_port}"]}]}],
        }
        (work / "prometheus.yml").write_text(yaml.safe_dump(config))
        with open(log, "wb") as log_file:
            prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={work / 'prometheus.yml'}",
                 f"--storage.tsdb.path={work / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=log_file)
        # A scrape before any traffic, so rate() sees the counters grow.
        wait_for("a first scrape", lambda: query(port, 'up{job="strata"}')[0]["value"][1] == "1",
                 log)

        sent = 0
        for i in range(2):
            server.stub.Generate(pb.GenerateRequest(prompt=SHARED_PROMPT + f" {i}",
                                                    sampling=greedy(8)), timeout=60)
            sent += 1
        for i in range(2):
            chunks = list(server.stub.GenerateStream(
                pb.GenerateRequest(prompt=f"Once upon a time, {i}", sampling=greedy(8)),
                timeout=60))
            assert chunks
            sent += 1
        with pytest.raises(grpc.RpcError) as refused:
            server.stub.Generate(pb.GenerateRequest(
                prompt="Hello", sampling=pb.SamplingParams(max_tokens=4, temperature=-1.0)),
                timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        traffic_end = time.time()

        # At least two scrapes after the last request: the last scrape is a full interval past
        # the end of the traffic.
        def scraped_twice_since():
            (sample,) = query(port, 'timestamp(up{job="strata"})')
            return float(sample["value"][1]) >= traffic_end + 1.0
        wait_for("two scrapes after the traffic", scraped_twice_since, log)
        (ended,) = query(port, "sum(strata_requests_total)")
        assert float(ended["value"][1]) == sent, ended
        yield types.SimpleNamespace(port=port, log=log)
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(timeout=30)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait()
        stopped = server.stop()
    assert stopped == 0, (f"strata-server exited {stopped}:\n"
                          f"{server.log_path.read_text(errors='replace')[-3000:]}")


@pytest.mark.parametrize("expr", dashboard_queries())
def test_dashboard_query_evaluates(prometheus, expr):
    result = query(prometheus.port, expr)
    if any(core in expr for core in CORE):
        assert result, f"{expr}: no series"
        for sample in result:
            value = float(sample["value"][1])
            assert math.isfinite(value) and value >= 0, f"{expr}: {sample}"


@pytest.mark.parametrize("expr", alert_expressions())
def test_alert_expression_evaluates(prometheus, expr):
    query(prometheus.port, expr)


def test_rules_load_evaluate_and_nothing_fires_on_a_healthy_server(prometheus):
    def all_rules_evaluated():
        groups = api(prometheus.port, "rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) >= 2 and all(r["health"] == "ok" for r in rules)
    wait_for("every rule evaluated", all_rules_evaluated, prometheus.log, timeout=30)
    groups = api(prometheus.port, "rules")["data"]["groups"]
    assert {g["name"] for g in groups} == {"strata", "strata-alerts"}
    alerts = api(prometheus.port, "alerts")["data"]["alerts"]
    assert alerts == [], alerts


def test_core_panels_show_the_traffic(prometheus):
    port = prometheus.port
    (tokens,) = query(port, "sum(rate(strata_generation_tokens_total[1m]))")
    assert float(tokens["value"][1]) > 0
    (p99,) = query(port, 'strata_time_to_first_token_quantiles_seconds{quantile="0.99"}')
    assert 0 < float(p99["value"][1]) < 60
    (hits,) = query(port, "sum(strata_prefix_cache_hits_total)")
    assert float(hits["value"][1]) > 0, "the repeated prompt prefix never hit the cache"
    errors = query(port, "sum by (code) (strata_request_errors_total)")
    assert [e["metric"]["code"] for e in errors] == ["INVALID_ARGUMENT"], errors
