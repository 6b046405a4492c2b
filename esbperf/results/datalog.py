"""Grinder 3.11 worker data logs (`<hostID>-<n>-data.log`) -> transaction statistics of a step.

Each data log is read in blocks of whole lines (BLOCK_BYTES: memory stays flat however long the
log), the blocks of a step's logs in parallel, one thread per core: a native parser
(esbperf/results/intlines.py; polars for a user's log with fractional statistics of its own) turns
a block into integer columns, numpy counts its rows into histogram buckets (esbperf/results/
histogram.py: bounded, log-linear, exact moments), counts and byte sums, and the blocks' counts are
added up.
Nothing is held per row; mean, deviation and percentiles then come from the histograms
(stats.py).

Times: the workers' own wire time `Response us` (µs) when every data log of the step has it,
else Grinder's whole-ms `Test time` (logs of other scripts); `rt_source` says which. Open-model
logs also carry `Latency us` (from the due start, corrected for coordinated omission) and
`Start lag us` (actual start - due start).

The window: a row belongs to it by its start, or in the open model by its due start (start - lag):
a request due in the window and started late is the window's. The open model's latency holds
every request due in the window, failed ones included, and those its pool never started: a
worker process whose every thread was still busy at the window's end had left the tickets due
after its last one unstarted, and each counts with the latency it had reached by then, end - due
(`never_started`, _unstarted_dues).

Rows are kept apart by their Grinder test (the `Test` column): a user's script may record
several tests, and a page test wrapping request tests times the same seconds twice, so each
test gets its own counts and histograms (`LogStats.tests`), never added to another's.

Fields are separated by ", ": both parsers split on "," and skip the space before a number. A line
is malformed when a field the header declares is missing or not a number, a time is negative, or it
has more fields than the header; such lines, and a last line cut short by a killed worker, are
counted and skipped."""
from __future__ import annotations

import math
import mmap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl

from esbperf.core.errors import EsbperfError
from esbperf.core.steady import MAX_GAPS, series_interval_ms
from esbperf.core.plan import Plan
from esbperf.results import intlines
from esbperf.results.files import line_blocks, lines_after_header, read_header
from esbperf.results.histogram import BUCKETS, Histogram, bucket_index, bucket_low, bucket_shifts

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

# The warm-up counted interval by interval before the window (RowStats.interval_*): at most this long.
SERIES_WARMUP_MS = 600_000
# Grinder's start times are whole ms (`Start time (ms since Epoch)`).
START_RESOLUTION_MS = 1.0
# A start later than its due time by more than this is a late start (the workers' default
# `esbperf.late.us`, docs/grinder.md): well above the ~0.1 ms a sleeping thread wakes late.
LATE_START_US = 1000
# The lag's trend is the mean lag of the window's last fifth minus that of its first fifth.
LAG_TREND_PARTS = 5
# How often a worker reports its transactions to the console (`grinder.reportToConsole.interval`):
# Grinder's default, and what grinder-scripts/grinder.properties sets; step.json records the
# step's own (`report_interval_ms`).
REPORT_INTERVAL_MS = 500
# The console counts a transaction once its worker's report reaches it: within the report
# interval of its end, plus this for the report's way, the runner's calls that zero and read the
# console, and the agents' clocks (the run refuses a host off by more than 100 ms).
REPORT_MARGIN_MS = 100
# Tickets never started are generated this many at a time (a pool dead for an hour at a high
# rate leaves millions).
UNSTARTED_CHUNK = 1 << 20

# What a row is, decided once per row.
MALFORMED, WARMUP, LATE, SUCCESS, FAILURE = range(5)

# A data log is parsed this many bytes at a time (about 270 000 rows of esbperf's columns; fewer
# than 2^21 rows of any log, which keeps _grouped's slot numbers below 2^63).
BLOCK_BYTES = 16 << 20
# Values of a key (threads, tests, statuses, buckets) spanning at most this many numbers are
# counted by their position; a wider spread (garbage that parsed as numbers) is sorted instead.
DENSE_SPAN = 1 << 22
SMALL_SPAN = 64        # ... and those spanning fewer are numbered by their offset from the smallest
# Block results added up at once: their number, not the rows', bounds the memory they take.
FOLD_BLOCKS = 32


@dataclass
class RowStats:
    """What a set of rows says about the measurement window: those of one Grinder test, or (in
    LogStats itself) those of every test of the step together."""

    warmup_rows: int = 0                     # started before the window (excluded)
    late_rows: int = 0                       # started at or after its end (excluded)
    transactions: int = 0                    # successful (Errors == 0) rows in the window
    errors: int = 0                          # failed rows in the window
    error_statuses: dict[str, int] = field(default_factory=dict)   # HTTP status -> failed rows
    request_bytes: int | None = None         # of successful transactions; None without the columns
    response_bytes: int | None = None
    response: Histogram = field(default_factory=Histogram)         # successful transactions, µs
    failed_response: Histogram = field(default_factory=Histogram)  # failed ones, µs
    latency: Histogram | None = None         # open model: latency of every request due in the window
    late_starts: int | None = None           # open model: starts lagging more than LATE_START_US
    never_started: int | None = None         # open model: due in the window, never started (_unstarted_dues)
    started_after_end: int | None = None     # open model: due in the window, started at or after its end
    no_answer: int = 0                       # failed rows without an answer (refused, reset, timed out)
    console_min: int | None = None           # rows the console has surely counted (console_band)
    console_max: int | None = None           # ... and those it may have counted
    max_lag_us: int | None = None
    lag_first_us: float | None = None        # mean start lag over the window's first fifth
    lag_last_us: float | None = None         # ... and over its last fifth
    # Interval by interval (series_interval_ms, from the window's start; the warm-up before it at
    # negative intervals), for the drift test and its graphs: successful transactions and the sum of
    # their times (µs); None when the rows hold none. Index 0 is interval `interval_first` (<= 0).
    interval_n: tuple[int, ...] | None = None
    interval_us: tuple[int, ...] | None = None
    interval_first: int = 0

    @property
    def starts(self) -> int:
        return self.transactions + self.errors

    @property
    def histogram(self) -> list[tuple[int, int]]:
        """(response µs bucket, count) of the successful transactions, sorted."""
        return self.response.items()

    @property
    def due(self) -> int | None:
        """Open model: the requests due in the window (started or not); None where not known."""
        return None if self.never_started is None else self.starts + self.never_started

    def _add(self, kind: int, status: int | None, groups: pl.DataFrame) -> None:
        """Count rows of one kind (and HTTP status, of failures): `_grouped`'s groups of them."""
        n = int(groups["n"].sum())
        if kind in (SUCCESS, FAILURE) and "after_end" in groups.columns:
            self.started_after_end = (self.started_after_end or 0) + int(groups["after_end"].sum())
        if kind == WARMUP:
            self.warmup_rows += n
        elif kind == LATE:
            self.late_rows += n
        elif kind == SUCCESS:
            self.transactions += n
            _add_buckets(self.response, groups)
            self.request_bytes = (self.request_bytes or 0) + int(groups["request_bytes"].sum())
            self.response_bytes = (self.response_bytes or 0) + int(groups["response_bytes"].sum())
        else:
            self.errors += n
            _add_buckets(self.failed_response, groups)
            name = "none" if status is None else str(status)
            self.error_statuses[name] = self.error_statuses.get(name, 0) + n
            self.no_answer += n if status == 0 else 0      # no status: no answer came (esbperf's client)

    def _absorb(self, other: "RowStats") -> None:
        """Add another set's rows to these (a step's tests into its total): counts and histograms;
        the open model's lag is not additive and is taken from the rows instead (_lag)."""
        self.warmup_rows += other.warmup_rows
        self.late_rows += other.late_rows
        self.transactions += other.transactions
        self.errors += other.errors
        self.no_answer += other.no_answer
        for name in ("never_started", "started_after_end", "console_min", "console_max"):
            if getattr(other, name) is not None:
                setattr(self, name, (getattr(self, name) or 0) + getattr(other, name))
        for status, n in other.error_statuses.items():
            self.error_statuses[status] = self.error_statuses.get(status, 0) + n
        if other.request_bytes is not None:
            self.request_bytes = (self.request_bytes or 0) + other.request_bytes
            self.response_bytes = (self.response_bytes or 0) + other.response_bytes
        self.response.merge(other.response)
        self.failed_response.merge(other.failed_response)
        if other.latency is not None:
            self.latency = (self.latency or Histogram()).merge(other.latency)

    def _lag(self, groups: pl.DataFrame) -> None:
        """The open model's start lag over the transactions of `groups` (_grouped's rows)."""
        self.late_starts = int(groups["late"].sum())
        self.max_lag_us = groups["max_lag"].max()
        first_n, last_n = groups["first_n"].sum(), groups["last_n"].sum()
        self.lag_first_us = groups["first_sum"].sum() / first_n if first_n else None
        self.lag_last_us = groups["last_sum"].sum() / last_n if last_n else None


@dataclass
class LogStats(RowStats):
    """What the data logs of one step say about its measurement window: the rows of all its
    tests together (what a step of one test, every esbperf scenario, is), each test's own in
    `tests`, and what belongs to the step as a whole (files, malformed lines, threads)."""

    files: int = 0
    malformed_lines: int = 0                 # skipped: unparsable, ragged or cut short
    malformed_by_file: dict[str, int] = field(default_factory=dict)
    rt_source: str = ""                      # "us": Response us; "ms": Test time; "": no row at all
    threads_by_file: dict[str, int] = field(default_factory=dict)  # threads busy in the window (_count_block)
    tests: dict[int, RowStats] = field(default_factory=dict)       # Grinder test number -> its rows
    interval_ms: int = 0                     # the length of RowStats' intervals
    # Open model: runs of consecutive start times (ms) in the window, sorted, each from one block of
    # one data log (one worker process's schedule) and at most MAX_GAPS + 1 long, for the Poisson check.
    start_runs: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)

    @property
    def threads(self) -> int:
        return sum(self.threads_by_file.values())


@dataclass
class _Log:
    """A data log as its header declares it."""

    path: Path
    names: list[str]             # its columns, as the header names them ([] without a whole header)
    lines: tuple[int, int]       # the byte range of its whole lines after the header
    cut_lines: int               # a header or last line cut short: counted, never read

    @property
    def integers(self) -> bool:
        """Whether every column is one of Grinder's or esbperf's (all integers)."""
        return all(n in STANDARD or n in CUSTOM for n in self.names)

    @property
    def declared(self) -> set[str]:
        """The custom columns its header declares."""
        return {n for n in self.names if n in CUSTOM}

    @property
    def schema(self) -> dict[str, pl.DataType]:
        """Its fields as polars parses them: known columns are integers, any other custom statistic
        may be fractional; `extra` is filled only by a line with more fields than the header."""
        schema = {f"c{i}": pl.Int64 if n in STANDARD or n in CUSTOM else pl.Float64 for i, n in enumerate(self.names)}
        return {**schema, "extra": pl.String}

    def columns(self) -> tuple[dict[str, pl.Expr], pl.Expr]:
        """The columns read, by their short names (those the log has), and the malformed-line rule."""
        column = {n: f"c{i}" for i, n in enumerate(self.names)}
        times = [pl.col(column[n]) < 0 for n in ("Test time", *MICROS, *OPEN_MODEL) if n in column]
        bad = (pl.any_horizontal([pl.col(r).is_null() for r in self.schema if r != "extra"])
               | pl.col("extra").is_not_null() | pl.any_horizontal(times).fill_null(False))
        wanted = {alias: pl.col(column[n]) for n, alias in {**STANDARD, **CUSTOM}.items()
                  if n in column and alias != "run"}
        return wanted, bad


def _open(path: Path) -> _Log:
    header, complete = read_header(path)
    if header is None:                    # an empty file: a worker that logged nothing
        return _Log(path, [], (0, 0), 0)
    if not complete:                      # killed while writing its header
        return _Log(path, [], (0, 0), 1)
    names = [n.strip() for n in header.split(SEPARATOR)]
    names = [HTTP_PLUGIN[n] if n in HTTP_PLUGIN and HTTP_PLUGIN[n] not in names else n for n in names]
    missing = [n for n in STANDARD if n not in names]
    if missing:
        raise EsbperfError(f"{path}: not a Grinder data log: its header lacks {missing[0]!r} "
                           f"(header: {header[:120]!r})")
    start, end = lines_after_header(path)
    return _Log(path, names, (start, end), int(end < path.stat().st_size))


def step_process_rate(meta: dict) -> float | None:
    """The open model's arrivals per second of each worker process of a step, from its step.json
    (`rate`, `processes`, `agents`: Plan.process_rate); None for a closed-model step or one that
    does not say."""
    rate, processes, agents = meta.get("rate"), meta.get("processes"), meta.get("agents")
    count = len(agents) if isinstance(agents, list) else agents if isinstance(agents, int) else 1
    if (meta.get("model") != "open" or not isinstance(rate, (int, float)) or rate <= 0
            or not isinstance(processes, int) or processes <= 0 or count <= 0):
        return None
    return Plan.process_rate(rate, processes, count)


def step_report_interval_ms(meta: dict) -> int:
    """How often a step's workers reported to the console, from its step.json
    (`report_interval_ms`; REPORT_INTERVAL_MS where it does not say)."""
    value = meta.get("report_interval_ms")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else REPORT_INTERVAL_MS


def log_stats(paths: list[Path], warmup_end_ms: int, end_ms: int, process_rate: float | None = None,
              report_interval_ms: int | None = None) -> LogStats:
    """Statistics of the rows of `paths` in the window [warmup_end_ms, end_ms) (by their start, or
    in the open model by their due start). `process_rate` (open model: each worker process's
    arrivals per second) lets the requests its pool never started count; `report_interval_ms`
    (the workers' report interval) the range of the console's count the rows allow (console_min,
    console_max)."""
    stats = LogStats(files=len(paths), threads_by_file={p.name: 0 for p in paths})
    logs = [_open(p) for p in paths]
    for log in logs:
        if log.cut_lines:
            stats.malformed_lines += log.cut_lines
            stats.malformed_by_file[log.path.name] = log.cut_lines
    has = _columns_of(logs)
    blocks = _blocks(logs)
    if blocks:
        stats.rt_source = "us" if has["Response us"] else "ms"
        window = _Window(warmup_end_ms, end_ms, "response_us" if stats.rt_source == "us" else "time",
                         open_model=has["Latency us"] and has["Start lag us"], process_rate=process_rate,
                         report_edge_ms=None if report_interval_ms is None else report_interval_ms + REPORT_MARGIN_MS,
                         interval_ms=series_interval_ms(end_ms - warmup_end_ms))
        stats.interval_ms = window.interval_ms
        _aggregate(blocks, window, stats)
    for part in (stats, *stats.tests.values()):
        if not all(has[n] for n in ("Request bytes", "Response bytes")):
            # Byte rates from some workers only would be silently too low.
            part.request_bytes = part.response_bytes = None
        elif part.request_bytes is None:        # the columns are there; no successful row
            part.request_bytes = part.response_bytes = 0
    return stats


def _columns_of(logs: list[_Log]) -> dict[str, bool]:
    """Which custom columns every data log of the step has (logs without a row nor a header aside)."""
    headed = [log for log in logs if log.declared or log.lines[1] > log.lines[0]]
    return {name: bool(headed) and all(name in log.declared for log in headed) for name in CUSTOM}


@dataclass
class _Window:
    """What a step's rows are judged by: its measurement window, the column of the response time
    histogrammed, whether the logs have the open model's columns, each worker process's arrivals
    per second (open model), and how far from the window's edges the console's count is uncertain."""

    warmup_end_ms: int
    end_ms: int
    value: str
    open_model: bool
    process_rate: float | None = None
    report_edge_ms: int | None = None
    interval_ms: int = 0         # > 0: count the window's transactions per interval of this length

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns counted (a log may lack the custom ones)."""
        return tuple(dict.fromkeys(("thread", "test", "start", "time", "errors", "status", "request_bytes",
                                    "response_bytes", self.value, *(("latency_us", "lag_us") if self.open_model else ()))))

    def placed_us(self, column: dict[str, np.ndarray]) -> np.ndarray:
        """What places each row in the window, in µs since the epoch: its start, or in the open
        model its due start (start - lag)."""
        return column["start"] * 1000 - column["lag_us"] if self.open_model else column["start"] * 1000


@dataclass
class _Counts:
    """A block's rows counted: malformed ones, groups of rows alike (`_grouped`: by kind, test and
    the HTTP status of a failure, and response time bucket), the same of the window's requests'
    latency (open model), the threads that started a transaction, (open model) the latest due
    start of each test and the latest end of each thread (_unstarted_dues), and per test the rows
    the console surely and maybe counted (console_band)."""

    malformed: int
    groups: pl.DataFrame | None = None
    latency: pl.DataFrame | None = None
    threads: tuple[int, ...] = ()
    intervals: pl.DataFrame | None = None     # per test and interval: successful transactions, their time
    starts: np.ndarray | None = None          # open model: the window's start times, sorted (start_runs)
    marks: "_Marks | None" = None
    console: dict[int, tuple[int, int]] = field(default_factory=dict)   # test -> console_band's counts


@dataclass
class _Marks:
    """How far a worker process's pool had got: per test the latest due start of its rows (µs),
    per thread the latest end of its rows (ms)."""

    due: dict[int, int] = field(default_factory=dict)
    thread_end: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, column: dict[str, np.ndarray], window: _Window) -> "_Marks":
        marks = cls()
        for key, values, into in ((column["test"], window.placed_us(column), marks.due),
                                  (column["thread"], column["start"] + column["time"], marks.thread_end)):
            numbers, distinct = _distinct(key)
            latest = np.full(len(distinct), np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(latest, numbers, values)
            into.update(zip(distinct.tolist(), latest.tolist()))
        return marks

    def add(self, other: "_Marks | None") -> None:
        for mine, theirs in ((self.due, other.due), (self.thread_end, other.thread_end)) if other else ():
            for key, value in theirs.items():
                mine[key] = max(mine.get(key, value), value)


def _unstarted_dues(marks: dict[str, _Marks], window: _Window) -> Iterator[tuple[int, np.ndarray]]:
    """The due starts (µs) of the window's requests that no worker process started: (test, dues),
    a chunk at a time.

    A process's pool takes tickets in their order and starts each as soon as a thread is free and
    the ticket is due. So if any of its threads had ended its last row before the window's end, the
    pool was free and every ticket due by then was started; if every thread was still busy, the
    tickets due after its latest one, up to the window's end, never started. They are spaced at
    the process's rate: exactly its schedule for evenly spaced arrivals, the expected number for
    Poisson ones."""
    if not window.open_model or not window.process_rate:
        return
    period_us = 1e6 / window.process_rate
    start_us, end_us = window.warmup_end_ms * 1000, window.end_ms * 1000
    for mark in marks.values():
        if not mark.thread_end or min(mark.thread_end.values()) < window.end_ms:
            continue
        for test, latest in mark.due.items():
            if latest >= end_us:
                continue
            count = math.ceil((end_us - latest) / period_us) - 1      # dues strictly between
            first = max(1, math.ceil((start_us - latest) / period_us))   # ... inside the window
            for low in range(first, count + 1, UNSTARTED_CHUNK):
                ticket = np.arange(low, min(low + UNSTARTED_CHUNK, count + 1), dtype=np.float64)
                yield test, (latest + ticket * period_us).astype(np.int64)


def _block_rows(log: _Log, block: tuple[int, int], wanted: tuple[str, ...]) -> tuple[int, dict[str, np.ndarray]]:
    """A block's malformed lines, and its other rows' columns of `wanted` that the log has.

    A log of integer columns only (every esbperf log) is parsed natively (esbperf/results/intlines.py);
    a user's script may log fractional statistics of its own, which polars reads."""
    if log.integers:
        index = {alias: i for i, n in enumerate(log.names) for name, alias in {**STANDARD, **CUSTOM}.items() if n == name}
        times = {i for i, n in enumerate(log.names) if n in ("Test time", *MICROS, *OPEN_MODEL)}
        with open(log.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            text = np.frombuffer(mapped, dtype=np.uint8, count=block[1] - block[0], offset=block[0])
            try:   # read where the file lies in memory, not copied
                return intlines.parse(text, len(log.names), {index[name]: name for name in wanted if name in index}, times)
            finally:
                del text      # the map closes only once no array looks into it
    with open(log.path, "rb") as f:
        f.seek(block[0])
        text = f.read(block[1] - block[0])
    columns, bad = log.columns()
    # One thread per block: the blocks are what runs in parallel.
    rows = pl.read_csv(text, has_header=False, separator=",", quote_char=None, schema=log.schema, n_threads=1,
                       ignore_errors=True, truncate_ragged_lines=True, encoding="utf8-lossy")
    rows = rows.select(bad=bad, **{name: columns[name] for name in wanted if name in columns})
    malformed = int(rows["bad"].sum())
    if malformed:
        rows = rows.filter(~pl.col("bad"))
    return malformed, {name: rows[name].to_numpy() for name in rows.columns if name != "bad" and rows.height}


def _kinds(column: dict[str, np.ndarray], window: _Window) -> np.ndarray:
    """What each (well-formed) row is: WARMUP, LATE, SUCCESS or FAILURE."""
    kind = np.where(column["errors"] == 0, SUCCESS, FAILURE)
    if window.open_model:
        at, scale = window.placed_us(column), 1000
    else:   # compared in ms: no product that a garbled start could overflow
        at, scale = column["start"], 1
    kind[at < window.warmup_end_ms * scale] = WARMUP
    kind[at >= window.end_ms * scale] = LATE
    return kind


def _count_block(log: _Log, block: tuple[int, int], window: _Window) -> _Counts:
    malformed, column = _block_rows(log, block, window.columns)
    if not column:
        return _Counts(malformed)
    kind = _kinds(column, window)
    timed = kind >= SUCCESS
    keys = {"kind": kind, "test": column["test"]}
    if "status" in column:
        keys["status"] = np.where(kind == FAILURE, column["status"], 0)   # a status is read for failures only
    sums = {name: column[name] for name in ("request_bytes", "response_bytes") if name in column}
    maxima = {}
    if window.open_model:
        lag = column["lag_us"]
        window_us = max(window.end_ms - window.warmup_end_ms, 1) * 1000
        part = (window.placed_us(column) - window.warmup_end_ms * 1000) * LAG_TREND_PARTS // window_us
        first, last = part == 0, part == LAG_TREND_PARTS - 1
        sums.update(late=lag > LATE_START_US, first_sum=lag * first, first_n=first, last_sum=lag * last, last_n=last,
                    after_end=column["start"] >= window.end_ms)
        maxima["max_lag"] = lag
    groups = _grouped(keys, np.where(timed, column[window.value], 0), sums, maxima)
    counts = _Counts(malformed, groups.with_columns(**{name: pl.lit(None, dtype=pl.Int64) for name in
                                                       ("status", "request_bytes", "response_bytes")
                                                       if name not in groups.columns}))
    if window.open_model:   # every request of the window, failed ones too
        counts.latency = _grouped({"test": column["test"][timed]}, column["latency_us"][timed])
        counts.marks = _Marks.of(column, window)
    if window.report_edge_ms is not None:   # rows of every kind end near the window
        numbers, tests = _distinct(column["test"])
        band = console_band(column["start"] + column["time"], window.warmup_end_ms, window.end_ms,
                            window.report_edge_ms)
        counts.console = dict(zip(tests.tolist(), zip(*(np.bincount(numbers[rows], minlength=len(tests)).tolist()
                                                         for rows in band))))
    # A thread busy in the window: one that started a transaction in it, or whose transaction started
    # before it and ended in or after it (at 320 users a 3 s window can pass inside one long answer).
    busy = timed | ((kind == WARMUP) & (column["start"] + column["time"] >= window.warmup_end_ms))
    counts.threads = tuple(_distinct(column["thread"][busy])[1].tolist())
    if window.interval_ms:
        counts.intervals = _interval_sums(column, kind, window)
    if window.open_model:
        counts.starts = np.sort(column["start"][timed])[:MAX_GAPS + 1]
    return counts


def _interval_sums(column: dict[str, np.ndarray], kind: np.ndarray, window: _Window) -> pl.DataFrame:
    """The block's successful transactions per test and interval, from the window's start (the
    warm-up's at negative intervals; none after the window), placed as the window places them (in
    the open model by their due start, so a request due in the window's last interval that started
    after it counts there), and the sum of their times (in the column's unit)."""
    placed_ms = window.placed_us(column) // 1000
    success = (kind == SUCCESS) | ((kind == WARMUP) & (column["errors"] == 0)
                                   & (placed_ms >= window.warmup_end_ms - SERIES_WARMUP_MS))
    return (pl.DataFrame({"test": column["test"][success],
                          "interval": (placed_ms[success] - window.warmup_end_ms) // window.interval_ms,
                          "value": column[window.value][success]})
            .group_by("test", "interval").agg(n=pl.len(), total=pl.col("value").sum()))


def console_band(end_ms: np.ndarray, warmup_end_ms: int, window_end_ms: int, edge_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """Which rows, by their end (ms), the console has surely counted, and which it may have: it
    counts what its workers report between its zeroing at the window's start and its reading at
    the end, and a worker reports a transaction within `edge_ms` of its end. Surely: ended in the
    window, at least `edge_ms` before its end; maybe: ended in it, or within `edge_ms` before it."""
    surely = (end_ms > warmup_end_ms) & (end_ms <= window_end_ms - edge_ms)
    maybe = (end_ms > warmup_end_ms - edge_ms) & (end_ms <= window_end_ms)
    return surely, maybe


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's number among the distinct values (0, 1, … in their order), and those values."""
    if not len(values):
        return values, values
    low, high = values.min(), values.max()
    if low == high:
        return np.zeros(len(values), dtype=np.int64), values[:1]
    if int(high) - int(low) < DENSE_SPAN:
        offsets = values - low
        present = np.bincount(offsets) > 0
        return (np.cumsum(present) - 1)[offsets], np.flatnonzero(present) + low
    distinct, numbers = np.unique(values, return_inverse=True)
    return numbers, distinct


def _numbered(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_distinct, but values within a small span are numbered by their offset, which is cheaper:
    the value of each number is then every value of the span, present or not."""
    if len(values):
        low, high = values.min(), values.max()
        if int(high) - int(low) < SMALL_SPAN:
            return values - low, np.arange(low, high + 1)
    return _distinct(values)


def _grouped(keys: dict[str, np.ndarray], value: np.ndarray, sums: dict[str, np.ndarray] | None = None,
             maxima: dict[str, np.ndarray] | None = None) -> pl.DataFrame:
    """Rows grouped by `keys` and the histogram bucket of `value` (>= 0): per group its keys, the
    bucket's lower bound `lo`, the count `n`, the sums of the values' offsets from `lo` and of
    their squares (the histogram's exact moments), their `low` and `high`, the sums of `sums`
    and the maxima of `maxima`. Each group is a slot number, counted with numpy's bincount."""
    shifts = bucket_shifts(value)
    index = bucket_index(value, shifts)
    first = index.min(initial=0)
    slot, values = index - first, {"lo": bucket_low(np.arange(first, index.max(initial=0) + 1))}
    width = len(values["lo"])
    for name, key in keys.items():
        numbers, values[name] = _numbered(key)
        if len(values[name]) > 1:           # one value: every number is 0
            slot, width = slot + width * numbers, width * len(values[name])
    slot, slots = _distinct(slot)
    out = {}
    for name, distinct in values.items():      # each key's number is a digit of the slot's
        slots, digit = np.divmod(slots, len(distinct))
        out[name] = distinct[digit]
    out["n"] = np.bincount(slot)

    def reduced(at: np.ufunc, start: int, of: np.ndarray) -> np.ndarray:
        total = np.full(len(out["n"]), start, dtype=np.int64)
        at.at(total, slot, of.astype(np.int64, copy=False))   # a bool array takes ufunc.at's slow path, 25x
        return total

    offsets = value & ((1 << shifts) - 1)
    out.update(offsets=reduced(np.add, 0, offsets), offsets_sq=reduced(np.add, 0, offsets * offsets),
               low=reduced(np.minimum, np.iinfo(np.int64).max, value), high=reduced(np.maximum, 0, value))
    out.update({name: reduced(np.add, 0, of) for name, of in (sums or {}).items()})
    out.update({name: reduced(np.maximum, np.iinfo(np.int64).min, of) for name, of in (maxima or {}).items()})
    return pl.DataFrame(out)


def _add_buckets(histogram: Histogram, groups: pl.DataFrame) -> None:
    """Add `_grouped`'s groups of one histogram's rows to it."""
    columns = [groups[c].to_list() for c in ("lo", "n", "offsets", "offsets_sq")]
    histogram.add_buckets(*columns, groups["low"].min(), groups["high"].max())


def _merged(frames: list[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """Groups counted in several blocks, as one count per group."""
    frame = pl.concat(frames, how="diagonal")   # columns a log lacks come last in its blocks
    reduce = {"low": pl.Expr.min, "high": pl.Expr.max, "max_lag": pl.Expr.max}
    return frame.group_by(*keys, "lo").agg(reduce.get(c, pl.Expr.sum)(pl.col(c))
                                           for c in frame.columns if c not in (*keys, "lo"))


def _blocks(logs: list[_Log]) -> list[tuple[_Log, tuple[int, int]]]:
    """The blocks of whole lines of the logs (line_blocks), BLOCK_BYTES or so each."""
    return [(log, block) for log in logs if log.names for block in line_blocks(log.path, *log.lines, BLOCK_BYTES)]


class _Folded(list):
    """Counted groups of many blocks (_grouped's frames), added up FOLD_BLOCKS at a time."""

    def __init__(self, keys: list[str]):
        super().__init__()
        self.keys = keys

    def add(self, groups: pl.DataFrame | None) -> None:
        if groups is not None:
            self.append(groups)
            if len(self) >= FOLD_BLOCKS:
                self[:] = [_merged(self, self.keys)]

    def total(self) -> pl.DataFrame | None:
        return _merged(self, self.keys) if self else None


def _aggregate(blocks: list[tuple[_Log, tuple[int, int]]], window: _Window, stats: LogStats) -> None:
    """Count the blocks in parallel, a thread per core (polars and numpy release Python's lock
    while they work), and put their counts into `stats`."""
    groups, latency = _Folded(["kind", "test", "status"]), _Folded(["test"])
    threads: dict[str, set[int]] = {}
    intervals: list[pl.DataFrame] = []
    marks: dict[str, _Marks] = {}
    console: dict[int, list[int]] = {}
    with ThreadPoolExecutor(max_workers=pl.thread_pool_size()) as pool:
        for (log, _), counts in zip(blocks, pool.map(lambda block: _count_block(*block, window), blocks)):
            name = log.path.name
            if counts.malformed:
                stats.malformed_by_file[name] = stats.malformed_by_file.get(name, 0) + counts.malformed
                stats.malformed_lines += counts.malformed
            threads.setdefault(name, set()).update(counts.threads)
            groups.add(counts.groups)
            latency.add(counts.latency)
            if counts.intervals is not None:
                intervals.append(counts.intervals)
            if counts.starts is not None and len(counts.starts) > 1:
                stats.start_runs.append(counts.starts)
            marks.setdefault(name, _Marks()).add(counts.marks)
            for test, (surely, maybe) in counts.console.items():
                both = console.setdefault(test, [0, 0])
                both[0] += surely
                both[1] += maybe
    for name, seen in threads.items():     # a thread counts once per log, whichever tests it ran
        stats.threads_by_file[name] = len(seen)
    if window.report_edge_ms is not None:
        stats.console_min = stats.console_max = 0
    if not groups:
        if window.open_model:
            stats.late_starts = 0            # no transaction: none started late
        return
    main = groups.total().sort("test", "kind", "status", nulls_last=True)
    tests = stats.tests
    for (test, kind, status), group in main.group_by("test", "kind", "status", maintain_order=True):
        tests.setdefault(test, RowStats())._add(kind, status, group)
    for test, (surely, maybe) in console.items():
        tests[test].console_min, tests[test].console_max = surely, maybe
    scale = 1 if window.value == "response_us" else 1000    # histograms are in µs
    for part in tests.values():
        part.response, part.failed_response = part.response.scaled(scale), part.failed_response.scaled(scale)
    if intervals:
        _add_intervals(pl.concat(intervals), window, scale, tests)
    if window.open_model:
        for part in tests.values():
            part.latency = Histogram()
            part.started_after_end = part.started_after_end or 0
        for (test,), group in (latency.total().group_by("test") if latency else ()):
            _add_buckets(tests[test].latency, group)
        # Tickets are a worker process's, not a test's: counted in a step of one test only.
        if window.process_rate and len(tests) == 1:
            [part] = tests.values()
            part.never_started = 0
            for _, dues in _unstarted_dues(marks, window):
                _add_buckets(part.latency, _grouped({}, window.end_ms * 1000 - dues))
                part.never_started += len(dues)
    for part in tests.values():      # the step's total: its tests' rows together
        stats._absorb(part)
    if window.open_model:
        timed = main.filter(pl.col("kind").is_in([SUCCESS, FAILURE]))
        stats._lag(timed)
        for (test,), group in timed.group_by("test"):
            tests[test]._lag(group)


def _add_intervals(frame: pl.DataFrame, window: _Window, scale: int, tests: dict[int, RowStats]) -> None:
    """Each test's per-interval counts and time sums (µs) from the blocks' (_interval_sums)."""
    size = max(1, -(-(window.end_ms - window.warmup_end_ms) // window.interval_ms))
    for (test,), group in frame.group_by("test"):
        part = tests.setdefault(test, RowStats())
        at = group["interval"].to_numpy()
        part.interval_first = min(0, int(at.min()))
        n, us = np.zeros(size - part.interval_first, dtype=np.int64), np.zeros(size - part.interval_first, dtype=np.int64)
        np.add.at(n, at - part.interval_first, group["n"].to_numpy())
        np.add.at(us, at - part.interval_first, group["total"].to_numpy() * scale)
        part.interval_n, part.interval_us = tuple(n.tolist()), tuple(us.tolist())


def interval_counts(paths: list[Path], warmup_end_ms: int, end_ms: int, interval_ms: int,
                    value: str, process_rate: float | None = None) -> dict[int, tuple[pl.DataFrame, np.ndarray]]:
    """The window's rows per Grinder test, interval of `interval_ms` from the window's start and µs
    bucket, read and judged as log_stats reads them (so analysis/hlog.py's files count what
    summary.csv counts): per test, its counts (a frame of interval, lo, n) and each interval's
    largest value (an array, one per interval; 0 in an empty one). `value` is the column counted:
    "response_us" or "time" (Grinder's whole ms, counted in µs) of the successful transactions, or
    "latency_us": the open model's latency of every request due in the window, failed ones and
    those never started (with `process_rate`, as log_stats) included. A row's interval is that of
    its start, or in the open model of its due start."""
    logs = [_open(p) for p in paths]
    has = _columns_of(logs)
    column = "time" if value == "time" else value
    window = _Window(warmup_end_ms, end_ms, column, has["Latency us"] and has["Start lag us"], process_rate)
    intervals = max(1, -(-(end_ms - warmup_end_ms) // interval_ms))
    latency = value == "latency_us"
    wanted = ("thread", "test", "start", "time", "errors", column, *(("lag_us",) if window.open_model else ()))

    def count(block: tuple[_Log, tuple[int, int]]) -> tuple[list, _Marks | None]:
        _, rows = _block_rows(*block, wanted)
        if column not in rows or (window.open_model and "lag_us" not in rows):
            return [], None
        kind = _kinds(rows, window)
        chosen = kind >= SUCCESS if latency else kind == SUCCESS
        at = window.placed_us(rows)[chosen]
        counted = _interval_cells(rows["test"][chosen], (at - warmup_end_ms * 1000) // (interval_ms * 1000),
                                  rows[column][chosen] * (1000 if value == "time" else 1), intervals)
        return counted, (_Marks.of(rows, window) if latency and window.open_model else None)

    per_test: dict[int, tuple[list, list, np.ndarray]] = {}

    def add(found: list) -> None:
        for test, keys, n, maxima in found:
            keys_of, n_of, high = per_test.setdefault(test, ([], [], np.zeros(intervals, dtype=np.int64)))
            keys_of.append(keys)
            n_of.append(n)
            np.maximum(high, maxima, out=high)

    marks: dict[str, _Marks] = {}
    blocks = _blocks(logs)
    with ThreadPoolExecutor(max_workers=pl.thread_pool_size()) as pool:
        for (log, _), (found, mark) in zip(blocks, pool.map(count, blocks)):
            add(found)
            marks.setdefault(log.path.name, _Marks()).add(mark)
    tests = {test for mark in marks.values() for test in mark.due}
    if len(tests) == 1:   # the requests never started, as log_stats counts them (a step of one test)
        for test, dues in _unstarted_dues(marks, window):
            add(_interval_cells(np.full(len(dues), test), (dues - warmup_end_ms * 1000) // (interval_ms * 1000),
                                end_ms * 1000 - dues, intervals))
    out = {}
    for test, (keys_of, n_of, high) in per_test.items():
        keys, n = np.concatenate(keys_of), np.concatenate(n_of)
        order = np.argsort(keys, kind="stable")          # the blocks' keys are sorted runs
        keys, n = keys[order], n[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(first)
        interval, index = np.divmod(keys[starts], BUCKETS)
        out[test] = (pl.DataFrame({"interval": interval, "lo": bucket_low(index), "n": np.add.reduceat(n, starts)}),
                     high)
    return out


def _interval_cells(tests: np.ndarray, interval: np.ndarray, values: np.ndarray,
                    intervals: int) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per test: its (interval, bucket) cells as keys interval x BUCKETS + bucket, sorted, their
    counts, and each interval's largest value. Only the cells present are counted (_distinct):
    memory follows the rows, whatever span of time and of values they cover."""
    index = bucket_index(values, bucket_shifts(values))
    numbers, distinct = _distinct(tests)
    found = []
    for k, test in enumerate(distinct.tolist()):
        mine = numbers == k
        i, v = interval[mine], values[mine]
        cell, cells = _distinct(i * BUCKETS + index[mine])
        maxima = np.zeros(intervals, dtype=np.int64)
        np.maximum.at(maxima, i, v)
        found.append((test, cells, np.bincount(cell), maxima))
    return found
