"""Benchmark of the analysis: rows per second parsed and aggregated from Grinder data logs, the
wall time of `esbperf report` on the same run, and the peak memory of each.

    .venv/bin/python analysis/bench/bench_analysis.py [--rows 10000000] [--dir /tmp/...]

It writes a synthetic run of the thesis's two sweeps (10 steps, 4 worker data logs each, monitor
files for every host) under --dir (default: a folder in the system's temp dir; reused when it
holds the same number of rows, never committed), then measures in fresh subprocesses, so each
figure includes Python's and polars' start-up and the peak RSS is that process's own:
  1. parse + aggregate: the statistics of every step (stats.analyse_steps, as the report runs it:
     data logs and monitor files, no graphs), and the same grouping without the malformed-line
     checks, for their cost;
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


def child_parse(run: str) -> None:
    """Runs in a subprocess: statistics of every step, no graphs; prints JSON."""
    started = time.perf_counter()
    from esbperf.analysis import stats
    from esbperf.analysis.runs import load_runs

    imported = time.perf_counter()
    runs = load_runs([Path(run)])
    rows = 0
    for tests in stats.analyse_steps(runs[0]):       # per step, a summary row per Grinder test: one here
        rows += sum(r["transactions"] + r["errors"] + r["warmup_rows"] + r["late_rows"] for r, _ in tests)
        rows += tests[0][0]["malformed_lines"]         # the step's, the same in each test's row
    done = time.perf_counter()
    print(json.dumps({"rows": rows, "seconds": done - imported, "with_imports": done - started}))


def child_bare(run: str) -> None:
    """Runs in a subprocess: the same grouping per step (window, success/failure, response-time
    histogram, byte sums) without the malformed-line checks (no extra column, no null checks,
    no error tolerance, no cut-line handling), to show what those checks cost."""
    import polars as pl

    from esbperf.results.layout import data_logs
    from esbperf.results.histogram import bucket_expr
    from esbperf.analysis.runs import load_runs

    started = time.perf_counter()
    schema = dict(zip(["thread", "run", "test", "start", "time", "errors", "status", "req", "resp", "us"],
                      [pl.Int64] * 10))
    rows = 0
    for step in load_runs([Path(run)])[0].steps:
        w0, w1 = step.meta["warmup_end_ms"], step.meta["end_ms"]
        scans = [pl.scan_csv(p, has_header=False, skip_rows=1, separator=",", quote_char=None, schema=schema)
                 for p in data_logs(step.dir)]
        kind = (pl.when(pl.col("start") < w0).then(1).when(pl.col("start") >= w1).then(2)
                .when(pl.col("errors") == 0).then(3).otherwise(4)).cast(pl.Int8)
        grouped = (pl.concat(scans).with_columns(kind=kind)
                   .group_by("kind", pl.when(pl.col("kind") == 3).then(bucket_expr(pl.col("us"))).alias("t"),
                             pl.when(pl.col("kind") == 4).then(pl.col("status")).alias("s"))
                   .agg(n=pl.len(), req=pl.col("req").sum(), resp=pl.col("resp").sum())
                   .collect(engine="streaming"))
        rows += grouped["n"].sum()
    print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}))


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
    parser.add_argument("--child-bare", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_parse:
        child_parse(args.child_parse)
        return
    if args.child_bare:
        child_bare(args.child_bare)
        return

    run = make_run(args.dir, args.rows)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")

    seconds, rss, text, cpu = measure([sys.executable, __file__, "--child-parse", str(run)])
    result = json.loads(text.strip().splitlines()[-1])
    print(f"parse + aggregate: {result['rows']:,} rows in {result['seconds']:.2f} s = "
          f"{result['rows'] / result['seconds'] / 1e6:.2f} M rows/s "
          f"({seconds:.2f} s with interpreter start and imports, {cpu:.2f} s of CPU); peak RSS {rss:,.0f} MB")

    _, _, text, _ = measure([sys.executable, __file__, "--child-bare", str(run)])
    bare = json.loads(text.strip().splitlines()[-1])
    print(f"  the same without malformed-line checks (bench-only query, monitors not read): "
          f"{bare['seconds']:.2f} s = {bare['rows'] / bare['seconds'] / 1e6:.2f} M rows/s")

    out = args.dir / f"report-{int(time.time())}"
    esbperf = [sys.executable, "-m", "esbperf", "report", str(run), "--out", str(out)]
    seconds, rss, _, cpu = measure(esbperf)
    print(f"esbperf report (10 steps, {len(list((out / 'graphs').glob('*.png')))} graphs): "
          f"{seconds:.2f} s wall, {cpu:.2f} s of CPU; peak RSS {rss:,.0f} MB")
    shutil.rmtree(out)
    print(f"data kept for reruns in {args.dir} (delete it when done)")


if __name__ == "__main__":
    main()
