"""The deployment files, checked offline with the tools an operator would use: hadolint on the
Dockerfile, kustomize and kubernetes-validate on the manifests, promtool on the Prometheus
configs, rules and alert tests; plus the contracts between the files (ports, probes, drain
grace, metric names, mounts) that no single tool sees."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "strata-dashboard.json"
OVERLAYS = ["cpu", "gpu"]
# A Kubernetes release whose schemas kubernetes-validate bundles (it needs no network); the
# manifests use nothing newer (native gRPC probes are GA since 1.27).
KUBERNETES_VERSION = "1.33.0"
CORE_GROUPS = {"v1", "apps/v1", "policy/v1", "autoscaling/v2"}
# Kinds from CRDs: kubernetes-validate has no schema for them, so they are checked structurally.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
PORTS = {"grpc": 50051, "http": 8000, "metrics": 9464}


def tool(name: str) -> str:
    """A tool from the virtual environment that runs these tests, else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    assert found, f"{name} is not installed: run scripts/setup"
    return found


def run(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=120)


# ---- Dockerfile ---------------------------------------------------------------------------

def dockerfile_instructions():
    """[(stage index, INSTRUCTION, arguments)] with continuation lines joined, comments out."""
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out, stage = [], -1
    for line in joined.splitlines():
        if not line.strip():
            continue
        instruction, _, args = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            stage += 1
        out.append((stage, instruction, args.strip()))
    return out


def test_dockerfile_has_no_hadolint_findings():
    r = run(tool("hadolint"), "--no-color", "--format", "json", "deploy/Dockerfile")
    findings = json.loads(r.stdout or "null")
    assert r.returncode == 0 and findings == [], r.stdout + r.stderr
    # Every inline ignore says why on the line above it.
    lines = (DEPLOY / "Dockerfile").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            assert i > 0 and lines[i - 1].startswith("#") and "ignore=" not in lines[i - 1], (
                f"Dockerfile line {i + 1}: say why the rule is ignored on the line above")


def test_dockerfile_builds_cpu_or_cuda_and_runs_slim_as_non_root():
    ins = dockerfile_instructions()
    froms = [args for _, i, args in ins if i == "FROM"]
    assert any(f.startswith("debian:12 ") for f in froms), froms
    assert any(re.match(r"nvidia/cuda:\S+-devel-", f) for f in froms), froms
    assert any(re.match(r"nvidia/cuda:\S+-runtime-", f) for f in froms), froms
    assert any(i == "ARG" and args == "BACKEND=cpu" for _, i, args in ins)
    build = " ".join(args for _, i, args in ins if i == "RUN" and "cmake" in args)
    assert "-DSTRATA_BUILD_TESTS=OFF" in build and "-DCMAKE_BUILD_TYPE=Release" in build
    assert re.search(r"--target strata-server strata-cli", build), build

    last = max(stage for stage, _, _ in ins)
    final = [(i, args) for stage, i, args in ins if stage == last]
    assert final[0][1].startswith("runtime-${BACKEND}"), final[0]
    assert any(i == "COPY" and args.startswith("--from=builder ") for i, args in final)
    installs = " ".join(args for i, args in final if i == "RUN")
    assert not re.search(r"-dev\b|build-essential|cmake|ninja", installs), (
        "the runtime stage installs build tools: " + installs)
    users = [args for i, args in final if i == "USER"]
    assert users and re.fullmatch(r"[1-9][0-9]*(:[1-9][0-9]*)?", users[-1]), (
        f"the runtime user must be numeric and not root, got {users}")
    exposed = {int(p) for i, args in final if i == "EXPOSE" for p in args.split()}
    assert exposed == set(PORTS.values()), exposed
    assert any(i == "VOLUME" and "/models" in args for i, args in final)
    health = [args for i, args in final if i == "HEALTHCHECK"]
    assert health and "strata-cli" in health[0] and " health" in health[0], health
    assert any(i == "ENTRYPOINT" and "strata-server" in args for i, args in final)
    for _, i, args in ins:
        assert not (i in ("COPY", "ADD") and re.search(r"models|\.gguf", args)), (
            f"the model must be mounted, not copied: {i} {args}")


def test_dockerfile_copies_every_source_folder_the_build_reads():
    copied = {args.split()[0].rstrip("/") for _, i, args in dockerfile_instructions()
              if i == "COPY" and not args.startswith("--from")}
    root_cmake = (ROOT / "CMakeLists.txt").read_text()
    # tests/: the image builds with STRATA_BUILD_TESTS=OFF and no fuzzers.
    needed = {d.split("/")[0] for d in re.findall(r"add_subdirectory\((\S+?)\)", root_cmake)}
    needed -= {"tests"}
    for folder in list(needed):
        for cmake in (ROOT / folder).rglob("CMakeLists.txt"):
            needed |= set(re.findall(r"\$\{PROJECT_SOURCE_DIR\}/([A-Za-z0-9_.-]+)",
                                     cmake.read_text()))
    # models/: only a default path compiled into a benchmark, never read while building.
    needed -= {"models"}
    assert "CMakeLists.txt" in copied
    assert needed <= copied, f"the Dockerfile does not copy {sorted(needed - copied)}"


def test_dockerignore_keeps_the_model_and_build_trees_out_of_the_context():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for must in ("models", ".venv", ".git", "build*"):
        assert must in patterns, f".dockerignore misses {must}"
    copied = {args.split()[0] for _, i, args in dockerfile_instructions() if i == "COPY"}
    assert not copied & set(patterns), "the Dockerfile copies something .dockerignore drops"


# ---- Kubernetes ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rendered():
    out = {}
    for overlay in OVERLAYS:
        r = run(tool("kubectl"), "kustomize", f"deploy/kubernetes/overlays/{overlay}")
        assert r.returncode == 0, r.stderr
        out[overlay] = [d for d in yaml.safe_load_all(r.stdout) if d]
    return out


def one(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def is_crd(obj) -> bool:
    return (obj["apiVersion"], obj["kind"]) in CRD_KINDS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_every_object(rendered, overlay):
    kinds = sorted(o["kind"] for o in rendered[overlay])
    assert kinds == sorted(["ConfigMap", "Deployment", "HorizontalPodAutoscaler",
                            "PodDisruptionBudget", "Service", "ServiceMonitor"]), kinds


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_core_objects_are_valid_kubernetes(rendered, overlay):
    problems = []
    for obj in rendered[overlay]:
        if is_crd(obj):
            continue
        assert obj["apiVersion"] in CORE_GROUPS, (
            f"{obj['kind']} {obj['apiVersion']}: neither a core kind nor a known CRD")
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except jsonschema.ValidationError as e:  # kubernetes_validate raises this or a subclass
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {e.message} at "
                            f"{'.'.join(str(p) for p in e.absolute_path)}")
    assert not problems, "\n".join(problems)


def test_validation_is_strict_and_offline(rendered):
    """The validator itself catches what a typo would do, without a cluster or network."""
    deployment = json.loads(json.dumps(one(rendered["cpu"], "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(jsonschema.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_servicemonitor_scrapes_the_service_metrics_port(rendered, overlay):
    monitor = one(rendered[overlay], "ServiceMonitor")
    service = one(rendered[overlay], "Service")
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "endpoints", "namespaceSelector", "jobLabel",
                         "targetLabels", "podTargetLabels", "sampleLimit"}, set(spec)
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert spec["endpoints"], "no endpoints"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "scheme",
                                 "honorLabels", "relabelings", "metricRelabelings"}
        assert endpoint["port"] in port_names and endpoint["port"] == "metrics"
        assert endpoint.get("path", "/metrics") == "/metrics"
        assert re.fullmatch(r"[0-9]+[smh]", endpoint["interval"])
    # Alerts match job="strata": the job a ServiceMonitor gives is the Service's name.
    assert service["metadata"]["name"] == "strata" and "jobLabel" not in spec


def configured_settings() -> set:
    """STRATA_* names from docs/configuration.md's tables."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    return set(re.findall(r"\| `(STRATA_[A-Z_]+)` \|", text))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_deployment_probes_ports_drain_and_model(rendered, overlay):
    objects = rendered[overlay]
    config = one(objects, "ConfigMap")
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    settings = config["data"]
    unknown = set(settings) - configured_settings()
    assert not unknown, f"settings docs/configuration.md does not know: {unknown}"
    assert {"configMapRef": {"name": config["metadata"]["name"]}} in container["envFrom"]

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == PORTS
    for name, port in PORTS.items():
        assert int(settings[f"STRATA_{name.upper()}_PORT"]) == port
    assert settings["STRATA_HOST"] == "0.0.0.0"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": PORTS["grpc"]}, probe
    drain = int(settings["STRATA_DRAIN_GRACE_SECONDS"])
    grace = pod["terminationGracePeriodSeconds"]
    assert drain < grace <= drain + 60, (drain, grace)
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > drain, (
        "liveness would restart a draining pod")
    start = container["startupProbe"]
    assert start["periodSeconds"] * start["failureThreshold"] >= 120, "too little time to load"

    assert pod["securityContext"]["runAsNonRoot"] is True
    user = [a for _, i, a in dockerfile_instructions() if i == "USER"][-1]
    assert str(pod["securityContext"]["runAsUser"]) == user.split(":")[0]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    models = [m for m in mounts.values() if m["mountPath"] == "/models"]
    assert models and models[0]["readOnly"] is True
    source = volumes[models[0]["name"]]
    assert "persistentVolumeClaim" in source or "hostPath" in source, source
    assert settings["STRATA_MODEL"].startswith("/models/")
    assert "memory" in container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_pdb_and_hpa_point_at_the_pods(rendered, overlay):
    objects = rendered[overlay]
    deployment = one(objects, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(objects, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == PORTS
    assert all(p["targetPort"] == p["name"] for p in service["spec"]["ports"])
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()

    hpa = one(objects, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2, "one replica cannot keep serving through a drain"
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    name = metric["pods"]["metric"]["name"]
    assert name == "strata_requests_waiting", name
    gauges = (ROOT / "docs" / "metrics.md").read_text().split("## Gauges", 1)[1]
    assert f"`{name}`" in gauges, f"{name} is not a gauge in docs/metrics.md"
    assert metric["pods"]["target"]["type"] == "AverageValue"


def test_overlays_pick_their_backend_and_devices(rendered):
    cpu = one(rendered["cpu"], "Deployment")["spec"]["template"]["spec"]
    gpu = one(rendered["gpu"], "Deployment")["spec"]["template"]["spec"]
    cpu_c, gpu_c = cpu["containers"][0], gpu["containers"][0]
    assert " ".join(cpu_c["args"]) == "--backend cpu"
    assert " ".join(gpu_c["args"]) == "--backend cuda"
    assert cpu_c["image"].endswith(":cpu") and gpu_c["image"].endswith(":cuda")

    assert "nvidia.com/gpu" not in json.dumps(rendered["cpu"])
    threads = int(one(rendered["cpu"], "ConfigMap")["data"]["STRATA_THREADS"])
    assert str(threads) == str(cpu_c["resources"]["limits"]["cpu"]), (
        "STRATA_THREADS should match the CPU limit")

    assert gpu_c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert any(k.startswith("nvidia.com/") for k in gpu.get("nodeSelector", {}))
    assert any(t["key"] == "nvidia.com/gpu" for t in gpu.get("tolerations", []))


# ---- Prometheus ---------------------------------------------------------------------------

def alert_rules():
    doc = yaml.safe_load((PROMETHEUS_DIR / "strata_alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_rules_and_alerts_pass_promtool_check():
    r = run(tool("promtool"), "check", "rules", "strata_rules.yml", "strata_alerts.yml",
            cwd=PROMETHEUS_DIR)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = [int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", r.stdout)]
    assert counts[1:] == [len(alert_rules())] and counts[0] >= 1, r.stdout
    names = {a["alert"] for a in alert_rules()}
    wanted = {"StrataHighTimeToFirstTokenP99", "StrataQueueBacklog", "StrataQueueFull",
              "StrataKVCacheNearlyFull", "StrataHighErrorRate", "StrataInstanceDown"}
    assert names == wanted, names
    for alert in alert_rules():
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        assert {"summary", "description"} <= alert["annotations"].keys(), alert["alert"]


def test_alert_unit_tests_pass_and_each_alert_fires_and_stays_quiet():
    r = run(tool("promtool"), "test", "rules", "strata_alerts_test.yml", cwd=PROMETHEUS_DIR)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    tests = yaml.safe_load((PROMETHEUS_DIR / "strata_alerts_test.yml").read_text())
    cases = [c for t in tests["tests"] for c in t.get("alert_rule_test", [])]
    for alert in alert_rules():
        mine = [c for c in cases if c["alertname"] == alert["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{alert['alert']}: no firing case"
        assert any(not c["exp_alerts"] for c in mine), f"{alert['alert']}: no quiet case"


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-compose.yml"])
def test_prometheus_configs_pass_promtool_check(config):
    r = run(tool("promtool"), "check", "config", config, cwd=PROMETHEUS_DIR)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {config} is valid prometheus config file syntax" in r.stdout, r.stdout


def test_compose_prometheus_scrapes_the_three_replicas_with_rules_and_alerts():
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus-compose.yml").read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "strata"]
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"strata-{i}:{PORTS['metrics']}" for i in (1, 2, 3)]
    assert set(config["rule_files"]) == {"strata_rules.yml", "strata_alerts.yml"}


# ---- Compose and Grafana ------------------------------------------------------------------

def compose():
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def bind_mounts(service):
    """{container path: host path} of a service's bind mounts (host paths start with . or $)."""
    out = {}
    for volume in service.get("volumes", []):
        host, container = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::ro|:rw)?",
                                       volume).groups()
        if host.startswith((".", "$")):
            out[container] = host
    return out


def test_compose_runs_three_replicas_behind_nginx_with_monitoring():
    services = compose()["services"]
    assert {"strata-1", "strata-2", "strata-3", "nginx", "redis", "prometheus",
            "grafana"} <= set(services), sorted(services)
    for name in ("strata-1", "strata-2", "strata-3"):
        replica = services[name]
        assert replica["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / replica["build"]["context"] / "deploy" / "Dockerfile").is_file()
        assert any(v.endswith(":/models:ro") for v in replica["volumes"]), replica["volumes"]
        env = replica["environment"]
        assert env["STRATA_HOST"] == "0.0.0.0" and env["STRATA_MODEL"].startswith("/models/")
        grace = int(re.fullmatch(r"(\d+)s", replica["stop_grace_period"]).group(1))
        assert grace > int(env["STRATA_DRAIN_GRACE_SECONDS"]), "stop before the drain ends"
        assert not replica.get("ports"), "replicas are reached through nginx only"

    nginx = services["nginx"]
    assert bind_mounts(nginx) == {"/etc/nginx/nginx.conf": "./nginx/nginx.conf"}
    published = {p.rsplit(":", 1)[-1] for p in nginx["ports"]}
    assert published == {str(PORTS["grpc"]), str(PORTS["http"])}
    depends = nginx["depends_on"]
    assert all(depends[f"strata-{i}"]["condition"] == "service_healthy" for i in (1, 2, 3))
    conf = (DEPLOY / "nginx" / "nginx.conf").read_text()
    for i in (1, 2, 3):
        for port in (PORTS["grpc"], PORTS["http"]):
            assert f"server strata-{i}:{port}" in conf, f"nginx.conf lacks strata-{i}:{port}"

    prometheus = bind_mounts(services["prometheus"])
    assert prometheus["/etc/prometheus/prometheus.yml"] == "./prometheus/prometheus-compose.yml"
    for rule_file in ("strata_rules.yml", "strata_alerts.yml"):
        assert prometheus[f"/etc/prometheus/{rule_file}"] == f"./prometheus/{rule_file}"


def test_compose_bind_mounts_exist():
    for name, service in compose()["services"].items():
        for host in bind_mounts(service).values():
            if host.startswith("$"):  # the model folder, ../models unless overridden
                assert host == "${STRATA_MODELS_DIR:-../models}", host
                continue
            assert (DEPLOY / host).exists(), f"{name} mounts {host}, which does not exist"


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard():
    grafana = bind_mounts(compose()["services"]["grafana"])
    assert grafana["/etc/grafana/provisioning"] == "./grafana/provisioning"
    provisioning = DEPLOY / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())[
        "datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "strata.yaml").read_text())[
        "providers"]
    folder = provider["options"]["path"]
    mounted = [c for c, h in grafana.items() if h == "./grafana/strata-dashboard.json"]
    assert mounted and Path(mounted[0]).parent == Path(folder), (mounted, folder)


def dashboard_targets():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t) for p in panels for t in p.get("targets", [])]


def test_dashboard_panels_each_have_promql_targets_and_do_not_overlap():
    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    cells = set()
    for p in panels:
        assert p["targets"], f"panel {p['title']!r} has no target"
        for t in p["targets"]:
            assert t.get("expr", "").strip(), f"panel {p['title']!r}: a target without PromQL"
        assert p["datasource"]["type"] == "prometheus"
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert g["x"] + g["w"] <= 24 and not mine & cells, f"panel {p['title']!r} overlaps"
        cells |= mine
    variables = {v["name"] for v in dash["templating"]["list"]}
    for title, t in dashboard_targets():
        used = set(re.findall(r"\$\{?(\w+)", t["expr"]))
        builtin = {"__rate_interval", "__interval", "__range"}
        assert used <= variables | builtin, f"{title}: unknown variables {used - variables}"


def test_dashboard_shows_the_operator_signals():
    exprs = [t["expr"] for _, t in dashboard_targets()]
    for metric in ("time_to_first_token", "inter_token_latency", "e2e_request_latency",
                   "request_queue_time"):
        for q in ("0.5", "0.9", "0.95", "0.99"):
            assert any(e.startswith(f"histogram_quantile({q},") and
                       f"strata_{metric}_seconds_bucket" in e for e in exprs), (metric, q)
    for pattern in (r"rate\(strata_prompt_tokens_total", r"rate\(strata_generation_tokens_total",
                    r"strata_requests_waiting", r"strata_kv_cache_usage_ratio",
                    r"strata_batch_size", r"sum by \(code\) \(rate\(strata_request_errors_total",
                    r"rate\(strata_requests_total", r"strata_prefix_cache_hits_total"):
        assert any(re.search(pattern, e) for e in exprs), f"no panel shows {pattern}"


def exported_metrics() -> set:
    """Metric names docs/metrics.md documents, with their histogram/summary series."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    names = set(re.findall(r"\bstrata_[a-z0-9_]*[a-z0-9]", text))
    latencies = text.split("## Latencies", 1)[1].split("## Counters", 1)[0]
    for what in re.findall(r"^\| `([a-z0-9_]+)` \|", latencies, re.M):
        names |= {f"strata_{what}_seconds", f"strata_{what}_quantiles_seconds"}
    return names | {n + s for n in names for s in ("_bucket", "_sum", "_count")}


def test_dashboard_and_alerts_use_only_documented_metrics():
    known = exported_metrics()
    assert "strata_time_to_first_token_seconds_bucket" in known  # the parse found the table
    exprs = [(title, t["expr"]) for title, t in dashboard_targets()]
    exprs += [(a["alert"], a["expr"]) for a in alert_rules()]
    for where, expr in exprs:
        used = set(re.findall(r"\bstrata_[a-z0-9_]*[a-z0-9]\b", expr))
        # Prometheus' own `up` is the one other series (replicas up, instance down).
        assert used or re.match(r"(sum\()?up\{", expr), f"{where}: no metric in {expr}"
        assert used <= known, f"{where}: {sorted(used - known)} not in docs/metrics.md"
