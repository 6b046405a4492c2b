#!/usr/bin/env python3
"""Echo back-end benchmark: wrk POSTs thesis envelopes to the JAX-WS RI echo, the CXF echo
and nginx (a reference doing no SOAP work: it returns, from a file, the very bytes the echo
answers) side by side in one run, and prints req/s, p50/p99 latency and server CPU.

    .venv/bin/python jaxws-echo/bench/bench_echo.py [--duration 5] [--rounds 2] [--warmup 10]

Needs wrk and nginx (Debian: apt-get install -y wrk nginx). Everything listens on loopback,
on ports 18201-18203, and is stopped at the end. Figures and how to read them:
docs/echo-services.md."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from esbperf.core import procs, scenarios
from esbperf.services import nginx

from esbperf.core.errors import EsbperfError
from esbperf.run import wrk
from esbperf.services.echo import start_echo

HOST = "127.0.0.1"
PORTS = {"jaxws": 18201, "cxf": 18202, "nginx": 18203}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# nginx as a reference that does no SOAP work: it serves, from a file, the bytes the echo answers.
NGINX_SERVER = """    root {answers};
    default_type "text/xml; charset=utf-8";
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    # The static module refuses POST (405); this serves the file anyway, as a GET would.
    error_page 405 =200 $uri;"""
HEADERS = {"Content-Type": "text/xml; charset=utf-8", "SOAPAction": '"echoMessage"'}


def envelope(size: int) -> bytes:
    """A thesis request of exactly `size` bytes (grinder-scripts/contract.py)."""
    contract = scenarios.contract()
    return contract.thesis_envelope(1, contract.thesis_message(size, 1)).encode()


def post(port: int, path: str, body: bytes) -> bytes:
    request = urllib.request.Request(f"http://{HOST}:{port}{path}", data=body, method="POST", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def cpu_seconds(group: int) -> float:
    """CPU (user + system) used so far by every process of a process group."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[2]) == group:  # pgrp; utime and stime follow at 11 and 12
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def run_wrk(port: int, path: str, body: bytes, connections: int, seconds: int) -> dict:
    r = wrk.run(f"http://{HOST}:{port}{path}", body, connections, seconds, headers=HEADERS)
    return {"requests": r.requests, "rps": r.rps, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "errors": r.errors}


def start_nginx(workdir: Path, answers: dict[int, bytes]) -> procs.Process:
    """nginx on loopback answering /answer-<size>.xml with fixed bytes."""
    (workdir / "answers").mkdir(parents=True)
    for size, answer in answers.items():
        (workdir / "answers" / f"answer-{size}.xml").write_bytes(answer)
    workdir.parent.chmod(0o755)   # nginx's unprivileged workers must reach the answers
    return nginx.start(workdir, HOST, PORTS["nginx"], NGINX_SERVER.format(answers=workdir / "answers"),
                       "nginx reference")


@dataclass
class Target:
    name: str
    port: int
    path: Callable[[int], str]   # size -> URL path
    pid: int                     # its process group, for the CPU figures


def measure(target: Target, size: int, connections: int, body: bytes, seconds: int) -> dict:
    before, started = cpu_seconds(target.pid), time.monotonic()
    figures = run_wrk(target.port, target.path(size), body, connections, seconds)
    cpu = cpu_seconds(target.pid) - before
    figures.update(size=size, connections=connections, target=target.name,
                   cpu_percent=100 * cpu / (time.monotonic() - started),
                   cpu_us_per_request=1e6 * cpu / max(figures["requests"], 1))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per measurement (default 5)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per target and step; the best is kept (default 2)")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of warm-up per echo and size (default 10)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 102400], help="request sizes in bytes")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 20, 80])
    parser.add_argument("--raw", action="store_true", help="also measure the raw echo (/raw) of both runtimes")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    procs.raise_on_sigterm()  # so a SIGTERM still stops the servers (as Ctrl-C does)
    wrk.require()
    print("bench: load average before: %.1f %.1f %.1f" % os.getloadavg(), flush=True)

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-echo-") as tmp, procs.ProcessGroup() as group:
        work = Path(tmp)
        echoes = {runtime: group.add(start_echo("ws1", HOST, PORTS[runtime], runtime, workdir=work / runtime))
                  for runtime in ("jaxws", "cxf")}
        bodies, answers = {}, {}
        for size in args.sizes:
            bodies[size] = envelope(size)
            answers[size] = post(PORTS["jaxws"], "/echo", envelope(size))
            if post(PORTS["cxf"], "/echo", envelope(size)).count(b"[echoed by ws1]") != 1:
                raise EsbperfError("the CXF echo did not answer the benchmark request correctly")
        nginx = group.add(start_nginx(work / "nginx", answers))
        for size in args.sizes:
            if post(PORTS["nginx"], f"/answer-{size}.xml", envelope(size)) != answers[size]:
                raise EsbperfError(f"nginx does not answer as configured; see {work / 'nginx'}")
        targets = [Target(runtime, PORTS[runtime], lambda s: "/echo", p.pid) for runtime, p in echoes.items()]
        if args.raw:
            targets += [Target(f"{runtime}-raw", PORTS[runtime], lambda s: "/raw", p.pid) for runtime, p in echoes.items()]
        targets.append(Target("nginx", PORTS["nginx"], lambda s: f"/answer-{s}.xml", nginx.pid))

        print(f"{'size':>7} {'conns':>5} {'target':>9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'CPU %':>6} {'CPU µs/req':>10} {'vs nginx':>8} {'errors':>6}", flush=True)
        for size in args.sizes:
            for target in targets[:-1]:  # the JIT needs traffic; nginx does not
                run_wrk(target.port, target.path(size), bodies[size], 20, args.warmup)
            for connections in args.connections:
                rounds = []
                for k in range(args.rounds):  # alternate the order, so a drift in load hits all alike
                    order = targets if k % 2 == 0 else targets[::-1]
                    rounds.append({t.name: measure(t, size, connections, bodies[size], args.duration)
                                   for t in order})
                # The best round per target: on a shared machine, the least disturbed one.
                row = [max((r[t.name] for r in rounds), key=lambda f: f["rps"]) for t in targets]
                for f in row:
                    f["vs_nginx"] = f["rps"] / row[-1]["rps"]
                    print(f"{size:>7} {connections:>5} {f['target']:>9} {f['rps']:>9.0f} {f['p50_ms']:>8.2f} "
                          f"{f['p99_ms']:>8.2f} {f['cpu_percent']:>6.0f} {f['cpu_us_per_request']:>10.0f} "
                          f"{f['vs_nginx']:>8.2f} {f['errors']:>6}", flush=True)
                results.append(row)
    print("bench: load average after: %.1f %.1f %.1f" % os.getloadavg())
    if args.json:
        args.json.write_text(json.dumps([f for row in results for f in row], indent=2))
    if any(f["errors"] for row in results for f in row):
        print("bench: some requests failed (see the errors column)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EsbperfError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
