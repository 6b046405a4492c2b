"""Soak benchmark: does anything grow when esbperf runs for hours?

    .venv/bin/python grinder-scripts/bench/bench_soak.py [--minutes 60] [--step-seconds 120]
        [--users 1,20,40,80,160,320] [--testbed emulated|local] [--esb camel] [--sample-s 10]
        [--max-growth 5]

Starts every service of the testbed with the CLI's own launcher (on a copy of the emulated
testbed with a prefix and subnet of its own when run as root, so nothing else on this machine
collides with it; the `local` testbed otherwise), then runs the thesis's concurrency sweep (100 KB;
1, 20, 40, 80, 160, 320 users; `proxy`) through the ESB with `esbperf run` — a process of its own —
for at least --minutes, in steps of --step-seconds, the sweep repeated in as many cycles
(iterations) as fit.

What is compared: a process at the same load. The sweep's users rise step by step, and connections,
threads and heaps rise with them, so a first step cannot be compared with a last one. At the end of
every step (its step.json written) each process is read — resident memory, open descriptors,
threads — and, at the end of every cycle, each service JVM's live heap after a full collection
(`jcmd GC.run`, then `GC.heap_info`; its code cache: `Compiler.codecache`). The first cycle is
where heaps, pools and caches reach the sizes the load needs; growth is counted from the second
cycle on: the slope of a figure over the cycles, step by step (the same step of each cycle), per
hour. A leak shows in the live heap, or in
descriptors or threads; a JVM's RSS can also creep while G1 still sizes its heap.

Also sampled every --sample-s for the picture (soak.csv): every process, and the disk used by the
run folder, the agents' and the console's state folders and the monitors' spools.

Prints, and writes (soak.csv, checkpoints.csv, soak-table.txt) into its work folder: per process
its RSS at the end of the first cycle and at the end, the growth per hour after the first cycle of
RSS, live heap, descriptors and threads; and the bytes on disk per million transactions. Exits 1
when a long-lived process grows by more than --max-growth % per hour with 95 % confidence (the
lower bound of the slope's interval beyond the limit) — a JVM by its live heap or by what it holds
beside its heap and its JIT's code cache (its resident memory outside those two address ranges:
metaspace, threads, malloc), or by its RSS when jcmd answered at some cycle ends only; another
process by its RSS — or gains more than 2 descriptors or
threads over the cycles judged (the trend at the same steps, with the same confidence); it needs
3 cycles or more to judge (2 after the first). Run it by hand on a quiet machine (it takes the whole --minutes).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from esbperf.analysis.forks import t_quantile
from esbperf.core import procs, roles, topology
from esbperf.core.project import CONSOLE_CONFIG
from esbperf.results import layout
from esbperf.testbed import down, services, up

PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(rss bytes, open descriptors, threads) of a live process, or None."""
    try:
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        threads = len(os.listdir(f"/proc/{pid}/task"))
        return rss, fds, threads
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    try:
        return [int(c) for task in os.listdir(f"/proc/{pid}/task")
                for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        return []


def disk_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


@dataclass
class Series:
    name: str
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)   # (t, rss, fds, threads)


def soak_testbed(work: Path, root: bool) -> topology.Testbed:
    """The testbed to soak: a copy of the emulated one with its own prefix and subnet (root), else local."""
    if not root:
        return topology.load("local")
    data = yaml.safe_load((CONSOLE_CONFIG / "testbeds" / "emulated.yaml").read_text())
    text = json.dumps(data).replace("198.18.0.", "198.18.240.").replace("esbp-", "soak-")
    path = work / "soak.yaml"
    path.write_text(yaml.safe_dump({**json.loads(text), "name": "soak"}, sort_keys=False))
    return topology.load(path)


@dataclass
class Heap:
    """A JVM right after a full collection: its heap in use (the live data), the heap committed
    (what G1 holds, up to -Xmx), its RSS, and how much of that RSS lies in the heap's and in the
    code cache's address ranges (read from /proc/PID/smaps in the same moment)."""

    live: int
    committed: int
    rss: int
    heap_rss: int = 0
    code_rss: int = 0

    @property
    def native(self) -> int:
        """Resident outside the heap and the code cache: metaspace, threads, GC structures,
        buffers, malloc. Not RSS minus the committed heap: JDK 17's G1 hands shrunk regions back
        to the OS in the background, so after a full collection the committed heap drops before
        the RSS does. The code cache is left out: it grows for as long as the JIT compiles more of
        a fixed program — a console's per-step paths reach their compile thresholds after
        hundreds of steps (Native Memory Tracking, docs/running.md) — and the JVM bounds it."""
        return self.rss - self.heap_rss - self.code_rss


def resident_in(pid: int, ranges: list[tuple[int, int]]) -> tuple[int, list[int]]:
    """(the process's RSS, the resident bytes of its mappings inside each of `ranges`), from one
    read of /proc/PID/smaps."""
    total, inside, start = 0, [0] * len(ranges), None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            start = int(head.split("-")[0], 16)
        elif line.startswith("Rss:"):
            size = int(line.split()[1]) * 1024
            total += size
            for i, (lo, hi) in enumerate(ranges):
                if start is not None and lo <= start < hi:
                    inside[i] += size
    return total, inside


def heap_after_gc(pid: int) -> Heap | None:
    """A JVM's Heap after `jcmd GC.run`, or None (not a JVM, gone, refused)."""
    jcmd = str(Path(procs.java_executable()).with_name("jcmd"))
    try:
        if subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60).returncode:
            return None
        info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60)
        code = subprocess.run([jcmd, str(pid), "Compiler.codecache"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # G1: one "garbage-first heap total …K, used …K [low, high)" line; serial: one per generation,
    # its spaces below it, each "[low, …, high)".
    sizes = [(int(total), int(used)) for total, used in re.findall(r"total (\d+)K, used (\d+)K", info.stdout)]
    heap = [(int(lo, 16), int(hi, 16)) for lo, hi in
            re.findall(r"\[0x([0-9a-f]+)(?:, 0x[0-9a-f]+)*, 0x([0-9a-f]+)\)", info.stdout)]
    # One "bounds [low, top, end]" line per code heap; together one reserved range.
    bounds = [(int(lo, 16), int(hi, 16)) for lo, hi in
              re.findall(r"bounds \[0x([0-9a-f]+), 0x[0-9a-f]+, 0x([0-9a-f]+)\]", code.stdout)]
    if not sizes or not heap:
        return None
    code_range = (min(lo for lo, _ in bounds), max(hi for _, hi in bounds)) if bounds else (0, 0)
    try:
        rss, (heap_rss, code_rss) = resident_in(pid, [(min(lo for lo, _ in heap), max(hi for _, hi in heap)),
                                                      code_range])
    except (OSError, ValueError):
        return None
    return Heap(sum(u for _, u in sizes) * 1024, sum(t for t, _ in sizes) * 1024, rss, heap_rss, code_rss)


@dataclass
class Checkpoint:
    """Every process read at the end of one step: cycle (iteration), the step's place in it."""

    cycle: int
    step: int
    t: float
    stats: dict[str, tuple[int, int, int]]                 # process -> (rss, fds, threads)
    heaps: dict[str, Heap] = field(default_factory=dict)   # JVM -> after a full GC (cycle ends only)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--step-seconds", type=float, default=120)
    parser.add_argument("--users", default="1,20,40,80,160,320", help="the sweep's users, in order")
    parser.add_argument("--testbed", choices=("emulated", "local"),
                        default="emulated" if os.geteuid() == 0 else "local")
    parser.add_argument("--esb", default="camel")
    parser.add_argument("--sample-s", type=float, default=10)
    parser.add_argument("--max-growth", type=float, default=5.0, help="percent per hour")
    args = parser.parse_args()
    # A SIGTERM (a caller's timeout) ends through the finally below, which takes the testbed down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = Path(tempfile.mkdtemp(prefix="esbperf-soak-"))
    testbed = soak_testbed(work, args.testbed == "emulated")
    users = [int(u) for u in args.users.split(",")]
    warmup = 10.0
    per_iteration = len(users) * (args.step_seconds + warmup + 3)
    iterations = max(1, int(-(-args.minutes * 60 // per_iteration)))
    plan = work / "soak-plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "soak", "scenarios": ["proxy"], "payloads": ["100KB"], "users": users,
        "duration_s": args.step_seconds - warmup, "warmup_s": warmup, "target_warmup_s": 30,
        "iterations": iterations, "keepalive": True, "timeout_s": 60, "max_threads_per_process": 320}))
    services_dir, results = work / "services", work / "results"
    brought_up = up(testbed) if testbed.emulated else []
    series: dict[str, Series] = {}
    checkpoints: list[Checkpoint] = []
    disk: list[tuple[float, dict[str, int]]] = []
    stop = threading.Event()
    try:
        group = services.start(testbed, args.esb, services_dir, echo=lambda line: print(line, flush=True))
        env = dict(os.environ, ESBPERF_STATE=str(services.state_dir_of(services_dir, "client")))
        runner = subprocess.Popen(
            [sys.executable, "-m", "esbperf", "run", "--plan", str(plan), "--target", args.esb,
             "--testbed", str(testbed.path), "--out", str(results), "--no-report",
             "--token-file", str(services.console_token_file(services_dir))],
            env=env, stdout=open(work / "runner.log", "w"), stderr=subprocess.STDOUT)
        watched = {p.name: p.pid for p in group.processes}
        began, launched = time.monotonic(), time.time()

        def processes() -> tuple[dict[str, int], set[str]]:
            """Every long-lived process by name, and the names of the JVMs among them."""
            pids, jvms = {"runner": runner.pid}, set()
            for name, pid in watched.items():
                pids[f"{name} (launcher)"] = pid
                for child in children(pid):
                    pids[f"{name} (jvm)"] = child
                    jvms.add(f"{name} (jvm)")
            return pids, jvms

        def read(pids: dict[str, int]) -> dict[str, tuple[int, int, int]]:
            return {name: stat for name, pid in pids.items() if (stat := proc_stat(pid))}

        def sample() -> None:
            seen: set[Path] = set()
            next_sample = 0.0
            while not stop.is_set():
                t = time.monotonic() - began
                for step in sorted(set(results.rglob(layout.STEP_FILE)) - seen):
                    seen.add(step)
                    if any(part.startswith(layout.UNFINISHED_PREFIXES) for part in step.parts):
                        continue
                    record = layout.read_json(step)
                    pids, jvms = processes()
                    point = Checkpoint(record["iteration"], users.index(record["users"]), t, read(pids))
                    if record["users"] == users[-1]:    # the cycle's last step
                        point.heaps = {name: heap for name in jvms if (heap := heap_after_gc(pids[name]))}
                    checkpoints.append(point)
                if t >= next_sample:
                    next_sample = t + args.sample_s
                    pids, _ = processes()
                    for name, pid in watched.items():
                        if name.startswith("agent"):
                            for jvm in children(pid):
                                pids.update({f"worker {w}": w for w in children(jvm)})
                    for name, stat in read(pids).items():
                        series.setdefault(name, Series(name)).samples.append((t, *stat))
                    disk.append((t, {"run folder": disk_bytes(results),
                                     **{f"state {role}": disk_bytes(services.state_dir_of(services_dir, role))
                                        for role in roles.ordered(testbed.hosts)}}))
                stop.wait(1.0)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = runner.wait()
        time.sleep(2)          # the last step's checkpoint
        stop.set()
        sampler.join()
        group.stop_all()
    finally:
        stop.set()
        if brought_up:
            down(testbed)
    return report(work, results, series, checkpoints, disk, code, args, launched)


def transactions_of(results: Path) -> int:
    total = 0
    for step in results.rglob(layout.STEP_FILE):
        console = layout.read_json(step).get("console") or {}
        total += dict(zip(console.get("columns") or [], console.get("totals") or [])).get("Tests") or 0
    return total


def pooled_slope_per_hour(points: list[tuple[int, float, float]]) -> tuple[float, float | None] | None:
    """The growth per hour of a figure read at the same step of several cycles: (step, t, value)
    points, one straight line per step with a slope they share (least squares within steps).
    Returns (slope, half-width of its 95 % confidence interval, None without a degree of freedom
    left), or None without two points of one step."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for step, t, value in points:
        by_step.setdefault(step, []).append((t, value))
    groups = [pts for pts in by_step.values() if len(pts) >= 2]
    centred = [[(t - sum(t for t, _ in pts) / len(pts), v - sum(v for _, v in pts) / len(pts)) for t, v in pts]
               for pts in groups]
    sxx = sum(t * t for pts in centred for t, _ in pts)
    if not sxx:
        return None
    slope = sum(t * v for pts in centred for t, v in pts) / sxx
    dof = sum(len(pts) for pts in centred) - len(centred) - 1
    if dof < 1:
        return slope * 3600, None
    residual = sum((v - slope * t) ** 2 for pts in centred for t, v in pts) / dof
    return slope * 3600, t_quantile(0.975, dof) * math.sqrt(residual / sxx) * 3600


def growth(points: list[tuple[int, float, float]]) -> tuple[float, float | None] | None:
    """pooled_slope_per_hour as % of the figure's mean per hour."""
    found = pooled_slope_per_hour(points)
    mean = sum(v for *_, v in points) / len(points) if points else 0
    if found is None or not mean:
        return None
    slope, half = found
    return 100 * slope / mean, None if half is None else 100 * half / mean


Found = tuple[float, float | None] | None    # a growth and the half-width of its 95 % interval


def beyond(found: Found, limit: float) -> bool:
    """Beyond `limit` with 95 % confidence (no confidence: the figure itself)."""
    return found is not None and found[0] - (found[1] or 0) > limit


@dataclass
class Growth:
    """What one process did from the second cycle on, at the same step of each cycle: its RSS,
    live heap and native memory in % per hour, descriptors and threads gained over the span
    judged; and what its verdict rests on."""

    first: tuple[int, int, int]           # (rss, fds, threads) at its first and last checkpoints
    last: tuple[int, int, int]
    rss: Found
    fds: Found
    threads: Found
    heaps: list[tuple[float, Heap]]       # (t, heap) at the cycle ends where jcmd answered
    live: Found
    native: Found
    cycle_ends: int                       # cycle ends judged where the process was read
    by_heap: bool                         # judged by live heap and native memory, not RSS

    def growing(self, max_growth: float) -> bool:
        """Memory beyond `max_growth` % per hour, or more than 2 descriptors or threads gained,
        with 95 % confidence. A JVM's RSS follows its committed heap, which G1 sizes up and down
        to -Xmx: a JVM is judged by its live heap and what it holds beside the heap and the JIT's
        code, after a full collection, when jcmd answered at every cycle end; otherwise (not a
        JVM, or jcmd answered at some cycle ends only) by its RSS too, never by nothing."""
        memory = (self.live, self.native) if self.by_heap else (self.rss, self.live, self.native)
        return any(beyond(g, max_growth) for g in memory) or any(beyond(g, 2) for g in (self.fds, self.threads))


def process_growth(name: str, checkpoints: list[Checkpoint]) -> Growth:
    """`name`'s Growth over `checkpoints` (those of cycle 2 on are judged; a cycle ends at the
    sweep's last step, where the JVMs' heaps are read)."""
    mine = [(c, c.stats[name]) for c in checkpoints if name in c.stats]
    later = [c for c in checkpoints if c.cycle >= 2]
    later_points = [(c.step, c.t, stat) for c, stat in mine if c.cycle >= 2]
    span_h = (later[-1].t - later[0].t) / 3600 if later else 0.0   # fds +, thr +: the trend over it
    rss = growth([(step, t, stat[0]) for step, t, stat in later_points])
    # Descriptors and threads gained over the span judged, ± their 95 % interval: an ESB's or an
    # echo's sockets at a step's end depend on which connections the load left open (±10 over
    # an hour, both ways); a leak of one per step is a steady line.
    fds, threads = ((None if (found := pooled_slope_per_hour([(step, t, stat[i]) for step, t, stat in later_points]))
                     is None else (found[0] * span_h, None if found[1] is None else found[1] * span_h))
                    for i in (1, 2))
    last_step = max((c.step for c in checkpoints), default=0)
    ends = [c for c in later if c.step == last_step and name in c.stats]
    heaps = [(c.t, c.heaps[name]) for c in ends if name in c.heaps]
    live = growth([(0, t, h.live) for t, h in heaps])
    native = growth([(0, t, h.native) for t, h in heaps])
    by_heap = bool(heaps) and len(heaps) == len(ends) and live is not None and native is not None
    return Growth(mine[0][1], mine[-1][1], rss, fds, threads, heaps, live, native, len(ends), by_heap)


def report(work: Path, results: Path, series: dict[str, Series], checkpoints: list[Checkpoint], disk: list,
           code: int, args, launched: float) -> int:
    with open(work / "soak.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["seconds", "process", "rss_bytes", "fds", "threads"])
        for s in series.values():
            out.writerows([(round(t, 1), s.name, rss, fds, thr) for t, rss, fds, thr in s.samples])
    with open(work / "checkpoints.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["seconds", "cycle", "step", "process", "rss_bytes", "fds", "threads", "live_heap_bytes",
                      "committed_heap_bytes", "rss_after_gc_bytes", "heap_rss_bytes", "code_cache_rss_bytes"])
        for c in checkpoints:
            out.writerows([(round(c.t, 1), c.cycle, c.step, name, *stat,
                            *((h.live, h.committed, h.rss, h.heap_rss, h.code_rss) if (h := c.heaps.get(name))
                              else ("",) * 5))
                           for name, stat in c.stats.items()])
    transactions = transactions_of(results)
    cycles = max((c.cycle for c in checkpoints), default=0)
    minutes = (max((t for s in series.values() for t, *_ in s.samples), default=0)) / 60
    lines = [f"soak: {minutes:.0f} min, {len(checkpoints)} steps of {args.step_seconds:g} s in {cycles} cycles "
             f"(users {args.users}), {transactions} transactions; runner exit {code}; growth from cycle 2 on, "
             "at the same step of each cycle, in % per hour ± its 95 % confidence interval",
             f"{'process':24} {'RSS MB':>13} {'RSS %/h':>13} {'live heap MB':>12} {'heap %/h':>13} "
             f"{'native MB':>14} {'native %/h':>13} {'code MB':>11} {'fds +':>11} {'thr +':>11}"]
    failed = []

    def shown(found: tuple[float, float | None] | None) -> str:
        return "–" if found is None else f"{found[0]:+.1f}" + ("" if found[1] is None else f" ± {found[1]:.1f}")

    for name in sorted({name for c in checkpoints for name in c.stats}):
        g = process_growth(name, checkpoints)
        heaps = g.heaps
        first, last = g.first, g.last
        lines.append(f"{name:24} {first[0] / 2**20:>6.0f}→{last[0] / 2**20:<6.0f} {shown(g.rss):>13} "
                     + (f"{heaps[0][1].live / 2**20:>5.1f}→{heaps[-1][1].live / 2**20:<6.1f} {shown(g.live):>13} "
                        f"{heaps[0][1].native / 2**20:>6.0f}→{heaps[-1][1].native / 2**20:<7.0f} "
                        f"{shown(g.native):>13} {heaps[0][1].code_rss / 2**20:>4.1f}→{heaps[-1][1].code_rss / 2**20:<6.1f}"
                        if heaps else f"{'–':>12} {'–':>13} {'–':>14} {'–':>13} {'–':>11}")
                     + f" {shown(g.fds):>11} {shown(g.threads):>11}"
                     + ("" if g.by_heap or not heaps else f"  (RSS judged: jcmd answered {len(heaps)} of "
                                                         f"{g.cycle_ends} cycle ends)"))
        if g.growing(args.max_growth):
            failed.append(name)
    workers = [s for s in series.values() if s.name.startswith("worker ")]
    if workers:
        peak = max(max(p[1] for p in s.samples) for s in workers)
        lines.append(f"{'worker JVMs (' + str(len(workers)) + ', one set per step)':24} peak RSS {peak / 2**20:.1f} MB")
    if disk:
        end = disk[-1][1]
        lines.append("disk: " + ", ".join(f"{k} {v / 2**20:.1f} MB" for k, v in end.items()))
        if transactions:
            lines.append(f"run folder: {end['run folder'] / transactions * 1e6 / 2**20:.1f} MB per million transactions")
    judged = cycles >= 3
    lines.append("growing: " + (", ".join(failed) if failed else "none" if judged else "not judged (fewer than 3 "
                                "cycles)") + f" (beyond {args.max_growth:g} %/hour with 95 % confidence: a JVM's "
                 "live heap or its native memory beside heap and code cache (its RSS where jcmd did not answer at "
                 "every cycle end), another process's RSS; or more than 2 descriptors or threads gained over the "
                 "cycles judged, with the same confidence)")
    text = "\n".join(lines)
    print(text)
    (work / "soak-table.txt").write_text(text + "\n")
    print(f"(work folder {work})")
    return 1 if failed or code or not judged else 0


if __name__ == "__main__":
    sys.exit(main())
