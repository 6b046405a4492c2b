"""Benchmark: how noisy one engine-bound step is, and how much of that noise is esbperf's own.

    sudo .venv/bin/python grinder-scripts/bench/bench_noise.py [--esb camel] [--payload 1KB] [--users 20]
        [--iterations 8] [--seconds 10] [--target-warmup 90] [--setting work=1000 ...]

One engine on the shipped emulated testbed (started as `esbperf demo` starts it), warmed by the
run's own target warm-up, then `--iterations` back-to-back steps of `--seconds` each (`proxy`, one
payload, one number of users), with wrk bracketing every step (`--cross-check wrk`). Meanwhile a
thread reads the console every 250 ms (its last sample's TPS, and its cumulative count), and the
engine's JIT (`jstat -compiler`) every 2 s. Printed, each over the same measured windows:

    esbperf       the steps' TPS (10-s windows, their data logs): mean and SD between iterations
    wrk           wrk's runs before and after each step: mean and SD between runs
    console       the console's last-sample TPS as a live reader sees it (one per sample): CoV
    counted       rates from its cumulative count by our own clock, per 250 ms, 1 s and 5 s: CoV
    engine        the engine's CPU per request (its process's CPU ÷ the step's transactions), its
                  share of its core, its GC pauses, methods compiled during the windows
    client        the client host's cores (the workers and the echoes that share them)
    machine       with --machine: the paced memory probe (esbperf/run/wander.py Pace, 3 % of the esb
                  core) beside the steps: how closely the counted TPS per 1 s and 5 s follows it (the
                  correlation, the power β of its speed that TPS moves by, and the CoV of TPS ÷ speed^β:
                  what a judgment that takes the machine out still sees)

The figures go in docs/benchmarks/noise.md.
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

import numpy as np
import polars as pl
from rich.console import Console

from esbperf.analysis.report import build_report
from esbperf.cli.launch import launched
from esbperf.core import engines, plan as plans, topology
from esbperf.core.project import CONSOLE_CONFIG
from esbperf.run import runner, wander
from esbperf.services.console import control_client, statistics as totals_of

POLL_S = 0.25
JIT_POLL_S = 2.0


def cov(values) -> float | None:
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


class Watcher(threading.Thread):
    """The console's last sample and cumulative count every POLL_S, the engine's JIT every JIT_POLL_S."""

    def __init__(self, testbed: topology.Testbed, token_file: Path, match: str):
        super().__init__(daemon=True)
        self.client = control_client(testbed, token_file)
        self.match = match
        self.samples: list[tuple[int, float | None]] = []        # (ms, last sample's TPS)
        self.counts: list[tuple[int, float]] = []                # (ms, cumulative transactions)
        self.compiled: list[tuple[int, int]] = []                # (ms, methods compiled so far)
        self.stop = threading.Event()

    def run(self) -> None:
        last_jit = 0.0
        while not self.stop.wait(POLL_S):
            try:
                latest = totals_of(self.client.data(latest=True))
                self.samples.append((int(time.time() * 1000), latest.get("TPS")))
                cumulative = totals_of(self.client.data())
                self.counts.append((int(time.time() * 1000), float(cumulative.get("Tests") or 0)))
            except Exception:   # the console between runs, or restarting: the next poll tries again
                continue
            if time.monotonic() - last_jit > JIT_POLL_S:
                last_jit = time.monotonic()
                compiled = self._compiled()
                if compiled is not None:
                    self.compiled.append((int(time.time() * 1000), compiled))

    def _compiled(self) -> int | None:
        """Methods the engine's JIT compiled so far (jstat -compiler), None when it cannot tell."""
        try:
            pid = subprocess.run(["pgrep", "-f", "-o", self.match], capture_output=True, text=True, timeout=5).stdout.split()
            if not pid:
                return None
            out = subprocess.run(["jstat", "-compiler", pid[0]], capture_output=True, text=True, timeout=10).stdout.split()
            return int(out[len(out) // 2])   # header line then values: "Compiled Failed Invalid Time ..."
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None


def rates(counts: list[tuple[int, float]], start: int, end: int, bucket_ms: int) -> list[float]:
    """Rates per bucket from the cumulative counts read inside [start, end) (the step zeroes the
    console's totals as its window opens: a count from before is of another sum), interpolated at
    the bucket edges from the first read inside on."""
    inside = [c for c in counts if start <= c[0] < end]
    if len(inside) < 2:
        return []
    ms = np.array([c[0] for c in inside], dtype=float)
    n = np.array([c[1] for c in inside], dtype=float)
    edges = np.arange(ms[0], ms[-1] + 1, bucket_ms, dtype=float)
    return list(np.diff(np.interp(edges, ms, n)) / (bucket_ms / 1000)) if len(edges) > 1 else []


def machine_figures(counts: list[tuple[int, float]], windows: list[tuple[int, int]], pace: wander.Pace) -> None:
    """How the counted TPS follows the machine's speed (the paced probe) inside the measured windows."""
    for seconds in (1, 5):
        pairs = []
        for a, e in windows:
            inside = [c for c in counts if a <= c[0] < e]
            found = rates(counts, a, e, 1000)
            if not inside or not found:
                continue
            speeds = pace.speeds(inside[0][0], 1.0, len(found))
            whole = len(found) // seconds * seconds
            for i in range(0, whole, seconds):
                chunk = speeds[i:i + seconds]
                if all(v for v in chunk):
                    pairs.append((statistics.fmean(found[i:i + seconds]), statistics.fmean(chunk)))
        if len(pairs) < 4:
            print(f"machine, per {seconds} s: too few pairs ({len(pairs)})")
            continue
        tps, speed = np.array(pairs).T
        beta = float(np.polyfit(np.log(speed), np.log(tps), 1)[0])
        print(f"machine, per {seconds} s over {len(tps)} pairs: TPS CoV {pct(cov(tps))}, the probe's {pct(cov(speed))}, "
              f"correlation {np.corrcoef(tps, speed)[0, 1]:+.2f}, β {beta:.2f}, TPS ÷ speed^β CoV {pct(cov(tps / speed ** beta))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--esb", default="camel")
    parser.add_argument("--payload", default="1KB")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--target-warmup", type=float, default=90)
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="an engine setting (engine.yaml `settings`), e.g. work=1000")
    parser.add_argument("--testbed", default=str(CONSOLE_CONFIG / "testbeds" / "emulated.yaml"))
    parser.add_argument("--machine", action="store_true", help="the paced memory probe beside the steps")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_noise: the emulated testbed needs root", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="esbperf-bench-noise-"))
    plan_file = work / "noise.yaml"
    plan_file.write_text(json.dumps({
        "name": "bench-noise", "scenarios": ["proxy"], "payloads": [args.payload], "users": [args.users],
        "duration_s": args.seconds, "warmup_s": "auto", "warmup_min_s": 1, "warmup_max_s": 20,
        "iterations": args.iterations, "target_warmup_s": {"direct": 10, "floor": 10, "esb": args.target_warmup},
        "target_warmup_max_s": {"direct": 30, "floor": 30, "esb": args.target_warmup + 60}, "timeout_s": 30}))
    plan = plans.load(plan_file)
    testbed = topology.load(args.testbed)
    settings = dict(s.split("=", 1) for s in args.setting)
    console = Console()
    extra = {"settings": {args.esb: settings}} if settings else {}
    with launched(testbed, args.esb, work / "services", console, **extra) as launcher:
        watcher = Watcher(testbed, launcher["token_file"], engines.load_all()[args.esb].match)
        watcher.start()
        pace = wander.Pace(testbed.hosts["esb"].cpus, 3600) if args.machine else None
        try:
            run_dir = runner.start(plan, [args.esb], testbed, work / "results", console=console, cross_check="wrk",
                                   **launcher)
        finally:
            watcher.stop.set()
            watcher.join(5)
            if pace is not None:
                pace.close()
    report = work / "report"
    build_report([run_dir], report)
    summary = pl.read_csv(report / "summary.csv", infer_schema_length=None).sort("iteration").to_dicts()
    steps = sorted((json.loads(p.read_text()) for p in run_dir.rglob("step.json")), key=lambda s: s["iteration"])
    windows = [(s["warmup_end_ms"], s["end_ms"]) for s in steps]

    def inside(ms: int) -> bool:
        return any(a <= ms < b for a, b in windows)

    sample_tps = [v for ms, v in watcher.samples if inside(ms) and v is not None]
    counted = {b: [r for a, e in windows for r in rates(watcher.counts, a, e, b)] for b in (250, 1000, 5000)}
    wrk = [x[k]["tps"] for s in steps for x in [s.get("xcheck") or {}] for k in ("before", "after")
           if isinstance(x.get(k), dict) and x[k].get("tps")]
    tps = [r["tps"] for r in summary]
    engine_share = [r.get("esb_proc_cpu_mean") for r in summary]
    per_request = [None if not c or not t else c / 100 * 1e6 / t for c, t in zip(engine_share, tps)]
    compiled = [max((n for ms, n in watcher.compiled if ms <= b), default=None)
                - max((n for ms, n in watcher.compiled if ms <= a), default=0)
                if any(ms <= b for ms, _ in watcher.compiled) else None for a, b in windows]
    print(f"\n{args.esb} proxy {args.payload} {args.users} users, {args.iterations} × {args.seconds:g} s, emulated testbed "
          f"({testbed.cpu_split()}), {os.cpu_count()} CPUs, after its own target warm-up; settings {settings or 'default'}")
    print(f"{'it':>3} {'TPS':>9} {'wrk before':>11} {'wrk after':>10} {'engine %':>9} {'µs/req':>8} {'GC pauses':>10} "
          f"{'GC max ms':>10} {'compiled':>9} {'client %':>9} {'valid'}")
    for r, s, us, jit in zip(summary, steps, per_request, compiled):
        x = s.get("xcheck") or {}
        print(f"{r['iteration']:>3} {r['tps']:>9.0f} {(x.get('before') or {}).get('tps') or 0:>11.0f} "
              f"{(x.get('after') or {}).get('tps') or 0:>10.0f} {r.get('esb_proc_cpu_mean') or 0:>9.1f} "
              f"{us or 0:>8.1f} {r.get('gc_pauses') or 0:>10} {r.get('gc_pause_max_ms') or 0:>10.1f} "
              f"{'–' if jit is None else jit:>9} {r.get('client_cpu_mean') or 0:>9.1f} {r.get('valid')}")
    print(f"esbperf 10-s windows: mean {statistics.fmean(tps):.0f} TPS, SD {pct(cov(tps))} between iterations")
    print(f"wrk {args.seconds:g}-s runs (before and after each step): mean {statistics.fmean(wrk) if wrk else 0:.0f} TPS, "
          f"SD {pct(cov(wrk))} between runs ({len(wrk)} runs)")
    print(f"console's last sample as read every {POLL_S:g} s: CoV {pct(cov(sample_tps))} over {len(sample_tps)} reads "
          f"({sum(1 for v in sample_tps if not v)} read 0)")
    for bucket, values in counted.items():
        print(f"counted from the cumulative totals by time, per {bucket} ms: CoV {pct(cov(values))} over {len(values)} buckets")
    print(f"engine CPU per request: {pct(cov(per_request))} between iterations (mean "
          f"{statistics.fmean([v for v in per_request if v]) if any(per_request) else 0:.1f} µs)")
    if pace is not None:
        machine_figures(watcher.counts, windows, pace)
    print(f"work folder {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
