"""Benchmark: how long the threads of a warm pool take to begin a step once it is handed over.

    .venv/bin/python grinder-scripts/bench/bench_step_start.py [--threads 320] [--bytes 102400]
        [--steps 3] [--cpus 0]

Starts a console and one agent on loopback ports of its own (16772/16773, a state folder in a
temporary folder), a warm pool of one worker process of `--threads` threads, and hands it `--steps`
steps of the `calibrate` scenario (the client against a server inside its own process: no target to
start) in which every thread takes part. For each step it prints how long the workers took to adopt
it, and then how long until every thread had begun its part (esbperf.client.Steps#begun: the
step's clock, and its warm-up, start then). With `--cpus 0` everything runs on that one core, as a
saturated client does: the threads begun first take the CPU from those still building their first
request.

Measured 2026-11-28 on the 2-vCPU machine of the sixth wave (shared with other work, load 2-20),
`--cpus 0`, 320 threads at 100 KB, three runs: a new pool's threads had all begun 3.9-5.6 s after it
adopted the step, a warm pool's 0.6-5.5 s (docs/grinder.md, "Warm workers")."""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

HOST = "127.0.0.1"
CONSOLE_PORT, API_PORT = 16772, 16773


def write_testbed(path: Path) -> Path:
    """A one-machine testbed of the benchmark's own ports (no service but the console is used)."""
    path.write_text(yaml.safe_dump({
        "name": "bench-step-start",
        "console": {"port": CONSOLE_PORT, "api_host": HOST, "api_port": API_PORT},
        "hosts": {"client": {"address": HOST}, "esb": {"address": HOST, "esb_ports": {}},
                  **{ws: {"address": HOST, "echo_port": port} for ws, port in (("ws1", 16781), ("ws2", 16782),
                                                                              ("ws3", 16783))}},
        "targets": {"direct": {"kind": "direct"}}}, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=320, help="threads of the pool's one worker process")
    parser.add_argument("--bytes", type=int, default=102400, help="the calibration request's size")
    parser.add_argument("--steps", type=int, default=3, help="steps handed over one after the other")
    parser.add_argument("--cpus", default=None, help="run everything on these CPUs (e.g. 0), as a saturated client")
    args = parser.parse_args()
    if args.threads < 1 or args.steps < 1 or args.bytes < 1:
        parser.error("--threads, --steps and --bytes must be positive whole numbers")
    if args.cpus is not None:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})   # the JVMs started below inherit it
    state = Path(tempfile.mkdtemp(prefix="esbperf-step-start-"))
    os.environ["ESBPERF_STATE"] = str(state)   # before esbperf reads it
    from esbperf.core import topology
    from esbperf.run import collect, pool
    from esbperf.run.workers import ConsoleWatch, now_ms
    from esbperf.services import agent, console

    testbed = topology.load(write_testbed(state / "bench.yaml"))
    console_process = console.start_console(testbed, workdir=state / "console")
    [agent_process] = agent.agent_processes(HOST, CONSOLE_PORT, count=1, host_id="bench", workdir=state / "agents")
    try:
        agent_process.start()
        client = console.control_client(testbed, console.token_file(state / "console"), timeout=30)
        client.wait_for_agents(1, 60)
        client.distribute()
        watch = ConsoleWatch(client, {a["name"] for a in client.agents()}, lambda *a: None)
        the_pool = pool.WarmPool(1, args.threads, 1, testbed.board_url, False, 10, 50, lambda: client, state,
                                 [collect.LocalAgents([state])])
        the_pool.watch = watch
        settings = {"grinder.runs": 0, "esbperf.scenario": "calibrate", "esbperf.users": 0,
                    "esbperf.payload.bytes": args.bytes, "esbperf.keepalive": "true", "esbperf.timeout.ms": 10000}
        began = time.monotonic()
        the_pool.ensure(settings)
        print(f"a pool of {args.threads} threads polled the board {time.monotonic() - began:.2f} s after its start")
        for n in range(args.steps):
            folder = collect.step_log_folder(state.name, Path(f"step-{n}"), str(now_ms()))
            the_pool._post("step", pool.order_properties(settings, 1, args.threads, folder, False))
            ordered = time.monotonic()
            seq = the_pool.seq
            the_pool._await(lambda entry: entry.get("state") == f"adopted:{seq}", pool.ADOPT_S, "adopted")
            adopted = time.monotonic()
            the_pool._await(lambda entry: entry.get("state") == f"adopted:{seq}"
                            and (entry.get("begun") or 0) >= (entry.get("takes") or 0), pool.JOIN_S, "begun")
            print(f"step {n + 1} ({'new' if n == 0 else 'warm'} pool): adopted {adopted - ordered:.2f} s after the "
                  f"order; every thread begun {time.monotonic() - adopted:.2f} s after that")
            time.sleep(1)
            the_pool.end_step()
        the_pool.close()
    finally:
        agent_process.stop()
        console_process.stop()


if __name__ == "__main__":
    main()
