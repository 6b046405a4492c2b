"""The direct-proxy benchmark: Camel, Synapse and nginx (a plain reverse proxy) in front of
the same echo back end, and the echo alone, measured with wrk in one run, side by side.

    .venv/bin/python esb-projects/bench/bench_esb.py [--rounds 3] [--duration 15] [--warmup 10]
        [--connections 20] [--sizes 1024,102400] [--markdown FILE]

Needs wrk and nginx (Debian: apt-get install wrk nginx). Everything listens on loopback ports
193xx and is stopped at the end. Each engine gets one warm-up run per size (discarded, for the
JITs), then a measured run per round; within a round the engines take turns, so slow drift of
the machine hits them alike, and the table shows the median of the rounds with the range of
req/s. On a shared machine the absolute figures are noisy: compare the ratios."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

from esbperf import procs, scenarios
from esbperf.echo import start_echo
from esbperf.errors import EsbperfError
from esbperf.esb import start_esb

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"
ECHO_PORT, CAMEL_PORT, SYNAPSE_PORT, NGINX_PORT = 19381, 19382, 19383, 19384
ENGINES = ("echo alone", "nginx", "camel", "synapse")


def nginx_config(workdir: Path) -> str:
    """A plain keep-alive reverse proxy: /proxy/echo -> the echo's /echo, like the ESBs."""
    return textwrap.dedent(f"""\
        daemon off;
        worker_processes auto;
        pid {workdir}/nginx.pid;
        error_log {workdir}/error.log warn;
        events {{ worker_connections 4096; }}
        http {{
            access_log off;
            client_body_temp_path {workdir}/body;
            proxy_temp_path {workdir}/proxy;
            fastcgi_temp_path {workdir}/fastcgi;
            uwsgi_temp_path {workdir}/uwsgi;
            scgi_temp_path {workdir}/scgi;
            client_max_body_size 16m;
            client_body_buffer_size 1m;
            upstream echo {{ server {HOST}:{ECHO_PORT}; keepalive 256; }}
            server {{
                listen {HOST}:{NGINX_PORT};
                location = /proxy/echo {{
                    proxy_pass http://echo/echo;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_read_timeout 120s;
                }}
            }}
        }}
        """)


def start_nginx(workdir: Path) -> procs.Process:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise EsbperfError("nginx is not installed (Debian: apt-get install nginx)")
    procs.check_port_free(HOST, NGINX_PORT, "nginx")
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "nginx.conf"
    conf.write_text(nginx_config(workdir))
    process = procs.Process("nginx", [nginx, "-e", str(workdir / "error.log"), "-p", str(workdir), "-c", str(conf)],
                            workdir / "nginx.log", cwd=workdir).start()
    process.wait_until(lambda: procs.port_open(HOST, NGINX_PORT), 15, "listening")
    return process


def check(url: str, body: bytes) -> None:
    """One request first: the answer must be ws1's echo of this very request."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "text/xml; charset=UTF-8", "SOAPAction": '"echoMessage"'})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
        if response.headers.get("X-Echo-Backend") != "ws1" or "[echoed by ws1]</WSResponse>" not in text:
            raise EsbperfError(f"{url} does not answer as the echo ws1 would")


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk(url: str, body_file: Path, seconds: int, connections: int, threads: int) -> dict:
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "30s",
            "-s", str(HERE / "post.lua"), url]
    out = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, BENCH_BODY=str(body_file)))
    if out.returncode != 0:
        raise EsbperfError(f"wrk failed: {out.stderr.strip() or out.stdout.strip()}")
    text = out.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    socket_errors = tuple(map(int, errors.groups())) if errors else (0, 0, 0, 0)
    return {"rps": rps, "p99_ms": float(p99.group(1)) * _UNITS[p99.group(2)],
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "errors": sum(socket_errors), "socket_errors": socket_errors}


def table(results: dict, sizes: list[int], args, load: tuple[float, float]) -> str:
    """Median over the rounds of req/s and of p99, the req/s range, ratios of the medians."""
    lines = ["| engine | size | req/s (median) | req/s (range) | p99 ms (median) | req/s vs nginx | req/s vs echo alone | errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in sizes:
        rps = {e: statistics.median(r["rps"] for r in results[(e, size)]) for e in ENGINES}
        for engine in ENGINES:
            runs = results[(engine, size)]
            low, high = min(r["rps"] for r in runs), max(r["rps"] for r in runs)
            p99 = statistics.median(r["p99_ms"] for r in runs)
            errors = sum(r["non2xx"] + r["errors"] for r in runs)
            lines.append(f"| {engine} | {size // 1024} KB | {rps[engine]:.0f} | {low:.0f}–{high:.0f} | {p99:.1f} | "
                         f"{rps[engine] / rps['nginx']:.2f} | {rps[engine] / rps['echo alone']:.2f} | {errors} |")
    return "\n".join(lines) + (
        f"\n\n(direct proxy /proxy/echo; wrk, {args.connections} keep-alive connections, {args.threads} threads; "
        f"{args.rounds} rounds of {args.duration} s after a {args.warmup} s warm-up; {os.cpu_count()} CPUs, "
        f"load average {load[0]:.1f} before, {load[1]:.1f} after)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured runs per engine and size")
    parser.add_argument("--duration", type=int, default=15, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=10, help="discarded seconds per engine and size, first")
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--sizes", default="1024,102400", help="thesis envelope sizes in bytes")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise EsbperfError("wrk is not installed (Debian: apt-get install wrk)")
    sizes = [int(s) for s in args.sizes.split(",")]
    contract = scenarios.contract()
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-"))
    started: list[procs.Process] = []
    results: dict[tuple[str, int], list[dict]] = {}
    load_before = os.getloadavg()[0]
    try:
        started.append(start_echo("ws1", HOST, ECHO_PORT, workdir=work / "echo"))
        echo = f"http://{HOST}:{ECHO_PORT}"
        # Only ws1 is used by the direct proxy; ws2 and ws3 point at it too.
        backends = {"ws1": echo, "ws2": echo, "ws3": echo}
        started.append(start_esb("camel", HOST, CAMEL_PORT, backends, workdir=work / "camel"))
        started.append(start_esb("synapse", HOST, SYNAPSE_PORT, backends, workdir=work / "synapse"))
        started.append(start_nginx(work / "nginx"))
        urls = {"echo alone": f"{echo}/echo", "nginx": f"http://{HOST}:{NGINX_PORT}/proxy/echo",
                "camel": f"http://{HOST}:{CAMEL_PORT}/proxy/echo",
                "synapse": f"http://{HOST}:{SYNAPSE_PORT}/proxy/echo"}
        bodies = {}
        for size in sizes:
            body = contract.thesis_envelope(1, contract.thesis_message(size, 1)).encode()
            bodies[size] = work / f"body-{size}.xml"
            bodies[size].write_bytes(body)
            for engine in ENGINES:
                check(urls[engine], body)
                if args.warmup:
                    wrk(urls[engine], bodies[size], args.warmup, args.connections, args.threads)
        for round_ in range(args.rounds):
            for size in sizes:
                # A different engine goes first in each round.
                for engine in ENGINES[round_ % len(ENGINES):] + ENGINES[:round_ % len(ENGINES)]:
                    r = wrk(urls[engine], bodies[size], args.duration, args.connections, args.threads)
                    results.setdefault((engine, size), []).append(r)
                    print(f"round {round_ + 1}  {engine:10s} {size:7d} B  {r['rps']:9.1f} req/s  "
                          f"p99 {r['p99_ms']:8.2f} ms  non-2xx {r['non2xx']}, socket errors "
                          "(connect/read/write/timeout) %d/%d/%d/%d" % r["socket_errors"], flush=True)
    finally:
        for process in reversed(started):
            process.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = table(results, sizes, args, (load_before, os.getloadavg()[0]))
    print()
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EsbperfError as e:
        print(f"bench_esb: error: {e}", file=sys.stderr)
        sys.exit(2)
