"""Statistics, each figure defined once: histograms -> mean, deviation, percentiles; a step ->
one summary.csv row (with its checks: the open model's schedule, Little's law, the console's
count); iterations -> pooled distributions and means with 95 % confidence intervals."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

import polars as pl

from esbperf.analysis.bottleneck import THRESHOLD_PERCENT  # noqa: F401  (re-exported for graphs and tables)
from esbperf.analysis.gc import GC_FIGURES, GC_ROLES, GcStats, gc_stats
from esbperf.analysis.monitor import HostStats, host_stats
from esbperf.analysis.runs import Run, Step
from esbperf.core.errors import EsbperfError
from esbperf.core.plan import parse_size
from esbperf.core.roles import FIXED as FIXED_ROLES
from esbperf.results.datalog import LogStats, log_stats
from esbperf.results.histogram import Histogram, nearest_rank
from esbperf.results.layout import data_logs, gc_file, monitor_file

ROLES = FIXED_ROLES   # client, esb, ws1, ws2, ws3; a report adds the load hosts its runs have
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
LATENCY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99_9": 99.9}
# What identifies a step across iterations (summary.csv adds `iteration`).
KEYS = ["run", "scenario", "target", "payload_bytes", "payload_label", "users", "model", "rate"]

# The open model: a pool keeps its schedule unless its start rate falls short of the offered
# rate by more than SCHEDULE_SHORTFALL, or its start lag grows over the window (mean lag of the
# last fifth minus that of the first fifth) by more than LAG_GROWTH_SHARE of the window: a
# backlog growing at that share of the rate.
SCHEDULE_SHORTFALL = 0.05
LAG_GROWTH_SHARE = 0.02
# Little's law in a closed-model step: users = (starts / window) x (mean time per transaction
# + time outside the clock + think time), within this share.
LITTLE_TOLERANCE = 0.10
# Data logs against the console's count: a share of the count, plus the window's edges.
CONSOLE_TOLERANCE = 0.10
# A step shorter than this many console sample intervals gives the console too few samples.
MIN_SAMPLES_PER_STEP = 10


# --- one step ---------------------------------------------------------------------------------

def describe(histogram: Histogram | None, percentiles: dict[str, float] = PERCENTILES) -> dict[str, float | None]:
    """Mean, sample standard deviation, min, max and percentiles of a µs histogram, in ms."""
    h = histogram or Histogram()
    ms = (lambda v: None if v is None else v / 1000.0)
    return {"mean": ms(h.mean), "std": ms(h.std), "min": ms(h.min), "max": ms(h.max),
            **{k: ms(h.percentile(p)) for k, p in percentiles.items()}}


@dataclass
class StepHistograms:
    """The distributions behind a step's figures (µs), kept for pooling and export."""

    response: Histogram = field(default_factory=Histogram)        # successful: service time
    failed: Histogram = field(default_factory=Histogram)          # failed transactions
    latency: Histogram | None = None                              # open model: corrected latency

    @classmethod
    def of(cls, logs: LogStats) -> "StepHistograms":
        return cls(logs.response, logs.failed_response, logs.latency)

    @classmethod
    def pooled(cls, parts: list["StepHistograms"]) -> "StepHistograms":
        latencies = [p.latency for p in parts if p.latency is not None]
        return cls(Histogram.pooled(p.response for p in parts), Histogram.pooled(p.failed for p in parts),
                   Histogram.pooled(latencies) if latencies else None)


def distribution_figures(h: StepHistograms) -> dict[str, Any]:
    """Every figure taken from a step's distributions (one iteration, or iterations pooled)."""
    rt = describe(h.response)
    failed = describe(h.failed, {"p99": 99.0})
    row = {f"rt_{k}_ms": v for k, v in rt.items()}
    row["failed_rt_mean_ms"], row["failed_rt_p99_ms"] = failed["mean"], failed["p99"]
    lat = describe(h.latency, LATENCY_PERCENTILES)
    row.update({f"lat_{k}_ms": lat[k] for k in ("mean", "max", *LATENCY_PERCENTILES)})
    return row


def bottlenecks(hosts: dict[str, HostStats]) -> list[str]:
    """The hosts' saturated resources, as 'role:resource': the one rule of
    esbperf/analysis/bottleneck.py applied to each step's monitor files."""
    return sorted({f"{b['role']}:{b['resource']}" for h in hosts.values() for b in h.bottlenecks})


def outside_clock_us(run: Run, payload_bytes: int) -> float | None:
    """What each transaction costs its thread outside the clock (µs), from run.json's client
    calibration (esbperf/run/calibration.py: `outside_clock_us`, per payload label), interpolated
    linearly in payload bytes between the calibrated sizes; None without a calibration."""
    calibration = run.info.get("calibration")
    if not isinstance(calibration, dict):
        return None

    def value(entry: Any) -> float | None:
        if not isinstance(entry, dict):
            return None
        v = entry.get("outside_clock_us_per_tx", entry.get("outside_clock_us"))
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    if value(calibration) is not None:        # one figure for every payload
        return value(calibration)
    points = []
    for label, entry in calibration.items():
        try:
            size = entry.get("payload_bytes") if isinstance(entry, dict) and "payload_bytes" in entry else parse_size(label)
        except ValueError:
            continue
        if value(entry) is not None:
            points.append((size, value(entry)))
    if not points:
        return None
    points.sort()
    if payload_bytes <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if payload_bytes <= x1:
            return y0 + (y1 - y0) * (payload_bytes - x0) / (x1 - x0)
    return points[-1][1]


def little(row: dict) -> tuple[float | None, float | None]:
    """Little's law: the users the step's completions and times account for, as a share of
    `users` (low and high estimate: whole-ms `Test time` is truncated, up to 1 ms short per
    transaction; µs times are not)."""
    if not row["starts"] or row["all_mean_us"] is None:
        return None, None
    rate = row["starts"] / row["window_s"]
    extra = (row["outside_clock_us"] or 0.0) + row["think_us"]
    low = rate * (row["all_mean_us"] + extra) / 1e6 / row["users"]
    high = low + (rate * 1000 / 1e6 / row["users"] if row["rt_source"] == "ms" else 0.0)
    return low, high


def little_disagrees(row: dict) -> bool:
    """A closed-model step whose users Little's law does not account for (e.g. idle threads)."""
    if row["model"] != "closed":
        return False
    low, high = little(row)
    return low is not None and (high < 1 - LITTLE_TOLERANCE or low > 1 + LITTLE_TOLERANCE)


def behind_schedule(row: dict) -> bool:
    """An open-model step whose pool could not keep the schedule (see SCHEDULE_SHORTFALL)."""
    if row["model"] != "open":
        return False
    short = row["start_rate"] < (1 - SCHEDULE_SHORTFALL) * row["rate"]
    growing = row["lag_growth_ms"] is not None and row["lag_growth_ms"] / 1000 > LAG_GROWTH_SHARE * row["window_s"]
    return short or growing


def console_allowance(row: dict, sample_interval_ms: float) -> float:
    """How far the data logs' count may be from the console's: CONSOLE_TOLERANCE of the count
    (at least 10), plus at each edge of the window one console sample interval of transactions
    at the step's rate and the transactions in flight (at most one per thread: `users`)."""
    console = row["console_tests"] + (row["console_errors"] or 0)
    rate = max(row["starts"], console) / row["window_s"]
    return max(10.0, CONSOLE_TOLERANCE * console) + 2 * (rate * sample_interval_ms / 1000 + row["users"])


def console_disagrees(row: dict, sample_interval_ms: float) -> bool:
    if row["console_tests"] is None:
        return False
    console = row["console_tests"] + (row["console_errors"] or 0)
    return abs(row["starts"] - console) > console_allowance(row, sample_interval_ms)


def network_faults(step: Step) -> str:
    """The link faults emulated during the step (step.json `network_faults`, written by the
    runner from `esbperf testbed fault`), as `host:what;…`; empty when there was none."""
    faults = step.meta.get("network_faults")
    if not isinstance(faults, list):
        return ""
    out = []
    for f in faults:
        if isinstance(f, dict):
            what = f.get("description") or ", ".join(f"{k} {f[k]}" for k in ("loss_percent", "delay_ms", "jitter_ms")
                                                       if f.get(k) is not None)
            out.append(f"{f.get('host', '?')}:{what or 'fault'}")
    return ";".join(out)


def gc_columns(role: str, g: GcStats | None) -> dict:
    """A JVM's GC figures over the window (analysis/gc.py); empty, not zero, without its GC log."""
    figures = dict.fromkeys(GC_FIGURES) if g is None else {
        "gc_throughput_percent": g.throughput_percent, "gc_pauses": len(g.pauses),
        "gc_pause_p99_ms": _pause_p99_ms(g), "gc_pause_max_ms": g.pause_max_ms,
        "heap_after_gc_mb": g.heap_after_mean_mb, "heap_after_gc_max_mb": g.heap_after_max_mb}
    return {f"{role}_{name}": figures[name] for name in GC_FIGURES}


def _pause_p99_ms(g: GcStats) -> float | None:
    """Nearest-rank p99 of the window's GC pauses (ms, as logged)."""
    if not g.pauses:
        return None
    pauses = sorted(p.ms for p in g.pauses)
    return pauses[nearest_rank(99.0, len(pauses)) - 1]


def step_row(run: Run, step: Step, logs: LogStats, hosts: dict[str, HostStats],
             roles: Iterable[str] = ROLES, gcs: dict[str, GcStats] | None = None) -> dict:
    """One summary.csv row (see docs/analysis.md for every column)."""
    m = step.meta
    window_s = (m["end_ms"] - m["warmup_end_ms"]) / 1000.0
    starts = logs.starts
    think_ms = m.get("think_ms")
    row = {
        "run": run.name, "plan": run.plan_name, "scenario": m["scenario"], "target": m["target"],
        "payload_bytes": m["payload_bytes"], "payload_label": step.payload_label, "users": m["users"],
        "model": step.model, "rate": step.rate,
        "processes": m.get("processes"), "threads": m.get("threads"), "iteration": m["iteration"],
        "window_s": window_s, "transactions": logs.transactions, "errors": logs.errors, "starts": starts,
        "error_percent": 100.0 * logs.errors / starts if starts else None,
        "error_statuses": ";".join(f"{s}:{n}" for s, n in sorted(logs.error_statuses.items())),
        "tps": logs.transactions / window_s,
        "start_rate": starts / window_s,
        "rt_source": logs.rt_source,
        **distribution_figures(StepHistograms.of(logs)),
        "late_starts": logs.late_starts,
        "late_start_percent": 100.0 * logs.late_starts / starts if logs.late_starts is not None and starts else None,
        "max_lag_ms": None if logs.max_lag_us is None else logs.max_lag_us / 1000.0,
        "lag_growth_ms": (None if logs.lag_first_us is None or logs.lag_last_us is None
                          else (logs.lag_last_us - logs.lag_first_us) / 1000.0),
        "request_bytes_per_s": None if logs.request_bytes is None else logs.request_bytes / window_s,
        "response_bytes_per_s": None if logs.response_bytes is None else logs.response_bytes / window_s,
        "threads_seen": logs.threads,
        "threads_by_file": ";".join(f"{f}:{n}" for f, n in sorted(logs.threads_by_file.items())),
        "all_mean_us": ((logs.response.total + logs.failed_response.total) / starts if starts else None),
        "outside_clock_us": outside_clock_us(run, m["payload_bytes"]),
        "think_us": 1000.0 * think_ms if isinstance(think_ms, (int, float)) and not isinstance(think_ms, bool) else 0.0,
        "log_files": logs.files, "malformed_lines": logs.malformed_lines,
        "malformed_by_file": ";".join(f"{f}:{n}" for f, n in sorted(logs.malformed_by_file.items())),
        "warmup_rows": logs.warmup_rows, "late_rows": logs.late_rows,
        "network_faults": network_faults(step),
    }
    row["behind_schedule"] = behind_schedule(row)
    row["little_users"] = None if little(row)[0] is None else little(row)[0] * row["users"]
    row["little_ratio"] = little(row)[0]
    for role in roles:
        h = hosts.get(role) or HostStats(role)
        row.update({f"{role}_cpu_mean": h.cpu_mean, f"{role}_cpu_max": h.cpu_max,
                    f"{role}_proc_cpu_mean": h.proc_cpu_mean, f"{role}_proc_cpu_max": h.proc_cpu_max,
                    f"{role}_rx_mbit": h.rx_mbit, f"{role}_tx_mbit": h.tx_mbit, f"{role}_interface": h.interface,
                    f"{role}_link_percent": h.link_percent, f"{role}_gap_s": h.gap_ms / 1000.0})
    for role in GC_ROLES:
        row.update(gc_columns(role, (gcs or {}).get(role)))
    # The console's own count of the measurement: a check that every worker's data log is here.
    console = m.get("console") if isinstance(m.get("console"), dict) else {}
    totals = dict(zip(console.get("columns") or [], console.get("totals") or []))
    row["console_tests"], row["console_errors"] = totals.get("Tests"), totals.get("Errors")
    row["monitor_missing"] = ";".join(r for r in roles if r not in hosts)
    row["monitor_malformed_lines"] = sum(h.malformed_lines for h in hosts.values())
    verdicts = bottlenecks(hosts)
    row["bottleneck"] = bool(verdicts)
    row["bottlenecks"] = ";".join(verdicts)
    row["step_dir"] = str(step.dir.relative_to(run.dir))
    return row


def analyse_step(run: Run, step: Step, roles: Iterable[str] | None = None) -> tuple[dict, StepHistograms]:
    roles = list(roles or run.roles)
    logs = log_stats(data_logs(step.dir), step.meta["warmup_end_ms"], step.meta["end_ms"])
    hosts = {role: host_stats(monitor_file(step.dir, role), role, step.link_mbit(role),
                              step.meta["warmup_end_ms"], step.interface(role))
             for role in roles if monitor_file(step.dir, role).exists()}
    gcs = {role: gc_stats(gc_file(step.dir, role), role, step.meta["warmup_end_ms"], step.meta["end_ms"])
           for role in GC_ROLES if gc_file(step.dir, role).exists()}
    return step_row(run, step, logs, hosts, roles, gcs), StepHistograms.of(logs)


# --- many steps ---------------------------------------------------------------------------------

def summary_frame(rows: list[dict]) -> pl.DataFrame:
    """summary.csv's rows as a frame with stable types, sorted for reading."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.sort("run", "scenario", "target", "payload_bytes", "users", "rate", "iteration", nulls_last=False)


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


def _numbers(values: Iterable[Any]) -> list[float]:
    return [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def mean_ci(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and half-width of its 95 % confidence interval (None with fewer than 2 values)."""
    xs = _numbers(values)
    if not xs:
        return None, None
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, None
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return mean, t_quantile(0.975, len(xs) - 1) * sd / math.sqrt(len(xs))


def replicated(roles: Iterable[str] = ROLES) -> list[str]:
    """Figures of a step's iterations as replicates: their mean and 95 % CI (`<figure>_ci95`)."""
    return (["tps", "start_rate", "transactions", "errors", "request_bytes_per_s", "response_bytes_per_s",
             "threads_seen", "little_ratio"]
            + [f"{r}_{m}" for r in roles for m in ("cpu_mean", "cpu_max", "proc_cpu_mean", "proc_cpu_max",
                                                   "rx_mbit", "tx_mbit", "link_percent")]
            + [f"{r}_{m}" for r in GC_ROLES for m in GC_FIGURES])


# Figures of the pooled data of all iterations (`<figure>`), each with the spread of its
# per-iteration values (`<figure>_iter_min`, `<figure>_iter_max`), labelled as such.
POOLED = (["error_percent", "late_start_percent", "max_lag_ms"]
          + [f"rt_{k}_ms" for k in ("mean", "std", "min", "max", *PERCENTILES)]
          + ["failed_rt_mean_ms", "failed_rt_p99_ms"]
          + [f"lat_{k}_ms" for k in ("mean", "max", *LATENCY_PERCENTILES)])


def _pooled_counts(group: pl.DataFrame) -> dict[str, Any]:
    starts, errors = group["starts"].sum(), group["errors"].sum()
    late = _numbers(group["late_starts"].to_list())
    lags = _numbers(group["max_lag_ms"].to_list())
    return {"error_percent": 100.0 * errors / starts if starts else None,
            "late_start_percent": 100.0 * sum(late) / starts if late and starts else None,
            "max_lag_ms": max(lags) if lags else None}


def aggregate(summary: pl.DataFrame, histograms: dict[tuple, StepHistograms],
              roles: Iterable[str] = ROLES) -> tuple[pl.DataFrame, dict[tuple, StepHistograms]]:
    """One row per run and step, iterations pooled; `histograms` holds each summary row's
    distributions by (run, step_dir). Returns the rows and the pooled distributions by KEYS."""
    rows, pooled = [], {}
    for keys, group in summary.group_by(KEYS, maintain_order=True):
        row = dict(zip(KEYS, keys))
        row["iterations"] = group.height
        sources = sorted(set(group["rt_source"]) - {""})
        row["rt_source"] = "+".join(sources)
        for name in replicated(roles):
            row[name], row[f"{name}_ci95"] = mean_ci(group[name].to_list())
        parts = [histograms[(r["run"], r["step_dir"])] for r in group.select("run", "step_dir").iter_rows(named=True)]
        pooled[tuple(keys)] = StepHistograms.pooled(parts)
        figures = {**distribution_figures(pooled[tuple(keys)]), **_pooled_counts(group)}
        for name in POOLED:
            per_iteration = _numbers(group[name].to_list())
            row[name] = figures[name]
            row[f"{name}_iter_min"] = min(per_iteration) if per_iteration else None
            row[f"{name}_iter_max"] = max(per_iteration) if per_iteration else None
        row["malformed_lines"] = group["malformed_lines"].sum()
        row["has_errors"] = bool(group["errors"].sum())
        row["behind_schedule"] = bool(group["behind_schedule"].any())
        row["bottleneck"] = bool(group["bottleneck"].any())
        row["bottlenecks"] = ";".join(sorted({b for s in group["bottlenecks"] for b in s.split(";") if b}))
        rows.append(row)
    if not rows:
        raise EsbperfError("no step to aggregate")
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.sort("run", "scenario", "target", "payload_bytes", "users", "rate", nulls_last=False), pooled
