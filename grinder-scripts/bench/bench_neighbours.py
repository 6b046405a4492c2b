"""Benchmark: does a target read the same with the other engines beside it on the esb host?

    .venv/bin/python grinder-scripts/bench/bench_neighbours.py [--testbed local|emulated]
        [--iterations 3] [--users 1,20] [--payload 1KB] [--seconds 4]

Starts the testbed as `esbperf demo` and `esbperf round` do (esbperf/cli/launch.py) with Camel,
Spring Integration, nginx and HAProxy on the esb host at once, then runs one plan twice through the
runner: against `direct` alone (the engines started, none loaded), against all five targets —
direct, nginx, haproxy, camel, spring-integration — interleaved step by step, the targets' order
rotated per iteration, and against `direct` alone again (so that what changed with time is told
from what the neighbours did). Each run gets its report (`esbperf report`); the bench prints, from its
summary.csv, each target's TPS and mean per user count over the iterations, the CPU of the engine
under test and of its neighbours on the esb host, and whether `direct` among the five reads within
the noise of `direct` alone: the two means of its iterations apart by at most the larger of their
two ranges.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from esbperf.cli.launch import launched
from esbperf.core import plan as plans, topology
from esbperf.run import runner

ENGINES = ["camel", "spring-integration", "nginx", "haproxy"]
FIVE = ["direct", "nginx", "haproxy", "camel", "spring-integration"]


def summary_rows(run_dir: Path) -> list[dict]:
    """The run's summary.csv rows, its report written by the CLI a user runs."""
    esbperf = Path(sys.executable).parent / "esbperf"
    out = run_dir.parent / f"{run_dir.name}-report"
    subprocess.run([str(esbperf), "report", str(run_dir), "--out", str(out)], check=True, capture_output=True, text=True)
    with (out / "summary.csv").open() as f:
        return list(csv.DictReader(f))


def number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def figures(rows: list[dict], target: str, users: int) -> dict:
    mine = [r for r in rows if r["target"] == target and int(r["users"]) == users]
    tps = [float(r["tps"]) for r in mine]
    mean = [float(r["rt_mean_ms"]) for r in mine]
    own = [v for v in (number(r.get("esb_proc_cpu_mean")) for r in mine) if v is not None]
    others = [v for v in (number(r.get("esb_neighbours_cpu_mean")) for r in mine) if v is not None]
    return {"tps": tps, "mean_ms": mean, "valid": sorted({r.get("valid", "") for r in mine}),
            "own_cpu": statistics.mean(own) if own else None, "neighbours_cpu": statistics.mean(others) if others else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbed", default="emulated" if os.geteuid() == 0 else "local")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--users", default="1,20")
    parser.add_argument("--payload", default="1KB")
    parser.add_argument("--seconds", type=float, default=4)
    args = parser.parse_args()

    testbed = topology.load(args.testbed)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-neighbours-"))
    users = [int(u) for u in args.users.split(",")]
    plan_file = work / "bench-neighbours.yaml"
    plan_file.write_text(json.dumps({
        "name": "bench-neighbours", "scenarios": ["proxy"], "payloads": [args.payload], "users": users,
        "duration_s": args.seconds, "warmup_s": "auto", "warmup_min_s": 1, "warmup_max_s": 15,
        "target_warmup_s": 10, "iterations": args.iterations, "keepalive": True, "timeout_s": 30}))
    plan = plans.load(plan_file)
    console = Console(quiet=True)
    with launched(testbed, ENGINES, work / "services", Console()) as launcher:
        before = runner.start(plan, ["direct"], testbed, work / "results", console=console, **launcher)
        print(f"direct alone: {before}", flush=True)
        five = runner.start(plan, FIVE, testbed, work / "results", console=console, **launcher)
        print(f"five targets: {five}", flush=True)
        after = runner.start(plan, ["direct"], testbed, work / "results", console=console, **launcher)
        print(f"direct alone again: {after}", flush=True)
    before_rows, five_rows, after_rows = summary_rows(before), summary_rows(five), summary_rows(after)
    alone_rows = before_rows + after_rows

    print(f"\nproxy {args.payload} on the {testbed.name} testbed ({testbed.cpu_split()}), keep-alive; "
          f"{args.seconds:g} s measured per step after an auto warm-up; {args.iterations} iterations; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    print(f"{'run':<13} {'target':<19} {'users':>5} {'TPS mean':>9} {'TPS range':>15} {'mean ms':>8} "
          f"{'own CPU %':>9} {'neighbours %':>12}  valid")
    for u in users:
        for name, rows, targets in (("direct alone", before_rows, ["direct"]), ("five targets", five_rows, FIVE),
                                    ("alone again", after_rows, ["direct"])):
            for target in targets:
                f = figures(rows, target, u)
                if not f["tps"]:
                    print(f"{name:<13} {target:<19} {u:>5} no step")
                    continue
                cpu = lambda v: f"{v:9.1f}" if v is not None else f"{'-':>9}"
                print(f"{name:<13} {target:<19} {u:>5} {statistics.mean(f['tps']):>9.0f} "
                      f"{min(f['tps']):>7.0f}–{max(f['tps']):<7.0f} {statistics.mean(f['mean_ms']):>8.3f} "
                      f"{cpu(f['own_cpu'])} {cpu(f['neighbours_cpu']):>12}  {';'.join(f['valid'])}")
    outside = 0
    print("\ndirect among the five against direct alone, before and after pooled (within the noise: the means "
          "apart by at most the larger of the two ranges)")
    for u in users:
        a, b = figures(alone_rows, "direct", u), figures(five_rows, "direct", u)
        if not a["tps"] or not b["tps"]:
            print(f"{u:>5} users: a run has no direct step")
            outside += 1
            continue
        gap = statistics.mean(b["tps"]) - statistics.mean(a["tps"])
        noise = max(max(a["tps"]) - min(a["tps"]), max(b["tps"]) - min(b["tps"]))
        ok = abs(gap) <= noise
        outside += not ok
        print(f"{u:>5} users: {statistics.mean(b['tps']):.0f} vs {statistics.mean(a['tps']):.0f} TPS "
              f"(ratio {statistics.mean(b['tps']) / statistics.mean(a['tps']):.3f}, gap {gap:+.0f}, noise {noise:.0f}): "
              f"{'within' if ok else 'OUTSIDE'}")
    print(f"(work folder {work})")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
