#!/usr/bin/env python3
"""Renders deploy/nginx/nginx.conf for replicas somewhere else than strata-N (e.g. loopback).

The compose config names its replicas strata-1..3 and listens on 50051 (gRPC) and 8000 (HTTP)
with the official image's paths. This rewrites exactly those parts of the same file: the
`server` lines of the two upstreams (as many as given), the two `listen` ports, and pid, log
and temp paths under a prefix folder, so nginx runs as an ordinary user. Everything else
(balancing, timeouts, retries, passive health) stays as written, which is what the tests
exercise. Any part it expects but does not find is an error, so the file and this script
cannot drift apart silently.

    python3 deploy/nginx/render.py --prefix /tmp/lb \
        --grpc-upstream 127.0.0.1:50061 --grpc-upstream 127.0.0.1:50062 \
        --http-upstream 127.0.0.1:8001 --http-upstream 127.0.0.1:8002 \
        --grpc-listen 127.0.0.1:50051 --http-listen 127.0.0.1:8000 > /tmp/lb/nginx.conf
    nginx -p /tmp/lb -c /tmp/lb/nginx.conf -g 'daemon off;'
"""
import argparse
import re
import sys
from pathlib import Path

CONFIG = Path(__file__).resolve().parent / "nginx.conf"

_TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def _sub_once(pattern: str, repl: str, text: str) -> str:
    out, n = re.subn(pattern, repl, text, flags=re.M)
    if n != 1:
        raise ValueError(f"nginx.conf: expected one match of {pattern!r}, found {n}")
    return out


def _replace_servers(text: str, upstream: str, port: int, addresses: list[str]) -> str:
    """Replaces the `server strata-N:PORT params;` lines of one upstream block with one line
    per address, keeping the parameters (max_fails, fail_timeout) of the first line."""
    block = re.search(rf"^(\s*)upstream {upstream} \{{\n(.*?)^\1\}}", text, re.M | re.S)
    if block is None:
        raise ValueError(f"nginx.conf: no upstream {upstream}")
    body = block.group(2)
    lines = re.findall(rf"^(\s*)server strata-\d+:{port}( [^;]*)?;\n", body, re.M)
    if not lines:
        raise ValueError(f"nginx.conf: upstream {upstream} has no server strata-N:{port} line")
    if not addresses:
        raise ValueError(f"no addresses for upstream {upstream}")
    indent, params = lines[0][0], lines[0][1] or ""
    new_servers = "".join(f"{indent}server {a}{params};\n" for a in addresses)
    seen = []

    def first_becomes_all(_match):
        seen.append(1)
        return new_servers if len(seen) == 1 else ""

    body = re.sub(rf"^\s*server strata-\d+:{port}( [^;]*)?;\n", first_becomes_all, body,
                  flags=re.M)
    return text[:block.start(2)] + body + text[block.end(2):]


def render(grpc_upstreams: list[str], http_upstreams: list[str], grpc_listen: str,
           http_listen: str, prefix: str, balance: str | None = None,
           source: Path = CONFIG) -> str:
    """The text of `source` with the replicas, listen addresses and paths replaced.

    `balance` replaces the `least_conn;` line of both upstreams (e.g.
    "hash $http_x_prefix_key consistent"); None keeps the file's method."""
    text = source.read_text()
    text = _replace_servers(text, "strata_grpc", 50051, grpc_upstreams)
    text = _replace_servers(text, "strata_http", 8000, http_upstreams)
    text = _sub_once(r"^(\s*)listen 50051 http2;", rf"\1listen {grpc_listen} http2;", text)
    text = _sub_once(r"^(\s*)listen 8000;", rf"\1listen {http_listen};", text)
    text = _sub_once(r"^pid \S+;", f"pid {prefix}/nginx.pid;", text)
    text = _sub_once(r"^error_log \S+", f"error_log {prefix}/error.log", text)
    text = _sub_once(r"^(\s*)access_log \S+", rf"\1access_log {prefix}/access.log", text)
    # The packaged defaults (/var/lib/nginx/...) are root's; nginx creates these at start.
    temp = "".join(f"  {d}_temp_path {prefix}/{d}_temp;\n" for d in _TEMP_DIRS)
    text = _sub_once(r"^http \{\n", "http {\n" + temp, text)
    if balance is not None:
        text, n = re.subn(r"^(\s*)least_conn;", rf"\1{balance};", text, flags=re.M)
        if n != 2:
            raise ValueError(f"nginx.conf: expected least_conn in both upstreams, found {n}")
    return text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grpc-upstream", action="append", required=True, metavar="HOST:PORT")
    parser.add_argument("--http-upstream", action="append", required=True, metavar="HOST:PORT")
    parser.add_argument("--grpc-listen", required=True, metavar="[HOST:]PORT")
    parser.add_argument("--http-listen", required=True, metavar="[HOST:]PORT")
    parser.add_argument("--prefix", required=True, help="folder for pid, logs and temp files")
    parser.add_argument("--balance", help='replaces least_conn, e.g. "hash $remote_addr"')
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(
            render(args.grpc_upstream, args.http_upstream, args.grpc_listen, args.http_listen,
                   str(Path(args.prefix).resolve()), args.balance))
    except ValueError as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
