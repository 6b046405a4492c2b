"""Benchmark: step transition overhead of `esbperf run`.

Runs a plan of 10 s steps (3 s warm-up + 7 s measured; payload and users vary) against the
direct baseline on loopback, with a real console, agent and echo services, and prints
wall time ÷ sum of step durations, and the gap between one step's end and the next one's start.
Run: .venv/bin/python grinder-scripts/bench/bench_runner.py [--steps 6]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console

from esbperf.core import plan as plans, procs, topology
from esbperf.services import agent, console

from esbperf.run import runner
from esbperf.services.echo import start_echo

HOST, CONSOLE_PORT, API_PORT = "127.0.0.1", 16972, 16973
ECHO = {"ws1": 16981, "ws2": 16982, "ws3": 16983}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="number of 10 s steps (even)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-runner-"))
    os.environ["ESBPERF_STATE"] = str(work)
    testbed_file = work / "bench.yaml"
    testbed_file.write_text(
        f"name: bench\nconsole: {{port: {CONSOLE_PORT}, api_host: {HOST}, api_port: {API_PORT}}}\nhosts:\n"
        f"  client: {{address: {HOST}}}\n  esb: {{address: {HOST}}}\n"
        + "".join(f"  {ws}: {{address: {HOST}, echo_port: {port}}}\n" for ws, port in ECHO.items()))
    plan_file = work / "transitions.yaml"
    plan_file.write_text(json.dumps({
        "name": "transitions", "scenarios": ["proxy"], "payloads": ["1KB", "100KB"],
        "users": [1, 10, 20][: max(1, args.steps // 2)], "duration_s": 7, "warmup_s": 3, "timeout_s": 10}))
    the_plan = plans.load(plan_file)
    testbed = topology.load(testbed_file)
    group = procs.ProcessGroup()
    try:
        for ws, port in ECHO.items():
            group.add(start_echo(ws, HOST, port, workdir=work / ws))
        group.add(console.start_console(testbed, workdir=work / "console"))
        [the_agent] = agent.agent_processes(HOST, CONSOLE_PORT, 1, host_id="bench", workdir=work / "agents")
        group.add(the_agent).start()
        console.ControlClient(testbed.api_url).wait_for_agents(1, 30)
        started = time.monotonic()
        run_dir = runner.start(the_plan, "direct", testbed, work / "results", console=Console(quiet=True))
        wall = time.monotonic() - started
    finally:
        group.stop_all()
    steps = sorted((json.loads(p.read_text()) for p in run_dir.rglob("step.json")), key=lambda s: s["start_ms"])
    planned = len(steps) * the_plan.step_seconds()
    gaps = [(b["start_ms"] - a["end_ms"]) / 1000 for a, b in zip(steps, steps[1:])]
    late = [(s["warmup_end_ms"] - s["start_ms"]) / 1000 - the_plan.warmup_s for s in steps]
    print(f"steps: {len(steps)} of {the_plan.step_seconds():g} s (warm-up {the_plan.warmup_s:g} + measured {the_plan.duration_s:g})")
    print(f"wall time of `esbperf run` (preflight, verify, distribution included): {wall:.1f} s")
    print(f"wall ÷ sum of step durations: {wall / planned:.3f}")
    print(f"first step start → last step end ÷ sum: {(steps[-1]['end_ms'] - steps[0]['start_ms']) / 1000 / planned:.3f}")
    print(f"gap between steps (stop, wait, write, start): mean {sum(gaps) / len(gaps):.2f} s, max {max(gaps):.2f} s")
    print(f"warm-up extended past plan (slow worker start): mean {sum(late) / len(late):.2f} s, max {max(late):.2f} s")


if __name__ == "__main__":
    main()
