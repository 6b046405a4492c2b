"""Benchmark: esbperf's figures beside an independent client's, on the set-up a user runs.

    .venv/bin/python grinder-scripts/bench/bench_timing.py [--testbed local|emulated] [--esb camel]
        [--rounds 3] [--users 1,20] [--payload 1KB] [--scenario proxy] [--seconds 10] [--warmups 2,20]
        [--target-warmup 40] [--property NAME=VALUE ...]

Starts every service of the testbed exactly as `esbperf testbed commands` prints them (three
JAX-WS RI echoes, the ESB, the console, an agent and the monitors; on the emulated testbed, as
root, each in its host's network namespace, on its cores: the shipped testbeds say `cpus: auto`)
through the CLI's own launcher, then runs `--rounds` rounds, each a run of one plan per warm-up of
`--warmups` (seconds, or `auto`; the scenario at one payload, each user count, keep-alive) through
the runner with `--cross-check wrk`: after each step, wrk measures the same target, requests and
users from the client host. Prints, per warm-up, step and round, esbperf's TPS and mean (the
workers' `Response us`, over the measured window) beside wrk's, their ratio and difference, and
whether the round holds the limits (TPS >= 0.95 of wrk's, mean within max(10 %, 0.03 ms)).
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
    parser.add_argument("--warmups", default="2,20",
                        help="each round runs the plan once per warm-up (seconds, or auto): a short one measures "
                             "while the new worker JVM still compiles, a long one past it (about 10 s here)")
    parser.add_argument("--target-warmup", type=float, default=40,
                        help="seconds the target is loaded before the first round (a cold Camel climbs for about 30 s "
                             "at 1 KB; later runs follow the first and do not warm it again)")
    parser.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()

    testbed = topology.load(args.testbed)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-timing-"))
    warmups = [w if w == "auto" else float(w) for w in args.warmups.split(",")]
    the_plans = {}
    for w in warmups:
        plan_file = work / f"bench-timing-{w}.yaml"
        plan_file.write_text(json.dumps({
            "name": f"bench-timing-{w}", "scenarios": [args.scenario], "payloads": [args.payload],
            "users": [int(u) for u in args.users.split(",")], "duration_s": args.seconds, "warmup_s": w,
            "target_warmup_s": args.target_warmup, "keepalive": True, "timeout_s": 30}))
        the_plans[w] = plans.load(plan_file)
    extra = dict(p.split("=", 1) for p in args.property)
    if extra:   # a candidate cause of bias, on every step's workers
        original = steps.step_properties
        steps.step_properties = lambda *a, **k: {**original(*a, **k), **extra}
    print(f"testbed {testbed.name}: {testbed.cpu_split()}", flush=True)
    brought_up = up(testbed) if testbed.emulated else []
    rounds: dict = {w: [] for w in warmups}
    previous = None   # each run follows the last: the target is warmed once, the client calibrated once
    try:
        group = services.start(testbed, args.esb, work / "services", echo=lambda *_: None)
        try:
            for n in range(args.rounds):
                for w in warmups:
                    run_dir = runner.start(the_plans[w], [args.esb], testbed, work / "results",
                                           console=Console(quiet=True),
                                           local_state_dirs=services.state_dirs(work / "services"),
                                           token_file=services.console_token_file(work / "services"),
                                           cross_check="wrk", after=previous)
                    previous = run_dir
                    rounds[w].append([figures(p.parent) for p in sorted(run_dir.glob("**/iter-*/step.json"))])
                    print(f"round {n + 1}, warm-up {w}: " + "; ".join(
                        f"{f['users']}u esbperf {f['tps']:.0f} TPS {f['mean_ms']:.3f} ms, wrk {f['wrk_tps'] or 0:.0f} "
                        f"TPS {f['wrk_mean_ms'] or 0:.3f} ms" for f in rounds[w][-1]), flush=True)
        finally:
            group.stop_all()
    finally:
        if brought_up:
            down(testbed)
    print(f"\n{args.scenario} {args.payload} through {args.esb} on the {args.testbed} testbed ({testbed.cpu_split()}), "
          f"keep-alive; {args.seconds:g} s measured per step; {args.rounds} rounds; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}" + (f"; worker properties {extra}" if extra else ""))
    print(f"{'warm-up':>7} {'users':>5} {'round':>5} {'esbperf TPS':>11} {'wrk TPS':>8} {'ratio':>6} "
          f"{'esbperf mean':>12} {'wrk mean':>9} {'diff ms':>8} {'limit ms':>8}  verdict")
    failed = 0
    for w in warmups:
        for i, first in enumerate(rounds[w][0]):
            for n, r in enumerate(rounds[w], 1):
                f = r[i]
                if not f["wrk_tps"] or f["wrk_mean_ms"] is None:
                    print(f"{w!s:>7} {f['users']:>5} {n:>5} wrk gave no figure ({f['skipped'] or 'no xcheck'})")
                    failed += 1
                    continue
                ratio, diff = f["tps"] / f["wrk_tps"], f["mean_ms"] - f["wrk_mean_ms"]
                limit = max(0.1 * f["wrk_mean_ms"], 0.03)
                ok = ratio >= 0.95 and abs(diff) <= limit
                failed += not ok
                print(f"{w!s:>7} {f['users']:>5} {n:>5} {f['tps']:>11.0f} {f['wrk_tps']:>8.0f} {ratio:>6.2f} "
                      f"{f['mean_ms']:>12.3f} {f['wrk_mean_ms']:>9.3f} {diff:>+8.3f} {limit:>8.3f}  "
                      f"{'holds' if ok else 'OUTSIDE'}")
    print(f"{failed} step(s) outside the limits")
    print(f"(work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
