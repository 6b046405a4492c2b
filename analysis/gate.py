"""The regression gate of `esbperf compare`: did NEW get slower than BASE beyond a threshold?

A step breaks the gate when its figure moved the wrong way by more than the threshold (the
mean over iterations, NEW against BASE) and, where both runs have two or more iterations, the
move is outside the noise: the 95 % confidence interval of the difference of the two means
(pooled two-sample t) does not include zero. A drop the iterations cannot tell from noise passes, and says so.
With one iteration on either side there is no noise estimate and the threshold alone decides.

Steps are matched by what defines them (scenario, target, payload, users, model, rate); a step
in BASE missing from NEW is a failure (a smaller NEW must not pass by leaving steps out)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr, escape

import polars as pl

from esbperf.analysis.stats import t_quantile
from esbperf.core.errors import EsbperfError

STEP_FIELDS = ("scenario", "target", "payload_bytes", "users", "model", "rate")


@dataclass(frozen=True)
class Limit:
    figure: str          # a summary.csv column
    label: str           # how the message names it
    worse: int           # +1: a rise is worse (latency); -1: a drop is worse (throughput)
    percent: float


@dataclass(frozen=True)
class Verdict:
    step: str
    limit: Limit
    base: float | None
    new: float | None
    change_percent: float | None
    significant: bool | None     # None: no noise estimate (fewer than 2 iterations on a side)
    failed: bool
    message: str


def parse_percent(text: str, option: str) -> float:
    """'5%', '5' or '5.0 %' → 5.0; a clear error otherwise."""
    try:
        value = float(str(text).strip().rstrip("%").strip())
    except ValueError:
        raise EsbperfError(f"{option} {text!r}: give a percentage such as 5%") from None
    if not (0 <= value < 1000) or math.isnan(value):
        raise EsbperfError(f"{option} {text!r}: the percentage must be between 0 and 1000")
    return value


def limits(max_tps_drop: float | None, max_p99_rise: float | None,
           max_mean_rise: float | None = None) -> list[Limit]:
    found = []
    if max_tps_drop is not None:
        found.append(Limit("tps", "TPS", -1, max_tps_drop))
    if max_p99_rise is not None:
        found.append(Limit("rt_p99_ms", "p99", +1, max_p99_rise))
    if max_mean_rise is not None:
        found.append(Limit("rt_mean_ms", "mean response time", +1, max_mean_rise))
    return found


def _values(frame: pl.DataFrame, figure: str) -> list[float]:
    return [v for v in frame[figure].to_list() if v is not None and not math.isnan(v)]


def difference_half_width(a: list[float], b: list[float]) -> float | None:
    """Half-width of the 95 % confidence interval of mean(b) − mean(a), from the two runs' pooled
    variance (Student's two-sample t, n_a + n_b − 2 degrees of freedom); None below 2 values a side.

    Pooled rather than Welch: reruns of one setup scatter alike, and with the 2–3 iterations
    plans have, Welch's degrees of freedom fall towards 1 and hide even a 70 % drop."""
    if len(a) < 2 or len(b) < 2:
        return None
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    squares = sum((x - mean_a) ** 2 for x in a) + sum((x - mean_b) ** 2 for x in b)
    dof = len(a) + len(b) - 2
    return t_quantile(0.975, dof) * math.sqrt(squares / dof * (1 / len(a) + 1 / len(b)))


def _step_name(row: dict) -> str:
    where = f"{row['scenario']} {row['target']} {row.get('payload_label') or row['payload_bytes']}"
    load = f"{row['rate']}/s" if row.get("model") == "open" and row.get("rate") else f"{row['users']} users"
    return f"{where} {load}"


def judge(base: pl.DataFrame, new: pl.DataFrame, limit: Limit, step: str) -> Verdict:
    """One step, one figure: `base` and `new` hold that step's iterations of each run."""
    a, b = _values(base, limit.figure), _values(new, limit.figure)
    if not b:
        return Verdict(step, limit, None, None, None, None, True,
                       f"{step}: no {limit.label} in the new run (the step is missing or failed)")
    if not a:
        return Verdict(step, limit, None, None, None, None, False,
                       f"{step}: no {limit.label} in the base run; nothing to compare")
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    change = (mean_b - mean_a) / mean_a * 100 if mean_a else 0.0
    worse_by = change * limit.worse
    half = difference_half_width(a, b)
    significant = None if half is None else abs(mean_b - mean_a) > half
    beyond = worse_by > limit.percent
    failed = beyond and significant is not False
    direction = "rose" if change >= 0 else "fell"
    text = (f"{step}: {limit.label} {direction} {abs(change):.1f} % ({mean_a:.4g} → {mean_b:.4g}; "
            f"limit {limit.percent:g} %")
    if significant is None:
        text += ", one iteration: no noise estimate)"
    elif significant:
        text += f", outside the noise ±{half:.3g})"
    else:
        text += f", inside the noise ±{half:.3g}: not a failure)" if beyond else f", noise ±{half:.3g})"
    return Verdict(step, limit, mean_a, mean_b, change, significant, failed, text)


def gate(summary: pl.DataFrame, base_run: str, new_run: str, checks: list[Limit]) -> list[Verdict]:
    """Every step of `base_run` against the same step of `new_run`, for each limit."""
    keys = [k for k in STEP_FIELDS if k in summary.columns]
    base = summary.filter(pl.col("run") == base_run)
    new = summary.filter(pl.col("run") == new_run)
    if base.is_empty():
        raise EsbperfError(f"run {base_run} has no steps to gate against")
    verdicts = []
    for step_keys, base_step in base.group_by(keys, maintain_order=True):
        match = pl.all_horizontal([(pl.col(k) == v) if v is not None else pl.col(k).is_null()
                                   for k, v in zip(keys, step_keys)])
        new_step = new.filter(match)
        name = _step_name(base_step.row(0, named=True))
        verdicts.extend(judge(base_step, new_step, limit, name) for limit in checks)
    return verdicts


def write_junit(verdicts: list[Verdict], path: Path, suite: str) -> None:
    """JUnit XML, one test case per step and figure, so CI systems list the gate as tests."""
    failures = sum(v.failed for v in verdicts)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(verdicts)}" failures="{failures}" errors="0">']
    for v in verdicts:
        tag = f'failure message={quoteattr(v.message)}' if v.failed else "system-out"
        body = f'<{tag}>{escape(v.message)}</{tag.split()[0]}>'
        lines += [f'  <testcase classname={quoteattr(suite)} name={quoteattr(f"{v.step} {v.limit.label}")}>',
                  f'    {body}', '  </testcase>']
    lines.append('</testsuite>')
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
