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
import shutil
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

from esbperf.core import procs, scenarios
from esbperf.services import nginx

from esbperf.core.errors import EsbperfError
from esbperf.run import wrk
from esbperf.services.echo import start_echo
from esbperf.services.esb import start_esb

HOST = "127.0.0.1"
ECHO_PORT, CAMEL_PORT, SYNAPSE_PORT, NGINX_PORT = 19381, 19382, 19383, 19384
ENGINES = ("echo alone", "nginx", "camel", "synapse")


# A plain keep-alive reverse proxy: /proxy/echo -> the echo's /echo, like the ESBs.
NGINX_SERVER = f"""    client_max_body_size 16m;
    client_body_buffer_size 1m;
    location = /proxy/echo {{
      proxy_pass http://{HOST}:{ECHO_PORT}/echo;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 120s;
    }}"""
HEADERS = {"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": '"echoMessage"'}


def check(url: str, body: bytes) -> None:
    """One request first: the answer must be ws1's echo of this very request."""
    request = urllib.request.Request(url, data=body, method="POST", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
        if response.headers.get("X-Echo-Backend") != "ws1" or "[echoed by ws1]</WSResponse>" not in text:
            raise EsbperfError(f"{url} does not answer as the echo ws1 would")


def run_wrk(url: str, body: bytes, seconds: int, connections: int, threads: int) -> dict:
    r = wrk.run(url, body, connections, seconds, threads=threads, headers=HEADERS, timeout_s=30)
    return {"rps": r.rps, "p99_ms": r.p99_ms, "non2xx": r.non_2xx, "errors": r.errors - r.non_2xx,
            "socket_errors": (r.connect_errors, r.read_errors, r.write_errors, r.timeouts)}


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
    wrk.require()
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
        started.append(nginx.start(work / "nginx", HOST, NGINX_PORT, NGINX_SERVER))
        urls = {"echo alone": f"{echo}/echo", "nginx": f"http://{HOST}:{NGINX_PORT}/proxy/echo",
                "camel": f"http://{HOST}:{CAMEL_PORT}/proxy/echo",
                "synapse": f"http://{HOST}:{SYNAPSE_PORT}/proxy/echo"}
        bodies = {}
        for size in sizes:
            body = contract.thesis_envelope(1, contract.thesis_message(size, 1)).encode()
            bodies[size] = body
            for engine in ENGINES:
                check(urls[engine], body)
                if args.warmup:
                    run_wrk(urls[engine], bodies[size], args.warmup, args.connections, args.threads)
        for round_ in range(args.rounds):
            for size in sizes:
                # A different engine goes first in each round.
                for engine in ENGINES[round_ % len(ENGINES):] + ENGINES[:round_ % len(ENGINES)]:
                    r = run_wrk(urls[engine], bodies[size], args.duration, args.connections, args.threads)
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
