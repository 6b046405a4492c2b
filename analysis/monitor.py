"""Monitor samples (`monitor-<role>.csv`, long format) -> CPU and network figures of a host, and
its verdicts by the one rule of analysis/bottleneck.py.

Only the measurement window counts (samples of the `measure` phase; a network interval counts
when its later sample is in it). Network figures are those of ONE interface per direction: the
testbed's `interface` for the host, else the busiest; never a sum over interfaces.

A watched process's `proc.cpu` is its rate since the previous reading of the same watch (the
monitor reads them every other second), so each value covers an interval: the window's figure is
the mean of the intervals weighted by how much of each lies in the window, which interpolates the
process's CPU time to the window's edges; a window shorter than the readings' spacing still gets
the interval around it. A JVM's `proc.jit` (its JIT compiler threads' CPU, read every second) is
weighed the same way (`jit_mean_by_watch`)."""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from esbperf.analysis import bottleneck
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.results.files import complete_data_lines, read_header

SCHEMA = {"time_ms": pl.Int64, "phase": pl.String, "metric": pl.String, "subject": pl.String,
          "value": pl.Float64, "extra": pl.String}
# The monitor reads watched processes every other tick (agents/monitor ProcessWatcher): the
# interval of a reading whose previous one is not in the file.
PROC_INTERVAL_MS = 2000
JIT_INTERVAL_MS = 1000    # proc.jit is read every tick


@dataclass
class HostStats:
    role: str
    cpu_mean: float | None = None     # cpu.total, percent of the host's cores
    cpu_max: float | None = None
    rx_mbit: float | None = None      # received, Mbit/s, on the counted interface
    tx_mbit: float | None = None
    interface: str = ""               # the counted interface(s): "eth0", or "rx/tx" when they differ
    link_percent: float | None = None  # max(rx, tx) / link capacity, when the capacity is known
    proc_cpu_mean: float | None = None  # the watched processes (ESB or echo JVM), percent of ONE core
    proc_cpu_max: float | None = None
    cores: int | None = None          # the host's cores: its pinned `cpus`, else the machine's (cpu.core rows)
    gap_ms: float = 0.0               # time the monitor was unreachable during the measurement
    malformed_lines: int = 0
    bottlenecks: list[dict] = field(default_factory=list)   # bottleneck.assess's verdicts
    cpu_samples: list[float] = field(default_factory=list)    # the window's cpu.total samples
    # The readings whose interval overlaps the window, summed per reading (% of one core)
    proc_samples: list[float] = field(default_factory=list)
    # (time ms, proc.cpu) of each watch (a pid or a --match text) whose interval overlaps the window
    proc_by_watch: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # each watch's CPU over the window, its intervals weighted by their time in it (% of one core)
    proc_mean_by_watch: dict[str, float] = field(default_factory=dict)
    # each JVM watch's JIT compiler threads over the window, weighted likewise (% of one core)
    jit_mean_by_watch: dict[str, float] = field(default_factory=dict)


def host_stats(path: Path, role: str, link_mbit: float | None = None, measure_ms: int | None = None,
               interface: str | None = None, end_ms: int | None = None, cores: int | None = None) -> HostStats:
    """A host's figures over the measurement window (measure_ms, end_ms]: the samples stamped in it
    (analysis/bottleneck.py). Without the times, the samples the runner marked `measure`. `cores`:
    the host's pinned cores, if any (else the machine's, counted from the file's cpu.core rows)."""
    stats = HostStats(role)
    header, complete = read_header(path)
    if header is None:
        return stats
    if not complete:
        stats.malformed_lines = 1
        return stats
    if [h.strip() for h in header.split(",")] != layout.MONITOR_HEADER:
        raise EsbperfError(f"{path}: not a monitor file: header is {header[:80]!r}, expected {','.join(layout.MONITOR_HEADER)!r}")
    complete_rows = complete_data_lines(path)
    stats.malformed_lines = 0 if complete_rows is None else 1
    try:
        rows = pl.read_csv(path, has_header=False, skip_rows=1, schema=SCHEMA, ignore_errors=True,
                           truncate_ragged_lines=True, quote_char=None, encoding="utf8-lossy",
                           n_rows=complete_rows)
    except pl.exceptions.NoDataError:   # the header alone: a monitor that sampled nothing yet
        return stats
    bad = (pl.any_horizontal([pl.col(c).is_null() for c in ("time_ms", "phase", "metric", "value")])
           | pl.col("extra").is_not_null())
    stats.malformed_lines += rows.select(bad.sum()).item()
    rows = rows.filter(~bad)
    measured = rows.filter(pl.col("phase") == "measure")
    if measure_ms is None:
        measure_ms = measured["time_ms"].min() - 1 if measured.height else 0
    stats.cores = cores or rows.filter(pl.col("metric") == "cpu.core")["subject"].n_unique() or None
    _process_cpu(stats, rows, measure_ms, end_ms)
    stats.gap_ms = measured.filter(pl.col("metric") == "gap")["value"].sum()

    cpu = rows.filter(pl.col("metric") == "cpu.total").select("time_ms", "value").rows()
    counters: dict[str, dict[str, list]] = {"rx": {}, "tx": {}}
    net = rows.filter(pl.col("metric").is_in(["net.rx_bytes", "net.tx_bytes"]))
    for t, metric, subject, value in net.select("time_ms", "metric", "subject", "value").iter_rows():
        counters[metric[4:6]].setdefault(subject or "", []).append((t, value))
    load = bottleneck.assess(role, cpu, counters["rx"], counters["tx"], measure_ms, link_mbit, interface, end_ms)
    stats.cpu_samples = [v for t, v in sorted(cpu) if bottleneck.in_window(t, measure_ms, end_ms)]
    stats.cpu_mean, stats.cpu_max = load.cpu_mean, load.cpu_max
    stats.rx_mbit, stats.tx_mbit, stats.link_percent = load.rx.mbit, load.tx.mbit, load.link_percent
    names = [n for n in dict.fromkeys((load.rx.interface, load.tx.interface)) if n]
    stats.interface = "/".join(names)
    stats.bottlenecks = load.bottlenecks
    return stats


def _process_cpu(stats: HostStats, rows: pl.DataFrame, measure_ms: int, end_ms: int | None) -> None:
    """The watched processes' CPU over the window (the module's rule), and their compilers'. A value
    above what the host's cores allow (cores × 100 % of one core) is cut to it: only a last guard,
    for files of monitors that stamped a rate with the tick rather than with its reading (a tick
    starved on a saturated core read 192 % of the one core an echo was pinned to) and for clock-tick
    rounding."""
    cap = 100.0 * stats.cores if stats.cores else None
    stats.proc_by_watch = _readings_in_window(rows, "proc.cpu", PROC_INTERVAL_MS, measure_ms, end_ms, cap,
                                              read_with=("proc.rss",))
    stats.proc_mean_by_watch = _weighted_means(stats.proc_by_watch)
    jit = _readings_in_window(rows, "proc.jit", JIT_INTERVAL_MS, measure_ms, end_ms, cap)
    stats.jit_mean_by_watch = _weighted_means(jit)
    per_reading: dict[int, float] = {}
    for readings in stats.proc_by_watch.values():
        for t, value, _ in readings:
            per_reading[t] = per_reading.get(t, 0.0) + value
    stats.proc_by_watch = {w: [(t, v) for t, v, _ in readings] for w, readings in stats.proc_by_watch.items()}
    if per_reading:
        stats.proc_samples = [min(v, cap) if cap else v for _, v in sorted(per_reading.items())]
        total = sum(stats.proc_mean_by_watch.values())
        stats.proc_cpu_mean = min(total, cap) if cap else total
        stats.proc_cpu_max = max(stats.proc_samples)


def _readings_in_window(rows: pl.DataFrame, metric: str, interval_ms: int, measure_ms: int, end_ms: int | None,
                        cap: float | None, read_with: tuple[str, ...] = ()) -> dict[str, list[tuple[int, float, float]]]:
    """Each watch's readings of `metric` whose interval (since the watch's previous reading — of
    `metric` or of a metric `read_with` it, which a reading without a rate still has — or
    `interval_ms` before the first) overlaps the window: (time ms, value, ms of it inside)."""
    end = float("inf") if end_ms is None else end_ms
    found = rows.filter(pl.col("metric").is_in([metric, *read_with])).sort("time_ms")
    read_at: dict[str, list[int]] = {}     # each watch's reading times, ascending
    for t, subject in found.select("time_ms", "subject").iter_rows():
        times = read_at.setdefault(subject or "", [])
        if not times or times[-1] != t:
            times.append(t)
    readings: dict[str, list[tuple[int, float, float]]] = {}
    for t, subject, value in found.filter(pl.col("metric") == metric).select("time_ms", "subject", "value").iter_rows():
        watch = subject or ""
        times = read_at[watch]
        i = bisect_left(times, t)
        start = times[i - 1] if i else t - interval_ms
        inside = min(t, end) - max(start, measure_ms)
        if inside > 0:
            readings.setdefault(watch, []).append((t, min(value, cap) if cap else value, inside))
    return readings


def _weighted_means(readings: dict[str, list[tuple[int, float, float]]]) -> dict[str, float]:
    """Each watch's mean over the window, its readings weighted by their time inside it."""
    return {w: sum(v * ms for _, v, ms in found) / sum(ms for _, _, ms in found) for w, found in readings.items()}
