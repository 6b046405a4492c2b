"""Benchmark: what the client costs per transaction in each scenario, with learned fast checks and without.

    .venv/bin/python grinder-scripts/bench/bench_client_cpu.py [--rounds 3]
        [--scenarios proxy,cbr,hbr,json,xslt,raw,cbr-raw,hbr-raw] [--rate 400] [--users 4]
        [--payload 1KB] [--seconds 10] [--warmup 20] [--target-warmup 20] [--esb camel]

Starts the local testbed's services through the CLI's own launcher (what `esbperf testbed start
--testbed local --esb camel` starts: three JAX-WS RI echoes, the ESB, the console, an agent, the
monitors) and runs one plan of every scenario through the runner, `--rounds` iterations. The ESB is
measured as two targets, step after step: `camel` with the workers learning right answers
(`esbperf.fastcheck.learn=true`, the default) and `camel-no-learning` without (`false`: the client
before its learned fast checks, which judged every json and xslt answer in Jython); the runner rotates their
order each iteration, so each scenario's two figures are taken side by side.

The load is the open model, `--rate` requests per second served by a pool of `--users` threads, so
every scenario's workers do the same transactions at the same pace whatever the ESB's speed: a
worker JVM is new in each step, and how warm its JIT gets, or how long its threads sleep between
transactions (and so how cold their caches are), must not differ between scenarios. `--rate 0`
measures the closed model with `--users` users instead. Every worker thread writes its own CPU time per
transaction, counted from the end of the step's warm-up (`esbperf.cpu.after.ms`), to its worker
log; a step's figure is the mean over its threads weighted by their transactions. Prints, per
scenario and mode, the medians over the rounds and their ratio to the median of all scenarios
(the goal: every scenario within 10 % of it), each round's figures, and the load average.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from esbperf.core import plan as plans, topology
from esbperf.results import layout
from esbperf.results.datalog import log_stats
from esbperf.run import runner, step as steps
from esbperf.testbed import services

CPU_LINE = re.compile(r"client CPU: ([\d.]+) us per transaction \(this thread's CPU time over (\d+) transactions\)")
MISSES_LINE = re.compile(r"(\d+) right answers of (\d+) transactions missed their fast check")


def step_figures(step_dir: Path) -> dict:
    """A step's client CPU per transaction (its threads' worker-log lines, weighted by transactions),
    the share of its right answers judged in Jython, and its TPS over the measured window."""
    meta = layout.read_json(step_dir / layout.STEP_FILE)
    logs = [p.read_text() for p in (step_dir / layout.LOGS).glob("*.log") if not p.name.endswith("-data.log")]
    cpu = [(float(m[1]), int(m[2])) for log in logs for m in CPU_LINE.finditer(log)]
    misses = [(int(m[1]), int(m[2])) for log in logs for m in MISSES_LINE.finditer(log)]
    counted = sum(n for _, n in cpu)
    window = log_stats(layout.data_logs(step_dir), meta["warmup_end_ms"], meta["end_ms"])
    return {"scenario": meta["scenario"], "target": meta["target"], "iteration": meta["iteration"],
            "cpu_us": sum(us * n for us, n in cpu) / counted if counted else float("nan"),
            "jython": sum(m for m, _ in misses) / max(1, sum(t for _, t in misses)),
            "tps": window.transactions / ((meta["end_ms"] - meta["warmup_end_ms"]) / 1000), "errors": window.errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--esb", default="camel")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="proxy,cbr,hbr,json,xslt,raw,cbr-raw,hbr-raw")
    parser.add_argument("--rate", type=float, default=400, help="requests per second (open model); 0: closed model")
    parser.add_argument("--users", type=int, default=4, help="the open model's thread pool, or the closed model's users")
    parser.add_argument("--payload", default="1KB")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=20)
    parser.add_argument("--target-warmup", type=float, default=20)
    args = parser.parse_args()

    scenarios = args.scenarios.split(",")
    testbed = topology.load("local")
    learning, no_learning = args.esb, f"{args.esb}-no-learning"
    testbed.targets[no_learning] = dataclasses.replace(testbed.targets[learning], name=no_learning)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-client-cpu-"))
    plan_file = work / "bench-client-cpu.yaml"
    load = {"users": [args.users], **({"rates": [args.rate]} if args.rate else {})}
    plan_file.write_text(json.dumps({
        "name": "bench-client-cpu", "scenarios": scenarios, "payloads": [args.payload], **load,
        "duration_s": args.seconds, "warmup_s": args.warmup, "target_warmup_s": args.target_warmup,
        "iterations": args.rounds, "keepalive": True, "timeout_s": 30}))
    the_plan = plans.load(plan_file)
    # Each measured step's mode, by its target; the CPU count from the end of the warm-up (the
    # workers start with the step, so it begins inside the measured window).
    original = steps.step_properties
    steps.step_properties = lambda ctx, step, *rest: {
        **original(ctx, step, *rest), "esbperf.fastcheck.learn": str(step.target != no_learning).lower(),
        "esbperf.cpu.after.ms": int(args.warmup * 1000)}
    load_before = os.getloadavg()
    group = services.start(testbed, args.esb, work / "services", echo=lambda *_: None)
    try:
        run_dir = runner.start(the_plan, [learning, no_learning], testbed, work / "results", console=Console(quiet=True),
                               local_state_dirs=services.state_dirs(work / "services"),
                               token_file=services.console_token_file(work / "services"))
    finally:
        group.stop_all()
    load_after = os.getloadavg()

    found = [step_figures(p.parent) for p in sorted(run_dir.glob("**/iter-*/step.json"))]
    modes = {learning: "learning", no_learning: "no learning (before)"}
    figures = {(f["target"], f["scenario"], f["iteration"]): f for f in found}
    rounds = sorted({f["iteration"] for f in found})

    def median(target: str, scenario: str, key: str) -> float:
        return statistics.median(figures[target, scenario, i][key] for i in rounds if (target, scenario, i) in figures)

    what = (f"{args.rate:g} requests/s served by {args.users} threads (open model)" if args.rate
            else f"{args.users} users (closed model)")
    print(f"\nclient CPU per transaction, {args.payload} through {args.esb} on the local testbed, {what}, keep-alive, "
          f"{args.seconds:g} s measured per step after {args.warmup:g} s, medians of {len(rounds)} rounds, "
          f"{os.cpu_count()} cores; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    middle = {t: statistics.median(median(t, s, "cpu_us") for s in scenarios) for t in modes}
    print(f"{'scenario':>9} | " + " | ".join(f"{mode:^37}" for mode in modes.values()))
    print(f"{'':>9} | " + " | ".join(f"{'CPU us/tx':>9} {'÷ median':>8} {'in Jython':>9} {'TPS':>7}" for _ in modes))
    for s in scenarios:
        print(f"{s:>9} | " + " | ".join(
            f"{median(t, s, 'cpu_us'):>9.1f} {median(t, s, 'cpu_us') / middle[t]:>8.2f} "
            f"{median(t, s, 'jython'):>9.1%} {median(t, s, 'tps'):>7.0f}" for t in modes))
    for t, mode in modes.items():
        spread = [median(t, s, "cpu_us") / middle[t] for s in scenarios]
        print(f"{mode}: scenarios from {min(spread):.2f} to {max(spread):.2f} of their median "
              f"({'within' if 0.9 <= min(spread) and max(spread) <= 1.1 else 'NOT within'} 10 %)")
        for i in rounds:
            print(f"  round {i}: " + ", ".join(f"{s} {figures[t, s, i]['cpu_us']:.1f}" for s in scenarios
                                               if (t, s, i) in figures))
    errors = sum(f["errors"] for f in found)
    print(f"{len(found)} steps, {errors} errors (work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
