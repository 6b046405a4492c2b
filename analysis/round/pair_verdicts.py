"""A round's verdicts (verdicts.csv, control.csv): every pair of targets at every closed step (TPS,
p50, p99) and every pair of searched targets (capacity), each on the interval of their ratio over the
forks, all judged as one family (analysis/verdicts.py: their false discoveries controlled). One rule
(round.json `verdict_steps`, STRICT_STEPS): a pair is judged only on steps no validity warning spoils
and the testbed did not bound — a step the client, a link or the back ends bounded measured the
testbed, and says nothing about the engine in it. The control pair (the round's `control` part: an
engine measured again in forks of its own) is judged by the same rule as a family of its own, and
must read "no difference shown". And how many forks a difference needs, with a round as the pilot."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

import polars as pl

from esbperf.analysis import forks
from esbperf.analysis.bottleneck import NAMES, pooled_bound, testbed_bound
from esbperf.analysis.round.folder import RoundData, payload_bytes, ranks
from esbperf.analysis.round.headline_figures import NOT_CHECKED, WHOLE_STEP_KINDS, capacity_samples, kept, step_valid
from esbperf.analysis.stats import figure_sample
from esbperf.analysis.validity import faults
from esbperf.analysis.verdicts import (COLUMNS, FIGURES as VERDICT_FIGURES, STEP, STEP_OVERHEAD_S, Pending, advice,
                                       fork_costs, iteration_costs, judged)

# How the control pair's second side is named in its verdicts.
CONTROL_LABEL = "{target} (control forks)"


def verdicts(data: RoundData) -> pl.DataFrame:
    """verdicts.csv: every pair of targets at every closed step and every pair of searched targets,
    judged as one family (module doc)."""
    if data._verdicts is None:
        # A round that may add forks where verdicts are unresolved judges its family twice (round.json
        # `looks`): its false discoveries spent over both (forks.Family).
        data._verdicts = judged(step_pairs(data) + capacity_pairs(data), data.info.get("looks", 1))
    return data._verdicts


def capacity_pairs(data: RoundData) -> list[Pending]:
    """Every pair of targets searched at a scenario and payload, on the interval of the ratio of their
    capacities over the searches no validity warning names (not judged when too few are left)."""
    order = ranks(data.kinds())
    out = []
    for (scenario, payload), by_target in capacity_samples(data, only_valid=True).items():
        for a, b in _pairs(by_target, order):
            (sa, va), (sb, vb) = by_target[a], by_target[b]
            invalid = "; ".join(f"{who}: {', '.join(faults(what))}" for who, what in ((a, va), (b, vb))
                                if what != NOT_CHECKED and faults(what))
            unchecked = NOT_CHECKED in (va, vb)
            left = "; ".join(f"{who}: {sample.left_out}" for who, sample in ((a, sa), (b, sb)) if sample.left_out)
            found = forks.ratio(sa, sb)
            if left and not found.has_interval:
                found = _not_judged(f"too few searches no validity warning names ({left})")
            out.append(Pending(
                {"plan": "capacity", "scenario": scenario, "payload_bytes": payload_bytes(payload),
                 "payload_label": payload, "model": "open", "figure": "capacity", "a": a, "b": b, "a_target": a,
                 "b_target": b, "valid_a": va, "valid_b": vb, "bound_note": ""},
                "capacity", found,
                after=(f" [not a valid measurement: {invalid}]" if invalid else "")
                + (f" [{left}]" if left and found.has_interval else "")
                + (" [the searches' validity was not checked: an older capacity.csv]" if unchecked else ""),
                after_short=" (not valid)" if invalid or (left and not found.has_interval) else ""))
    return out


def _pairs(targets: Iterable[str], order: dict[str, int]) -> list[tuple[str, str]]:
    """Every pair of the targets once, in the page's order (folder.ranks; a target it does not know
    last, by name)."""
    return list(itertools.combinations(sorted(targets, key=lambda t: (order.get(t, len(order)), t)), 2))


# --- a closed step's pairs: valid steps the testbed did not bound ----------------------------------------

@dataclass(frozen=True)
class Side:
    """One target's step as a verdict takes it: the iterations it uses (those no validity
    warning names), and, when it cannot be used, why (`problem`)."""

    label: str
    run: str
    target: str
    rows: tuple[dict, ...]   # the iterations used
    problem: str             # "" when it may be judged
    bounded: bool            # its problem is a testbed bound (not a spoiled step)
    bound: str | None        # what bounded it over the iterations used (analysis/bottleneck.py)
    valid: str               # the step's `valid` (step_valid)
    left_out: str            # the iterations a validity warning names, left out (kept)


def side(data: RoundData, label: str, run: str, target: str, rows: list[dict], aggregate_row: dict | None) -> Side:
    """A target's step as a verdict takes it (Side): a step that misses iterations or forks, or whose
    valid forks are too few to leave the spoiled ones out, or that the testbed bounded (the client, a
    link, the back ends: it measured the testbed, not the engine) is not judged."""
    used, left_out = kept(rows)
    valid = step_valid(data, aggregate_row, len(rows)) if aggregate_row else "yes"
    bound = pooled_bound([r.get("bound") for r in used])[0]
    whole = [k for k in faults(valid) if k in WHOLE_STEP_KINDS]
    problem, bounded = "", False
    if whole:
        problem = f"{label}'s step is not valid ({', '.join(whole)})"
    elif left_out and not left_out.startswith("left out"):
        problem = f"{label}'s step is not valid: {left_out.replace('includes ', '', 1)}"
    elif testbed_bound(bound):
        problem, bounded = (f"{label}'s step was bounded by {NAMES[bound]}, a limit of the testbed: it measured the "
                            "testbed, not the engine"), True
    return Side(label, run, target, tuple(used), problem, bounded, bound, valid,
                left_out if left_out.startswith("left out") else "")


def _not_judged(why: str) -> forks.Interval:
    """An interval there is none of, and why: a verdict not judged, no member of its family."""
    return forks.Interval(None, None, None, 0, 0, None, False, why_none=why)


def pair_pending(data: RoundData, a: Side, b: Side, plan: str, step: dict, memo: dict, cache: dict) -> list:
    """The verdicts (TPS, p50, p99) of two sides at one step, to be judged in their family: on the
    interval of a ÷ b over the iterations each uses, or not judged when a side cannot be (Side.problem)."""
    problem = "; ".join(s.problem for s in (a, b) if s.problem)
    left = "; ".join(f"{s.label}: {s.left_out}" for s in (a, b) if s.left_out)
    out = []
    for figure, column in VERDICT_FIGURES.items():
        row = {"plan": plan, **step, "figure": figure, "a": a.label, "b": b.label, "a_run": a.run,
               "a_target": a.target, "b_run": b.run, "b_target": b.target, "bound_a": a.bound, "bound_b": b.bound,
               "valid_a": a.valid, "valid_b": b.valid, "bound_note": ""}
        if problem:
            bounded = any(s.bounded for s in (a, b))
            out.append(Pending(row, figure, _not_judged(problem),
                               after_short=" (testbed bound)" if bounded else " (not valid)"))
            continue
        samples = [cache.setdefault((s.run, s.target, tuple(step.values()), column),
                                    figure_sample(s.rows, data.histograms(), column)) for s in (a, b)]
        out.append(Pending(row, figure, forks.ratio(*samples, memo=memo, paired=a.run == b.run),
                           after=f" [{left}]" if left else ""))
    return out


def _steps(frame: pl.DataFrame) -> dict[str, dict[tuple, dict[str, list[dict]]]]:
    """A summary's rows by run, step (verdicts.STEP) and target."""
    out: dict[str, dict[tuple, dict[str, list[dict]]]] = {}
    for r in frame.iter_rows(named=True):
        out.setdefault(r["run"], {}).setdefault(tuple(r[k] for k in STEP), {}).setdefault(r["target"], []).append(r)
    return out


def _aggregate_rows(frame: pl.DataFrame | None) -> dict[tuple, dict]:
    """An aggregate's rows by run, target and step (verdicts.STEP)."""
    return {} if frame is None else {(r["run"], r["target"], *(r[k] for k in STEP)): r
                                     for r in frame.iter_rows(named=True)}


def step_pairs(data: RoundData) -> list[Pending]:
    """Every pair of targets at every closed step of each run, each side as `side` takes it."""
    order = ranks(data.kinds())
    aggregate = _aggregate_rows(data.aggregate)
    plans = dict(zip(data.summary["run"], data.summary["plan"])) if data.summary.height else {}
    out, memo, cache = [], {}, {}
    for run, steps in _steps(data.summary).items():
        for step, by_target in steps.items():
            sides = {t: side(data, t, run, t, rows, aggregate.get((run, t, *step))) for t, rows in by_target.items()}
            for a, b in _pairs(by_target, order):
                out += pair_pending(data, sides[a], sides[b], plans[run], dict(zip(STEP, step)), memo, cache)
    return out


def control_verdicts(data: RoundData) -> pl.DataFrame:
    """control.csv: the control pair — each target of the round's control part in the closed plan's
    forks against itself in the control part's, at every step both measured — judged by the same
    rule as a family of their own (Benjamini–Hochberg over these verdicts alone: a check of the
    round's rules is no member of the round's family). Every verdict must read "no difference
    shown". Empty without a control part."""
    if data.control_summary is None or data.control_summary.is_empty():
        return pl.DataFrame(schema=COLUMNS)
    ours, theirs = _steps(data.summary), _steps(data.control_summary)
    aggregate = {**_aggregate_rows(data.aggregate), **_aggregate_rows(data.control_aggregate)}
    out, memo, cache = [], {}, {}
    for control_run, steps in theirs.items():
        for step, by_target in steps.items():
            for target, rows in by_target.items():
                for run, mine in ours.items():
                    if target not in mine.get(step, {}):
                        continue
                    a = side(data, target, run, target, mine[step][target], aggregate.get((run, target, *step)))
                    b = side(data, CONTROL_LABEL.format(target=target), control_run, target, rows,
                             aggregate.get((control_run, target, *step)))
                    plan = str(rows[0].get("plan") or "")
                    out += pair_pending(data, a, b, plan, dict(zip(STEP, step)), memo, cache)
    return judged(out) if out else pl.DataFrame(schema=COLUMNS)


def repetition_lines(pilot: RoundData) -> list[str]:
    """How many forks and iterations each target needs for a difference of 5 % and 10 % in TPS to be
    resolved at 95 %, with a round as the pilot: its own variance at each level and its costs (a
    fork's start and warm-up, run.json; an iteration's steps, summary.csv's warm-up and window and
    verdicts.STEP_OVERHEAD_S each). What `esbperf round --dry-run` prints of the published round."""
    s = pilot.summary
    seconds = [(r["target"], (r["run"], r.get("fork") or 1, r["iteration"]),
                (r.get("warmup_used_s") or 0.0) + r["window_s"] + STEP_OVERHEAD_S) for r in s.iter_rows(named=True)]
    found = advice(s, fork_costs(list(pilot.runs.values())), iteration_costs(seconds))
    return ([f"forks and iterations that would resolve a TPS difference of 5 % and 10 % at 95 %, from {pilot.dir} "
             "as the pilot (docs/analysis.md, \"Forks: the process as the unit\"):"]
            + [f"  {a.describe()}" for a in found])

