"""Grinder 3.11 worker data logs (`<hostID>-<n>-data.log`) -> transaction statistics of a step.

All worker files of a step go through one lazy polars plan run by the streaming engine, which
reduces the rows to histograms (esbperf/results/histogram.py: bounded, log-linear, exact moments),
counts and byte sums without holding the rows in memory; mean, deviation and percentiles then
come from the histograms (stats.py).

Times: the workers' own wire time `Response us` (µs) when every data log of the step has it,
else Grinder's whole-ms `Test time` (logs of other scripts); `rt_source` says which. Open-model
logs also carry `Latency us` (from the due start, corrected for coordinated omission) and
`Start lag us` (actual start - due start).

Fields are separated by ", ": polars splits on "," and its integer parser skips the leading
space. A line is malformed when a field the header declares is missing or not a number, a time
is negative, or it has more fields than the header; such lines, and a last line cut short by a
killed worker, are counted and skipped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from esbperf.core.errors import EsbperfError
from esbperf.results.files import complete_data_lines, read_header
from esbperf.results.histogram import Histogram, bucket_expr

SEPARATOR = ", "
# Grinder's own columns, always first, and what we call them.
STANDARD = {
    "Thread": "thread",
    "Run": "run",
    "Test": "test",
    "Start time (ms since Epoch)": "start",
    "Test time": "time",
    "Errors": "errors",
}
# esbperf's custom columns (registered by grinder-scripts/scenario.py); older logs lack them.
CUSTOM = {"HTTP status": "status", "Request bytes": "request_bytes", "Response bytes": "response_bytes",
          "Response us": "response_us", "Latency us": "latency_us", "Start lag us": "lag_us"}
SIZES = ("HTTP status", "Request bytes", "Response bytes")
# The stock HTTP plugin's column of a user's own script (`esbperf run --script`), read as ours.
HTTP_PLUGIN = {"HTTP response code": "HTTP status"}
RESPONSE_US = "Response us"
MICROS = (RESPONSE_US,)
OPEN_MODEL = ("Latency us", "Start lag us")

# A start later than its due time by more than this is a late start (the workers' default
# `esbperf.late.us`, docs/grinder.md): well above the ~0.1 ms a sleeping thread wakes late.
LATE_START_US = 1000
# The lag's trend is the mean lag of the window's last fifth minus that of its first fifth.
LAG_TREND_PARTS = 5

# What a row is, decided once per row in the query.
MALFORMED, WARMUP, LATE, SUCCESS, FAILURE = range(5)


@dataclass
class LogStats:
    """What the data logs of one step say about its measurement window."""

    files: int = 0
    malformed_lines: int = 0                 # skipped: unparsable, ragged or cut short
    malformed_by_file: dict[str, int] = field(default_factory=dict)
    warmup_rows: int = 0                     # started before the window (excluded)
    late_rows: int = 0                       # started at or after its end (excluded)
    transactions: int = 0                    # successful (Errors == 0) rows in the window
    errors: int = 0                          # failed rows in the window
    error_statuses: dict[str, int] = field(default_factory=dict)   # HTTP status -> failed rows
    request_bytes: int | None = None         # of successful transactions; None without the columns
    response_bytes: int | None = None
    rt_source: str = ""                      # "us": Response us; "ms": Test time; "": no row at all
    response: Histogram = field(default_factory=Histogram)         # successful transactions, µs
    failed_response: Histogram = field(default_factory=Histogram)  # failed ones, µs
    latency: Histogram | None = None         # open model: Latency us of the successful ones
    threads_by_file: dict[str, int] = field(default_factory=dict)  # threads with a row in the window
    late_starts: int | None = None           # open model: starts lagging more than LATE_START_US
    max_lag_us: int | None = None
    lag_first_us: float | None = None        # mean start lag over the window's first fifth
    lag_last_us: float | None = None         # ... and over its last fifth

    @property
    def starts(self) -> int:
        return self.transactions + self.errors

    @property
    def threads(self) -> int:
        return sum(self.threads_by_file.values())

    @property
    def histogram(self) -> list[tuple[int, int]]:
        """(response µs bucket, count) of the successful transactions, sorted."""
        return self.response.items()


@dataclass
class _Scan:
    frame: pl.LazyFrame | None   # None when the file holds no complete row
    cut_lines: int               # lines skipped before polars sees the file
    columns: set[str]            # the custom columns its header declares (empty without a header)


def _scan(path: Path, index: int) -> _Scan:
    """One data log as a lazy frame of the normalised columns."""
    header, complete = read_header(path)
    if header is None:
        return _Scan(None, 0, set())
    if not complete:                      # killed while writing its header
        return _Scan(None, 1, set())
    names = [n.strip() for n in header.split(SEPARATOR)]
    names = [HTTP_PLUGIN[n] if n in HTTP_PLUGIN and HTTP_PLUGIN[n] not in names else n for n in names]
    missing = [n for n in STANDARD if n not in names]
    if missing:
        raise EsbperfError(f"{path}: not a Grinder data log: its header lacks {missing[0]!r} "
                           f"(header: {header[:120]!r})")
    declared = {n for n in names if n in CUSTOM}
    complete_rows = complete_data_lines(path)
    if complete_rows == 0 or path.stat().st_size <= len(header.encode()) + 2:
        # No transaction at all: e.g. an agent whose threads had no user in this step.
        return _Scan(None, 0 if complete_rows is None else 1, declared)
    # Known columns are integers; any other custom statistic may be fractional.
    raw = [f"c{i}" for i in range(len(names))]
    schema = {r: (pl.Int64 if n in STANDARD or n in CUSTOM else pl.Float64) for r, n in zip(raw, names)}
    schema["extra"] = pl.String   # filled only by a line with more fields than the header
    frame = pl.scan_csv(path, has_header=False, skip_rows=1, separator=",", quote_char=None,
                        schema=schema, ignore_errors=True, truncate_ragged_lines=True,
                        encoding="utf8-lossy", n_rows=complete_rows)
    column = dict(zip(names, raw))
    times = [pl.col(column[n]) < 0 for n in ("Test time", *MICROS, *OPEN_MODEL) if n in column]
    bad = (pl.any_horizontal([pl.col(r).is_null() for r in raw]) | pl.col("extra").is_not_null()
           | pl.any_horizontal(times).fill_null(False))
    wanted = {alias: pl.col(column[n]) for n, alias in STANDARD.items() if alias in ("thread", "start", "time", "errors")}
    for n, alias in CUSTOM.items():
        wanted[alias] = pl.col(column[n]) if n in column else pl.lit(None, dtype=pl.Int64)
    frame = frame.select(**wanted, bad=bad, file=pl.lit(index, dtype=pl.Int32))
    return _Scan(frame, 0 if complete_rows is None else 1, declared)


def _rows(paths: list[Path]) -> tuple[list[_Scan], pl.LazyFrame | None]:
    scans = [_scan(p, i) for i, p in enumerate(paths)]
    frames = [s.frame for s in scans if s.frame is not None]
    return scans, (pl.concat(frames, how="vertical") if frames else None)


def _classified(rows: pl.LazyFrame, warmup_end_ms: int, end_ms: int) -> pl.LazyFrame:
    start = pl.col("start")
    kind = (pl.when(pl.col("bad")).then(MALFORMED)
            .when(start < warmup_end_ms).then(WARMUP)
            .when(start >= end_ms).then(LATE)
            .when(pl.col("errors") == 0).then(SUCCESS)
            .otherwise(FAILURE)).cast(pl.Int8)
    return rows.with_columns(kind=kind)


def _thread_groups(rows: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (data log, thread) with a transaction, successful or failed, in the window."""
    return rows.filter(pl.col("kind").is_in([SUCCESS, FAILURE])).group_by("file", "thread")


def threads_seen(paths: list[Path], warmup_end_ms: int, end_ms: int) -> dict[str, int]:
    """The distinct worker threads that started at least one transaction (successful or failed)
    in [warmup_end_ms, end_ms), per data log (file name -> threads; 0 for a log without one).
    What the runner checks after each step against the step's users, and what the report shows
    (LogStats.threads_by_file is this same count)."""
    _, rows = _rows(paths)
    seen = {p.name: 0 for p in paths}
    if rows is not None:
        counts = (_thread_groups(_classified(rows, warmup_end_ms, end_ms)).agg(n=pl.len())
                  .group_by("file").agg(threads=pl.len()).collect(engine="streaming"))
        for index, threads in counts.iter_rows():
            seen[paths[index].name] = threads
    return seen


def log_stats(paths: list[Path], warmup_end_ms: int, end_ms: int) -> LogStats:
    """Statistics of the rows of `paths` whose start time is in [warmup_end_ms, end_ms)."""
    stats = LogStats(files=len(paths), threads_by_file={p.name: 0 for p in paths})
    scans, rows = _rows(paths)
    for path, scan in zip(paths, scans):
        if scan.cut_lines:
            stats.malformed_lines += scan.cut_lines
            stats.malformed_by_file[path.name] = scan.cut_lines
    headed = [s for s in scans if s.columns or s.frame is not None]
    has = {name: bool(headed) and all(name in s.columns for s in headed) for name in CUSTOM}
    if rows is not None:
        stats.rt_source = "us" if has["Response us"] else "ms"
        _aggregate(_classified(rows, warmup_end_ms, end_ms), warmup_end_ms, end_ms, paths, stats,
                   open_model=has["Latency us"] and has["Start lag us"])
    if not all(has[n] for n in ("Request bytes", "Response bytes")):
        # Byte rates from some workers only would be silently too low.
        stats.request_bytes = stats.response_bytes = None
    return stats


def _histogram_groups(rows: pl.LazyFrame, value: pl.Expr, *keys: pl.Expr, **more: pl.Expr) -> pl.LazyFrame:
    """Rows grouped by `keys` and the bucket of `value` (null where `value` is): count, the sums
    of the offsets from the bucket's lower bound and of their squares, min, max, and `more`."""
    rows = rows.with_columns(value=value)
    value = pl.col("value")
    offset = value - pl.col("lo")
    return (rows.with_columns(lo=bucket_expr(value))
            .group_by(*keys, "lo")
            .agg(n=pl.len(), offsets=offset.sum(), offsets_sq=(offset * offset).sum(),
                 low=value.min(), high=value.max(), **more))


def _aggregate(rows: pl.LazyFrame, warmup_end_ms: int, end_ms: int, paths: list[Path], stats: LogStats,
               open_model: bool) -> None:
    kind = pl.col("kind")
    value = pl.col("response_us") if stats.rt_source == "us" else pl.col("time")
    timed = kind.is_in([SUCCESS, FAILURE])
    # Keys are null where they do not matter, so the result stays a few thousand rows at most.
    main = _histogram_groups(rows, pl.when(timed).then(value), kind,
                             pl.when(kind == FAILURE).then(pl.col("status")).alias("status"),
                             pl.when(kind == MALFORMED).then(pl.col("file")).alias("file"),
                             request_bytes=pl.col("request_bytes").sum(), response_bytes=pl.col("response_bytes").sum())
    queries = [main]
    lag = pl.col("lag_us")
    part = ((pl.col("start") - warmup_end_ms) * LAG_TREND_PARTS // (end_ms - warmup_end_ms))
    thread_aggs = [pl.len().alias("n")]
    if open_model:
        thread_aggs += [(lag > LATE_START_US).sum().alias("late"), lag.max().alias("max_lag"),
                        lag.filter(part == 0).sum().alias("first_sum"), (part == 0).sum().alias("first_n"),
                        lag.filter(part == LAG_TREND_PARTS - 1).sum().alias("last_sum"),
                        (part == LAG_TREND_PARTS - 1).sum().alias("last_n")]
    queries.append(_thread_groups(rows).agg(thread_aggs))
    if open_model:
        queries.append(_histogram_groups(rows.filter(kind == SUCCESS), pl.col("latency_us")))
    results = pl.collect_all(queries, engine="streaming")

    scale = 1 if stats.rt_source == "us" else 1000    # histograms are in µs
    response, failed = Histogram(), Histogram()
    request_bytes = response_bytes = 0
    for r in results[0].iter_rows(named=True):
        n = r["n"]
        if r["kind"] == MALFORMED:
            name = paths[r["file"]].name
            stats.malformed_lines += n
            stats.malformed_by_file[name] = stats.malformed_by_file.get(name, 0) + n
        elif r["kind"] == WARMUP:
            stats.warmup_rows += n
        elif r["kind"] == LATE:
            stats.late_rows += n
        elif r["kind"] == SUCCESS:
            stats.transactions += n
            response.add(r["lo"], n, r["offsets"], r["offsets_sq"], r["low"], r["high"])
            request_bytes += r["request_bytes"] or 0
            response_bytes += r["response_bytes"] or 0
        else:
            stats.errors += n
            failed.add(r["lo"], n, r["offsets"], r["offsets_sq"], r["low"], r["high"])
            status = "none" if r["status"] is None else str(r["status"])
            stats.error_statuses[status] = stats.error_statuses.get(status, 0) + n
    stats.response, stats.failed_response = response.scaled(scale), failed.scaled(scale)
    stats.request_bytes, stats.response_bytes = request_bytes, response_bytes

    threads = results[1]
    for index, count in threads.group_by("file").agg(pl.len()).iter_rows():
        stats.threads_by_file[paths[index].name] = count
    if open_model:
        stats.late_starts = int(threads["late"].sum())
        stats.max_lag_us = threads["max_lag"].max()
        first_n, last_n = threads["first_n"].sum(), threads["last_n"].sum()
        stats.lag_first_us = threads["first_sum"].sum() / first_n if first_n else None
        stats.lag_last_us = threads["last_sum"].sum() / last_n if last_n else None
        stats.latency = Histogram()
        for r in results[2].iter_rows(named=True):
            stats.latency.add(r["lo"], r["n"], r["offsets"], r["offsets_sq"], r["low"], r["high"])

def threads_in_window(paths: list[Path], start_ms: int, end_ms: int) -> dict[str, int]:
    """threads_seen as the runner calls it after a step (esbperf/run/collect.py): the same count, one
    definition; a file that is not a data log counts 0 threads instead of stopping the run."""
    try:
        return threads_seen(paths, start_ms, end_ms)
    except EsbperfError:
        counts = {}
        for path in paths:
            try:
                counts.update(threads_seen([path], start_ms, end_ms))
            except EsbperfError:
                counts[path.name] = 0
        return counts
