"""Monitor samples (`monitor-<role>.csv`, long format) -> CPU and network figures of a host, and
its bottleneck verdict, by the one rule of analysis/bottleneck.py.

Only the measurement window counts (samples of the `measure` phase; a network interval counts
when its later sample is in it). Network figures are those of ONE interface per direction: the
testbed's `interface` for the host, else the busiest; never a sum over interfaces."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from esbperf.analysis import bottleneck
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.results.files import complete_data_lines, read_header

SCHEMA = {"time_ms": pl.Int64, "phase": pl.String, "metric": pl.String, "subject": pl.String,
          "value": pl.Float64, "extra": pl.String}


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
    gap_ms: float = 0.0               # time the monitor was unreachable during the measurement
    malformed_lines: int = 0
    bottlenecks: list[dict] = field(default_factory=list)   # bottleneck.assess's verdicts
    cpu_samples: list[float] = field(default_factory=list)    # the window's cpu.total samples
    proc_samples: list[float] = field(default_factory=list)   # the window's proc.cpu readings, summed per reading
    # (time ms, proc.cpu) of each watch (a pid or a --match text) in the window
    proc_by_watch: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def host_stats(path: Path, role: str, link_mbit: float | None = None, measure_ms: int | None = None,
               interface: str | None = None, end_ms: int | None = None) -> HostStats:
    """A host's figures over the measurement window (measure_ms, end_ms]: the samples stamped in it
    (analysis/bottleneck.py). Without the times, the samples the runner marked `measure`."""
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
    stamped_in = (pl.col("time_ms") > measure_ms) & (pl.lit(end_ms is None) | (pl.col("time_ms") <= (end_ms or 0)))

    # Several processes may match one watch (or several watches): their sum per reading.
    readings = rows.filter((pl.col("metric") == "proc.cpu") & stamped_in)
    proc = readings.group_by("time_ms").agg(pl.col("value").sum()).sort("time_ms")["value"]
    for (watch,), group in readings.sort("time_ms").group_by("subject", maintain_order=True):
        stats.proc_by_watch[watch or ""] = list(group.select("time_ms", "value").iter_rows())
    if len(proc):
        stats.proc_cpu_mean, stats.proc_cpu_max = proc.mean(), proc.max()
        stats.proc_samples = proc.to_list()
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
