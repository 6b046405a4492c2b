"""Benchmark: esbperf's timing and throughput beside wrk, against the same Camel direct proxy.

    .venv/bin/python grinder-scripts/bench/bench_timing.py [--rounds 3] [--seconds 15] [--warmup 5]
        [--users 1,20] [--size 1024] [--calibration-sizes 102400,1048576] [--jfr FOLDER]

Starts the JAX-WS RI echo (ws1) and Camel in front of it (/proxy/echo, as bench_esb.py does),
a console and one agent, all on loopback, then measures in turns, in one run: wrk (1 thread,
N keep-alive connections) and esbperf (real console/agent/worker, closed model, N users in one
worker process, the `proxy` scenario against Camel), at each user count, with a different one
first in each round; then a calibration step (esbperf.scenario=calibrate) per user count, and
one with 1 user per --calibration-sizes payload (--rounds 0: calibrations only).

Per run: TPS over the measured window, mean/p50/p99 response time (esbperf: the workers'
`Response us`; wrk: its own µs latency), and CPU milliseconds per transaction of the client (wrk,
or the worker JVM) and of Camel + echo. Printed as one table of ratios, medians of the rounds.
--jfr FOLDER records a Java Flight Recording of each esbperf worker (profiling only: it costs).
Needs wrk (Debian: apt-get install wrk). Run it under the shared lock.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_grinder import children, cpu_ms   # same folder
from esbperf.core import procs, scenarios, topology
from esbperf.core.config import AgentConfig
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CAMEL, CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, ensure_built
from esbperf.run import calibration, wrk
from esbperf.services import agent, console
from esbperf.services.console import ControlClient
from esbperf.services.echo import start_echo
from esbperf.services.esb import start_esb

HOST = "127.0.0.1"
ECHO_PORT, CAMEL_PORT, CONSOLE_PORT, API_PORT = 19481, 19482, 16982, 16983
PATH = "/proxy/echo"


def percentile(values: list[float], q: float) -> float:
    return calibration.percentile(sorted(values), q)


def run_wrk(url: str, body: bytes, headers: dict, users: int, seconds: int, servers: list[int]) -> dict:
    before_child, before_server = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_ms(servers)
    r = wrk.run(url, body, users, seconds, threads=1, headers=headers, timeout_s=30)
    after_child, server = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_ms(servers) - before_server
    client = ((after_child.ru_utime + after_child.ru_stime) - (before_child.ru_utime + before_child.ru_stime)) * 1000
    return {"tps": r.rps, "mean_ms": r.mean_ms, "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "errors": r.errors,
            "client_ms": client / max(r.requests, 1), "server_ms": server / max(r.requests, 1)}


def worker_properties(users: int, log_dir: Path, scenario: str, size: int, jfr: Path | None) -> dict:
    properties = {
        "grinder.processes": 1, "grinder.threads": users, "grinder.runs": 0, "grinder.duration": 600000,
        "grinder.logDirectory": str(log_dir), "esbperf.users": users, "esbperf.scenario": scenario,
        "esbperf.target.kind": "esb", "esbperf.target.url": f"http://{HOST}:{CAMEL_PORT}",
        "esbperf.payload.bytes": size, "esbperf.keepalive": "true", "esbperf.timeout.ms": 30000,
    }
    if jfr:
        # The console's properties replace the agent's worker options: repeat them, plus JFR.
        options = agent.worker_jvm_args(procs.java_executable(), AgentConfig.load())
        options.append(f"-XX:StartFlightRecording=filename={jfr / (log_dir.name + '.jfr')},settings=profile")
        properties["grinder.jvm.arguments"] = " ".join(options)
    return properties


def run_esbperf(client: ControlClient, agent_pid: int, properties: dict, warmup: int, seconds: int,
                servers: list[int]) -> tuple[dict, list[Path], tuple[int, int]]:
    """One worker process for warm-up + seconds; statistics of the rows in the measured window."""
    log_dir = Path(properties["grinder.logDirectory"])
    client.recording("stop")
    client.recording("reset")
    client.recording("start")
    workers = client.start_workers_and_wait(properties, 1)
    try:
        deadline = time.monotonic() + 60
        while client.data(latest=True)["status"]["state"] != "Recording":
            if time.monotonic() > deadline:
                raise EsbperfError("the worker sent no report within 60 s; see its log in " + str(log_dir))
            time.sleep(0.1)
        time.sleep(warmup)
        pids = children(agent_pid)
        before_client, before_server = cpu_ms(pids), cpu_ms(servers)
        window = (int(time.time() * 1000), 0)
        time.sleep(seconds)
        window = (window[0], int(time.time() * 1000))
        client_ms, server_ms = cpu_ms(pids) - before_client, cpu_ms(servers) - before_server
    finally:
        client.stop_workers()
        client.wait_workers_finished(workers, 60)
    logs = sorted(log_dir.glob("*-data.log"))
    rows = [r for p in logs for r in calibration.read_columns(p, (calibration.START, calibration.ERRORS,
                                                                   calibration.RESPONSE_US, "Test time"))
            if window[0] <= r[0] < window[1]]
    ok = [r for r in rows if r[1] == 0]
    if not ok:
        raise EsbperfError(f"no successful transaction in the window; see {log_dir}")
    micros = [r[2] for r in ok]
    done = len(rows)
    return ({"tps": len(ok) / ((window[1] - window[0]) / 1000), "mean_ms": statistics.mean(micros) / 1000,
             "p50_ms": percentile(micros, 50) / 1000, "p99_ms": percentile(micros, 99) / 1000,
             "test_time_ms": statistics.mean(r[3] for r in ok), "errors": done - len(ok),
             "client_ms": client_ms / done, "server_ms": server_ms / done}, logs, window)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15, help="measured seconds per run")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of each esbperf run before its window")
    parser.add_argument("--users", default="1,20", help="user counts (wrk connections = esbperf threads)")
    parser.add_argument("--size", type=int, default=1024, help="thesis envelope size in bytes")
    parser.add_argument("--calibration-sizes", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                        help="also calibrate 1 user at these payload sizes (bytes, comma-separated)")
    parser.add_argument("--jfr", type=Path, help="record each esbperf worker with Java Flight Recorder here")
    args = parser.parse_args()
    wrk.require()
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, CAMEL)
    user_counts = [int(u) for u in args.users.split(",")]
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-timing-"))
    os.environ["ESBPERF_STATE"] = str(work)
    if args.jfr:
        args.jfr = args.jfr.resolve()
        args.jfr.mkdir(parents=True, exist_ok=True)
    testbed_file = work / "bench.yaml"
    testbed_file.write_text(f"""name: bench
console: {{port: {CONSOLE_PORT}, api_host: {HOST}, api_port: {API_PORT}}}
hosts:
  client: {{address: {HOST}}}
  esb: {{address: {HOST}}}
  ws1: {{address: {HOST}, echo_port: {ECHO_PORT}}}
  ws2: {{address: {HOST}, echo_port: {ECHO_PORT + 10}}}
  ws3: {{address: {HOST}, echo_port: {ECHO_PORT + 11}}}
""")
    testbed = topology.load(testbed_file)
    [request] = scenarios.contract().requests_for("proxy", "esb", args.size)
    body = request.body.encode()
    headers = {"Content-Type": request.content_type, **dict(zip(request.headers[::2], request.headers[1::2]))}
    url = f"http://{HOST}:{CAMEL_PORT}{request.path}"
    results: dict[tuple[str, int], list[dict]] = {}
    calibrations: dict[tuple[int, int], dict] = {}
    load_before = os.getloadavg()[0]
    group = procs.ProcessGroup()
    try:
        echo = group.add(start_echo("ws1", HOST, ECHO_PORT, workdir=work / "echo"))
        backend = f"http://{HOST}:{ECHO_PORT}"
        camel = group.add(start_esb("camel", HOST, CAMEL_PORT, {"ws1": backend, "ws2": backend, "ws3": backend},
                                    workdir=work / "camel"))
        servers = [echo.pid, camel.pid]
        group.add(console.start_console(testbed, workdir=work / "console"))
        [the_agent] = agent.agent_processes(HOST, CONSOLE_PORT, 1, host_id="bench", workdir=work / "agents")
        group.add(the_agent).start()
        client = ControlClient(testbed.api_url, timeout=30)
        client.wait_for_agents(1, 30)
        client.distribute()
        if args.rounds:
            wrk.run(url, body, 20, 10, headers=headers)   # the JITs of Camel and the echo
        step = 0
        for round_ in range(args.rounds):
            for users in user_counts:
                order = ["wrk", "esbperf"] if (round_ + users) % 2 == 0 else ["esbperf", "wrk"]
                for tool in order:
                    step += 1
                    if tool == "wrk":
                        r = run_wrk(url, body, headers, users, args.seconds, servers)
                    else:
                        properties = worker_properties(users, work / "logs" / f"{step:02d}-esbperf-{users}", "proxy",
                                                       args.size, args.jfr)
                        r, _, _ = run_esbperf(client, the_agent.pid, properties, args.warmup, args.seconds, servers)
                    results.setdefault((tool, users), []).append(r)
                    print(f"round {round_ + 1} {users:3d} users {tool:8s} {r['tps']:8.0f} TPS  mean {r['mean_ms']:.3f} ms  "
                          f"p50 {r['p50_ms']:.3f}  p99 {r['p99_ms']:.3f}  errors {r['errors']}  client "
                          f"{r['client_ms']:.3f} CPU-ms/tx  Camel+echo {r['server_ms']:.3f} CPU-ms/tx", flush=True)
        for users, size in [(u, args.size) for u in user_counts] + [(1, s) for s in args.calibration_sizes]:
            properties = worker_properties(users, work / "logs" / f"calibrate-{users}-{size}", "calibrate", size, None)
            _, logs, window = run_esbperf(client, the_agent.pid, properties, args.warmup, args.seconds, servers)
            calibrations[(users, size)] = calibration.summarise(logs, *window)
            c = calibrations[(users, size)]
            print(f"calibrate {users:3d} users {size:8d} B: floor mean {c['floor_mean_us']:.1f} us p50 {c['floor_p50_us']:.0f} "
                  f"p99 {c['floor_p99_us']:.0f}; outside the clock {c['outside_clock_us']:.1f} us; "
                  f"{c['tps']:.0f} TPS", flush=True)
    finally:
        group.stop_all()
    print()
    print(table(results, calibrations, user_counts, args, (load_before, os.getloadavg()[0])))
    return 0


def table(results: dict, calibrations: dict, user_counts: list[int], args, load: tuple[float, float]) -> str:
    def median(tool: str, users: int, key: str) -> float:
        return statistics.median(r[key] for r in results[(tool, users)])

    lines = ["| users | client | TPS | ÷ wrk TPS | mean ms | − wrk mean ms | p50 ms | p99 ms | client CPU-ms/tx | Camel+echo CPU-ms/tx |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for users in user_counts if results else []:
        for tool in ("wrk", "esbperf"):
            tps, mean = median(tool, users, "tps"), median(tool, users, "mean_ms")
            lines.append(f"| {users} | {tool} | {tps:.0f} | {tps / median('wrk', users, 'tps'):.2f} | {mean:.3f} | "
                         f"{mean - median('wrk', users, 'mean_ms'):+.3f} | {median(tool, users, 'p50_ms'):.3f} | "
                         f"{median(tool, users, 'p99_ms'):.3f} | {median(tool, users, 'client_ms'):.3f} | "
                         f"{median(tool, users, 'server_ms'):.3f} |")
    lines += ["", "| calibration: users | payload | floor mean µs | floor p50 µs | floor p99 µs | outside the clock µs/tx | TPS |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for (users, size), c in calibrations.items():
        lines.append(f"| {users} | {size} B | {c['floor_mean_us']:.1f} | {c['floor_p50_us']:.0f} | {c['floor_p99_us']:.0f} | "
                     f"{c['outside_clock_us']:.1f} | {c['tps']:.0f} |")
    return "\n".join(lines) + (
        f"\n\n(Camel direct proxy {PATH}, {args.size} B thesis envelope, keep-alive; medians of {args.rounds} rounds of "
        f"{args.seconds} s; esbperf: 1 worker process, {args.warmup} s warm-up before its window, mean = `Response us`; "
        f"wrk: 1 thread; {os.cpu_count()} CPUs, load average {load[0]:.1f} before, {load[1]:.1f} after)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EsbperfError as e:
        print(f"bench_timing: error: {e}", file=sys.stderr)
        sys.exit(2)
