"""Warm-up shapes on fresh engine processes: how long each JVM ESB takes until its JIT compiler is
quiet and its throughput is at the level a long-warmed process holds, under each way of loading it.

    sudo .venv/bin/python esb-projects/bench/bench_warmup.py [--engines camel,synapse,spring-integration]
        [--scenarios proxy,cbr,xslt] [--shapes saturate,onoff,low] [--processes 5] [--seconds 120]
        [--users 20] [--csv FILE]

On the shipped emulated testbed (`esbperf testbed up`: the esb host on a core of its own, the client
and the three lean echoes on the other), each engine started as `esbperf testbed start` starts it;
each process fresh (the engine restarted). wrk loads it from the client host in 5-s windows:

    saturate   20 connections, back to back (a saturating closed load: what a round's warm-up was)
    onoff      20 connections for 5 s, then 5 s idle, again and again
    low        2 connections, back to back (the engine's core partly idle)
    gapped     20 connections; after a window in which the compiler ran (over QUIET_SHARE of the
               core), idle until it has been quiet for a second (at most 10 s)

Every engine starts as esbperf starts it, its JIT compiler threads ahead of its own (esbperf/services/
jvm.py COMPILER_PRIORITY); a shape named with `-plain` (saturate-plain, ...) starts it without them
(ESBPERF_COMPILER_PRIORITY=0), as esbperf did before.

Each window's compiler CPU is read from the process's own threads (/proc/PID/task/*/stat, the
threads HotSpot names "C1 CompilerThread*" and "C2 CompilerThread*"). After the shape: 20 s idle
(the compiler's backlog shows as CPU there), then 30 s of saturating load in 5-s windows, whose
median is the level the process reached. A shape is judged against a process of its own loaded
saturating for `--reference-seconds` over every scenario in turn, then measured at each (the
"warmed 10 minutes" level). One CSV row per window
(--csv); the table printed at the end: per engine, scenario and shape, the seconds until the
compiler was quiet for good, and the level after ÷ the long-warmed one."""
from __future__ import annotations

import argparse
import csv
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from esbperf.core import plan as plans, roles
from esbperf.analysis import gc
from esbperf.results import gclog
from esbperf.run import crosscheck, wander, wrk
from esbperf.testbed import emulated, services

WINDOW_S = 5
REFERENCE = "saturate-long"   # the long-warmed process's shape: as shipped, saturating
QUIET_SHARE = 0.05      # the compiler at or below 5 % of a core over 10 s is quiet (esbperf/core/steady.py)
PAUSE_S = 20
AFTER_WINDOWS = 6
COMPILER_PREFIXES = ("C1 CompilerThre", "C2 CompilerThre")   # /proc's comm holds 15 characters
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of the process's C1 and C2 compiler threads and of the whole process."""
    found = {"c1": 0.0, "c2": 0.0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {**found, "all": 0.0}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue   # ended meanwhile (HotSpot stops idle compiler threads)
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        ticks = int(fields[11]) + int(fields[12])
        for prefix, key in zip(COMPILER_PREFIXES, ("c1", "c2")):
            if comm.startswith(prefix):
                found[key] += ticks * TICK_S
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2:].split()
    found["all"] = (int(fields[11]) + int(fields[12])) * TICK_S
    return found


class Window:
    """CPU of the compiler threads between open() and close(), the machine's speed meanwhile (the
    paced probe's reads per CPU-second on the esb host's core, esbperf/run/wander.py), and the
    engine's collections (its gc.log: the pauses' ms, the most heap left after one)."""

    pace: wander.Pace | None = None
    gc_log: Path | None = None

    def __init__(self, pid: int):
        self.pid = pid
        self.began, self.at, self.began_ms = time.monotonic(), thread_cpu(pid), time.time() * 1000

    def close(self) -> dict[str, float]:
        now, cpu = time.monotonic(), thread_cpu(self.pid)
        found = {"seconds": now - self.began, **{k: cpu[k] - self.at[k] for k in cpu}}
        if Window.pace is not None:
            speed = Window.pace.speeds(self.began_ms, now - self.began, 1)[0]
            found["machine"] = (speed or 0) / 1e6   # million reads per CPU-second
        if Window.gc_log is not None:
            end_ms = int(self.began_ms + (now - self.began) * 1000)
            lines = gclog.window(Window.gc_log, int(self.began_ms), end_ms).splitlines()
            pauses = [p for p in (gc.parse_pause(gclog.line_time_ms(line.encode()) or 0, line) for line in lines) if p]
            found["gc_ms"] = sum(p.ms for p in pauses)
            found["heap_mb"] = max((p.heap_after_mb or 0 for p in pauses), default=0)
        return found


def load(base: str, requests: list[wrk.Request], testbed, connections: int, seconds: float) -> float:
    """wrk from the client host; requests a second."""
    result = wrk.run_requests(base, requests, connections, seconds, threads=min(2, connections), timeout_s=30,
                              wrap=lambda argv: testbed.command(roles.CLIENT, argv))
    if result.errors:
        raise SystemExit(f"{result.errors} failed requests against {base}: is the engine answering?")
    return result.rps


def idle(seconds: float) -> None:
    time.sleep(seconds)


def run_process(testbed, engine: str, scenarios: list[str], shape: str, seconds: float, users: int, restart,
                rows: list[dict], process: int) -> list[dict]:
    """One fresh process loaded in `shape` for `seconds` (its windows taking `scenarios` in turn),
    then paused and measured at each scenario; a summary per scenario."""
    target = testbed.target(engine)
    requests = {sc: crosscheck.step_requests(target, plans.Step(sc, 1024, users, 1, target=engine), None, "")
                for sc in scenarios}
    kind, plain = shape.removesuffix("-plain"), shape.endswith("-plain")
    if plain:
        os.environ["ESBPERF_COMPILER_PRIORITY"] = "0"
    try:
        pid = restart(engine)
    finally:
        os.environ.pop("ESBPERF_COMPILER_PRIORITY", None)
    born = time.monotonic()
    named = "+".join(scenarios)

    def row(phase: str, scenario: str, tps: float | None, cpu: dict) -> dict:
        r = {"engine": engine, "scenario": scenario, "shape": shape, "process": process, "phase": phase,
             "t_s": round(time.monotonic() - born, 1), "tps": None if tps is None else round(tps, 1),
             **{k if k in ("machine", "gc_ms", "heap_mb") else f"{k}_s": round(v, 3) for k, v in cpu.items()}}
        rows.append(r)
        return r

    began, n = time.monotonic(), 0
    while time.monotonic() - began < seconds:
        scenario = scenarios[n % len(scenarios)]
        n += 1
        w = Window(pid)
        connections = 2 if kind == "low" else users
        tps = load(*requests[scenario], testbed, connections, WINDOW_S)
        row("warm", scenario, tps, w.close())
        if kind == "onoff":
            w = Window(pid)
            idle(WINDOW_S)
            row("gap", named, None, w.close())
        elif kind == "gapped":
            waited = 0.0
            last = rows[-1]
            while last["c1_s"] + last["c2_s"] > QUIET_SHARE * last["seconds_s"] and waited < 10:
                w = Window(pid)
                idle(1)
                waited += 1
                last = row("gap", named, None, w.close())
    w = Window(pid)
    idle(PAUSE_S)
    paused = row("pause", named, None, w.close())
    mine = [r for r in rows if r["process"] == process and r["engine"] == engine and r["shape"] == shape]
    found = []
    for scenario in scenarios:
        after = []
        for _ in range(AFTER_WINDOWS):
            w = Window(pid)
            after.append(load(*requests[scenario], testbed, users, WINDOW_S))
            row("after", scenario, after[-1], w.close())
        found.append({"engine": engine, "scenario": scenario, "shape": shape, "process": process,
                      "quiet_s": quiet_since(mine), "last_warm_tps": last_warm([r for r in mine if r["scenario"] == scenario]),
                      "pause_compiler_s": round(paused["c1_s"] + paused["c2_s"], 2),
                      "after_tps": round(statistics.median(after), 1),
                      "after_cov": round(statistics.stdev(after) / statistics.fmean(after), 4)})
    return found


def quiet_since(rows: list[dict]) -> float | None:
    """The process's age when its compiler went quiet for good during the shape: every later
    stretch of 10 s or more (windows and gaps) at or below QUIET_SHARE of a core; None if never."""
    warm = [r for r in rows if r["phase"] in ("warm", "gap")]
    since = None
    for i in range(len(warm)):
        tail = warm[i:]
        span = sum(r["seconds_s"] for r in tail)
        busy = sum(r["c1_s"] + r["c2_s"] for r in tail)
        if span >= 10 and all(_quiet(tail[j:]) for j in range(len(tail))) and busy <= QUIET_SHARE * span:
            since = warm[i]["t_s"] - warm[i]["seconds_s"]
            break
    return None if since is None else round(since, 1)


def _quiet(rows: list[dict]) -> bool:
    """The first 10 s (or what there is) of `rows` at or below QUIET_SHARE."""
    span = busy = 0.0
    for r in rows:
        span += r["seconds_s"]
        busy += r["c1_s"] + r["c2_s"]
        if span >= 10:
            break
    return busy <= QUIET_SHARE * max(span, 10)


def last_warm(rows: list[dict]) -> float | None:
    tps = [r["tps"] for r in rows if r["phase"] == "warm"][-3:]
    return round(statistics.median(tps), 1) if tps else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="camel,synapse,spring-integration")
    p.add_argument("--scenarios", default="proxy")
    p.add_argument("--shapes", default="saturate,onoff")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--reference-seconds", type=float, default=0,
                   help="a process of its own loaded this long over every scenario in turn: the warm level (0: none)")
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--testbed", default="emulated")
    p.add_argument("--csv", type=Path)
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # stopped: everything it started stops too
    engines = args.engines.split(",")
    rows: list[dict] = []
    summaries: list[dict] = []
    with emulated(args.testbed) as testbed, tempfile.TemporaryDirectory(prefix="esbperf-bench-warmup-") as work:
        Window.pace = wander.Pace(testbed.hosts[roles.ESB].cpus, 24 * 3600)
        for engine in engines:
            group = services.start(testbed, engine, Path(work) / engine, echo=lambda line: None)
            port = testbed.hosts[roles.ESB].esb_ports[engine]
            Window.gc_log = services.state_dir_of(Path(work) / engine, roles.ESB) / "esb" / f"{engine}-{port}" / "gc.log"
            try:
                restart = services.esb_restarter(group, testbed)
                n = 0
                scenarios = args.scenarios.split(",")
                plan = [([sc], shape, args.seconds) for sc in scenarios for _ in range(args.processes)
                        for shape in args.shapes.split(",")]
                if args.reference_seconds:   # one process warmed that long over every scenario in turn
                    plan.append((scenarios, REFERENCE, args.reference_seconds))
                for these, shape, seconds in plan:
                    n += 1
                    for s in run_process(testbed, engine, these, shape, seconds, args.users, restart, rows, n):
                        summaries.append(s)
                        print(" ".join(f"{k}={v}" for k, v in s.items()), flush=True)
                    if args.csv:
                        write(args.csv, rows)
            finally:
                group.stop_all()
        Window.pace.close()
    print(table(summaries, rows))
    return 0


def write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def machine_adjusted(rows: list[dict]) -> dict[tuple, float]:
    """Each process's level after the pause at one machine speed: its after-windows' throughput times
    (M ÷ the probe's reading)^k, where M is the median reading over all of an engine's after-windows
    and k the engine's power of the machine's speed in them (least squares of log TPS on log speed,
    each scenario its own intercept). The machine's speed moves an engine's throughput by ±20 % from
    one 5-s window to the next here; a level compared across processes minutes apart needs it taken out.
    By (engine, scenario, process)."""
    import numpy as np

    out: dict[tuple, float] = {}
    for engine in {r["engine"] for r in rows}:
        after = [r for r in rows if r["engine"] == engine and r["phase"] == "after" and r.get("machine")]
        if len(after) < 6:
            continue
        scenarios = sorted({r["scenario"] for r in after})
        x = np.array([[np.log(r["machine"])] + [r["scenario"] == sc for sc in scenarios] for r in after], float)
        y = np.log([r["tps"] for r in after])
        k = float(np.linalg.lstsq(x, y, rcond=None)[0][0])
        m0 = float(np.median([r["machine"] for r in after]))
        levels: dict[tuple, list[float]] = {}
        for r in after:
            levels.setdefault((engine, r["scenario"], r["process"]), []).append(r["tps"] * (m0 / r["machine"]) ** k)
        out.update({key: float(np.median(v)) for key, v in levels.items()})
        out[(engine, "k")] = k
    return out


def table(summaries: list[dict], rows: list[dict]) -> str:
    adjusted = machine_adjusted(rows)
    lines = ["| engine | scenario | shape | processes | compiler quiet at (s) | TPS end of shape | TPS after pause "
             "| after ÷ reference | the same, the machine's speed taken out | compiler in pause (s) |",
             "|---|---|---|---:|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for s in summaries:
        groups.setdefault((s["engine"], s["scenario"], s["shape"]), []).append(s)
    for (engine, scenario, shape), found in groups.items():
        ref = groups.get((engine, scenario, REFERENCE))
        level = statistics.median(r["after_tps"] for r in ref) if ref else None
        fmt = lambda vs: ", ".join("-" if v is None else f"{v:g}" for v in vs)
        ratio = fmt(round(s["after_tps"] / level, 3) for s in found) if level else "-"
        ref_adjusted = [adjusted.get((engine, scenario, r["process"])) for r in ref or []]
        base = statistics.median(ref_adjusted) if ref_adjusted and None not in ref_adjusted else None
        mine = [adjusted.get((engine, scenario, s["process"])) for s in found]
        ratio_adjusted = fmt(None if v is None else round(v / base, 3) for v in mine) if base else "-"
        lines.append(f"| {engine} | {scenario} | {shape} | {len(found)} | {fmt(s['quiet_s'] for s in found)} | "
                     f"{fmt(s['last_warm_tps'] for s in found)} | {fmt(s['after_tps'] for s in found)} | {ratio} | "
                     f"{ratio_adjusted} | {fmt(s['pause_compiler_s'] for s in found)} |")
    powers = ", ".join(f"{e} {adjusted[(e, 'k')]:.2f}" for e in sorted({k[0] for k in adjusted if k[1] == 'k'}))
    return "\n".join(lines) + (f"\n\n(the throughput's power of the machine's speed, after the pause: {powers})"
                               if powers else "")


if __name__ == "__main__":
    sys.exit(main())
