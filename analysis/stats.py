"""Statistics: response-time histograms -> mean, deviation, percentiles; steps -> summary rows;
iterations -> mean and 95 % confidence interval (Student t)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterable

import polars as pl

from esbperf.analysis.datalog import LogStats, data_logs, log_stats
from esbperf.analysis.gc import GC_FIGURES, GC_ROLES, GcStats, gc_file, gc_stats
from esbperf.analysis.monitor import HostStats, host_stats, monitor_file
from esbperf.analysis.results import Run, Step
from esbperf.monitor import THRESHOLD_PERCENT
from esbperf.topology import ROLES   # client, esb, ws1, ws2, ws3: the data path, left to right
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
KEYS = ["run", "scenario", "target", "payload_bytes", "payload_label", "users"]


# --- one step ---------------------------------------------------------------------------------

def percentile(histogram: list[tuple[int, int]], p: float) -> int | None:
    """Nearest-rank percentile: the smallest value with at least p % of the values at or below it."""
    total = sum(n for _, n in histogram)
    if total == 0:
        return None
    rank = max(1, math.ceil(round(p * total / 100.0, 6)))   # round: 99.9 % of 1000 is 999, not 999.0000001
    seen = 0
    for value, n in histogram:
        seen += n
        if seen >= rank:
            return value
    return histogram[-1][0]


def describe(histogram: list[tuple[int, int]]) -> dict[str, float | None]:
    """Mean, sample standard deviation, min, max and percentiles of a (value, count) histogram."""
    n = sum(c for _, c in histogram)
    if n == 0:
        return {"mean": None, "std": None, "min": None, "max": None, **{k: None for k in PERCENTILES}}
    mean = sum(v * c for v, c in histogram) / n
    std = math.sqrt(sum(c * (v - mean) ** 2 for v, c in histogram) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "min": histogram[0][0], "max": histogram[-1][0],
            **{k: percentile(histogram, p) for k, p in PERCENTILES.items()}}


def bottlenecks(step: Step, hosts: dict[str, HostStats]) -> list[str]:
    """The runner's verdicts (step.json), and ours from the monitor files' means over the window
    with the monitor's threshold and names (for steps the runner did not judge), as 'role:resource'."""
    found = []
    for b in step.meta.get("bottlenecks") or []:
        if isinstance(b, dict) and b.get("role") and b.get("resource"):
            found.append(f"{b['role']}:{b['resource']}")
    for role, h in hosts.items():
        if h.cpu_mean is not None and h.cpu_mean > THRESHOLD_PERCENT:
            found.append(f"{role}:cpu")
        link = step.link_mbit(role)
        for direction, mbit in (("rx", h.rx_mbit), ("tx", h.tx_mbit)):
            if link and mbit is not None and 100 * mbit / link > THRESHOLD_PERCENT:
                found.append(f"{role}:link-{direction}")
    return sorted(set(found))


def gc_columns(role: str, g: GcStats | None) -> dict:
    """A JVM's GC figures over the window (analysis/gc.py); empty, not zero, without its GC log."""
    figures = dict.fromkeys(GC_FIGURES) if g is None else {
        "gc_throughput_percent": g.throughput_percent, "gc_pauses": len(g.pauses),
        "gc_pause_p99_ms": percentile(g.pause_histogram, 99.0), "gc_pause_max_ms": g.pause_max_ms,
        "heap_after_gc_mb": g.heap_after_mean_mb, "heap_after_gc_max_mb": g.heap_after_max_mb}
    return {f"{role}_{name}": figures[name] for name in GC_FIGURES}


def step_row(run: Run, step: Step, logs: LogStats, hosts: dict[str, HostStats],
             gcs: dict[str, GcStats] | None = None) -> dict:
    """One summary.csv row (see docs/analysis.md for every column)."""
    m = step.meta
    window_s = (m["end_ms"] - m["warmup_end_ms"]) / 1000.0
    rt = describe(logs.histogram)
    attempts = logs.transactions + logs.errors
    row = {
        "run": run.name, "plan": run.plan_name, "scenario": m["scenario"], "target": m["target"],
        "payload_bytes": m["payload_bytes"], "payload_label": step.payload_label, "users": m["users"],
        "processes": m.get("processes"), "threads": m.get("threads"), "iteration": m["iteration"],
        "window_s": window_s, "transactions": logs.transactions, "errors": logs.errors,
        "error_percent": 100.0 * logs.errors / attempts if attempts else None,
        "error_statuses": ";".join(f"{s}:{n}" for s, n in sorted(logs.error_statuses.items())),
        "tps": logs.transactions / window_s,
        **{f"rt_{k}_ms": v for k, v in rt.items()},
        "request_bytes_per_s": None if logs.request_bytes is None else logs.request_bytes / window_s,
        "response_bytes_per_s": None if logs.response_bytes is None else logs.response_bytes / window_s,
        "log_files": logs.files, "malformed_lines": logs.malformed_lines,
        "malformed_by_file": ";".join(f"{f}:{n}" for f, n in sorted(logs.malformed_by_file.items())),
        "warmup_rows": logs.warmup_rows, "late_rows": logs.late_rows,
    }
    for role in ROLES:
        h = hosts.get(role) or HostStats(role)
        row.update({f"{role}_cpu_mean": h.cpu_mean, f"{role}_cpu_max": h.cpu_max,
                    f"{role}_proc_cpu_mean": h.proc_cpu_mean, f"{role}_proc_cpu_max": h.proc_cpu_max,
                    f"{role}_rx_mbit": h.rx_mbit, f"{role}_tx_mbit": h.tx_mbit,
                    f"{role}_link_percent": h.link_percent, f"{role}_gap_s": h.gap_ms / 1000.0})
    for role in GC_ROLES:
        row.update(gc_columns(role, (gcs or {}).get(role)))
    # The console's own count of the measurement: a check that every worker's data log is here.
    console = m.get("console") if isinstance(m.get("console"), dict) else {}
    totals = dict(zip(console.get("columns") or [], console.get("totals") or []))
    row["console_tests"], row["console_errors"] = totals.get("Tests"), totals.get("Errors")
    row["monitor_missing"] = ";".join(r for r in ROLES if r not in hosts)
    row["monitor_malformed_lines"] = sum(h.malformed_lines for h in hosts.values())
    verdicts = bottlenecks(step, hosts)
    row["bottleneck"] = bool(verdicts)
    row["bottlenecks"] = ";".join(verdicts)
    row["step_dir"] = str(step.dir.relative_to(run.dir))
    return row


def analyse_step(run: Run, step: Step) -> tuple[dict, LogStats]:
    logs = log_stats(data_logs(step.dir), step.meta["warmup_end_ms"], step.meta["end_ms"])
    hosts = {role: host_stats(monitor_file(step.dir, role), role, step.link_mbit(role))
             for role in ROLES if monitor_file(step.dir, role).exists()}
    gcs = {role: gc_stats(gc_file(step.dir, role), role, step.meta["warmup_end_ms"], step.meta["end_ms"])
           for role in GC_ROLES if gc_file(step.dir, role).exists()}
    return step_row(run, step, logs, hosts, gcs), logs


# --- many steps ---------------------------------------------------------------------------------

def summary_frame(rows: list[dict]) -> pl.DataFrame:
    """summary.csv's rows as a frame with stable types, sorted for reading."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.sort("run", "scenario", "payload_bytes", "users", "iteration")


@lru_cache(maxsize=None)
def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t distribution, by bisection on its integrated density."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(x: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))

    def cdf(x: float, steps: int = 2000) -> float:   # Simpson's rule on [0, x]
        h = x / steps
        s = density(0) + density(x) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
        return 0.5 + s * h / 3

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def mean_ci(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and half-width of its 95 % confidence interval (None with fewer than 2 values)."""
    xs = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not xs:
        return None, None
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, None
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return mean, t_quantile(0.975, len(xs) - 1) * sd / math.sqrt(len(xs))


# Figures whose iterations are averaged in aggregate.csv, the graphs and the tables.
AGGREGATED = (["tps", "transactions", "errors", "error_percent"]
              + [f"rt_{k}_ms" for k in ("mean", "std", "min", "max", *PERCENTILES)]
              + ["request_bytes_per_s", "response_bytes_per_s"]
              + [f"{r}_{m}" for r in ROLES for m in ("cpu_mean", "cpu_max", "proc_cpu_mean", "proc_cpu_max",
                                                     "rx_mbit", "tx_mbit", "link_percent")]
              + [f"{r}_{m}" for r in GC_ROLES for m in GC_FIGURES])


def aggregate(summary: pl.DataFrame) -> pl.DataFrame:
    """One row per run and step (iterations pooled): each figure's mean and `<figure>_ci95`."""
    rows = []
    for keys, group in summary.group_by(KEYS, maintain_order=True):
        row = dict(zip(KEYS, keys))
        row["iterations"] = group.height
        for name in AGGREGATED:
            row[name], row[f"{name}_ci95"] = mean_ci(group[name].to_list())
        row["malformed_lines"] = group["malformed_lines"].sum()
        row["bottleneck"] = bool(group["bottleneck"].any())
        row["bottlenecks"] = ";".join(sorted({b for s in group["bottlenecks"] for b in s.split(";") if b}))
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None).sort("run", "scenario", "payload_bytes", "users")


def pooled_histogram(histograms: list[list[tuple[int, int]]]) -> list[tuple[int, int]]:
    merged: dict[int, int] = {}
    for h in histograms:
        for v, n in h:
            merged[v] = merged.get(v, 0) + n
    return sorted(merged.items())
