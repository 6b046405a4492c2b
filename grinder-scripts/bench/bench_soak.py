"""Soak benchmark: does anything grow when esbperf runs for hours?

    .venv/bin/python grinder-scripts/bench/bench_soak.py [--minutes 60] [--step-seconds 120]
        [--testbed emulated|local] [--esb camel] [--sample-s 10] [--max-growth 5]

Starts every service of the testbed with the CLI's own launcher (on a copy of the emulated
testbed with a prefix and subnet of its own when run as root, so nothing else on this machine
collides with it; the `local` testbed otherwise), then runs the thesis's concurrency sweep (100 KB;
1, 20, 40, 80, 160, 320 users; `proxy`) through the ESB with `esbperf run` — a process of its own —
for at least --minutes, in steps of --step-seconds, iterations as many as fit. Every --sample-s it
samples each process's resident memory, open file descriptors and threads (console, agents,
worker JVMs, monitors, the runner, ESB, echoes, and the launchers' Python processes) and the disk
used by the run folder, the agents' and the console's state folders and the monitors' spools.

Prints, and writes (soak.csv of samples, soak-table.txt) into its work folder: per process its
RSS at the end of the first step and at the end, its growth per hour after the first step (least
squares over the samples), the range of its descriptors and threads; and the bytes on disk per
million transactions. Exits 1 when a long-lived process grew by more than --max-growth % per hour
or gained descriptors or threads. Run it by hand on a quiet machine (it takes the whole --minutes).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from esbperf.core import topology
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--step-seconds", type=float, default=120)
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
    users = [1, 20, 40, 80, 160, 320]
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

        def sample() -> None:
            while not stop.is_set():
                t = time.monotonic() - began
                pids = {"runner": runner.pid}
                for name, pid in watched.items():
                    pids[f"{name} (launcher)"] = pid
                    for child in children(pid):
                        pids[f"{name} (jvm)"] = child
                        for worker in (children(child) if name.startswith("agent") else []):
                            pids[f"worker {worker}"] = worker
                for name, pid in pids.items():
                    stat = proc_stat(pid)
                    if stat:
                        series.setdefault(name, Series(name)).samples.append((t, *stat))
                disk.append((t, {"run folder": disk_bytes(results),
                                 **{f"state {role}": disk_bytes(services.state_dir_of(services_dir, role))
                                    for role in ("client", "esb", "ws1", "ws2", "ws3")}}))
                stop.wait(args.sample_s)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = runner.wait()
        stop.set()
        sampler.join()
        group.stop_all()
    finally:
        stop.set()
        if brought_up:
            down(testbed)
    return report(work, results, series, disk, code, args, launched)


def first_step_end(results: Path, launched: float) -> float | None:
    """Seconds from the runner's launch to the end of its first step (from step.json files)."""
    ends = [layout.read_json(p)["end_ms"] for p in results.rglob(layout.STEP_FILE) if ".failed" not in str(p)]
    return min(ends) / 1000 - launched if ends else None


def slope_per_hour(points: list[tuple[float, int]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if not var else sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 3600


def report(work: Path, results: Path, series: dict[str, Series], disk: list, code: int, args,
           launched: float) -> int:
    with open(work / "soak.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["seconds", "process", "rss_bytes", "fds", "threads"])
        for s in series.values():
            out.writerows([(round(t, 1), s.name, rss, fds, thr) for t, rss, fds, thr in s.samples])
    after = first_step_end(results, launched) or 0
    transactions = 0
    for step in results.rglob(layout.STEP_FILE):
        console = layout.read_json(step).get("console") or {}
        transactions += dict(zip(console.get("columns") or [], console.get("totals") or [])).get("Tests") or 0
    hours = (max((t for s in series.values() for t, *_ in s.samples), default=0)) / 3600
    lines = [f"soak: {hours * 60:.0f} min, {len(list(results.rglob(layout.STEP_FILE)))} steps of "
             f"{args.step_seconds:g} s, {transactions} transactions; runner exit {code}; growth counted after the "
             f"first step ({after:.0f} s)",
             f"{'process':34} {'RSS MB first':>12} {'RSS MB end':>10} {'%/hour':>7} {'fds':>9} {'threads':>9}"]
    failed = []
    for s in sorted(series.values(), key=lambda s: s.name):
        if s.name.startswith("worker "):
            continue   # each step's own JVMs: reported below as a whole
        kept = [p for p in s.samples if p[0] >= after] or s.samples
        base = kept[0][1]
        growth = 100 * slope_per_hour([(t, rss) for t, rss, *_ in kept]) / base if base else 0.0
        fds = (min(p[2] for p in kept), max(p[2] for p in kept), kept[-1][2])
        threads = (min(p[3] for p in kept), max(p[3] for p in kept), kept[-1][3])
        lines.append(f"{s.name:34} {base / 2**20:>12.1f} {kept[-1][1] / 2**20:>10.1f} {growth:>+7.1f} "
                     f"{fds[0]:>4}-{fds[1]:<4} {threads[0]:>4}-{threads[1]:<4}")
        if len(kept) > 3 and (growth > args.max_growth or kept[-1][2] > kept[0][2] + 2 or kept[-1][3] > kept[0][3] + 2):
            failed.append(s.name)
    workers = [s for s in series.values() if s.name.startswith("worker ")]
    if workers:
        peak = max(max(p[1] for p in s.samples) for s in workers)
        lines.append(f"{'worker JVMs (' + str(len(workers)) + ', one set per step)':34} peak RSS {peak / 2**20:.1f} MB")
    if disk:
        end = disk[-1][1]
        lines.append("disk: " + ", ".join(f"{k} {v / 2**20:.1f} MB" for k, v in end.items()))
        if transactions:
            lines.append(f"run folder: {end['run folder'] / transactions * 1e6 / 2**20:.1f} MB per million transactions")
    lines.append("growing: " + (", ".join(failed) if failed else "none") + f" (limit {args.max_growth:g} %/hour, "
                 "no descriptor or thread growth)")
    text = "\n".join(lines)
    print(text)
    (work / "soak-table.txt").write_text(text + "\n")
    print(f"(work folder {work})")
    return 1 if failed or code else 0


if __name__ == "__main__":
    sys.exit(main())
