"""Benchmark: how fast can The Grinder drive a fast echo, next to wrk on the same target?

Side by side in one run, against the JAX-WS RI raw echo on loopback:
  wrk            (keep-alive, and a new connection per request)
  grinder        the esbperf scenario script and HTTP client (keep-alive / new connection)
  grinder-plugin The Grinder's own HTTP plugin (keep-alive = requests per run / new connection)
For each: TPS, mean response time, errors, and CPU milliseconds per transaction on the client
(wrk, or the worker JVMs) and on the echo server. Run: .venv/bin/python grinder-scripts/bench/bench_grinder.py
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from esbperf.core import procs, topology
from esbperf.services import agent, console

from esbperf.core.project import CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, ensure_built
from esbperf.run import wrk
from esbperf.services.console import ControlClient, statistics
from esbperf.services.echo import start_echo

HOST, ECHO_PORT, CONSOLE_PORT, API_PORT = "127.0.0.1", 16181, 16872, 16873
TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(pids) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])   # utime + stime
        except (OSError, IndexError):
            pass
    return total * 1000 / TICK


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return found


def run_wrk(size: int, connections: int, seconds: int, keepalive: bool, echo_pid: int) -> dict:
    url, body = f"http://{HOST}:{ECHO_PORT}/raw", b"x" * size
    headers = {"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": '"bench"'}
    wrk.run(url, body, connections, 3, headers=headers, keepalive=keepalive)   # warm-up
    before_child, before_server = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_ms([echo_pid])
    result = wrk.run(url, body, connections, seconds, headers=headers, keepalive=keepalive)
    after_child, server = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_ms([echo_pid]) - before_server
    client = ((after_child.ru_utime + after_child.ru_stime) - (before_child.ru_utime + before_child.ru_stime)) * 1000
    return {"tps": result.rps, "mean_ms": result.mean_ms, "errors": result.errors,
            "client_ms": client / result.requests, "server_ms": server / result.requests}


def run_grinder(client: ControlClient, agent_pid: int, echo_pid: int, properties: dict, warmup: int, seconds: int) -> dict:
    client.recording("stop")
    client.recording("reset")
    client.recording("start")
    workers = client.start_workers_and_wait({**properties, "grinder.duration": (warmup + seconds + 30) * 1000,
                                             "grinder.runs": 0}, 1)
    try:
        while client.data(latest=True)["status"]["state"] != "Recording":
            time.sleep(0.1)
        time.sleep(warmup)
        client.recording("zero")
        pids = children(agent_pid)
        before_client, before_server = cpu_ms(pids), cpu_ms([echo_pid])
        time.sleep(seconds)
        totals = statistics(client.data())
        client_ms, server_ms = cpu_ms(pids) - before_client, cpu_ms([echo_pid]) - before_server
    finally:
        client.stop_workers()
        client.wait_workers_finished(workers, 30)
    done = max(totals["Tests"] + totals["Errors"], 1)
    return {"tps": totals["TPS"] or 0, "mean_ms": totals["Mean Test Time (ms)"] or 0, "errors": totals["Errors"],
            "client_ms": client_ms / done, "server_ms": server_ms / done}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=15, help="measured seconds per mode")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--users", type=int, default=8, help="connections (wrk) = threads (Grinder)")
    parser.add_argument("--sizes", default="1024,102400")
    args = parser.parse_args()
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-"))
    os.environ["ESBPERF_STATE"] = str(work)
    testbed_file = work / "bench.yaml"
    testbed_file.write_text(f"""name: bench
console: {{port: {CONSOLE_PORT}, api_host: {HOST}, api_port: {API_PORT}}}
hosts:
  client: {{address: {HOST}}}
  esb: {{address: {HOST}}}
  ws1: {{address: {HOST}, echo_port: {ECHO_PORT}}}
  ws2: {{address: {HOST}, echo_port: {ECHO_PORT + 1}}}
  ws3: {{address: {HOST}, echo_port: {ECHO_PORT + 2}}}
""")
    testbed = topology.load(testbed_file)
    group = procs.ProcessGroup()
    rows = []
    try:
        echo = group.add(start_echo("ws1", HOST, ECHO_PORT, workdir=work / "echo"))
        group.add(console.start_console(testbed, workdir=work / "console"))
        [the_agent] = agent.agent_processes(HOST, CONSOLE_PORT, 1, host_id="bench", workdir=work / "agents")
        group.add(the_agent).start()
        client = ControlClient(testbed.api_url, timeout=30)
        client.wait_for_agents(1, 30)
        client.distribute()
        for size in [int(s) for s in args.sizes.split(",")]:
            common = {"grinder.processes": 1, "grinder.threads": args.users, "esbperf.payload.bytes": size,
                      "esbperf.backend.ws1": f"http://{HOST}:{ECHO_PORT}", "esbperf.timeout.ms": 10000,
                      "grinder.logDirectory": str(work / "logs")}
            for keepalive in (True, False):
                mode = "keep-alive" if keepalive else "new conn."
                runs = [
                    ("wrk", lambda: run_wrk(size, args.users, args.seconds, keepalive, echo.pid)),
                    ("grinder (esbperf client)", lambda: run_grinder(client, the_agent.pid, echo.pid, {
                        **common, "esbperf.scenario": "raw", "esbperf.target.kind": "direct",
                        "esbperf.backend.ws2": f"http://{HOST}:{ECHO_PORT}", "esbperf.backend.ws3": f"http://{HOST}:{ECHO_PORT}",
                        "esbperf.keepalive": str(keepalive).lower()}, args.warmup, args.seconds)),
                    ("grinder (HTTP plugin)", lambda: run_grinder(client, the_agent.pid, echo.pid, {
                        **common, "grinder.script": "bench/http_plugin.py",
                        "esbperf.bench.per_run": 100 if keepalive else 1}, args.warmup, args.seconds)),
                ]
                wrk_tps = None
                for name, measure in runs:
                    result = measure()
                    wrk_tps = wrk_tps or result["tps"]
                    rows.append((size, mode, name, result, result["tps"] / wrk_tps))
                    print(f"{size:>7} B  {mode:<10}  {name:<25} {result['tps']:>9.0f} TPS  "
                          f"{result['mean_ms']:>7.2f} ms  errors {result['errors']:<5} client {result['client_ms']:.3f} "
                          f"CPU-ms/tx  server {result['server_ms']:.3f} CPU-ms/tx  ratio to wrk {result['tps'] / wrk_tps:.2f}",
                          flush=True)
    finally:
        group.stop_all()
    print("\n| payload | connections | client | TPS | mean ms | errors | client CPU-ms/tx | echo CPU-ms/tx | ÷ wrk |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, mode, name, r, ratio in rows:
        print(f"| {size // 1024} KB | {mode} | {name} | {r['tps']:.0f} | {r['mean_ms']:.2f} | {r['errors']} | "
              f"{r['client_ms']:.3f} | {r['server_ms']:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
