"""A step's checks of its own measurement, each a column of summary.csv that a validity warning may
read (analysis/validity.py): the open model's schedule kept (`behind_schedule`), Little's law in a
closed step (`little`, `little_disagrees`), the data logs against the console's count
(`console_check`), the hosts' clocks since the run's check (`clock_skew_change`), and the wrk
cross-check (`xcheck_columns`: wrk's figures beside esbperf's, and a bracket's drift against the
noise and the machine's wander, `bracket_noise`)."""
from __future__ import annotations

import math
import statistics
from typing import Any

from esbperf.analysis.runs import Run, Step

# The open model: a pool keeps its schedule unless the requests it started by the window's end
# fall short of those due in the window by more than SCHEDULE_SHORTFALL, or its start lag grows
# over the window (mean lag of the last fifth minus that of the first fifth) by more than
# LAG_GROWTH_SHARE of the window: a backlog growing at that share of the rate.
SCHEDULE_SHORTFALL = 0.05
LAG_GROWTH_SHARE = 0.02
# Little's law in a closed-model step: users = (starts / window) x (mean time per transaction
# + time outside the clock + think time), within this share.
LITTLE_TOLERANCE = 0.10
# Data logs against the console's count: the count must lie in the range the logs allow
# (datalog.console_band), give or take this share of it (at least CONSOLE_MIN_SLACK rows).
CONSOLE_TOLERANCE = 0.10
CONSOLE_MIN_SLACK = 10
# A host's clock may move this far between the run's check and a step's monitor pull: the run
# refuses a clock off by more (`esbperf run --max-skew-ms`, 100 ms by default).
CLOCK_SKEW_CHANGE_MS = 100


# --- the load the step had: Little's law, the open model's schedule ---------------------------------

def little(row: dict) -> tuple[float | None, float | None]:
    """Little's law: the users the step's completions and times account for, as a share of
    `users` (low and high estimate: whole-ms `Test time` is truncated, up to 1 ms short per
    transaction; µs times are not). Undefined in a step of several tests: tests may nest (a page
    test wrapping request tests times the same seconds twice), and the logs do not say whether
    they do."""
    if row["step_tests"] > 1 or not row["starts"] or row["all_mean_us"] is None:
        return None, None
    rate = row["starts"] / row["window_s"]
    extra = (row["outside_clock_us"] or 0.0) + row["think_us"]
    low = rate * (row["all_mean_us"] + extra) / 1e6 / row["users"]
    high = low + (rate * 1000 / 1e6 / row["users"] if row["rt_source"] == "ms" else 0.0)
    return low, high


def little_disagrees(row: dict) -> bool:
    """A closed-model step whose users Little's law does not account for: fewer (idle threads), or
    more than its transactions' own times allow (more threads than users). Not more by the client's
    time outside the clock alone: that is the client's calibration, measured apart, and on a fast
    target (tens of µs a transaction) its error alone makes a user count 1.2 or 1.4."""
    if row["model"] != "closed":
        return False
    low, high = little(row)
    if low is None:
        return False
    own = row["starts"] / row["window_s"] * (row["all_mean_us"] + row["think_us"]) / 1e6 / row["users"]
    return high < 1 - LITTLE_TOLERANCE or own > 1 + LITTLE_TOLERANCE


def behind_schedule(row: dict) -> bool:
    """An open-model step whose pool could not keep the schedule (see SCHEDULE_SHORTFALL): the
    requests it started by the window's end against those due in it, which Poisson arrivals make
    a number of chance, not the offered rate times the window. Tickets belong to a script's runs,
    not to a test: in a step of several tests the requests due are not known (`due_requests`
    empty), and only the lag's growth is judged."""
    if row["model"] != "open":
        return False
    due, on_time = row["due_requests"], row["starts"] - (row["started_after_end"] or 0)
    short = bool(due) and on_time < (1 - SCHEDULE_SHORTFALL) * due
    growing = row["lag_growth_ms"] is not None and row["lag_growth_ms"] / 1000 > LAG_GROWTH_SHARE * row["window_s"]
    return short or growing


# --- the console's count and the hosts' clocks ------------------------------------------------------

def console_check(row: dict) -> str:
    """The data logs against the console's count (`console_tests` + `console_errors`): "agrees",
    "disagrees" (outside the range the logs allow, `console_min`–`console_max`, by more than
    CONSOLE_TOLERANCE of the count), "not checked" (a window too short to judge: fewer rows ended
    surely inside it than within a report interval of its edges, where a missing log would hide),
    or "" (no console count)."""
    if row["console_tests"] is None or row["console_min"] is None:
        return ""
    low, high = row["console_min"], row["console_max"]
    if high - low > low:
        return "not checked"
    console = row["console_tests"] + (row["console_errors"] or 0)
    slack = max(CONSOLE_MIN_SLACK, CONSOLE_TOLERANCE * console)
    return "disagrees" if console < low - slack or console > high + slack else "agrees"


def clock_skew_change(run: Run, step: Step) -> tuple[str, float | None]:
    """The host whose clock moved most between the run's check (run.json `clock_skew`, and each
    resume's `clock_skew_resumed`: the nearest of them) and the step's monitor pull (step.json
    `monitors.<role>.clock_skew_ms`), and by how much (ms, signed); ("", None) when no host's
    clock was read both times."""
    checks = [run.info.get("clock_skew"), *(run.info.get("clock_skew_resumed") or [])]
    found: tuple[str, float | None] = ("", None)
    monitors = step.meta.get("monitors")
    for role, pulled in (monitors.items() if isinstance(monitors, dict) else ()):
        skew = pulled.get("clock_skew_ms") if isinstance(pulled, dict) else None
        before = [h.get("skew_ms") for c in checks if isinstance(c, dict) and isinstance(c.get("hosts"), dict)
                  for h in [c["hosts"].get(role)] if isinstance(h, dict)]
        before = [b for b in before if isinstance(b, (int, float))]
        if isinstance(skew, (int, float)) and before:
            change = min((skew - b for b in before), key=abs)
            if found[1] is None or abs(change) > abs(found[1]):
                found = (role, float(change))
    return found


def console_counts(console: dict, test: int | None, several: bool) -> tuple[Any, Any, str]:
    """(Tests, Errors, description) of `test` in the console's statistics (step.json `console`:
    its per-test rows, else its totals when the step has one test only)."""
    columns = console.get("columns") or []
    for entry in console.get("tests") or []:
        if isinstance(entry, dict) and entry.get("test") == test and test is not None:
            values = dict(zip(columns, entry.get("statistics") or []))
            return values.get("Tests"), values.get("Errors"), str(entry.get("description") or "")
    if several:
        return None, None, ""
    totals = dict(zip(columns, console.get("totals") or []))
    return totals.get("Tests"), totals.get("Errors"), ""


# --- the wrk cross-check ----------------------------------------------------------------------------

# The wrk cross-check of a closed-model step (step.json `xcheck`): esbperf's TPS must reach this
# share of wrk's, and its mean response time be within the larger of this share of wrk's mean
# and this floor (wrk reports whole µs; sub-0.1 ms means differ by the clients' own costs).
XCHECK_MIN_TPS_RATIO = 0.9
XCHECK_MEAN_SHARE = 0.10
XCHECK_MEAN_FLOOR_MS = 0.03
XCHECK_COLUMNS = ("xcheck_tps", "xcheck_mean_ms", "xcheck_p50_ms", "xcheck_p99_ms", "xcheck_tps_ratio",
                  "xcheck_mean_diff_ms", "xcheck_drift", "xcheck_noise")
# A bracket's two wrk runs (before and after the step, each as long as its window) differ by chance
# for two reasons: each window's own sampling noise (the relative standard error of a window's mean
# TPS, from the step's own per-interval TPS) and the machine's wander between windows seconds apart
# (its speed moves though the target's does not), added as variances. The wander is the run's own,
# measured before its first step (run.json `machine_wander`, esbperf/run/wander.py); XCHECK_WANDER stands
# in for a run measured before esbperf measured it: the relative SD of one window's mean on flat targets
# (the reference engine, the direct lean echoes) over Round 2's 30 brackets of 4-s windows, 2026-11-29.
XCHECK_WANDER = 0.025


def bracket_noise(interval_tps: list[float], wander: float | None = None) -> float | None:
    """How far two windows as long as the step's, seconds apart, may differ in TPS by chance on a
    flat target (a share of their mean, 95 %): 1.96 × √2 × √(SE² + W²), SE the relative standard
    error of a window's mean from the step's own per-interval TPS, W the machine's `wander` (the
    run's, else XCHECK_WANDER); None with fewer than 3 intervals."""
    if len(interval_tps) < 3 or not sum(interval_tps):
        return None
    relative_se = statistics.stdev(interval_tps) / statistics.fmean(interval_tps) / math.sqrt(len(interval_tps))
    return 1.96 * math.sqrt(2) * math.hypot(relative_se, XCHECK_WANDER if wander is None else wander)


def run_wander(info: dict) -> float | None:
    """The machine's wander a run measured before its first step (run.json `machine_wander`), or None."""
    found = info.get("machine_wander")
    value = found.get("wander") if isinstance(found, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def xcheck_fails(tps_ratio: float | None, mean_diff_ms: float | None, wrk_mean_ms: float | None,
                 chance: float = 0.0) -> bool | None:
    """Whether esbperf's figures disagree with wrk's (XCHECK_* above) by more than `chance` too (a share:
    how far the machine's wander alone may set a window apart from wrk's, xcheck_chance); None when
    neither can be told."""
    if tps_ratio is None and mean_diff_ms is None:
        return None
    slow = tps_ratio is not None and tps_ratio < min(XCHECK_MIN_TPS_RATIO, 1 - chance)
    allowed = max(max(XCHECK_MEAN_SHARE, chance) * (wrk_mean_ms or 0.0), XCHECK_MEAN_FLOOR_MS)
    return slow or (mean_diff_ms is not None and abs(mean_diff_ms) > allowed)


def xcheck_chance(wander: float | None, bracketed: bool) -> float:
    """How far the step's window may lie from wrk's figure by the machine's wander alone (95 %, a
    share): wrk's figure is the mean of its two windows when bracketed (variance W² + W²/2), else
    one window (2 W²). Nothing without a measured wander: the fixed shares then hold."""
    if not wander:
        return 0.0
    return 1.96 * math.sqrt(1.5 if bracketed else 2.0) * wander


def xcheck_columns(step: Step, tps: float, rt_mean_ms: float | None,
                   interval_tps: list[float] | None = None, wander: float | None = None) -> dict[str, Any]:
    """The wrk cross-check's columns of a step: wrk's figures, esbperf's against them, the verdict,
    or the reason it was skipped; empty when the run was not asked for one. A cross-check whose
    wrk run had errors (non-2xx answers, which wrk counts as requests, and socket errors) is void:
    its errors are said (`xcheck_errors`), its figures left empty, and it has no verdict.

    A bracketed cross-check (wrk before and after the step, esbperf/run/crosscheck.py) is judged
    against the mean of the two; where they differ by more than chance allows (`bracket_noise`:
    the step's own per-interval noise and the machine's wander) the target moved across the step (`target_drift`),
    and the step's client is blamed only if it read below XCHECK_MIN_TPS_RATIO of the slower run."""
    row: dict[str, Any] = {**dict.fromkeys(XCHECK_COLUMNS), "xcheck_errors": None, "xcheck_skipped": "",
                           "xcheck_failed": None, "target_drift": None}
    x = step.xcheck
    if x is None:
        return row
    if "skipped" in x:
        row["xcheck_skipped"] = x["skipped"]
        return row
    row["xcheck_errors"] = int(x.get("errors") or 0)
    if row["xcheck_errors"]:
        return row
    row.update({f"xcheck_{name}": None if x.get(name) is None else float(x[name])
                for name in ("tps", "mean_ms", "p50_ms", "p99_ms")})
    row["xcheck_tps_ratio"] = tps / row["xcheck_tps"] if row["xcheck_tps"] else None
    row["xcheck_mean_diff_ms"] = None if rt_mean_ms is None else rt_mean_ms - row["xcheck_mean_ms"]
    row["xcheck_failed"] = xcheck_fails(row["xcheck_tps_ratio"], row["xcheck_mean_diff_ms"], row["xcheck_mean_ms"],
                                        xcheck_chance(wander, bool(x.get("bracketed"))))
    before, after = x.get("before"), x.get("after")
    if x.get("bracketed") and isinstance(before, dict) and isinstance(after, dict) and row["xcheck_tps"]:
        row["xcheck_drift"] = (float(after["tps"]) - float(before["tps"])) / row["xcheck_tps"]
        row["xcheck_noise"] = bracket_noise(interval_tps or [], wander)
        if row["xcheck_noise"] is not None:
            row["target_drift"] = abs(row["xcheck_drift"]) > row["xcheck_noise"]
            if row["target_drift"]:   # the target moved: the client fails only below the slower of the two
                slower = min(float(before["tps"]), float(after["tps"]))
                row["xcheck_failed"] = bool(slower) and tps / slower < min(XCHECK_MIN_TPS_RATIO,
                                                                           1 - xcheck_chance(wander, False))
    return row
