"""Benchmark: esbperf's own warm-up on fresh engine processes — when it calls each JVM ESB warm, when
the engine's compiler went quiet, what esbperf then measured, and what wrk reads after a 20-s idle pause.

    sudo .venv/bin/python esb-projects/bench/bench_warm_engines.py [--engines camel,synapse,spring-integration]
        [--scenarios proxy,cbr,xslt] [--processes 5] [--max-s 180] [--csv FILE]

The testbed and services as `esbperf round` starts them (esbperf/cli/launch.py: the emulated testbed,
the engines with esbperf's options). Each process: the engine restarted (fresh), then one run of a plan
with a target warm-up of at most `--max-s` (`target_warmup_s` 20) and two 10-s steps at the scenario,
1 KB, 20 users, each after an automatic warm-up; then the run left idle for 20 s, and wrk on the same
requests for 10 s. Printed per process, and as a CSV row: the warm-up's length and verdict, when the
engine's compiler went quiet for good (its per-second share in run.json, at most 5 % of a core over
10 s), the TPS of esbperf's two steps, wrk's TPS after the pause, and their ratio (the goal: at most
1.10)."""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from esbperf.cli.launch import launched
from esbperf.core import plan as plans, roles, topology
from esbperf.results import layout
from esbperf.run import crosscheck, gauge, runner, wrk

PAUSE_S = 20
WRK_S = 10


def plan_file(folder: Path, scenario: str, max_s: float) -> Path:
    path = folder / f"bench-warm-{scenario}.yaml"
    path.write_text(json.dumps({
        "name": f"bench-warm-{scenario}", "scenarios": [scenario], "payloads": ["1KB"], "users": [20],
        "duration_s": 10, "warmup_s": "auto", "warmup_min_s": 2, "warmup_max_s": 15, "iterations": 2,
        "target_warmup_s": {"direct": 5, "floor": 5, "esb": 20},
        "target_warmup_max_s": {"direct": 20, "floor": 20, "esb": max_s},
        "target_warmup_horizon_s": {"direct": 10, "floor": 10, "esb": 60},
        "keepalive": True, "timeout_s": 30}))
    return path


def quiet_from(series: list[float | None], bucket_s: float) -> float | None:
    """Seconds into the judged load from which every 10-s stretch of the compiler's series averaged at
    most the quiet line (None: never, within the series)."""
    width = max(1, int(round(gauge.COMPILER_WINDOW_S / bucket_s)))
    values = [0.0 if v is None else v for v in series]
    for i in range(len(values) - width + 1):
        if all(statistics.fmean(values[j:j + width]) <= gauge.COMPILER_QUIET_PERCENT
               for j in range(i, len(values) - width + 1)):
            return round(i * bucket_s, 1)
    return None


def one_process(run_dir: Path, testbed: topology.Testbed, engine: str, scenario: str) -> dict:
    """What the run recorded, then wrk after the pause."""
    info = json.loads((run_dir / "run.json").read_text())
    entries = [e for block in info.get("target_warmup") or [] for e in block.get("targets") or []
               if e.get("target") == engine]
    judged = entries[-1] if entries else {}
    compiler = judged.get("compiler") or {}
    steps = sorted(s for s in run_dir.rglob(layout.STEP_FILE) if ".failed" not in str(s))
    tps = [json.loads(s.read_text())["summary"]["tps"] for s in steps]
    time.sleep(PAUSE_S)
    target = testbed.target(engine)
    base, requests = crosscheck.step_requests(target, plans.Step(scenario, 1024, 20, 1, target=engine), None, "")
    after = wrk.run_requests(base, requests, 20, WRK_S, threads=2, timeout_s=30,
                             wrap=lambda argv: testbed.command(roles.CLIENT, argv))
    return {"engine": engine, "scenario": scenario,
            "warmup_s": round(sum(e.get("seconds", 0) for e in entries), 1),
            "judged_s": judged.get("seconds"), "warm": judged.get("steady"), "outcome": judged.get("outcome"),
            "compiler_quiet": compiler.get("quiet"),
            "compiler_quiet_from_s": quiet_from(compiler.get("series") or [], judged.get("bucket_s") or 1.0),
            "esbperf_tps": round(statistics.fmean(tps), 1) if tps else None,
            "steps": len(tps), "wrk_after_pause_tps": round(after.rps, 1),
            "wrk_over_esbperf": round(after.rps / statistics.fmean(tps), 3) if tps else None,
            "reason": judged.get("reason", "")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="camel,synapse,spring-integration")
    p.add_argument("--scenarios", default="proxy")
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--max-s", type=float, default=180)
    p.add_argument("--testbed", default="emulated")
    p.add_argument("--csv", type=Path)
    args = p.parse_args()
    testbed = topology.load(args.testbed)
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-warm-engines-"))
    rows: list[dict] = []
    quiet = Console(quiet=True)
    for engine in args.engines.split(","):
        with launched(testbed, engine, work / engine / "services", Console()) as launcher:
            for scenario in args.scenarios.split(","):
                plan = plans.load(plan_file(work, scenario, args.max_s))
                for n in range(args.processes):
                    launcher["restart_esb"](engine)
                    run_dir = runner.start(plan, [engine], testbed, work / engine / "results", console=quiet, **launcher)
                    row = {"process": n + 1, **one_process(run_dir, testbed, engine, scenario)}
                    rows.append(row)
                    print(" ".join(f"{k}={v}" for k, v in row.items() if k != "reason"), flush=True)
                    print(f"  {row['reason']}", flush=True)
                    if args.csv:
                        with open(args.csv, "w", newline="") as f:
                            w = csv.DictWriter(f, fieldnames=list(rows[0]))
                            w.writeheader()
                            w.writerows(rows)
    print(f"\n{'engine':<19} {'scenario':<8} {'warm':>9} {'warm-up s (median, most)':>25} {'quiet from s':>13} "
          f"{'wrk after ÷ esbperf (median, most)':>35}")
    for engine in args.engines.split(","):
        for scenario in args.scenarios.split(","):
            mine = [r for r in rows if r["engine"] == engine and r["scenario"] == scenario]
            if not mine:
                continue
            warm = sum(1 for r in mine if r["warm"] is True)
            seconds = [r["warmup_s"] for r in mine]
            ratios = [r["wrk_over_esbperf"] for r in mine if r["wrk_over_esbperf"] is not None]
            quiet_s = [r["compiler_quiet_from_s"] for r in mine]
            print(f"{engine:<19} {scenario:<8} {warm:>4} of {len(mine):<2} {statistics.median(seconds):>12.0f}, "
                  f"{max(seconds):<10.0f} {', '.join('-' if q is None else f'{q:g}' for q in quiet_s):>13} "
                  f"{statistics.median(ratios) if ratios else float('nan'):>20.3f}, {max(ratios, default=float('nan')):.3f}")
    print(f"({os.cpu_count()} cores, {testbed.cpu_split()}; work folder {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
