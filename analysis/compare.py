"""Comparing runs: ESB vs baseline, ESB vs ESB, before vs after.

Runs are only comparable step by step when they ran the same plan (same name and settings;
the plan's `target` may differ, that is the point of comparing). A report of several plans
(the thesis's payload and concurrency sweeps are two plans) draws each plan's runs together,
plan by plan; `compare` needs one plan. Ratios are each run's figure divided by the first run's
for the same scenario, payload, users and rate.

A run may hold several targets (the runner interleaves `--target camel --target direct`): each
(run, target) is a series of its own, exactly as if each target had had a run. The reference is
the first run's `direct` target when it has one (ESB vs baseline, even within one run), else the
first run's first target; every other series is compared with it."""
from __future__ import annotations

from typing import Any

import polars as pl

from esbperf.analysis.bottleneck import NAMES as BOUND_NAMES, TESTBED
from esbperf.analysis.runs import BASELINE_TARGET, Run, label_runs
from esbperf.core.errors import EsbperfError

# Not settings: where the plan file was read from, its prose, and the target being compared.
IGNORED_PLAN_KEYS = {"target", "source", "description"}
RATIO_FIGURES = ("tps", "rt_mean_ms", "rt_p99_ms", "esb_cpu_mean")
STEP_KEYS = ["scenario", "payload_bytes", "users", "rate", "test"]   # a user script's tests are compared test by test


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two plans differ first, as 'field: A vs B', or None when they are the same."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if not path and key in IGNORED_PLAN_KEYS:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return f"{where}: {'missing' if key not in a else repr(a[key])} vs " \
                       f"{'missing' if key not in b else repr(b[key])}"
            found = first_difference(a[key], b[key], where)
            if found:
                return found
        return None
    return None if a == b else f"{path or 'plan'}: {a!r} vs {b!r}"


def plan_groups(runs: list[Run]) -> dict[str, list[Run]]:
    """The runs by plan name, in the order given, each run labelled within its plan; refuses a
    run whose steps name several plans, and runs of one plan name with different settings."""
    for run in runs:
        names = {str(s.meta["plan"]) for s in run.steps if s.meta.get("plan")} | ({run.plan_name} - {""})
        if len(names) > 1:
            raise EsbperfError(f"{run.dir}: mixed plans in one run ({', '.join(sorted(names))}); "
                               "its steps cannot be reported together")
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.plan_name, []).append(run)
    for members in groups.values():
        first = members[0]
        for other in members[1:]:
            diff = first_difference(first.plan, other.plan)
            if diff:
                raise EsbperfError(f"{first.name} and {other.name} ran plan {first.plan_name!r} with different "
                                   f"settings ({diff}); compare runs of one plan")
        label_runs(members)
    return groups


def require_one_plan(groups: dict[str, list[Run]]) -> None:
    if len(groups) > 1:
        (a, [first, *_]), (b, [other, *_]) = list(groups.items())[:2]
        raise EsbperfError(f"runs of different plans cannot be compared step by step: {first.name} ran "
                           f"{a or '(no plan name)'!r}, {other.name} ran {b or '(no plan name)'!r}; "
                           "compare the runs of each plan, or `esbperf report` them all (plan by plan)")


def reference_series(runs: list[Run]) -> tuple[str, str]:
    """(run, target) every other series is compared with."""
    first = runs[0]
    return first.name, BASELINE_TARGET if first.has_baseline else first.targets[0]


def require_series(runs: list[Run]) -> None:
    if sum(len(r.targets) for r in runs) < 2:
        raise EsbperfError("compare needs at least two runs, or a run of several targets (the first run's "
                           "direct target, or its first, is the reference)")


def bound_note(bound: str | None, reference: str | None, label: str, reference_label: str) -> str:
    """What a ratio is a figure of, when a step it compares was bounded by the testbed
    (analysis/bottleneck.py): `bounded by the link` when both were by the same, else which was
    (`direct bounded by the back ends`); empty when neither was: then it is about the targets."""
    mine, theirs = bound in TESTBED, reference in TESTBED
    if mine and theirs and bound == reference:
        return f"bounded by {BOUND_NAMES[bound]}"
    said = ([f"{label} bounded by {BOUND_NAMES[bound]}"] if mine else []) + \
        ([f"{reference_label} bounded by {BOUND_NAMES[reference]}"] if theirs else [])
    return ", ".join(said)


def ratio_lines(ratios: pl.DataFrame, labels: dict[tuple[str, str], str]) -> list[str]:
    """One line per compared step, as `esbperf compare` prints them: `proxy 100KB 20 users: camel ÷
    direct TPS 0.41, mean RT 2.44 — bounded by the link`."""
    lines = []
    several_tests = ratios["test"].n_unique() > 1
    for r in ratios.iter_rows(named=True):
        load = f"{r['users']} users" if r["rate"] is None else f"{r['rate']:g}/s ({r['users']} threads)"
        test = f" test {r['test']}" if several_tests and r["test"] is not None else ""
        figures = ", ".join(f"{name} {r[f'{figure}_ratio']:.2f}" for name, figure in (("TPS", "tps"),
                                                                                     ("mean RT", "rt_mean_ms"))
                            if r[f"{figure}_ratio"] is not None)
        note = r.get("bound_note") or ""
        lines.append(f"{r['scenario']} {r['payload_label']} {load}{test}: {labels[(r['run'], r['target'])]} ÷ "
                     f"{labels[(r['run_reference'], r['target_reference'])]} {figures or 'no figure'}"
                     + (f" — {note}" if note else ""))
    return lines


def ratios(agg: pl.DataFrame, runs: list[Run]) -> pl.DataFrame:
    """Every series against the reference: figures side by side and their ratio (series / reference),
    and what bounded each side's step (`bound`, `bound_reference`, `bound_note`)."""
    ref_run, ref_target = reference_series(runs)
    labels = label_runs(runs)
    verdicts = [c for c in ("valid", "bound") if c in agg.columns]     # stats.aggregate_verdicts, stats.aggregate
    columns = [*STEP_KEYS, "payload_label", "run", "target", *RATIO_FIGURES, *verdicts]
    ref = agg.filter((pl.col("run") == ref_run) & (pl.col("target") == ref_target)).select(columns)
    frames = []
    for run in runs:
        for target in run.targets:
            if (run.name, target) == (ref_run, ref_target):
                continue
            mine = agg.filter((pl.col("run") == run.name) & (pl.col("target") == target)).select(columns)
            joined = mine.join(ref.drop("payload_label"), on=STEP_KEYS, suffix="_reference", nulls_equal=True)
            if "bound" in verdicts:
                joined = joined.with_columns(bound_note=pl.Series(
                    [bound_note(a, b, labels[(run.name, target)], labels[(ref_run, ref_target)])
                     for a, b in joined.select("bound", "bound_reference").iter_rows()], dtype=pl.String))
            frames.append(joined.with_columns(
                pl.when(pl.col(f"{f}_reference") != 0).then(pl.col(f) / pl.col(f"{f}_reference"))
                .alias(f"{f}_ratio") for f in RATIO_FIGURES))
    if not frames:
        return pl.DataFrame()
    order = [*STEP_KEYS, "payload_label", "run", "target", "run_reference", "target_reference"]
    out = pl.concat(frames, how="diagonal_relaxed")
    rest = [c for f in RATIO_FIGURES for c in (f, f"{f}_reference", f"{f}_ratio")]
    rest += [c for v in verdicts for c in (v, f"{v}_reference")] + (["bound_note"] if "bound" in verdicts else [])
    return out.select(order + rest).sort("scenario", "payload_bytes", "users", "rate", "run", "target", nulls_last=False)
