"""Benchmark: warm workers against fresh ones, on the set-up a user runs.

    sudo .venv/bin/python grinder-scripts/bench/bench_warm_workers.py [--testbed emulated]
        [--esbs camel,spring-integration,synapse] [--rounds 3] [--target-warmup 150] [--seconds 10]
        [--skip-overhead] [--skip-accuracy]

Starts every service of the testbed as `esbperf testbed start` does (on the shipped emulated
testbed, as root: each host in its namespace, on its cores), then:

1. **Overhead per step.** The same plan of 8 short steps (proxy, 1 KB and 10 KB, 1, 5, 10 and 20
   users; 2 s warm-up, 2 s measured) against `direct`, once with `workers: fresh` (new worker JVMs
   per step, as Grinder starts them) and once with `workers: warm` (one set for the run), in turn,
   `--rounds` times. Prints per phase the median seconds per step of each, and the overhead: a
   step's wall time but its warm-up and window, plus the gap to the next step's start.
2. **esbperf ÷ wrk.** For each ESB of `--esbs`, started alone on the esb host: proxy 1 KB at 20
   and 1 users, step warm-ups of 2 s at least (`warmup_s: auto`, `warmup_min_s: 2`: with the client
   warm, until the target settles at the step's load, at most 20 s), `--rounds` iterations
   after the target's own warm-up (at 20 users, at least `--target-warmup` s, then until settled
   over 120 s, at most 450 s more), warm workers, `--cross-check wrk` bracketing every step (wrk
   just before and just after it). Prints per step esbperf's TPS, wrk's before and after, esbperf ÷ the
   bracket's mean, and whether it holds (>= 0.95).

Needs wrk (Debian: apt-get install wrk). The figures go in docs/benchmarks/warm-workers.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from esbperf.core import plan as plans, topology
from esbperf.results import layout
from esbperf.run import runner
from esbperf.testbed import down, services, up

PHASES = ("prepare", "xcheck_before", "start", "warmup", "measure", "stop", "collect", "check", "xcheck")
OVERHEAD_PLAN = {"scenarios": ["proxy"], "payloads": ["1KB", "10KB"], "users": [1, 5, 10, 20], "duration_s": 2,
                 "warmup_s": 2, "keepalive": True, "timeout_s": 30}


def step_records(run_dir: Path) -> list[dict]:
    """Every finished step's step.json, in the order the run measured them."""
    found = [layout.read_json(p) for p in run_dir.glob("**/iter-*/step.json")]
    return sorted(found, key=lambda m: m["began_ms"])


def overheads(records: list[dict]) -> list[float]:
    """Per step but the last: its wall time but its warm-up (from the workers' first report, as
    the plan counts it: a fresh worker's start-up is overhead) and its window, plus the gap to the
    next step's start (what the runner spends between one step's end and the next one's)."""
    return [(this["finished_ms"] - this["began_ms"]) / 1000 - this["warmup_used_s"]
            - (this["end_ms"] - this["warmup_end_ms"]) / 1000 + (after["began_ms"] - this["finished_ms"]) / 1000
            for this, after in zip(records, records[1:])]


def run_plan(plan: plans.Plan, targets: list[str], testbed: topology.Testbed, work: Path, cross_check: str | None,
             previous: Path | None) -> Path:
    return runner.start(plan, targets, testbed, work / "results", console=Console(quiet=True),
                        local_state_dirs=services.state_dirs(work / "services"),
                        token_file=services.console_token_file(work / "services"), cross_check=cross_check,
                        after=previous)


def write_plan(work: Path, name: str, **fields) -> plans.Plan:
    path = work / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, **fields}))
    return plans.load(path)


def overhead_phase(testbed: topology.Testbed, work: Path, rounds: int) -> None:
    group = services.start(testbed, None, work / "services", echo=lambda *_: None)
    per_mode: dict[str, dict] = {"fresh": {"records": [], "overheads": [], "walls": []},
                                 "warm": {"records": [], "overheads": [], "walls": []}}
    previous = None
    try:
        for n in range(rounds):
            for mode in ("fresh", "warm"):
                plan = write_plan(work, f"bench-overhead-{mode}", workers=mode, **OVERHEAD_PLAN)
                began = time.monotonic()
                run_dir = run_plan(plan, ["direct"], testbed, work, None, previous)
                previous = run_dir
                records = step_records(run_dir)
                per_mode[mode]["records"] += records
                per_mode[mode]["overheads"] += overheads(records)
                per_mode[mode]["walls"].append(time.monotonic() - began)
                print(f"round {n + 1} {mode}: {len(records)} steps in {time.monotonic() - began:.1f} s; median overhead "
                      f"{statistics.median(overheads(records)):.2f} s per step", flush=True)
    finally:
        group.stop_all()
    print(f"\nOverhead per step, {rounds} round(s) of {len(per_mode['warm']['records']) // rounds} steps each "
          f"(direct, {OVERHEAD_PLAN['warmup_s']} s warm-up, {OVERHEAD_PLAN['duration_s']} s measured):")
    print(f"{'phase':<14} {'fresh s':>8} {'warm s':>8}")
    for phase in PHASES:
        values = {m: [r["phases_s"][phase] for r in per_mode[m]["records"] if phase in r["phases_s"]] for m in per_mode}
        if any(values.values()):
            print(f"{phase:<14} " + " ".join(f"{statistics.median(values[m]):>8.3f}" if values[m] else f"{'–':>8}"
                                              for m in ("fresh", "warm")))
    print(f"{'overhead':<14} " + " ".join(f"{statistics.median(per_mode[m]['overheads']):>8.3f}"
                                          for m in ("fresh", "warm"))
          + "   (wall but warm-up and window, plus the gap to the next step; goal for warm: <= 0.5 s)")
    print(f"{'run wall':<14} " + " ".join(f"{statistics.median(per_mode[m]['walls']):>8.1f}" for m in ("fresh", "warm"))
          + "   (median of the rounds, preflight and calibration included)")


def accuracy_phase(testbed: topology.Testbed, work: Path, esbs: list[str], rounds: int, target_warmup: float,
                   seconds: float) -> int:
    outside = 0
    lines = []
    for esb in esbs:
        group = services.start(testbed, esb, work / f"services-{esb}", echo=lambda *_: None)
        try:
            # 20 users first: the target warms up at the heavier load (its JIT sooner done), until settled
            # over two minutes; then each step's own warm-up, 2 s at least.
            plan = write_plan(work, f"bench-xcheck-{esb}", scenarios=["proxy"], payloads=["1KB"], users=[20, 1],
                              duration_s=seconds, warmup_s="auto", warmup_min_s=2, warmup_max_s=20,
                              iterations=rounds, target_warmup_s=target_warmup, target_warmup_max_s=target_warmup + 450,
                              target_warmup_horizon_s=120, keepalive=True, timeout_s=30)
            run_dir = runner.start(plan, [esb], testbed, work / "results", console=Console(quiet=True),
                                   local_state_dirs=services.state_dirs(work / f"services-{esb}"),
                                   token_file=services.console_token_file(work / f"services-{esb}"),
                                   cross_check="wrk")
        finally:
            group.stop_all()
        for m in step_records(run_dir):
            x = m.get("xcheck") or {}
            before, after = (x.get("before") or {}).get("tps"), (x.get("after") or {}).get("tps")
            tps = m["summary"]["tps"]
            ratio = tps / x["tps"] if x.get("tps") else None
            ok = ratio is not None and ratio >= 0.95
            outside += not ok
            lines.append(f"{esb:<19} {m['users']:>5} {m['iteration']:>5} {tps:>9.0f} {before or 0:>10.0f} "
                         f"{after or 0:>9.0f} {ratio or 0:>6.2f}  {'holds' if ok else 'OUTSIDE'}")
    print(f"\nesbperf ÷ wrk (bracket mean), proxy 1 KB, step warm-ups auto from 2 s, {seconds:g} s windows, warm workers, "
          f"after {target_warmup:g} s of target warm-up:")
    print(f"{'engine':<19} {'users':>5} {'round':>5} {'esbperf':>9} {'wrk before':>10} {'wrk after':>9} {'ratio':>6}")
    print("\n".join(lines))
    print(f"{outside} step(s) below 0.95")
    return outside


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbed", default="emulated" if os.geteuid() == 0 else "local")
    parser.add_argument("--esbs", default="camel,spring-integration,synapse")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target-warmup", type=float, default=150)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    args = parser.parse_args()
    testbed = topology.load(args.testbed)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-warm-"))
    print(f"testbed {testbed.name}: {testbed.cpu_split()}; {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    brought_up = up(testbed) if testbed.emulated else []
    try:
        if not args.skip_overhead:
            overhead_phase(testbed, work, args.rounds)
        if not args.skip_accuracy:
            accuracy_phase(testbed, work, args.esbs.split(","), args.rounds, args.target_warmup, args.seconds)
    finally:
        if brought_up:
            down(testbed)
    print(f"(work folder {work}; load average at the end {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
