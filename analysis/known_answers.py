"""esbperf's judgments held against known answers (`esbperf selftest`): each judgment's error rate,
with its count and a 95 % interval, from runs whose truth is known — the reference engine's set
work per request and warm-up curve (esb-projects/reference), two runs of one target (A/A), a known
difference of work.

A rate is a number of wrong answers out of a number of judgments; its interval is Clopper and
Pearson's exact binomial interval (scipy), which assumes the judgments independent: the verdicts
of one comparison share its two runs, so each rate says how many comparisons its verdicts came
from, and the table counts those too. known-answers.csv holds a row per rate; its markdown table is
what docs/benchmarks/known-answers.md publishes."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import polars as pl
from scipy import stats as scipy_stats

from esbperf.analysis import verdicts as verdicts_module
from esbperf.core import steady

CONFIDENCE = 0.95
FIGURES = tuple(verdicts_module.FIGURES)          # tps, p50, p99
# How far the reference's speed may still move after a warm-up judged settled (its known curve).
STILL_MOVING = 0.05


@dataclass(frozen=True)
class Rate:
    """`hits` of `count` judgments of `check` did what the `judgment` says (an error, or, with
    `at_least`, a right answer); `goal` the highest (with `at_least`, the lowest) share that passes."""

    check: str
    judgment: str
    hits: int
    count: int
    goal: float | None = None
    at_least: bool = False      # the rate is of right answers: at least `goal`
    units: str = ""             # what the count counts, and what it came from
    note: str = ""

    @property
    def rate(self) -> float | None:
        return self.hits / self.count if self.count else None

    def interval(self) -> tuple[float | None, float | None]:
        if not self.count:
            return None, None
        found = scipy_stats.binomtest(self.hits, self.count).proportion_ci(CONFIDENCE, method="exact")
        return float(found.low), float(found.high)

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.rate is None:
            return None
        return self.rate >= self.goal if self.at_least else self.rate <= self.goal

    def row(self) -> dict:
        low, high = self.interval()
        return {"check": self.check, "judgment": self.judgment, "hits": self.hits, "count": self.count,
                "rate": _round(self.rate), "ci_low": _round(low), "ci_high": _round(high),
                "goal": "" if self.goal is None else f"{'≥' if self.at_least else '≤'} {self.goal:.0%}",
                "met": "" if self.met is None else "yes" if self.met else "no", "units": self.units,
                "note": self.note}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _percent(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f} %"


# --- A/A: two runs of one target ----------------------------------------------------------------

@dataclass
class Comparison:
    """One `esbperf compare` of two runs: its verdicts.csv and its gate's exit code."""

    name: str
    verdicts: pl.DataFrame
    second: str = ""                     # the side compared against the first: its run folder's name, or
                                         # its target's, for two targets of one run
    gate_exit: int | None = None
    truth: dict[tuple, dict[str, float]] = field(default_factory=dict)   # (payload_bytes, users) -> figure -> B÷A


def _judged(frame: pl.DataFrame, figure: str) -> pl.DataFrame:
    """The verdicts of one figure that judged something: with an interval, not `not judged` (a side the
    testbed bounded), and neither side named by a validity warning (its sentence says "not a valid
    measurement": the user is told not to take it). The others are no claim, right or wrong; they
    are counted apart (_not_judged)."""
    rows = frame.filter(pl.col("figure") == figure)
    rows = rows.filter(pl.col("ratio_low").is_not_null() & pl.col("ratio_high").is_not_null())
    if "short" in rows.columns:
        rows = rows.filter(~pl.col("short").fill_null("").str.starts_with("not judged"))
    for side in ("valid_a", "valid_b"):
        if side in rows.columns:
            rows = rows.filter(pl.col(side).is_null() | pl.col(side).cast(pl.String).is_in(["yes", ""]))
    return rows


def _not_judged(comparisons: list["Comparison"], figure: str | None = None) -> int:
    """How many verdicts (of `figure`, or of every figure) the comparisons gave that judged nothing."""
    figures = FIGURES if figure is None else (figure,)
    return sum(c.verdicts.filter(pl.col("figure") == f).height - _judged(c.verdicts, f).height
               for c in comparisons for f in figures)


def _apart(count: int) -> str:
    return f"; {count} more not judged (a side not valid, or bounded by the testbed)" if count else ""


def aa_rates(check: str, comparisons: list[Comparison], where: str = "comparison(s) of two runs") -> list[Rate]:
    """A/A: a difference called shown is wrong, whatever its direction (both sides are the same
    target); per figure and over all; and the gate at its limits failing, per comparison. `where`
    says what a comparison is (counted before it)."""
    out = []
    where = f"{len(comparisons)} {where}"
    every = []
    for figure in FIGURES:
        rows = [r for c in comparisons for r in _judged(c.verdicts, figure).iter_rows(named=True)]
        every += rows
        out.append(Rate(check, f"{figure}: a difference called shown", sum(bool(r["shown"]) for r in rows),
                        len(rows), 0.05, units=f"verdicts, from {where}{_apart(_not_judged(comparisons, figure))}"))
    out.append(Rate(check, "any figure: a difference called shown", sum(bool(r["shown"]) for r in every),
                    len(every), 0.05, units=f"verdicts, from {where}{_apart(_not_judged(comparisons))}"))
    gated = [c for c in comparisons if c.gate_exit is not None]
    if gated:
        out.append(Rate(check, "the gate at 5 % fails (exit 1)", sum(c.gate_exit == 1 for c in gated), len(gated), 0.05,
                        units="comparisons",
                        note=f"{sum(c.gate_exit == 3 for c in gated)} not judged (exit 3)"))
    return out


# --- a known difference ---------------------------------------------------------------------------

def _step_key(row: dict) -> tuple:
    return row["payload_bytes"], row["users"]


TRUTH_COLUMNS = {"tps": "tps", "p50": "p50_ms", "p99": "p99_ms"}   # a figure, and wrk's column for it


def pooled_truth(pairs: list[tuple[list[dict], list[dict]]]) -> dict[tuple, dict[str, float]]:
    """The truth of a known difference, B ÷ A per load (payload bytes, users) and figure: the mean
    of wrk's figures over every pair's runs on each side (each run's wrk windows after it)."""
    sides: dict[tuple, tuple[dict[str, list], dict[str, list]]] = {}
    for truth_a, truth_b in pairs:
        for side, found in ((0, truth_a), (1, truth_b)):
            for load in found:
                if "skipped" in load:
                    continue
                key = (load["payload_bytes"], load["users"])
                for figure, column in TRUTH_COLUMNS.items():
                    if load.get(column):
                        sides.setdefault(key, ({}, {}))[side].setdefault(figure, []).append(float(load[column]))
    truth = {}
    for key, (a, b) in sides.items():
        truth[key] = {f: (sum(b[f]) / len(b[f])) / (sum(a[f]) / len(a[f])) for f in TRUTH_COLUMNS if a.get(f) and b.get(f)}
    return truth


def work_share(accounts: Iterable[dict]) -> float | None:
    """The share of the reference's CPU that its set work takes, by its own clocks: its work's CPU
    time over its process's, summed over `accounts` (GET /reference/stats, each a process's life so
    far). Both clocks run over the same moments, so the machine's speed cancels out of the share;
    the process's start (JVM, calibration) counts as not work, so a long-loaded process tells it best."""
    work = process = 0.0
    for a in accounts:
        if a and a.get("work_cpu_s") and a.get("process_cpu_s"):
            work, process = work + float(a["work_cpu_s"]), process + float(a["process_cpu_s"])
    return work / process if process else None


def work_share_between(before: dict | None, after: dict | None) -> float | None:
    """The share of the reference's CPU its set work took between two readings of one process's
    account (GET /reference/stats): its work's CPU time over its process's, both as differences, so
    the JVM's start, its compiling and the start-up measurement of its work (a fork loaded for half a
    minute spends some 15 % of its CPU on them) count in neither. None unless `after` is a later
    reading of the same process (it has served more and lived longer, with the same start-up
    measurement)."""
    try:
        same = (before["work_calibration"] == after["work_calibration"] and after["uptime_s"] > before["uptime_s"]
                and after["requests"] > before["requests"])
        work = float(after["work_cpu_s"]) - float(before["work_cpu_s"])
        process = float(after["process_cpu_s"]) - float(before["process_cpu_s"])
    except (KeyError, TypeError, ValueError):
        return None
    return work / process if same and process > 0 and work > 0 else None


def construction_truth(share: float, factor: float, keys: Iterable[tuple]) -> dict[tuple, dict[str, float]]:
    """The truth of a known difference by construction, B ÷ A at each load of `keys`: B's work is
    `factor` × A's rounds, which are `share` of A's CPU a request, so B's request costs
    1 + (factor − 1) × share of A's; with the engine its own bound, TPS falls by that and a closed
    load's response times (users ÷ TPS) rise by it, p50 and p99 alike."""
    cost = 1 + (factor - 1) * share
    return {key: {"tps": 1 / cost, "p50": cost, "p99": cost} for key in keys}


def difference_rates(check: str, comparisons: list[Comparison]) -> list[Rate]:
    """A known difference (B does more work than A): each verdict's sign against the truth's (TPS
    lower, p50 and p99 higher), and whether its interval of B ÷ A covers the truth measured apart
    (Comparison.truth, e.g. wrk over long windows)."""
    out = []
    for figure in FIGURES:
        signs, covered = [], []
        for c in comparisons:
            for r in _judged(c.verdicts, figure).iter_rows(named=True):
                truth = c.truth.get(_step_key(r), {}).get(figure)
                if truth is None:
                    continue
                ratio = _b_over_a(r, c.second)
                if ratio is None:
                    continue
                low, high = sorted(_b_over_a(r, c.second, bound) for bound in ("ratio_low", "ratio_high"))
                expected_up = truth > 1
                signs.append(bool(r["shown"]) and (ratio > 1) == expected_up)
                covered.append(low <= truth <= high)
        where = f"verdicts, from {len(comparisons)} comparison(s){_apart(_not_judged(comparisons, figure))}"
        out.append(Rate(check, f"{figure}: the difference shown, with the right sign", sum(signs), len(signs), 0.95,
                        at_least=True, units=where))
        out.append(Rate(check, f"{figure}: the 95 % interval covers the truth", sum(covered), len(covered), 0.90,
                        at_least=True, units=where))
    return out


def _b_over_a(row: dict, second: str, column: str = "ratio") -> float | None:
    """The verdict's ratio (verdicts.csv: a ÷ b) as the second side's figure ÷ the first's (the second
    a run, or a target of a run that holds both)."""
    value = row[column]
    if value is None or value <= 0:
        return None
    a_is_second = row["a_target"] == second if row["a_run"] == row["b_run"] else row["a_run"] == second
    return value if a_is_second else 1 / value


# --- a target's warm-up -------------------------------------------------------------------------

@dataclass(frozen=True)
class Warming:
    """One fork's target warm-up, as it ran (`seconds`, `outcome`) and as this code's rule judges
    its recorded throughput series, replayed second by second from its least on: when it first
    calls it settled (`settled_at`, seconds of load; None: never), its answer at the series' end
    (`final`), and how far the engine's speed still had to move at that moment (`remaining`: from
    the reference's known curve and its own account, None for an engine without one)."""

    fork: int
    seconds: float
    outcome: str
    reason: str
    settled_at: float | None = None
    final: str = ""
    remaining: float | None = None


def _other_us(account: dict) -> float:
    """The reference's CPU per request besides its work (its process's less the work's and the
    start-up measurement's), µs."""
    calibration_s = float((account.get("work_calibration") or {}).get("cpu_s") or 0)
    spent = float(account["process_cpu_s"]) - float(account["work_cpu_s"]) - calibration_s
    return max(0.0, spent * 1e6 / float(account["requests"]))


def remaining_move(account: dict | None, factor: float | None = None) -> float | None:
    """How much faster the reference will still get, from its own account (esb-projects/reference,
    GET /reference/stats): with the work's factor (f: `factor`, else the account's own, of its
    moment), the work's CPU per request at factor 1 (w, measured at its start) and the rest of its
    CPU per request (o): (f·w + o) ÷ (w + o) − 1."""
    if not account:
        return None
    try:
        f = float(account["factor"]) if factor is None else factor
        work_us = float(account["work_us_per_request"])
        other_us = _other_us(account)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return (f * work_us + other_us) / (work_us + other_us) - 1


def _factor_at(account: dict, seconds: float) -> float | None:
    """The reference's work factor `seconds` after its first proxied request (its settings' curve)."""
    settings = account.get("settings") or {}
    try:
        start, span = float(settings.get("warmup-factor", 1)), float(settings.get("warmup-s", 0))
        step_at, step = float(settings.get("step-at", 0)), float(settings.get("step-factor", 1))
    except (TypeError, ValueError):
        return None
    f = 1 + (start - 1) * max(0.0, 1 - seconds / span) if span > 0 else 1.0
    return f * (step if step_at > 0 and seconds >= step_at else 1.0)


def replay(tps: list[float], bucket_s: float, horizon_s: float, least_s: float,
           machine: list[float | None] | None = None) -> tuple[float | None, str]:
    """When the warm-up would end under steady.settling, asked once a bucket as the runner asks it
    (settled, and no sooner than `least_s`: seconds of load), and its answer over the whole series;
    `machine`: the machine's speed in the same buckets, as the runner had it (or None)."""
    machine = machine if machine is not None and len(machine) == len(tps) else None
    for n in range(1, len(tps) + 1):
        if steady.settling(tps[:n], bucket_s, horizon_s, None if machine is None else machine[:n]).steady:
            return max(n * bucket_s, least_s), steady.SETTLED
    return None, steady.settling(tps, bucket_s, horizon_s, machine).outcome


def warmings(run_info: dict, machine: bool = True) -> list[Warming]:
    """Each fork's target warm-up from a run's run.json (`target_warmup`: the entry of the last
    load carries the verdict, the series and the engine's account), replayed (Warming); with
    `machine` False, on its throughput alone (as the rule judged before the machine's speed was
    taken out, 2026-12-06)."""
    out = []
    for entry in run_info.get("target_warmup") or []:
        for t in entry.get("targets") or []:
            if "outcome" not in t and "steady" not in t:
                continue
            outcome = t.get("outcome") or ("settled" if t.get("steady") else "not resolved")
            tps, account = t.get("tps") or [], t.get("account")
            bucket = float(t.get("bucket_s") or steady.SETTLE_BUCKET_S)
            settled_at, final = replay(tps, bucket, float(t.get("horizon_s") or 60), float(t.get("least_s") or 0),
                                       t.get("machine") if machine else None) if tps else (None, outcome)
            remaining = None
            if account and settled_at is not None:
                # The series' buckets run from the warm-up's first read; the account was read at its last.
                since = account.get("seconds_since_first_request")
                if since is not None:
                    factor = _factor_at(account, float(since) - len(tps) * bucket + settled_at)
                    remaining = remaining_move(account, factor)
            out.append(Warming(int(t.get("fork") or 1), float(t.get("seconds") or 0), outcome, t.get("reason", ""),
                               settled_at, final, remaining))
    return out


def warmup_rates(flat: list[Warming], falling: list[Warming], within_s: float = 60.0,
                 falling_label: str = "reference falling 20 % over 180 s", how: str = "") -> list[Rate]:
    """A flat reference: how often it is judged settled within `within_s` of load, and how often
    judged still moving (a false fault: its steps would be spoiled); one whose work falls: how often
    it is judged settled while its speed still had more than STILL_MOVING to go. `how`: said after
    each check's name (e.g. how the forks were judged again)."""
    out = []
    if flat:
        soon = [w for w in flat if w.settled_at is not None and w.settled_at <= within_s]
        times = sorted(w.settled_at for w in flat if w.settled_at is not None)
        median = times[len(times) // 2] if times else None
        out.append(Rate(f"warm-up: flat reference{how}", f"judged settled within {within_s:g} s of load",
                        len(soon), len(flat), 0.90, at_least=True, units="forks",
                        note=(f"settled in {len(times)} of {len(flat)} by the end, median {median:g} s"
                              if median is not None else "none settled") + "; " +
                        ", ".join(f"{w.final}" for w in flat if w.settled_at is None)))
        moving = [w for w in flat if w.final == steady.MOVING]
        out.append(Rate(f"warm-up: flat reference{how}", "judged still moving (its steps spoiled: a false fault)",
                        len(moving), len(flat), 0.05, units="forks"))
    if falling:
        wrong = [w for w in falling if w.settled_at is not None and (w.remaining is None or w.remaining > STILL_MOVING)]
        out.append(Rate(f"warm-up: {falling_label}{how}",
                        f"judged settled while its speed still moves by more than {STILL_MOVING:.0%}",
                        len(wrong), len(falling), 0.10, units="forks",
                        note="; ".join(f"fork {w.fork}: " + (f"settled at {w.settled_at:g} s" if w.settled_at is not None
                                                             else w.final)
                                       + ("" if w.remaining is None else f", {w.remaining:+.1%} to go")
                                       for w in falling)))
    return out


# --- valid steps ----------------------------------------------------------------------------------

def valid_rates(check: str, summary: pl.DataFrame) -> list[Rate]:
    """The share of steps marked valid, and for each warning the share of steps it names (a step of
    several rows counts once)."""
    steps = summary.unique(subset=["run", "step_dir"], keep="first")
    n = steps.height
    valid = steps.filter(pl.col("valid") == "yes").height
    out = [Rate(check, "steps marked valid", valid, n, 0.95, at_least=True, units="steps")]
    named: dict[str, int] = {}
    for v in steps["valid"].to_list():
        for kind in ([] if v in (None, "yes") else str(v).split(";")):
            named[kind] = named.get(kind, 0) + 1
    for kind, count in sorted(named.items(), key=lambda kv: -kv[1]):
        out.append(Rate(check, f"steps named by `{kind}`", count, n, units="steps"))
    return out


def bracket_rates(check: str, summary: pl.DataFrame) -> list[Rate]:
    """wrk's brackets on a flat target (its speed set): every `target-drift` is a false alarm. The
    rate counts bracketed steps (a step of several rows once) and names the forks they came from;
    its note gives the moves wrk saw between its two windows and the allowance they were held to."""
    steps = summary.unique(subset=["run", "step_dir"], keep="first").filter(pl.col("target_drift").is_not_null())
    if not steps.height:
        return []
    fired = steps.filter(pl.col("target_drift")).height
    moves = sorted(abs(float(d)) for d in steps["xcheck_drift"].to_list())
    allowed = sorted(float(n) for n in steps["xcheck_noise"].to_list())
    forks = steps.select(["run", "fork"]).unique().height
    note = (f"wrk's two windows moved a median {_percent(moves[len(moves) // 2])} apart, at most "
            f"{_percent(moves[-1])}; allowed a median {_percent(allowed[len(allowed) // 2])}")
    crossed = steps.filter(pl.col("xcheck_failed").fill_null(False)).height
    return [Rate(check, "steps named by `target-drift` (the target moved across the step)", fired, steps.height,
                 0.05, units=f"steps of {forks} forks", note=note),
            Rate(check, "steps named by `wrk-cross-check` (esbperf's client set the figure)", crossed, steps.height,
                 0.05, units=f"steps of {forks} forks",
                 note="the reference is its own bound: esbperf's figure is wrk's but for chance")]


# --- the table ------------------------------------------------------------------------------------

COLUMNS = ("check", "judgment", "hits", "count", "rate", "ci_low", "ci_high", "goal", "met", "units", "note")


def write_csv(rates: Iterable[Rate], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rates:
            writer.writerow(r.row())


def markdown(rates: Iterable[Rate]) -> str:
    """The table docs/benchmarks/known-answers.md publishes: each rate with its count and interval."""
    lines = ["| check | judgment | rate | 95 % interval | count | goal | met |", "|---|---|---|---|---|---|---|"]
    for r in rates:
        low, high = r.interval()
        met = "" if r.met is None else "yes" if r.met else "**no**"
        lines.append(f"| {r.check} | {r.judgment} | {_percent(r.rate)} | {_percent(low)}–{_percent(high)} | "
                     f"{r.hits} of {r.count} {r.units}{f' ({r.note})' if r.note else ''} | "
                     f"{'' if r.goal is None else ('≥ ' if r.at_least else '≤ ') + f'{r.goal:.0%}'} | {met} |")
    return "\n".join(lines) + "\n"


def read_rates(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def binomial_note() -> str:
    return (f"Intervals: Clopper–Pearson {CONFIDENCE:.0%} (exact binomial), assuming the judgments independent; "
            "verdicts of one comparison share its two runs, so the count of comparisons is given beside them.")


__all__ = ["Rate", "Comparison", "Warming", "aa_rates", "difference_rates", "warmup_rates", "warmings",
           "remaining_move", "valid_rates", "bracket_rates", "write_csv", "markdown", "binomial_note"]
