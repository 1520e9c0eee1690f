"""TLS and mTLS on the real server's gRPC and HTTP ports, with certificates made here by the
openssl command line tool.

- A client with a certificate the client CA signed is served on both ports; one without a
  certificate, with one from an unknown CA, or with an expired one is refused at the handshake.
- A renewed server certificate (here: one from another CA) is picked up without a restart, on
  change (--tls-refresh-seconds) and on SIGHUP, while a connection made before keeps working.
- Bad TLS settings stop the server at start with one clear line.
"""
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from strata_server import Server, greedy, pb, pb_grpc

def openssl(*args, cwd):
    assert shutil.which("openssl"), "the openssl tool is missing: run scripts/setup"
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN={name}", "-days", "2",
            cwd=d)


def issue(d: Path, name: str, ca: str, days: int = 2, server: bool = False):
    """{name}.pem and {name}.key, signed by `ca`; a server certificate names localhost."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server else
                   "extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days), "-extfile", ext.name,
            cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    for ca in ("server_ca", "server_ca2", "client_ca", "rogue_ca"):
        make_ca(d, ca)
    issue(d, "server", "server_ca", server=True)
    issue(d, "server2", "server_ca2", server=True)
    issue(d, "client", "client_ca")
    issue(d, "rogue", "rogue_ca")
    issue(d, "expired", "client_ca", days=-1)
    return d


def start(pki, *flags):
    live = pki / f"live-{time.monotonic_ns()}"
    live.mkdir()
    shutil.copy(pki / "server.pem", live / "cert.pem")
    shutil.copy(pki / "server.key", live / "key.pem")
    s = Server("--tls-cert-file", str(live / "cert.pem"), "--tls-key-file",
               str(live / "key.pem"), "--tls-client-ca-file", str(pki / "client_ca.pem"), *flags)
    s.live = live
    connect(s, pki, "server_ca", "client")
    deadline = time.monotonic() + 60
    while s.health_status() != 1:  # SERVING
        assert time.monotonic() < deadline, s.log()
        time.sleep(0.1)
    return s


def credentials(pki, ca, client):
    return grpc.ssl_channel_credentials(
        root_certificates=(pki / f"{ca}.pem").read_bytes(),
        private_key=(pki / f"{client}.key").read_bytes() if client else None,
        certificate_chain=(pki / f"{client}.pem").read_bytes() if client else None)


def connect(s, pki, ca, client):
    """Points the server helper's stubs at a new TLS channel."""
    from grpc_health.v1 import health_pb2_grpc
    s.channel = grpc.secure_channel(f"localhost:{s.grpc_port}", credentials(pki, ca, client))
    s.stub = pb_grpc.GenerationStub(s.channel)
    s.health = health_pb2_grpc.HealthStub(s.channel)


def grpc_works(s, pki, ca, client) -> bool:
    with grpc.secure_channel(f"localhost:{s.grpc_port}", credentials(pki, ca, client)) as ch:
        try:
            pb_grpc.GenerationStub(ch).Tokenize(pb.TokenizeRequest(text="hi"), timeout=10)
            return True
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            return False


def https_works(s, pki, ca, client) -> bool:
    ctx = ssl.create_default_context(cafile=str(pki / f"{ca}.pem"))
    if client:
        ctx.load_cert_chain(str(pki / f"{client}.pem"), str(pki / f"{client}.key"))
    try:
        with urllib.request.urlopen(f"https://localhost:{s.http_port}/health", context=ctx,
                                    timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(pki):
    s = start(pki, "--tls-refresh-seconds", "1")
    yield s
    assert s.stop() == 0, s.log()


def test_a_client_with_a_certificate_of_the_client_ca_is_served_on_both_ports(server, pki):
    r = server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(2)), timeout=60)
    assert r.usage.completion_tokens == 2
    assert https_works(server, pki, "server_ca", "client")


@pytest.mark.parametrize("client", [None, "rogue", "expired"])
def test_clients_without_a_valid_certificate_are_refused_at_the_handshake(server, pki, client):
    assert not grpc_works(server, pki, "server_ca", client)
    assert not https_works(server, pki, "server_ca", client)
    assert server.proc.poll() is None


def test_plaintext_is_refused(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.GenerationStub(ch).Tokenize(pb.TokenizeRequest(text="hi"), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health", timeout=10).read()


def test_metrics_can_be_served_over_https_only(pki):
    s = start(pki, "--metrics-port", "-1")
    try:
        assert s.metrics_port is None  # no plaintext metrics port, none in the port file
        assert " metrics=off " in s.log(), s.log()
        ctx = ssl.create_default_context(cafile=str(pki / "server_ca.pem"))
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
        with urllib.request.urlopen(f"https://localhost:{s.http_port}/metrics", context=ctx,
                                    timeout=10) as r:
            text = r.read().decode()
        assert "strata_requests_running" in text
        assert "strata_build_info" in text
    finally:
        assert s.stop() == 0, s.log()


def replace_identity(s, pki, name):
    for src, dst in ((f"{name}.pem", "cert.pem"), (f"{name}.key", "key.pem")):
        tmp = s.live / (dst + ".new")
        shutil.copy(pki / src, tmp)
        tmp.rename(s.live / dst)  # atomic: a reader sees the old file or the new one


def test_a_renewed_certificate_is_used_on_change_without_dropping_connections(server, pki):
    old_channel = server.channel  # made, and used, before the renewal
    server.stub.Tokenize(pb.TokenizeRequest(text="hi"), timeout=10)
    replace_identity(server, pki, "server2")
    deadline = time.monotonic() + 30
    while not (grpc_works(server, pki, "server_ca2", "client") and
               https_works(server, pki, "server_ca2", "client")):
        assert time.monotonic() < deadline, "the renewed certificate was not picked up"
        time.sleep(0.5)
    assert not https_works(server, pki, "server_ca", "client")
    assert not grpc_works(server, pki, "server_ca", "client")
    # The connection made before the renewal goes on.
    assert server.channel is old_channel
    r = server.stub.Generate(pb.GenerateRequest(prompt="Hello", sampling=greedy(2)), timeout=60)
    assert r.usage.completion_tokens == 2
    assert "TLS certificate reloaded" in server.log()


def test_sighup_reloads_the_http_identity_at_once(pki):
    s = start(pki, "--tls-refresh-seconds", "3600")
    try:
        assert https_works(s, pki, "server_ca", "client")
        replace_identity(s, pki, "server2")
        assert https_works(s, pki, "server_ca", "client")  # no check for an hour
        s.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not https_works(s, pki, "server_ca2", "client"):
            assert time.monotonic() < deadline, s.log()
            time.sleep(0.1)
        # A reload that fails keeps the identity in use.
        (s.live / "key.pem").write_text("not a key\n")
        s.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload failed" not in s.log():
            assert time.monotonic() < deadline, s.log()
            time.sleep(0.1)
        assert https_works(s, pki, "server_ca2", "client")
    finally:
        assert s.stop() == 0, s.log()


@pytest.mark.parametrize("flags, words", [
    (["--tls-cert-file", "{pki}/server.pem"], "must be given together"),
    (["--tls-cert-file", "{pki}/server.pem", "--tls-key-file", "{pki}/client.key"],
     "does not match the certificate"),
    (["--tls-cert-file", "{pki}/missing.pem", "--tls-key-file", "{pki}/server.key"],
     "cannot be read"),
    (["--tls-cert-file", "{pki}/server.pem", "--tls-key-file", "{pki}/server.key",
      "--tls-client-ca-file", "{pki}/server.key"], "holds no PEM certificate"),
])
def test_bad_tls_settings_stop_the_server_with_a_clear_line(pki, flags, words):
    from strata_server import build_dir, model_path
    run = subprocess.run([str(build_dir() / "src" / "tools" / "strata-server"), "--model",
                          str(model_path()), "--grpc-port", "0", "--metrics-port", "0",
                          "--http-port", "0", *[f.format(pki=pki) for f in flags]],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert words in run.stdout + run.stderr, run.stdout + run.stderr
