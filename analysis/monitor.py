"""Monitor samples (`monitor-<role>.csv`, long format) -> CPU and network figures of a host.

Only samples of the `measure` phase count. Network counters are cumulative per interface, so a
rate is the sum of the increases between consecutive samples over the time they span; a
decrease (the monitor restarted) adds nothing. The loopback interface is left out: it is not
the link between hosts."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from esbperf.analysis.files import complete_data_lines, read_header
from esbperf.errors import EsbperfError

HEADER = ["time_ms", "phase", "metric", "subject", "value"]
SCHEMA = {"time_ms": pl.Int64, "phase": pl.String, "metric": pl.String, "subject": pl.String,
          "value": pl.Float64, "extra": pl.String}
LOOPBACK = "lo"


@dataclass
class HostStats:
    role: str
    cpu_mean: float | None = None     # cpu.total, percent of all cores
    cpu_max: float | None = None
    rx_mbit: float | None = None      # received, Mbit/s, all interfaces but loopback
    tx_mbit: float | None = None
    link_percent: float | None = None  # max(rx, tx) / link capacity, when the capacity is known
    proc_cpu_mean: float | None = None  # the watched processes (ESB or echo JVM), percent of ONE core
    proc_cpu_max: float | None = None
    gap_ms: float = 0.0               # time the monitor was unreachable during the measurement
    malformed_lines: int = 0


def monitor_file(step_dir: Path, role: str) -> Path:
    return step_dir / f"monitor-{role}.csv"


def host_stats(path: Path, role: str, link_mbit: float | None = None) -> HostStats:
    stats = HostStats(role)
    header, complete = read_header(path)
    if header is None:
        return stats
    if not complete:
        stats.malformed_lines = 1
        return stats
    if [h.strip() for h in header.split(",")] != HEADER:
        raise EsbperfError(f"{path}: not a monitor file: header is {header[:80]!r}, expected {','.join(HEADER)!r}")
    complete_rows = complete_data_lines(path)
    stats.malformed_lines = 0 if complete_rows is None else 1
    rows = pl.read_csv(path, has_header=False, skip_rows=1, schema=SCHEMA, ignore_errors=True,
                       truncate_ragged_lines=True, quote_char=None, encoding="utf8-lossy",
                       n_rows=complete_rows)
    bad = (pl.any_horizontal([pl.col(c).is_null() for c in ("time_ms", "phase", "metric", "value")])
           | pl.col("extra").is_not_null())
    stats.malformed_lines += rows.select(bad.sum()).item()
    measured = rows.filter(~bad & (pl.col("phase") == "measure"))

    cpu = measured.filter(pl.col("metric") == "cpu.total")["value"]
    if len(cpu):
        stats.cpu_mean, stats.cpu_max = cpu.mean(), cpu.max()
    # Several processes may match one watch (or several watches): their sum per reading.
    proc = (measured.filter(pl.col("metric") == "proc.cpu").group_by("time_ms")
            .agg(pl.col("value").sum())["value"])
    if len(proc):
        stats.proc_cpu_mean, stats.proc_cpu_max = proc.mean(), proc.max()
    stats.gap_ms = measured.filter(pl.col("metric") == "gap")["value"].sum()
    stats.rx_mbit = _rate_mbit(measured, "net.rx_bytes")
    stats.tx_mbit = _rate_mbit(measured, "net.tx_bytes")
    if link_mbit and stats.rx_mbit is not None and stats.tx_mbit is not None:
        stats.link_percent = 100.0 * max(stats.rx_mbit, stats.tx_mbit) / link_mbit
    return stats


def _rate_mbit(measured: pl.DataFrame, metric: str) -> float | None:
    """Sum over interfaces of each interface's byte rate, in Mbit/s."""
    counters = (measured.filter((pl.col("metric") == metric) & (pl.col("subject") != LOOPBACK))
                .sort("subject", "time_ms"))
    per_interface = (counters.group_by("subject")
                     .agg(increase=pl.col("value").diff().clip(lower_bound=0).sum(),
                          span_ms=pl.col("time_ms").max() - pl.col("time_ms").min())
                     .filter(pl.col("span_ms") > 0))
    if per_interface.is_empty():
        return None
    return float((per_interface["increase"] * 8 / (per_interface["span_ms"] / 1000) / 1e6).sum())
