"""Comparing runs: ESB vs baseline, ESB vs ESB, before vs after.

Runs are only comparable step by step when they ran the same plan (same name and settings;
the plan's `target` may differ, that is the point of comparing). Ratios are each run's figure
divided by the first run's for the same scenario, payload and users."""
from __future__ import annotations

from typing import Any

import polars as pl

from esbperf.analysis.results import Run
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


def check_plans(runs: list[Run]) -> None:
    """Refuse, with the reason, runs whose steps did not all run one plan."""
    for run in runs:
        names = {str(s.meta["plan"]) for s in run.steps if s.meta.get("plan")} | ({run.plan_name} - {""})
        if len(names) > 1:
            raise EsbperfError(f"{run.dir}: mixed plans in one run ({', '.join(sorted(names))}); "
                               "its steps cannot be reported together")
    first = runs[0]
    for other in runs[1:]:
        if other.plan_name != first.plan_name:
            raise EsbperfError(f"runs of different plans cannot be compared step by step: {first.name} ran "
                               f"{first.plan_name or '(no plan name)'!r}, {other.name} ran "
                               f"{other.plan_name or '(no plan name)'!r}; report them separately")
        diff = first_difference(first.plan, other.plan)
        if diff:
            raise EsbperfError(f"{first.name} and {other.name} ran plan {first.plan_name!r} with different "
                               f"settings ({diff}); compare runs of one plan")


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
