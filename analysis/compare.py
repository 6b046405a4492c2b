"""Comparing runs: ESB vs baseline, ESB vs ESB, before vs after.

Runs are only comparable step by step when they ran the same plan (same name and settings;
the plan's `target` may differ, that is the point of comparing). A report of several plans
(the thesis's payload and concurrency sweeps are two plans) draws each plan's runs together,
plan by plan; `compare` needs one plan. Ratios are each run's figure divided by the first run's
for the same scenario, payload and users."""
from __future__ import annotations

from typing import Any

import polars as pl

from esbperf.analysis.results import Run, label_runs
from esbperf.errors import EsbperfError

# Not settings: where the plan file was read from, its prose, and the target being compared.
IGNORED_PLAN_KEYS = {"target", "source", "description"}
RATIO_FIGURES = ("tps", "rt_mean_ms", "rt_p99_ms", "esb_cpu_mean")
STEP_KEYS = ["scenario", "payload_bytes", "users"]


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


def ratios(agg: pl.DataFrame, runs: list[Run]) -> pl.DataFrame:
    """Each later run against the first: figures side by side and their ratio (later / first)."""
    reference = runs[0]
    columns = [*STEP_KEYS, "payload_label", "run", "target", *RATIO_FIGURES]
    ref = agg.filter(pl.col("run") == reference.name).select(columns)
    frames = []
    for other in runs[1:]:
        mine = agg.filter(pl.col("run") == other.name).select(columns)
        joined = mine.join(ref.drop("payload_label"), on=STEP_KEYS, suffix="_reference")
        frames.append(joined.with_columns(
            pl.when(pl.col(f"{f}_reference") != 0).then(pl.col(f) / pl.col(f"{f}_reference"))
            .alias(f"{f}_ratio") for f in RATIO_FIGURES))
    if not frames:
        return pl.DataFrame()
    order = [*STEP_KEYS, "payload_label", "run", "target", "run_reference", "target_reference"]
    out = pl.concat(frames, how="diagonal_relaxed")
    rest = [c for f in RATIO_FIGURES for c in (f, f"{f}_reference", f"{f}_ratio")]
    return out.select(order + rest).sort("scenario", "payload_bytes", "users", "run")
