"""Grinder 3.11 worker data logs (`<hostID>-<n>-data.log`) -> transaction statistics of a step.

All worker files of a step go through one lazy polars query run by the streaming engine, which
reduces the rows to a histogram of response times (plus counts and byte sums) without holding
the rows in memory; mean, deviation and exact percentiles then come from that histogram
(stats.py). Grinder writes `Test time` in whole milliseconds, so the histogram is small.

Fields are separated by ", ": polars splits on "," and its integer parser skips the leading
space. A line is malformed when a field the header declares is missing or not a number, or
when it has more fields than the header; such lines, and a last line cut short by a killed
worker, are counted and skipped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from esbperf.analysis.files import complete_data_lines, read_header
from esbperf.errors import EsbperfError

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
# esbperf's custom columns (registered by the scenario scripts); older logs lack them.
CUSTOM = {"HTTP status": "status", "Request bytes": "request_bytes", "Response bytes": "response_bytes"}

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
    histogram: list[tuple[int, int]] = field(default_factory=list)  # (response ms, count), sorted


def data_logs(step_dir: Path) -> list[Path]:
    return sorted((step_dir / "logs").glob("*-data.log"))


@dataclass
class _Scan:
    frame: pl.LazyFrame | None   # None when the file holds no complete row
    cut_lines: int               # lines skipped before polars sees the file
    has_sizes: bool              # the custom byte columns are there


def _scan(path: Path, index: int) -> _Scan:
    """One data log as a lazy frame of the normalised columns."""
    header, complete = read_header(path)
    if header is None:
        return _Scan(None, 0, False)
    if not complete:                      # killed while writing its header
        return _Scan(None, 1, False)
    names = [n.strip() for n in header.split(SEPARATOR)]
    missing = [n for n in STANDARD if n not in names]
    if missing:
        raise EsbperfError(f"{path}: not a Grinder data log: its header lacks {missing[0]!r} "
                           f"(header: {header[:120]!r})")
    complete_rows = complete_data_lines(path)
    if complete_rows == 0 or path.stat().st_size <= len(header.encode()) + 2:
        # No transaction at all: e.g. an agent whose threads had no user in this step.
        return _Scan(None, 0 if complete_rows is None else 1, all(n in names for n in CUSTOM))
    # Known columns are integers; any other custom statistic may be fractional.
    raw = [f"c{i}" for i in range(len(names))]
    schema = {r: (pl.Int64 if n in STANDARD or n in CUSTOM else pl.Float64) for r, n in zip(raw, names)}
    schema["extra"] = pl.String   # filled only by a line with more fields than the header
    frame = pl.scan_csv(path, has_header=False, skip_rows=1, separator=",", quote_char=None,
                        schema=schema, ignore_errors=True, truncate_ragged_lines=True,
                        encoding="utf8-lossy", n_rows=complete_rows)
    column = dict(zip(names, raw))
    bad = pl.any_horizontal([pl.col(r).is_null() for r in raw]) | pl.col("extra").is_not_null()
    wanted = {alias: pl.col(column[n]) for n, alias in STANDARD.items() if alias in ("start", "time", "errors")}
    for n, alias in CUSTOM.items():
        wanted[alias] = pl.col(column[n]) if n in column else pl.lit(None, dtype=pl.Int64)
    frame = frame.select(**wanted, bad=bad, file=pl.lit(index, dtype=pl.Int32))
    return _Scan(frame, 0 if complete_rows is None else 1, all(n in column for n in CUSTOM))


def log_stats(paths: list[Path], warmup_end_ms: int, end_ms: int) -> LogStats:
    """Statistics of the rows of `paths` whose start time is in [warmup_end_ms, end_ms)."""
    stats = LogStats(files=len(paths))
    scans = [_scan(p, i) for i, p in enumerate(paths)]
    for path, scan in zip(paths, scans):
        if scan.cut_lines:
            stats.malformed_lines += scan.cut_lines
            stats.malformed_by_file[path.name] = scan.cut_lines
    frames = [s.frame for s in scans if s.frame is not None]
    if frames:
        _aggregate(pl.concat(frames, how="vertical"), warmup_end_ms, end_ms, paths, stats)
    if not all(s.has_sizes for s in scans if s.frame is not None):
        # Byte rates from some workers only would be silently too low.
        stats.request_bytes = stats.response_bytes = None
    return stats


def _aggregate(rows: pl.LazyFrame, warmup_end_ms: int, end_ms: int, paths: list[Path],
               stats: LogStats) -> None:
    start = pl.col("start")
    kind = (pl.when(pl.col("bad")).then(MALFORMED)
            .when(start < warmup_end_ms).then(WARMUP)
            .when(start >= end_ms).then(LATE)
            .when(pl.col("errors") == 0).then(SUCCESS)
            .otherwise(FAILURE)).cast(pl.Int8)
    # Keys are null where they do not matter, so the result stays a few thousand rows at most.
    grouped = (rows.with_columns(kind=kind)
               .group_by(pl.col("kind"),
                         pl.when(pl.col("kind") == SUCCESS).then(pl.col("time")).alias("time"),
                         pl.when(pl.col("kind") == FAILURE).then(pl.col("status")).alias("status"),
                         pl.when(pl.col("kind") == MALFORMED).then(pl.col("file")).alias("file"))
               .agg(n=pl.len(), request_bytes=pl.col("request_bytes").sum(),
                    response_bytes=pl.col("response_bytes").sum())
               .collect(engine="streaming"))
    histogram: dict[int, int] = {}
    request_bytes = response_bytes = 0
    for r in grouped.iter_rows(named=True):
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
            histogram[r["time"]] = histogram.get(r["time"], 0) + n
            request_bytes += r["request_bytes"] or 0
            response_bytes += r["response_bytes"] or 0
        else:
            stats.errors += n
            status = "none" if r["status"] is None else str(r["status"])
            stats.error_statuses[status] = stats.error_statuses.get(status, 0) + n
    stats.histogram = sorted(histogram.items())
    stats.request_bytes, stats.response_bytes = request_bytes, response_bytes


def threads_in_window(paths: list[Path], start_ms: int, end_ms: int) -> dict[str, int]:
    """Per data log (by file name): how many distinct threads started a transaction in
    [start_ms, end_ms). The runner checks with it that `users` threads loaded the target."""
    counts = {}
    for path in paths:
        header, complete = read_header(path)
        names = [n.strip() for n in header.split(SEPARATOR)] if header and complete else []
        rows = complete_data_lines(path)
        if "Thread" not in names or "Start time (ms since Epoch)" not in names or rows == 0 \
                or path.stat().st_size <= len(header.encode()) + 2:
            counts[path.name] = 0
            continue
        frame = pl.scan_csv(path, has_header=False, skip_rows=1, separator=",", quote_char=None,
                            schema={f"c{i}": pl.Int64 for i in range(len(names))} | {"extra": pl.String},
                            ignore_errors=True, truncate_ragged_lines=True, n_rows=rows)
        thread, start = f"c{names.index('Thread')}", f"c{names.index('Start time (ms since Epoch)')}"
        counts[path.name] = (frame.filter((pl.col(start) >= start_ms) & (pl.col(start) < end_ms))
                             .select(pl.col(thread).n_unique()).collect().item())
    return counts
