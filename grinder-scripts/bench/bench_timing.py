"""Benchmark: esbperf's figures beside an independent client's, on the set-up a user runs.

    .venv/bin/python grinder-scripts/bench/bench_timing.py [--testbed local|emulated] [--esb camel]
        [--rounds 3] [--users 1,20] [--payload 1KB] [--scenario proxy] [--seconds 10] [--warmup 20]
        [--target-warmup 10] [--property NAME=VALUE ...]

Starts every service of the testbed exactly as `esbperf testbed commands` prints them (three
JAX-WS RI echoes, the ESB, the console, an agent and the monitors; on the emulated testbed, as
root, each in its host's network namespace) through the CLI's own launcher, then runs `--rounds`
runs of one plan (the scenario at one payload, each user count, keep-alive) through the runner with
`--cross-check wrk`: after each step, wrk measures the same target, requests and users from the
client host. Prints, per step and round, esbperf's TPS and mean (the workers' `Response us`, over
the measured window) beside wrk's, their ratio and difference, and the medians over the rounds.
`--property` passes a worker property to every step (a candidate cause of bias, e.g.
grinder.reportToConsole.interval=5000). Needs wrk (Debian: apt-get install wrk).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from esbperf.core import plan as plans, topology
from esbperf.results import layout
from esbperf.results.datalog import log_stats
from esbperf.run import runner, step as steps
from esbperf.testbed import services, up, down


def figures(step_dir: Path) -> dict:
    """esbperf's TPS and mean over the step's window, and wrk's, from its folder."""
    meta = layout.read_json(step_dir / layout.STEP_FILE)
    logs = log_stats(layout.data_logs(step_dir), meta["warmup_end_ms"], meta["end_ms"])
    window_s = (meta["end_ms"] - meta["warmup_end_ms"]) / 1000
    x = meta.get("xcheck") or {}
    return {"users": meta["users"], "tps": logs.transactions / window_s, "mean_ms": logs.response.mean / 1000,
            "p50_ms": logs.response.percentile(50) / 1000, "errors": logs.errors,
            "wrk_tps": x.get("tps"), "wrk_mean_ms": x.get("mean_ms"), "wrk_p50_ms": x.get("p50_ms"),
            "skipped": x.get("skipped")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbed", default="emulated" if os.geteuid() == 0 else "local")
    parser.add_argument("--esb", default="camel")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--users", default="1,20")
    parser.add_argument("--payload", default="1KB")
    parser.add_argument("--scenario", default="proxy")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=20,
                        help="each step's warm-up: past the new worker JVM's compile phase (about 10 s here)")
    parser.add_argument("--target-warmup", type=float, default=10)
    parser.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()

    testbed = topology.load(args.testbed)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-timing-"))
    plan_file = work / "bench-timing.yaml"
    plan_file.write_text(json.dumps({
        "name": "bench-timing", "scenarios": [args.scenario], "payloads": [args.payload],
        "users": [int(u) for u in args.users.split(",")], "duration_s": args.seconds, "warmup_s": args.warmup,
        "target_warmup_s": args.target_warmup, "keepalive": True, "timeout_s": 30}))
    the_plan = plans.load(plan_file)
    extra = dict(p.split("=", 1) for p in args.property)
    if extra:   # a candidate cause of bias, on every step's workers
        original = steps.step_properties
        steps.step_properties = lambda *a, **k: {**original(*a, **k), **extra}
    brought_up = up(testbed) if testbed.emulated else []
    rounds = []
    try:
        group = services.start(testbed, args.esb, work / "services", echo=lambda *_: None)
        try:
            for n in range(args.rounds):
                run_dir = runner.start(the_plan, [args.esb], testbed, work / "results", console=Console(quiet=True),
                                       local_state_dirs=services.state_dirs(work / "services"),
                                       token_file=services.console_token_file(work / "services"), cross_check="wrk")
                rounds.append([figures(p.parent) for p in sorted(run_dir.glob("**/iter-*/step.json"))])
                print(f"round {n + 1}: " + "; ".join(
                    f"{f['users']}u esbperf {f['tps']:.0f} TPS {f['mean_ms']:.3f} ms, wrk {f['wrk_tps'] or 0:.0f} TPS "
                    f"{f['wrk_mean_ms'] or 0:.3f} ms" for f in rounds[-1]), flush=True)
        finally:
            group.stop_all()
    finally:
        if brought_up:
            down(testbed)
    print(f"\n{args.scenario} {args.payload} through {args.esb} on the {args.testbed} testbed, keep-alive; "
          f"{args.seconds:g} s measured per step; {args.rounds} rounds; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}" + (f"; worker properties {extra}" if extra else ""))
    print(f"{'users':>5} {'esbperf TPS':>11} {'wrk TPS':>8} {'ratio':>6} {'esbperf mean':>12} {'wrk mean':>9} "
          f"{'diff ms':>8} {'limit ms':>8}")
    for i, first in enumerate(rounds[0]):
        med = {k: statistics.median(r[i][k] for r in rounds if r[i][k] is not None)
               for k in ("tps", "wrk_tps", "mean_ms", "wrk_mean_ms")}
        limit = max(0.1 * med["wrk_mean_ms"], 0.03)
        print(f"{first['users']:>5} {med['tps']:>11.0f} {med['wrk_tps']:>8.0f} {med['tps'] / med['wrk_tps']:>6.2f} "
              f"{med['mean_ms']:>12.3f} {med['wrk_mean_ms']:>9.3f} {med['mean_ms'] - med['wrk_mean_ms']:>+8.3f} "
              f"{limit:>8.3f}")
        for r in rounds:
            print(f"{'':>5} round: ratio {r[i]['tps'] / r[i]['wrk_tps']:.2f}, diff "
                  f"{r[i]['mean_ms'] - r[i]['wrk_mean_ms']:+.3f} ms")
    print(f"(work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
