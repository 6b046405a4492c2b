#!/usr/bin/env python3
"""Echo back-end benchmark: wrk POSTs thesis envelopes to the echo runtimes (JAX-WS RI, CXF,
lean), to nginx (a reference doing no SOAP work: it returns, from a file, the very bytes the echo
answers) and, with --camel, to Camel's direct proxy in front of a lean echo, side by side in one
run, and prints req/s, p50/p99 latency and each server's CPU per request.

    .venv/bin/python jaxws-echo/bench/bench_echo.py [--duration 5] [--rounds 2] [--warmup 10]
    .venv/bin/python jaxws-echo/bench/bench_echo.py --pin --camel --connections 20   # the issue-42 figures

--pin puts each measured server on one core (the last this process may use) and wrk, and the
echo behind Camel, on another (the first), so a server's CPU per request is its own work on one
core. Camel's figure is its own JVM's CPU only: its back end and wrk are other processes, read
apart. Needs wrk and nginx (Debian: apt-get install -y wrk nginx). Everything listens on loopback,
on ports 18201-18206, and is stopped at the end. Figures and how to read them:
docs/benchmarks/echo.md."""
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
from esbperf.services.echo import RUNTIMES, echo_process, wsdl_answers
from esbperf.services.esb import answers as esb_answers, esb_process

HOST = "127.0.0.1"
PORTS = {"jaxws": 18201, "cxf": 18202, "nginx": 18203, "lean": 18204, "camel": 18205, "camel-backend": 18206}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
GOAL = 0.2   # issue 42: the lean echo's CPU per request at most a fifth of Camel's direct proxy's

# nginx as a reference that does no SOAP work: it serves, from a file, the bytes the echo answers.
NGINX_SERVER = """    root {answers};
    default_type "text/xml; charset=utf-8";
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    # The static module refuses POST (405); this serves the file anyway, as a GET would.
    error_page 405 =200 $uri;"""
HEADERS = {"Content-Type": "text/xml; charset=utf-8", "SOAPAction": '"echoMessage"'}


def envelope(size: int) -> bytes:
    """A thesis request of exactly `size` bytes (grinder-scripts/contract.py), what `proxy` sends."""
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


def on_cpu(cpu: int | None) -> Callable[[list[str]], list[str]]:
    """argv -> argv run on that one core (taskset), or unchanged."""
    return (lambda argv: argv) if cpu is None else (lambda argv: ["taskset", "-c", str(cpu), *argv])


def start(process: procs.Process, cpu: int | None, ready: Callable[[], bool], timeout: float) -> procs.Process:
    process.argv = on_cpu(cpu)(process.argv)
    return process.start_until(ready, timeout, "answering")


def start_nginx(workdir: Path, answers: dict[int, bytes], cpu: int | None) -> procs.Process:
    """nginx on loopback answering /answer-<size>.xml with fixed bytes."""
    (workdir / "answers").mkdir(parents=True)
    for size, answer in answers.items():
        (workdir / "answers" / f"answer-{size}.xml").write_bytes(answer)
    workdir.parent.chmod(0o755)   # nginx's unprivileged workers must reach the answers
    process = nginx.process(workdir, HOST, PORTS["nginx"], NGINX_SERVER.format(answers=workdir / "answers"),
                            "nginx reference")
    return start(process, cpu, lambda: procs.port_open(HOST, PORTS["nginx"]), 10)


@dataclass
class Target:
    name: str
    port: int
    path: Callable[[int], str]   # size -> URL path
    pid: int                     # its process group, for the CPU figures
    warmup: int                  # seconds of traffic first, per size (a JVM's JIT), 0 for nginx


def measure(target: Target, size: int, connections: int, body: bytes, seconds: int, wrk_cpu: int | None) -> dict:
    before, started = cpu_seconds(target.pid), time.monotonic()
    r = wrk.run(f"http://{HOST}:{target.port}{target.path(size)}", body, connections, seconds, headers=HEADERS,
                wrap=on_cpu(wrk_cpu))
    cpu = cpu_seconds(target.pid) - before
    return {"size": size, "connections": connections, "target": target.name, "requests": r.requests, "rps": r.rps,
            "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "errors": r.errors,
            "cpu_percent": 100 * cpu / (time.monotonic() - started),
            "cpu_us_per_request": 1e6 * cpu / max(r.requests, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per measurement (default 5)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per target and step; the best is kept (default 2)")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of warm-up per echo and size (default 10)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 102400], help="request sizes in bytes")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 20, 80])
    parser.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES), help="echo runtimes to measure")
    parser.add_argument("--raw", action="store_true", help="also measure the raw echo (/raw) of each runtime")
    parser.add_argument("--camel", action="store_true",
                        help="also Camel's direct proxy (/proxy/echo) in front of a lean echo; prints lean ÷ Camel")
    parser.add_argument("--camel-warmup", type=int, default=60, help="seconds of warm-up for Camel per size (default 60)")
    parser.add_argument("--pin", action="store_true", help="each server on one core, wrk (and Camel's back end) on another")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    procs.raise_on_sigterm()  # so a SIGTERM still stops the servers (as Ctrl-C does)
    wrk.require()
    server_cpu = wrk_cpu = None
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise EsbperfError("--pin needs two CPUs (one for the server, one for wrk)")
        server_cpu, wrk_cpu = cpus[-1], cpus[0]
    print("bench: load average before: %.1f %.1f %.1f" % os.getloadavg(), flush=True)
    if args.pin:
        print(f"bench: servers on CPU {server_cpu}, wrk{' and the echo behind Camel' if args.camel else ''} "
              f"on CPU {wrk_cpu}", flush=True)

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-echo-") as tmp, procs.ProcessGroup() as group:
        work = Path(tmp)
        echoes = {}
        for runtime in args.runtimes:
            process = echo_process("ws1", HOST, PORTS[runtime], runtime, workdir=work / runtime)
            echoes[runtime] = group.add(start(process, server_cpu, lambda p=PORTS[runtime]: wsdl_answers(HOST, p), 60))
        bodies, answers = {}, {}
        for size in args.sizes:
            bodies[size] = envelope(size)
            for runtime in args.runtimes:
                answers.setdefault(size, post(PORTS[runtime], "/echo", bodies[size]))
                if post(PORTS[runtime], "/echo", bodies[size]).count(b"[echoed by ws1]") != 1:
                    raise EsbperfError(f"the {runtime} echo did not answer the benchmark request correctly")
        targets = [Target(runtime, PORTS[runtime], lambda s: "/echo", p.pid, args.warmup) for runtime, p in echoes.items()]
        if args.raw:
            targets += [Target(f"{runtime}-raw", PORTS[runtime], lambda s: "/raw", p.pid, args.warmup)
                        for runtime, p in echoes.items()]
        if args.camel:
            backend = echo_process("ws1", HOST, PORTS["camel-backend"], "lean", workdir=work / "camel-backend")
            group.add(start(backend, wrk_cpu, lambda: wsdl_answers(HOST, PORTS["camel-backend"]), 60))
            url = f"http://{HOST}:{PORTS['camel-backend']}"
            camel = esb_process("camel", HOST, PORTS["camel"], {"ws1": url, "ws2": url, "ws3": url}, work / "camel")
            group.add(start(camel, server_cpu, lambda: esb_answers(HOST, PORTS["camel"]), 120))
            for size in args.sizes:
                if post(PORTS["camel"], "/proxy/echo", bodies[size]).count(b"[echoed by ws1]</WSResponse>") != 1:
                    raise EsbperfError(f"Camel's direct proxy does not pass the echo's answer on; see {work / 'camel'}")
            targets.append(Target("camel", PORTS["camel"], lambda s: "/proxy/echo", camel.pid, args.camel_warmup))
        reference = group.add(start_nginx(work / "nginx", answers, server_cpu))
        for size in args.sizes:
            if post(PORTS["nginx"], f"/answer-{size}.xml", bodies[size]) != answers[size]:
                raise EsbperfError(f"nginx does not answer as configured; see {work / 'nginx'}")
        targets.append(Target("nginx", PORTS["nginx"], lambda s: f"/answer-{s}.xml", reference.pid, 0))

        print(f"{'size':>7} {'conns':>5} {'target':>9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'CPU %':>6} {'CPU µs/req':>10} {'vs nginx':>8} {'errors':>6}", flush=True)
        for size in args.sizes:
            for target in targets:  # the JITs need traffic first
                if target.warmup:
                    wrk.run(f"http://{HOST}:{target.port}{target.path(size)}", bodies[size], 20, target.warmup,
                            headers=HEADERS, wrap=on_cpu(wrk_cpu))
            for connections in args.connections:
                rounds = []
                for k in range(args.rounds):  # alternate the order, so a drift in load hits all alike
                    order = targets if k % 2 == 0 else targets[::-1]
                    rounds.append({t.name: measure(t, size, connections, bodies[size], args.duration, wrk_cpu)
                                   for t in order})
                # The best round per target: on a shared machine, the least disturbed one.
                row = [max((r[t.name] for r in rounds), key=lambda f: f["rps"]) for t in targets]
                for f in row:
                    f["vs_nginx"] = f["rps"] / row[-1]["rps"]
                    f["pinned"] = args.pin
                    print(f"{size:>7} {connections:>5} {f['target']:>9} {f['rps']:>9.0f} {f['p50_ms']:>8.2f} "
                          f"{f['p99_ms']:>8.2f} {f['cpu_percent']:>6.0f} {f['cpu_us_per_request']:>10.0f} "
                          f"{f['vs_nginx']:>8.2f} {f['errors']:>6}", flush=True)
                results.append(row)
    print("bench: load average after: %.1f %.1f %.1f" % os.getloadavg())
    met = True
    if args.camel and "lean" in args.runtimes:
        for row in results:
            by = {f["target"]: f for f in row}
            ratio = by["lean"]["cpu_us_per_request"] / by["camel"]["cpu_us_per_request"]
            met = met and ratio <= GOAL
            print(f"bench: {row[0]['size'] // 1024} KB, {row[0]['connections']} connections: CPU per request "
                  f"lean {by['lean']['cpu_us_per_request']:.0f} µs ÷ Camel {by['camel']['cpu_us_per_request']:.0f} µs "
                  f"= {ratio:.3f} ({'within' if ratio <= GOAL else 'above'} the goal of {GOAL})")
    if args.json:
        args.json.write_text(json.dumps([f for row in results for f in row], indent=2))
    if any(f["errors"] for row in results for f in row):
        print("bench: some requests failed (see the errors column)", file=sys.stderr)
        return 1
    return 0 if met else 3


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EsbperfError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
