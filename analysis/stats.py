"""Statistics, each figure defined once: histograms -> mean, deviation, percentiles; a step ->
summary.csv rows, one per Grinder test (its checks of itself are analysis/checks.py's: the open
model's schedule, Little's law, the console's count, the clocks, the wrk cross-check); iterations ->
pooled distributions and means with 95 % confidence intervals over the forks (analysis/forks.py)."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

import polars as pl

from esbperf.analysis import bottleneck
from esbperf.analysis.bottleneck import THRESHOLD_PERCENT  # noqa: F401  (re-exported for graphs and tables)
from esbperf.analysis.checks import (XCHECK_COLUMNS, behind_schedule, clock_skew_change, console_check, console_counts,
                                     little, run_wander, xcheck_columns)
# The checks' thresholds as analysis/validity.py reads them from here.
from esbperf.analysis.checks import (CLOCK_SKEW_CHANGE_MS, CONSOLE_TOLERANCE, LAG_GROWTH_SHARE,  # noqa: F401
                                     LITTLE_TOLERANCE, SCHEDULE_SHORTFALL, XCHECK_MEAN_FLOOR_MS, XCHECK_MEAN_SHARE,
                                     XCHECK_MIN_TPS_RATIO, little_disagrees)
from esbperf.analysis.gc import GC_FIGURES, GC_ROLES, GcStats, gc_stats
from esbperf.analysis.monitor import HostStats, host_stats
from esbperf.analysis import forks, stalls
from esbperf.analysis.runs import BASELINE_TARGET, Run, Step
from esbperf.core.errors import EsbperfError
from esbperf.core import busy, steady
from esbperf.core.plan import parse_size
from esbperf.core.roles import BACKENDS, CLIENT, ESB as ESB_ROLE, FIXED as FIXED_ROLES, is_load
from esbperf.core.scenarios import contract
from esbperf.results.datalog import (START_RESOLUTION_MS, LogStats, RowStats, log_stats, step_process_rate,
                                     step_report_interval_ms)
from esbperf.results.histogram import Histogram, nearest_rank
from esbperf.results.layout import data_logs, gc_file, monitor_file

ROLES = FIXED_ROLES   # client, esb, ws1, ws2, ws3; a report adds the load hosts its runs have
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
LATENCY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99_9": 99.9}
# What identifies a step's test across iterations (summary.csv adds `iteration`).
KEYS = ["run", "scenario", "target", "payload_bytes", "payload_label", "users", "model", "rate", "test"]
# Below this many iterations a t interval is mostly the t quantile (12.7 with one degree of
# freedom): tables and graphs show the range of the iterations (min–max) instead.
MIN_ITERATIONS_FOR_CI = 3
# Steps analysed at once (analyse_steps); each parses its data logs on every core.
STEPS_AT_ONCE = 2


# --- one step ---------------------------------------------------------------------------------

def describe(histogram: Histogram | None, percentiles: dict[str, float] = PERCENTILES) -> dict[str, float | None]:
    """Mean, sample standard deviation, min, max and percentiles of a µs histogram, in ms. A
    percentile from fewer values than esbperf/core/steady.py's min_transactions is not measured:
    None."""
    h = histogram or Histogram()
    ms = (lambda v: None if v is None else v / 1000.0)
    return {"mean": ms(h.mean), "std": ms(h.std), "min": ms(h.min), "max": ms(h.max),
            **{k: ms(h.percentile(p)) if steady.percentile_measured(p, h.n) else None
               for k, p in percentiles.items()}}


@dataclass
class StepHistograms:
    """The distributions behind a step's figures (µs), kept for pooling and export."""

    response: Histogram = field(default_factory=Histogram)        # successful: service time
    failed: Histogram = field(default_factory=Histogram)          # failed transactions
    latency: Histogram | None = None                              # open model: corrected latency
    # One iteration's interval_series (s from the window's start, TPS, mean ms), for its graph.
    series: tuple[list[float], list[float], list[float | None]] | None = None

    @classmethod
    def of(cls, logs: RowStats, series: tuple | None = None) -> "StepHistograms":
        return cls(logs.response, logs.failed_response, logs.latency, series)

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


NEIGHBOURS_BUSY_PERCENT = busy.NEIGHBOURS_BUSY_PERCENT   # the window's mean, % of one core


def engine_columns(run: Run, target: str, esb: HostStats | None) -> dict:
    """The esb host's engines apart (run.json `engine_matches`: each engine's --match text): the
    target's own processes (`esb_proc_cpu_*`; none for the baseline), its JIT compiler's
    (`esb_jit_mean`, % of one core: a JVM still compiling in the window) and its neighbours', the
    engines not under test (`esb_neighbours_cpu_*`: their window means added up, and their sum per
    reading at most). Without the matches (an older run) every watched process counts as the
    target's, as it did."""
    matches = run.info.get("engine_matches")
    if esb is None or not isinstance(matches, dict) or not matches:
        return {"esb_neighbours_cpu_mean": None, "esb_neighbours_cpu_max": None, "esb_jit_mean": None}
    own = bottleneck.engine_watch(run, target)
    mine = [v for _, v in esb.proc_by_watch.get(own, [])] if own else []
    others: dict[int, float] = {}
    for watch, readings in esb.proc_by_watch.items():
        if watch != own:
            for t, v in readings:
                others[t] = others.get(t, 0.0) + v
    neighbours = [m for watch, m in esb.proc_mean_by_watch.items() if watch != own]
    return {"esb_proc_cpu_mean": esb.proc_mean_by_watch.get(own) if own else None,
            "esb_proc_cpu_max": max(mine, default=None),
            # the target's JIT compiler over the window (a JVM's; none for a native engine or an older run)
            "esb_jit_mean": esb.jit_mean_by_watch.get(own) if own else None,
            "esb_neighbours_cpu_mean": sum(neighbours) if neighbours else None,
            "esb_neighbours_cpu_max": max(others.values(), default=None)}


def client_bound(run: Run, step: Step, hosts: dict[str, HostStats]) -> list[str]:
    """`client:workers 93%` for each load host (client, load2, ...) whose worker JVMs, or whose cores
    where they are its own, were busier than bottleneck.CLIENT_BOUND_PERCENT in the window
    (bottleneck.client_bound): the client set the step's figures, a bound of the testbed."""
    found = []
    for role, h in hosts.items():
        if role != CLIENT and not is_load(role):
            continue
        cpus = step.host(role).get("cpus") or (run.info.get("hosts") or {}).get(role, {}).get("cpus")
        cores = len(cpus) if cpus else (run.info.get("environment") or {}).get("cores")
        shared = any(run.share_cores(role, other) for other in run.hosts()
                     if other != CLIENT and not is_load(other))
        for v in bottleneck.client_bound(role, h.cpu_samples, h.proc_samples, cores, shared):
            found.append(f"{role}:{v['resource']} {max(v['mean_percent'], v['sustained_percent']):.0f}%")
    return found


def bottlenecks(hosts: dict[str, HostStats]) -> list[str]:
    """Every host resource the rule of esbperf/analysis/bottleneck.py found saturated, as
    'role:resource' (what the step's bound is decided from)."""
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


def scenario_test(scenario: str) -> tuple[int, str] | None:
    """The Grinder test number and description of an esbperf scenario (grinder-scripts/contract.py:
    one test per scenario); None for a user's script."""
    for name, number, description in contract().SCENARIOS:
        if name == scenario:
            return number, description
    return None


def step_rows(run: Run, step: Step, logs: LogStats, hosts: dict[str, HostStats],
              roles: Iterable[str] = ROLES, gcs: dict[str, GcStats] | None = None) -> list[dict]:
    """summary.csv's rows of a step: one per Grinder test of its data logs, never two tests added
    together; the step's own figures (window, threads, hosts, GC) repeated in each (see
    docs/analysis.md for every column). A step whose logs hold no row at all gets one row, of its
    scenario's test when it is esbperf's."""
    own = scenario_test(step.meta["scenario"])
    tests: dict[int | None, RowStats] = dict(logs.tests) or {own[0] if own else None: logs}
    shared = _step_columns(run, step, logs, hosts, roles, gcs)
    console = step.meta.get("console") if isinstance(step.meta.get("console"), dict) else {}
    rows = []
    for number, part in tests.items():
        console_tests, console_errors, description = console_counts(console, number, len(tests) > 1)
        if not description and own and own[0] == number:
            description = own[1]
        row = {**shared["head"], "test": number, "test_name": description, "step_tests": len(tests),
               **_test_columns(run, step, part, shared["head"]["window_s"])}
        row.update(shared["tail"])
        row["console_tests"], row["console_errors"] = console_tests, console_errors
        row["console_check"] = console_check(row)
        row["behind_schedule"] = behind_schedule(row)
        low = little(row)[0]
        row["little_users"] = None if low is None else low * row["users"]
        row["little_ratio"] = low
        seconds, interval_tps, _ = interval_series(part, logs.interval_ms, row["window_s"]) if logs.interval_ms \
            else ([], [], [])
        row.update(xcheck_columns(step, row["tps"], row["rt_mean_ms"],
                                  [t for when, t in zip(seconds, interval_tps) if when >= 0], run_wander(run.info)))
        row.update(stall_columns(part.response, target_cpu_percent(row, roles)))
        row.update(steady_columns(run, step, part, logs, row["window_s"]))
        row.update(shared["end"])
        rows.append(row)
    return rows


def target_cpu_percent(row: dict, roles: Iterable[str]) -> float | None:
    """The CPU of the step's target's process (% of one core): the ESB's JVM; for the baseline, the
    busiest echo's. None when no monitor watched it."""
    watched = ["esb"] if row["target"] != BASELINE_TARGET else [r for r in roles if r in BACKENDS]
    values = _numbers([row.get(f"{r}_proc_cpu_mean") for r in watched])
    return max(values) if values else None


def stall_columns(response: Histogram, cpu_percent: float | None) -> dict:
    """`stall_share`: the share of successful transactions piled up at a delayed-ACK timer;
    `delayed_ack_stall`: whether that is the step's signature (analysis/stalls.py)."""
    return {"stall_share": stalls.share_in_bands(response)[0], "delayed_ack_stall": stalls.stalls(response, cpu_percent)}


def warmup_used_s(step: Step) -> float | None:
    """The warm-up the step had, s: step.json `warmup_used_s` (the runner's, `warmup_s: auto`
    included), else from the workers' first report to the window's start; None without either."""
    m = step.meta
    used = m.get("warmup_used_s")
    if isinstance(used, (int, float)) and not isinstance(used, bool):
        return float(used)
    if isinstance(m.get("first_report_ms"), int):
        return (m["warmup_end_ms"] - m["first_report_ms"]) / 1000.0
    return None


def interval_series(part: RowStats, interval_ms: int, window_s: float) -> tuple[list[float], list[float], list[float | None]]:
    """A test's successful transactions interval by interval (datalog's RowStats.interval_*): each
    interval's start, s from the window's start (negative: the warm-up), its TPS and its mean
    response time, ms (None without a transaction). Whole intervals of the window only: a last
    part shorter than an interval would read low."""
    if part.interval_n is None or not interval_ms:
        return [], [], []
    end = int(window_s * 1000) // interval_ms - part.interval_first
    n, us = part.interval_n[:end], part.interval_us[:end]
    seconds = [(part.interval_first + i) * interval_ms / 1000.0 for i in range(len(n))]
    return (seconds, [k * 1000.0 / interval_ms for k in n],
            [t / k / 1000.0 if k else None for k, t in zip(n, us)])


def window_drift(part: RowStats, interval_ms: int, window_s: float) -> steady.Drift:
    """Whether the window's throughput or mean response time moved beyond the noise
    (esbperf/core/steady.py's drift test on interval_series, the window's intervals only)."""
    seconds, tps, mean = interval_series(part, interval_ms, window_s)
    measured = [i for i, t in enumerate(seconds) if t >= 0]
    return steady.drift([tps[i] for i in measured], [mean[i] for i in measured], interval_ms / 1000.0)


def poisson_step(run: Run, step: Step) -> bool:
    """An open-model step of a plan with `arrivals: poisson`."""
    return step.model == "open" and run.plan.get("arrivals") == "poisson"


def steady_columns(run: Run, step: Step, part: RowStats, logs: LogStats, window_s: float) -> dict:
    """What the step says of itself as a measurement (esbperf/core/steady.py): the warm-up it had,
    whether its window drifted (`drift`: None when not judged) and what moved, and in a Poisson
    step whether its realised starts were a Poisson process (from every worker's start times,
    whole ms; None in other steps, or when not judged) and the test's figures."""
    found = window_drift(part, logs.interval_ms, window_s)
    gaps = steady.exponential_gaps(logs.start_runs, START_RESOLUTION_MS) if poisson_step(run, step) else None
    warmup = step.meta.get("warmup") if isinstance(step.meta.get("warmup"), dict) else {}
    return {"warmup_used_s": warmup_used_s(step),
            # `warmup_s: auto`: whether the step became steady before warmup_max_s (None: a fixed warm-up).
            "warmup_steady": warmup.get("steady"), "warmup_unsteady": warmup.get("reason") or "",
            "drift": found.drifted, "drift_moves": found.describe(),
            "poisson_arrivals": None if gaps is None else gaps.exponential,
            "arrivals_test": "" if gaps is None else gaps.describe()}


def with_verdicts(summary: pl.DataFrame, named: dict[tuple[str, str], list[str]]) -> pl.DataFrame:
    """summary.csv with `valid`: `yes`, or the names of the validity warnings that name the row's
    step (`named`, by run and step folder: analysis/validity.py's step_verdicts), `;`-separated."""
    return summary.with_columns(valid=pl.Series(
        [";".join(named.get((run, folder), ())) or "yes" for run, folder in zip(summary["run"], summary["step_dir"])],
        dtype=pl.String))


def aggregate_verdicts(agg: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """aggregate.csv with `valid`: `yes` when every iteration's is, else the warnings' names of any."""
    verdicts = {tuple(keys): ";".join(sorted({name for v in group["valid"] for name in v.split(";") if v != "yes"}))
                or "yes" for keys, group in summary.group_by(KEYS, maintain_order=True)}
    return agg.with_columns(valid=pl.Series([verdicts.get(tuple(r[k] for k in KEYS), "yes")
                                             for r in agg.select(KEYS).iter_rows(named=True)], dtype=pl.String))


def _test_columns(run: Run, step: Step, part: RowStats, window_s: float) -> dict:
    """The columns of one test's rows (or, in a step of one test, of all of them)."""
    m = step.meta
    starts = part.starts
    think_ms = m.get("think_ms")
    return {
        "transactions": part.transactions, "errors": part.errors, "starts": starts,
        "error_percent": 100.0 * part.errors / starts if starts else None,
        "error_statuses": ";".join(f"{s}:{n}" for s, n in sorted(part.error_statuses.items())),
        "failed_no_answer": part.no_answer,
        "tps": part.transactions / window_s,
        "start_rate": starts / window_s,
        **distribution_figures(StepHistograms.of(part)),
        "due_requests": part.due, "never_started": part.never_started, "started_after_end": part.started_after_end,
        "late_starts": part.late_starts,
        "late_start_percent": late_start_percent(part.late_starts, part.never_started, part.due or starts),
        "max_lag_ms": None if part.max_lag_us is None else part.max_lag_us / 1000.0,
        "lag_growth_ms": (None if part.lag_first_us is None or part.lag_last_us is None
                          else (part.lag_last_us - part.lag_first_us) / 1000.0),
        "request_bytes_per_s": None if part.request_bytes is None else part.request_bytes / window_s,
        "response_bytes_per_s": None if part.response_bytes is None else part.response_bytes / window_s,
        "all_mean_us": ((part.response.total + part.failed_response.total) / starts if starts else None),
        "outside_clock_us": outside_clock_us(run, m["payload_bytes"]),
        "think_us": 1000.0 * think_ms if isinstance(think_ms, (int, float)) and not isinstance(think_ms, bool) else 0.0,
        "warmup_rows": part.warmup_rows, "late_rows": part.late_rows,
        "console_min": part.console_min, "console_max": part.console_max,
    }


def late_start_percent(late_starts: int | None, never_started: int | None, due: int) -> float | None:
    """The open model's share of the requests due that started late (by more than the workers'
    late-start threshold) or never."""
    return None if late_starts is None or not due else 100.0 * (late_starts + (never_started or 0)) / due


def _step_columns(run: Run, step: Step, logs: LogStats, hosts: dict[str, HostStats],
                  roles: Iterable[str], gcs: dict[str, GcStats] | None) -> dict[str, dict]:
    """The columns of the step as a whole, the same in each of its tests' rows: `head` (what the
    step is), `tail` (its threads, logs and hosts) and `end` (its verdicts and folder)."""
    m = step.meta
    window_s = (m["end_ms"] - m["warmup_end_ms"]) / 1000.0
    head = {
        "run": run.name, "plan": run.plan_name, "scenario": m["scenario"], "target": m["target"],
        "payload_bytes": m["payload_bytes"], "payload_label": step.payload_label, "users": m["users"],
        "model": step.model, "rate": step.rate,
        "processes": m.get("processes"), "threads": m.get("threads"), "fork": step.fork, "iteration": m["iteration"],
        "window_s": window_s, "rt_source": logs.rt_source,
    }
    skew_role, skew_change = clock_skew_change(run, step)
    tail = {
        "report_interval_ms": step_report_interval_ms(step.meta),
        "clock_skew_change_ms": skew_change, "clock_skew_change_role": skew_role,
        "threads_seen": logs.threads,
        "threads_by_file": ";".join(f"{f}:{n}" for f, n in sorted(logs.threads_by_file.items())),
        "log_files": logs.files, "malformed_lines": logs.malformed_lines,
        "malformed_by_file": ";".join(f"{f}:{n}" for f, n in sorted(logs.malformed_by_file.items())),
        "network_faults": network_faults(step),
    }
    for role in roles:
        h = hosts.get(role) or HostStats(role)
        tail.update({f"{role}_cpu_mean": h.cpu_mean, f"{role}_cpu_max": h.cpu_max,
                     f"{role}_proc_cpu_mean": h.proc_cpu_mean, f"{role}_proc_cpu_max": h.proc_cpu_max,
                     f"{role}_rx_mbit": h.rx_mbit, f"{role}_tx_mbit": h.tx_mbit, f"{role}_interface": h.interface,
                     f"{role}_link_percent": h.link_percent, f"{role}_gap_s": h.gap_ms / 1000.0})
    for role in GC_ROLES:
        tail.update(gc_columns(role, (gcs or {}).get(role)))
    if ESB_ROLE in roles:
        tail.update(engine_columns(run, m["target"], hosts.get(ESB_ROLE)))
    client = client_bound(run, step, hosts)
    bound = bottleneck.step_bound(run, step, hosts, client)
    end = {"monitor_missing": ";".join(r for r in roles if r not in hosts),
           "client_bound": bool(client), "client_bound_by": ";".join(client),
           "monitor_malformed_lines": sum(h.malformed_lines for h in hosts.values()),
           "bound": bound.kind, "bound_by": "; ".join(bound.by), "bottlenecks": ";".join(bottlenecks(hosts)),
           "step_dir": str(step.dir.relative_to(run.dir))}
    return {"head": head, "tail": tail, "end": end}


def analyse_step(run: Run, step: Step, roles: Iterable[str] | None = None) -> list[tuple[dict, StepHistograms]]:
    """Each summary.csv row of the step (one per test) with the distributions behind it."""
    roles = list(roles or run.roles)
    logs = log_stats(data_logs(step.dir), step.meta["warmup_end_ms"], step.meta["end_ms"],
                     step_process_rate(step.meta), step_report_interval_ms(step.meta))
    hosts = {role: host_stats(monitor_file(step.dir, role), role, step.link_mbit(role),
                              step.meta["warmup_end_ms"], step.interface(role), step.meta["end_ms"],
                              bottleneck.host_cores(run, step, role))
             for role in roles if monitor_file(step.dir, role).exists()}
    gcs = {role: gc_stats(gc_file(step.dir, role), role, step.meta["warmup_end_ms"], step.meta["end_ms"])
           for role in GC_ROLES if gc_file(step.dir, role).exists()}
    rows = step_rows(run, step, logs, hosts, roles, gcs)
    parts = logs.tests or {rows[0]["test"]: logs}
    return [(row, StepHistograms.of(parts[row["test"]], interval_series(parts[row["test"]], logs.interval_ms,
                                                                         row["window_s"])))
            for row in rows]


def analyse_steps(run: Run, roles: Iterable[str] | None = None) -> list[list[tuple[dict, StepHistograms]]]:
    """analyse_step of each of the run's steps, in order, STEPS_AT_ONCE at a time: while one step's
    data logs are parsed (polars and numpy leave Python's lock), another's monitor files and
    figures are computed."""
    with ThreadPoolExecutor(max_workers=STEPS_AT_ONCE) as pool:
        return list(pool.map(lambda step: analyse_step(run, step, roles), run.steps))


# --- many steps ---------------------------------------------------------------------------------

def summary_frame(rows: list[dict]) -> pl.DataFrame:
    """summary.csv's rows as a frame with stable types, sorted for reading."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.sort("run", "scenario", "target", "payload_bytes", "users", "rate", "fork", "iteration", "test",
                      nulls_last=False)


def _numbers(values: Iterable[Any]) -> list[float]:
    return [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def _range(values: Iterable[Any]) -> tuple[float | None, float | None]:
    """The smallest and largest of the values there are (None without any)."""
    xs = _numbers(values)
    return (min(xs), max(xs)) if xs else (None, None)


def mean_ci(values: Iterable[float | None], fork_of: Iterable[int] | None = None) -> tuple[float | None, float | None]:
    """Mean and half-width of its 95 % confidence interval (None with fewer than 2 values), the
    process as the unit (forks.interval): with the iterations' forks, the mean of the forks' means
    and Student's t with the forks' degrees of freedom; with one fork, the iterations'."""
    found = forks.interval(forks.Sample.of_values(values, fork_of))
    return found.value, found.half_width


# Figures taken from a step's iterations as a forks.Sample (one definition for the report's
# intervals, the verdicts, the gate and a round's page): a replicated figure's values (TPS), or the
# pooled response times' percentile (mean) of these columns.
SAMPLED_FROM_HISTOGRAMS = {**{f"rt_{k}_ms": p for k, p in PERCENTILES.items()}, "rt_mean_ms": None}
# The figures aggregate.csv gives their variance components and (the pooled ones) their interval.
COMPONENT_FIGURES = ("tps", "rt_p50_ms", "rt_p99_ms")


def figure_sample(rows: Iterable[dict], histograms: dict[tuple, "StepHistograms"], figure: str,
                  left_out: str = "") -> forks.Sample:
    """A step's `figure` as a forks.Sample: its iterations (summary.csv rows: `fork` (1 when absent),
    and `run`, `step_dir`, `test` to find each one's distributions in `histograms`)."""
    rows = list(rows)
    fork_of = [r.get("fork") or 1 for r in rows]
    if figure not in SAMPLED_FROM_HISTOGRAMS:
        return forks.Sample.of_values([r.get(figure) for r in rows], fork_of, left_out)
    parts = [histograms.get((r["run"], r["step_dir"], r["test"])) for r in rows]
    return forks.Sample.of_histograms([None if h is None else h.response for h in parts], fork_of,
                                      SAMPLED_FROM_HISTOGRAMS[figure], left_out, scale=0.001)   # µs to ms


def fork_columns(rows: list[dict], histograms: dict[tuple, "StepHistograms"]) -> dict[str, Any]:
    """aggregate.csv's columns of the process as the unit: `forks`, what the intervals count as
    units (`interval_over`: forks, or iterations with one fork, which leaves out the variance between
    processes), and per COMPONENT_FIGURES the variance between forks and within one
    (`<figure>_var_between`, `<figure>_var_within`: Kalibera & Jones' estimates) and, for the
    pooled percentiles, their 95 % interval (`<figure>_ci_low`, `<figure>_ci_high`)."""
    count = len({r.get("fork") or 1 for r in rows})
    out: dict[str, Any] = {"forks": count,
                           "interval_over": "forks" if count > 1 else "iterations" if len(rows) > 1 else ""}
    for figure in COMPONENT_FIGURES:
        sample = figure_sample(rows, histograms, figure)
        parts = forks.components(sample)
        out[f"{figure}_var_between"] = None if parts is None else parts.between
        out[f"{figure}_var_within"] = None if parts is None else parts.within
        if figure in SAMPLED_FROM_HISTOGRAMS:
            found = forks.interval(sample)
            out[f"{figure}_ci_low"], out[f"{figure}_ci_high"] = found.low, found.high
    return out


def replicated(roles: Iterable[str] = ROLES) -> list[str]:
    """Figures of a step's iterations as replicates: their mean, 95 % CI (`<figure>_ci95`) and
    range (`<figure>_iter_min`, `<figure>_iter_max`). The cross-check's ratio and difference are
    those of each iteration (esbperf and wrk ran back to back), averaged: a paired comparison."""
    return (["tps", "start_rate", "transactions", "errors", "never_started", "request_bytes_per_s",
             "response_bytes_per_s", "threads_seen", "little_ratio"]
            + [f"{r}_{m}" for r in roles for m in ("cpu_mean", "cpu_max", "proc_cpu_mean", "proc_cpu_max",
                                                   "rx_mbit", "tx_mbit", "link_percent")]
            + (["esb_neighbours_cpu_mean", "esb_neighbours_cpu_max", "esb_jit_mean"] if ESB_ROLE in roles else [])
            + [f"{r}_{m}" for r in GC_ROLES for m in GC_FIGURES]
            + list(XCHECK_COLUMNS))


# Figures of the pooled data of all iterations (`<figure>`), each with the spread of its
# per-iteration values (`<figure>_iter_min`, `<figure>_iter_max`), labelled as such.
POOLED = (["error_percent", "late_start_percent", "max_lag_ms"]
          + [f"rt_{k}_ms" for k in ("mean", "std", "min", "max", *PERCENTILES)]
          + ["failed_rt_mean_ms", "failed_rt_p99_ms"]
          + [f"lat_{k}_ms" for k in ("mean", "max", *LATENCY_PERCENTILES)])


def _pooled_counts(group: pl.DataFrame) -> dict[str, Any]:
    starts, errors = group["starts"].sum(), group["errors"].sum()
    late = _numbers(group["late_starts"].to_list())
    never = _numbers(group["never_started"].to_list())
    due = _numbers(group["due_requests"].to_list())
    lags = _numbers(group["max_lag_ms"].to_list())
    return {"error_percent": 100.0 * errors / starts if starts else None,
            "late_start_percent": late_start_percent(sum(late) if late else None, sum(never),
                                                     sum(due) if len(due) == group.height else starts),
            "max_lag_ms": max(lags) if lags else None}


def aggregate(summary: pl.DataFrame, histograms: dict[tuple, StepHistograms],
              roles: Iterable[str] = ROLES) -> tuple[pl.DataFrame, dict[tuple, StepHistograms]]:
    """One row per run, step and test, iterations pooled; `histograms` holds each summary row's
    distributions by (run, step_dir, test). Returns the rows and the pooled distributions by KEYS."""
    rows, pooled = [], {}
    for keys, group in summary.group_by(KEYS, maintain_order=True):
        row = dict(zip(KEYS, keys))
        row["test_name"] = next((n for n in group["test_name"] if n), "")
        row["step_tests"] = group["step_tests"].max()
        row["iterations"] = group.height
        sources = sorted(set(group["rt_source"]) - {""})
        row["rt_source"] = "+".join(sources)
        fork_of = group["fork"].to_list() if "fork" in group.columns else None
        for name in replicated(roles):
            values = group[name].to_list()
            row[name], row[f"{name}_ci95"] = mean_ci(values, fork_of)
            row[f"{name}_iter_min"], row[f"{name}_iter_max"] = _range(values)
        parts = [histograms[(r["run"], r["step_dir"], r["test"])]
                 for r in group.select("run", "step_dir", "test").iter_rows(named=True)]
        pooled[tuple(keys)] = StepHistograms.pooled(parts)
        row.update(fork_columns(group.to_dicts(), histograms))
        figures = {**distribution_figures(pooled[tuple(keys)]), **_pooled_counts(group)}
        for name in POOLED:
            row[name] = figures[name]
            row[f"{name}_iter_min"], row[f"{name}_iter_max"] = _range(group[name].to_list())
        row["malformed_lines"] = group["malformed_lines"].sum()
        row["has_errors"] = bool(group["errors"].sum())
        row["behind_schedule"] = bool(group["behind_schedule"].any())
        row["bound"], row["bound_iterations"] = bottleneck.pooled_bound(group["bound"].to_list())
        row["bound_by"] = " | ".join(dict.fromkeys(by for by in group["bound_by"] if by))   # each iteration's
        row["bottlenecks"] = ";".join(sorted({b for s in group["bottlenecks"] for b in s.split(";") if b}))
        row["xcheck_skipped"] = ";".join(sorted(set(group["xcheck_skipped"]) - {""}))
        verdicts = [v for v in group["xcheck_failed"].to_list() if v is not None]
        row["xcheck_failed"] = any(verdicts) if verdicts else None
        xcheck_errors = _numbers(group["xcheck_errors"].to_list())
        row["xcheck_errors"] = sum(xcheck_errors) if xcheck_errors else None
        row["stall_share"] = stalls.share_in_bands(pooled[tuple(keys)].response)[0]
        row["delayed_ack_stall"] = bool(group["delayed_ack_stall"].any())
        rows.append(row)
    if not rows:
        raise EsbperfError("no step to aggregate")
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.sort("run", "scenario", "target", "payload_bytes", "users", "rate", "test", nulls_last=False), pooled
