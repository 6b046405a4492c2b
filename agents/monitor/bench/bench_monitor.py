"""What the monitor costs the host it watches: its own CPU (percent of one core) and memory while
it samples once a second and appends each tick to its spool, the spool's growth on disk, and the
cost of the runner's pull of a step's window (read back from the spool).

Run from the checkout (after `esbperf build`):
    .venv/bin/python agents/monitor/bench/bench_monitor.py [--seconds 60] [--port 17170] [--unmatched] [--sampler oshi]

The monitor runs as `esbperf monitor` runs it (same JVM options), watching one process by
--match so that process sampling is part of the figure; with --unmatched the text matches
nothing, the worst case: every 2 s the monitor reads every process's command line looking
for it. CPU and RSS come from /proc.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from esbperf.core import topology
from esbperf.services import monitor

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
WARMUP_S = 10   # let the JIT settle before measuring


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S   # utime + stime


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def spool_bytes(workdir: Path) -> int:
    return sum(p.stat().st_size for p in (workdir / "spool").glob("samples-*.tsv"))


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="measurement length (default 60)")
    parser.add_argument("--port", type=int, default=17170, help="port for the monitor on 127.0.0.1")
    parser.add_argument("--unmatched", action="store_true", help="watch a --match text no process has")
    parser.add_argument("--sampler", choices=monitor.SAMPLERS, default="sigar", help="sigar (default) or oshi")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-monitor-"))
    marker = f"bench-monitor-watched-{os.getpid()}"
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(86400)",
                                "" if args.unmatched else marker])
    process = None
    try:
        process = monitor.start_monitor("esb", "127.0.0.1", args.port, matches=[marker], workdir=work,
                                        sampler=args.sampler)
        pid = process.pid
        print(f"monitor pid {pid}; warming up {WARMUP_S} s, then measuring {args.seconds} s ...", flush=True)
        time.sleep(WARMUP_S)

        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        spool0 = spool_bytes(work)
        window_start = int(time.time() * 1000)
        rss = []
        while time.monotonic() - t0 < args.seconds:
            rss.append(rss_bytes(pid))
            time.sleep(1)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        spool_per_hour = (spool_bytes(work) - spool0) * 3600 / (t1 - t0)
        window_end = int(time.time() * 1000)
        cpu_percent = 100 * (cpu1 - cpu0) / (t1 - t0)

        # The runner's pull of that window, repeated: wall time here, CPU time in the monitor.
        url = f"http://127.0.0.1:{args.port}/samples?from={window_start}&to={window_end}"
        pulls, walls = 20, []
        before = cpu_seconds(pid)
        for _ in range(pulls):
            started = time.perf_counter()
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read()
            walls.append(time.perf_counter() - started)
        pull_cpu_ms = 1000 * (cpu_seconds(pid) - before) / pulls
        rows = body.count(b"\n") - 1

        # collect_step end to end (pull, gaps, CSV file, verdict) for the same window.
        data = yaml.safe_load(topology.resolve("local").read_text())
        data["hosts"]["esb"]["monitor_port"] = args.port
        (work / "testbed.yaml").write_text(yaml.safe_dump(data))
        testbed = topology.load(work / "testbed.yaml")
        time.sleep(1.5)   # past the window's last sample, so collect_step does not wait for it
        started = time.perf_counter()
        monitor.collect_step(testbed, work / "step", window_start, window_start, window_end, roles=["esb"])
        collect_s = time.perf_counter() - started
    finally:
        if process is not None:
            process.stop()
        watched.kill()
        watched.wait()

    watching = "a --match that finds nothing" if args.unmatched else "one process by --match"
    print(f"monitor CPU at 1 Hz through {args.sampler}, {watching}, over {t1 - t0:.0f} s: "
          f"{cpu_percent:.2f} % of one core (goal < 1 %)")
    print(f"monitor RSS: {mib(statistics.median(rss))} median, {mib(max(rss))} max")
    print(f"spool growth: {mib(spool_per_hour)} per hour; the default bound (64 MiB, 24 h) holds "
          f"{min(24.0, 64 * 2**20 / spool_per_hour):.0f} h of it")
    print(f"pull of a {args.seconds}-s window ({rows} rows, {len(body) / 1024:.0f} KiB): "
          f"{1000 * statistics.median(walls):.1f} ms median wall, {pull_cpu_ms:.1f} ms monitor CPU per pull")
    print(f"collect_step of that window for one role (pull, CSV file, verdict): {1000 * collect_s:.0f} ms")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
