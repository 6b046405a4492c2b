"""Benchmark: what the console's quick message reader saves each step, on the set-up a user starts.

    .venv/bin/python grinder-scripts/bench/bench_console_latency.py
        [--rounds 3] [--idle 60] [--hops 5] [--poll MS] [--testbed local] [--esb camel] [--target direct]
        [--iterations 5]

Each round starts the testbed twice with the CLI (`esbperf testbed start --testbed local --esb
camel`): once with the console reading its connections as The Grinder ships it
(`-Desbperf.console.readerPollMs=0`: readers that sleep 500 ms when idle) and once with esbperf's
default (or `--poll MS`), in alternating order, since the machine's noise is high. Each time it
measures the idle console JVM's CPU, and its reader threads', over `--idle` seconds (agent
connected, nothing running); times `--hops` runs of
one short worker, each from the moment the worker sent RUNNING and FINISHED (its log) to the first
answer of the control API that shows it (polled every 5 ms); runs a plan of 1 KB proxy steps at 1
and 20 users (warm-up 1 s, 2 s measured, `--iterations` each) with `esbperf run`; and stops the
testbed. It prints the console log's line about its readers at each start.

Prints per setting the medians over its steps of each phase (step.json `phases_s`) and of the wall
time, how long after its workers' threads started (their logs' "start time is ... ms since Epoch")
the runner saw them all running, the idle console's CPU and the hops. The setting reaches the
console through ESBPERF_JAVA, a wrapper of the JVM that adds the property (every JVM of the
testbed gets it; only the console reads it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from esbperf.core import procs, topology
from esbperf.results import layout
from esbperf.services import console
from esbperf.testbed import hosts

BEFORE = "Grinder's readers alone"
PHASES = ("start", "warmup", "stop")
THREADS_STARTED = re.compile(r"start time is (\d+) ms since Epoch")
ELAPSED = re.compile(r"elapsed time is (\d+) ms")


def java_wrapper(folder: Path, poll_ms: str | None) -> Path:
    """An executable that runs this machine's java, with the console setting when there is one."""
    java = procs.java_executable()
    wrapper = folder / f"java-poll-{poll_ms or 'default'}"
    option = f" -Desbperf.console.readerPollMs={poll_ms}" if poll_ms is not None else ""
    wrapper.write_text(f'#!/bin/sh\nexec "{java}"{option} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def esbperf(*args: str, env: dict) -> None:
    subprocess.run([sys.executable, "-m", "esbperf", *args], env=env, check=True, stdout=subprocess.DEVNULL)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds so far of the process, and of its threads that read the console's connections."""
    def of(stat: str) -> float:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime

    readers = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("ServerReceiver"):
                readers += of(str(task / "stat"))
        except OSError:
            pass   # a thread that ended
    return of(f"/proc/{pid}/stat"), readers


def step_figures(step_dir: Path) -> dict:
    """A step's phases and wall time, and the runner's wait for RUNNING after the threads started."""
    meta = layout.read_json(step_dir / layout.STEP_FILE)
    started = [int(m.group(1)) for log in (step_dir / layout.LOGS).glob("*.log") if not log.name.endswith("-data.log")
               for m in [THREADS_STARTED.search(log.read_text(errors="replace"))] if m]
    figures = {phase: meta["phases_s"][phase] for phase in PHASES}
    figures["collect"] = meta["phases_s"]["collect"]
    figures["wall"] = meta["wall_s"]
    figures["seen running"] = (meta["first_report_ms"] - max(started)) / 1000 if started else None
    figures["users"] = meta["users"]
    return figures


def hop_trials(testbed: topology.Testbed, state: Path, trials: int) -> dict[str, list[float]]:
    """`trials` runs of one worker (1 thread, 1.5 s, the calibration scenario: no target needed)
    while the control API is polled every 5 ms: how long after the worker sent RUNNING (its log's
    "start time is", written just before) and FINISHED (that plus its "elapsed time", written just
    after) the API first showed it, in ms."""
    root = state / "services" / testbed.name
    client = console.control_client(testbed, hosts.console_token(testbed, root), timeout=30)
    client.distribute()
    hops: dict[str, list[float]] = {"RUNNING": [], "FINISHED": []}
    for _ in range(trials):
        seen: dict[tuple[str, str], float] = {}
        watching = threading.Event()

        def watch():
            while not watching.is_set():
                agents = client.agents()
                now = time.time() * 1000
                for w in (w for a in agents for w in a.get("workers", [])):
                    seen.setdefault((w["name"], w["state"]), now)
                time.sleep(0.005)

        relative = f"bench-hops/{time.time_ns()}"
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            workers = client.start_workers_and_wait({
                "grinder.processes": 1, "grinder.threads": 1, "grinder.runs": 0, "grinder.duration": 1500,
                "grinder.logDirectory": relative, "esbperf.scenario": "calibrate", "esbperf.payload.bytes": 1024}, 1)
            client.wait_workers_finished(workers, 30)
            time.sleep(0.2)
        finally:
            watching.set()
            watcher.join(5)
        for log in (log for folder in root.rglob(relative) for log in folder.glob("*.log")):
            text = log.read_text(errors="replace")
            started, elapsed = THREADS_STARTED.search(text), ELAPSED.search(text)
            if log.name.endswith("-data.log") or not started or not elapsed:
                continue
            sent = {"RUNNING": int(started.group(1)), "FINISHED": int(started.group(1)) + int(elapsed.group(1))}
            for state_name, at in sent.items():
                if (log.stem, state_name) in seen:
                    hops[state_name].append(seen[(log.stem, state_name)] - at)
    return hops


def console_says(state: Path) -> str:
    """What the console's log says of its readers (one line, QuickMessageReaders)."""
    lines = [line for log in state.rglob("console.log") for line in log.read_text(errors="replace").splitlines()
             if "esbperf: the console" in line]
    return lines[-1].split("esbperf: ", 1)[1] if lines else "(the console's log says nothing of its readers)"


def one_run(label: str, poll_ms: str | None, args, work: Path, out: Path) -> tuple[list[dict], tuple, dict]:
    """Start the testbed with the setting, measure the idle console and the hops, run the plan, stop;
    its steps, the idle CPU %, the hops."""
    env = dict(os.environ, ESBPERF_JAVA=str(java_wrapper(work, poll_ms)), ESBPERF_STATE=str(work / "state"))
    testbed = topology.load(args.testbed)
    esbperf("testbed", "start", "--testbed", args.testbed, "--esb", args.esb, env=env)
    try:
        print(f"  {label}: {console_says(work / 'state')}", flush=True)
        pid = procs.listener_pid(testbed.api_host, testbed.api_port)
        if pid is None:
            raise SystemExit(f"no process listens on the console's control API ({testbed.api_url})")
        before, at = cpu_seconds(pid), time.monotonic()
        time.sleep(args.idle)
        after, seconds = cpu_seconds(pid), time.monotonic() - at
        cpu = tuple((b - a) / seconds * 100 for a, b in zip(before, after))   # the JVM, its readers
        hops = hop_trials(testbed, work / "state", args.hops)
        esbperf("run", "--plan", str(args.plan_file), "--target", args.target, "--testbed", args.testbed,
                "--out", str(out), "--no-report", env=env)
    finally:
        esbperf("testbed", "stop", "--testbed", args.testbed, env=env)
    steps = [step_figures(p.parent) for p in sorted(out.rglob(layout.STEP_FILE)) if not p.parent.name.startswith(".")]
    print(f"  {label}: {len(steps)} steps, idle console CPU {cpu[0]:.2f} % of a core (readers {cpu[1]:.2f}), median step "
          + ", ".join(f"{k} {statistics.median(s[k] for s in steps):.3f} s" for k in (*PHASES, "wall"))
          + "; hops (ms) " + ", ".join(f"{k} {', '.join(str(round(v)) for v in vs)}" for k, vs in hops.items()), flush=True)
    return steps, cpu, hops


def print_table(steps: dict[str, list[dict]], cpu: dict[str, list[tuple]], hops: dict[str, dict[str, list[float]]]) -> None:
    """Each figure's median (and the wall time's mean) per setting, as a Markdown table."""
    settings = list(steps)
    def row(title: str, values: list[float], digits: int = 3) -> None:
        print(f"| {title} | {values[0]:.{digits}f} | {values[1]:.{digits}f} | {values[0] - values[1]:+.{digits}f} |")

    def median(key: str, users: int | None = None) -> list[float]:
        return [statistics.median(s[key] for s in steps[k] if s[key] is not None and users in (None, s["users"]))
                for k in settings]

    print(f"| median per step (s) | {' | '.join(settings)} | saved |")
    print("|---|---:|---:|---:|")
    for phase in PHASES:
        row(phase, median(phase))
    row("start + warmup + stop", [statistics.median(sum(s[p] for p in PHASES) for s in steps[k]) for k in settings])
    row("collect (waits for the worker JVMs' exit)", median("collect"))
    row("wall_s", median("wall"))
    row("wall_s, mean", [statistics.mean(s["wall"] for s in steps[k]) for k in settings])
    for users in (1, 20):
        row(f"wall_s at {users} user{'s' if users > 1 else ''}", median("wall", users))
    row("runner saw every worker running, after its threads started", median("seen running"))
    row("idle console CPU, % of a core (median of the runs)", [statistics.median(c[0] for c in cpu[k]) for k in settings], 2)
    row("of which its message readers", [statistics.median(c[1] for c in cpu[k]) for k in settings], 2)
    for state in ("RUNNING", "FINISHED"):
        row(f"{state} shown by the API after the worker sent it, ms (median)",
            [statistics.median(hops[k][state]) for k in settings], 0)
        row(f"{state} shown by the API after the worker sent it, ms (largest)", [max(hops[k][state]) for k in settings], 0)
    print("idle console CPU per run (% of a core): " + "; ".join(
        f"{k}: {', '.join(f'{c[0]:.2f} (readers {c[1]:.2f})' for c in cpu[k])}" for k in settings))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbed", default="local")
    parser.add_argument("--esb", default="camel")
    parser.add_argument("--target", default="direct")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=5, help="steps of each user count per run")
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle console whose CPU is measured")
    parser.add_argument("--hops", type=int, default=5, help="one-worker runs per testbed start, each state change timed")
    parser.add_argument("--poll", type=int, help="esbperf's reader's idle sleep, ms (default: the console's default)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-console-"))
    args.plan_file = work / "console-latency.yaml"
    args.plan_file.write_text(json.dumps({
        "name": "console-latency", "description": "1 KB proxy steps at 1 and 20 users, 1 s warm-up, 2 s measured",
        "scenarios": ["proxy"], "payloads": ["1KB"], "users": [1, 20], "duration_s": 2, "warmup_s": 1,
        "iterations": args.iterations, "keepalive": True, "timeout_s": 10}))
    poll = "default" if args.poll is None else f"{args.poll} ms"
    settings = {BEFORE: "0", f"esbperf's reader ({poll})": None if args.poll is None else str(args.poll)}
    steps: dict[str, list[dict]] = {label: [] for label in settings}
    cpu: dict[str, list[tuple]] = {label: [] for label in settings}
    hops: dict[str, dict[str, list[float]]] = {label: {"RUNNING": [], "FINISHED": []} for label in settings}
    for r in range(args.rounds):
        order = list(settings) if r % 2 == 0 else list(reversed(settings))
        print(f"round {r + 1} of {args.rounds}", flush=True)
        for label in order:
            out = work / "results" / (re.sub(r"\W+", "-", label) + f"round-{r + 1}")
            got, percent, timed = one_run(label, settings[label], args, work, out)
            steps[label] += got
            cpu[label].append(percent)
            for state, values in timed.items():
                hops[label][state] += values

    print(f"\n{args.rounds} rounds, testbed {args.testbed}, {args.esb} started, target {args.target} "
          f"({', '.join(f'{len(steps[k])} steps' for k in settings)}):")
    print_table(steps, cpu, hops)
    print(f"work folder (results, logs): {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
