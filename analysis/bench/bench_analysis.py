"""Benchmark of the analysis: rows per second parsed and aggregated from Grinder data logs, the
wall time of `esbperf report` on the same run, and the peak memory of each.

    .venv/bin/python analysis/bench/bench_analysis.py [--rows 10000000] [--dir /tmp/...]

It writes a synthetic run of the thesis's two sweeps (10 steps, 4 worker data logs each, monitor
files for every host) under --dir (default: a folder in the system's temp dir; reused when it
holds the same number of rows, never committed), then measures in fresh subprocesses, so each
figure includes Python's and polars' start-up and the peak RSS is that process's own:
  1. parse + aggregate: the statistics of every step (stats.analyse_steps, as the report runs it:
     data logs and monitor files, no graphs), and the same with every log read by polars' CSV
     reader instead of the native parser (esbperf/results/intlines.py), for the ratio;
  2. report: `esbperf report RUN --out NEW` (statistics, 9 graphs in PNG and SVG, report.html).
Goals: >= 10 M rows/s parse + aggregate, a 100 M-row run (--rows 100000000, 6 GB of logs) reported
in <= 30 s, <= 2 GB of memory."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = 10   # thesis grid: 5 payload sizes at 1 user + 5 more user counts at 100 KB
FILES = 4


def make_run(folder: Path, rows: int) -> Path:
    from esbperf.analysis.synthetic import thesis_run

    run = folder / "run"
    marker = folder / "rows.txt"
    layout = f"{rows} rows, µs logs"   # a run of an older layout (whole-ms logs) is written anew
    if marker.exists() and marker.read_text() == layout:
        return run
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    thesis_run(run, "camel", rows_per_step=rows // STEPS, files=FILES)
    size = sum(p.stat().st_size for p in run.rglob("*-data.log"))
    print(f"generated {rows:,} rows in {STEPS * FILES} data logs ({size / 1e6:,.0f} MB) "
          f"in {time.perf_counter() - started:.1f} s under {run}")
    marker.write_text(layout)
    return run


def child_parse(run: str, by_polars: bool = False) -> None:
    """Runs in a subprocess: statistics of every step, no graphs; prints JSON. by_polars: every
    log read by polars' CSV reader (what reads a user's log with fractional statistics of its own,
    and read every log before esbperf/results/intlines.py), for the ratio."""
    started = time.perf_counter()
    from esbperf.analysis import stats
    from esbperf.analysis.runs import load_runs
    from esbperf.results import datalog

    if by_polars:
        datalog._Log.integers = property(lambda self: False)

    imported = time.perf_counter()
    runs = load_runs([Path(run)])
    rows = 0
    for tests in stats.analyse_steps(runs[0]):       # per step, a summary row per Grinder test: one here
        rows += sum(r["transactions"] + r["errors"] + r["warmup_rows"] + r["late_rows"] for r, _ in tests)
        rows += tests[0][0]["malformed_lines"]         # the step's, the same in each test's row
    done = time.perf_counter()
    print(json.dumps({"rows": rows, "seconds": done - imported, "with_imports": done - started}))


def measure(argv: list[str]) -> tuple[float, float, str, float]:
    """Wall seconds, peak RSS (MB), stdout and CPU seconds (user + system) of one subprocess.

    The CPU time does not grow when other work on the machine slows the wall clock down."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    if process.returncode:
        sys.exit(f"benchmark step failed ({process.returncode}): {' '.join(argv)}\n{text}")
    return seconds, usage.ru_maxrss / 1024, text, usage.ru_utime + usage.ru_stime   # ru_maxrss: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / f"esbperf-bench-{os.getuid()}")
    parser.add_argument("--child-parse", help=argparse.SUPPRESS)
    parser.add_argument("--child-polars", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_parse or args.child_polars:
        child_parse(args.child_parse or args.child_polars, by_polars=bool(args.child_polars))
        return

    run = make_run(args.dir, args.rows)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")

    seconds, rss, text, cpu = measure([sys.executable, __file__, "--child-parse", str(run)])
    result = json.loads(text.strip().splitlines()[-1])
    print(f"parse + aggregate: {result['rows']:,} rows in {result['seconds']:.2f} s = "
          f"{result['rows'] / result['seconds'] / 1e6:.2f} M rows/s "
          f"({seconds:.2f} s with interpreter start and imports, {cpu:.2f} s of CPU); peak RSS {rss:,.0f} MB")

    _, _, text, polars_cpu = measure([sys.executable, __file__, "--child-polars", str(run)])
    by_polars = json.loads(text.strip().splitlines()[-1])
    print(f"  the same, every log read by polars' CSV reader: {by_polars['seconds']:.2f} s = "
          f"{by_polars['rows'] / by_polars['seconds'] / 1e6:.2f} M rows/s ({polars_cpu:.2f} s of CPU); native parser "
          f"{by_polars['seconds'] / result['seconds']:.1f}x as fast")

    out = args.dir / f"report-{int(time.time())}"
    esbperf = [sys.executable, "-m", "esbperf", "report", str(run), "--out", str(out)]
    seconds, rss, _, cpu = measure(esbperf)
    print(f"esbperf report (10 steps, {len(list((out / 'graphs').glob('*.png')))} graphs): "
          f"{seconds:.2f} s wall, {cpu:.2f} s of CPU; peak RSS {rss:,.0f} MB")
    shutil.rmtree(out)
    print(f"data kept for reruns in {args.dir} (delete it when done)")


if __name__ == "__main__":
    main()
