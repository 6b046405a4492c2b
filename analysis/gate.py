"""The gate: pass/fail limits a CI job holds runs to (`esbperf compare` and `esbperf report`,
docs/regression-gate.md).

Every limit is judged step by step on the figures the report shows: a step's response-time
mean and percentiles, error and late-start shares are those of its iterations pooled from their
data; its TPS is the mean of its iterations.

- **Relative** limits (`compare --max-tps-drop/--max-p99-rise/--max-mean-rise`) judge every
  later run (NEW) against the first (BASE). A step breaks one when its figure moved the wrong
  way by more than the limit and the move is outside the noise: for TPS and the mean, Student's
  two-sample t over the iterations (REPLICATES_TEST); for a percentile, distribution-free
  intervals from order statistics of each run's pooled transactions (ORDER_STATISTICS_TEST).
  Steps are matched by what defines them (scenario, target, payload, users, model, rate, test); a
  step of BASE that NEW lacks fails (a smaller NEW must not pass by leaving steps out); a NEW
  that shares no step with BASE, or a single run, is an error: nothing was compared. A check
  that cannot be made is **not judged**, never passed: BASE has no figure, BASE's figure is 0
  (no percentage of it), or a percentile's move beyond the limit has too few transactions
  for its noise test (its interval open on the side that would tell).
- **Absolute** limits (`--max-p99-ms`, `--max-mean-ms`, `--max-error-percent`,
  `--max-late-start-percent`, `--min-tps`) hold every step of every run to a fixed line; a
  figure that is missing (no transaction) fails. A limit that applies to no step is an error.

The verdicts (passed, failed, not judged) are printed, and written as JUnit XML (one test case
per step and limit; a check not judged is an error) and as a short Markdown summary for a pull
request."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Protocol
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from esbperf.analysis import forks
from esbperf.analysis.bottleneck import NAMES as BOUND_NAMES, pooled_bound, testbed_bound
from esbperf.analysis.forks import t_quantile
from esbperf.analysis.stats import KEYS, PERCENTILES, StepHistograms, distribution_figures, figure_sample
from esbperf.analysis.verdicts import percent_level, q_text, signed_percent
from esbperf.core.errors import EsbperfError
from esbperf.core.steady import min_transactions
from esbperf.results.histogram import Histogram

# What defines a step across runs (and the Grinder test, for a user's script of several).
STEP_FIELDS = ("scenario", "target", "payload_bytes", "users", "model", "rate", "test")
CONFIDENCE = 0.95
# Percentile figures (aggregate.csv's `rt_p99_ms`, …) and their percentile.
PERCENTILE_FIGURES = {f"rt_{name}_ms": p for name, p in PERCENTILES.items()}
# How a relative limit tells a move from noise, said in every message, the JUnit file and the docs.
REPLICATES_TEST = ("Student's two-sample t over the iterations (pooled variance, 95 %): "
                   "the interval of the difference excludes zero")
ORDER_STATISTICS_TEST = ("distribution-free 95 % interval of each run's pooled percentile from order "
                         "statistics (binomial ranks around n·p): the two intervals do not overlap")
# With two forks or more on both sides the process is the unit, and the limit is judged on the
# interval, never on the point estimate: a step fails when the whole interval lies beyond the limit,
# passes when it lies within, and is not judged when it straddles the limit.
FORKS_TEST = ("with 2+ forks a side, the interval of NEW ÷ BASE with the engine process as the unit "
              "(analysis/forks.py: bootstrap over the forks, Student's t with Welch's degrees of freedom), at the "
              "level Benjamini–Hochberg gives the family of such checks (95 % for one; forks.family): beyond "
              "the limit as a whole fails, within it as a whole passes, across it is not judged")
# The figures a testbed bound makes a floor of the target's (TPS at least, times and late starts at
# most): on a bounded step only a claim in the target's favour stands (BOUND_TEST). Errors are errors.
BOUNDED_FIGURES = {"tps", "rt_p99_ms", "rt_mean_ms", "late_start_percent"}
BOUND_TEST = ("a step the testbed bounded (the client, a link, the back ends: its `bound`) measured at least "
              "its target's TPS and at most its response times: a check that would hold it against it is not "
              "judged")


@dataclass(frozen=True)
class LimitOption:
    """A limit as its command-line option defines it."""

    flag: str            # --max-p99-ms
    figure: str          # an aggregate.csv column
    label: str           # how messages name the figure
    worse: int           # +1: higher is worse (times, shares); -1: lower is worse (throughput)
    absolute: bool       # False: a percentage of BASE's figure
    unit: str            # of an absolute limit's value: "ms", "%" or "" (TPS)
    help: str
    open_only: bool = False   # late starts exist in open-model steps only

    @property
    def param(self) -> str:
        """The option's keyword in the click command."""
        return self.flag.lstrip("-").replace("-", "_")


RELATIVE_OPTIONS = (
    LimitOption("--max-tps-drop", "tps", "TPS", -1, False, "%",
                "Fail when a step's TPS fell by more than this against the first run (e.g. 5%)."),
    LimitOption("--max-p99-rise", "rt_p99_ms", "p99", +1, False, "%",
                "Fail when a step's p99 (iterations pooled) rose by more than this (e.g. 10%)."),
    LimitOption("--max-mean-rise", "rt_mean_ms", "mean response time", +1, False, "%",
                "Fail when a step's mean response time rose by more than this (e.g. 10%)."),
)
ABSOLUTE_OPTIONS = (
    LimitOption("--max-p99-ms", "rt_p99_ms", "p99", +1, True, "ms",
                "Fail a step whose p99 response time (ms, iterations pooled) is above this."),
    LimitOption("--max-mean-ms", "rt_mean_ms", "mean response time", +1, True, "ms",
                "Fail a step whose mean response time (ms) is above this."),
    LimitOption("--max-error-percent", "error_percent", "errors", +1, True, "%",
                "Fail a step whose failed transactions are more than this share of its starts (%)."),
    LimitOption("--max-late-start-percent", "late_start_percent", "late starts", +1, True, "%",
                "Fail an open-model step whose requests started later than due, or never, are more than this "
                "share of those due (%).", open_only=True),
    LimitOption("--min-tps", "tps", "TPS", -1, True, "",
                "Fail a step whose TPS (mean over its iterations) is below this."),
)


@dataclass(frozen=True)
class Limit:
    option: LimitOption
    value: float         # relative: a percentage; absolute: the line, in option.unit

    @property
    def figure(self) -> str:
        return self.option.figure

    @property
    def label(self) -> str:
        return self.option.label

    @property
    def worse(self) -> int:
        return self.option.worse

    @property
    def absolute(self) -> bool:
        return self.option.absolute

    @property
    def bound(self) -> str:
        """The limit as a table shows it: `rise ≤ 10 %`, `≤ 50 ms`, `≥ 800`."""
        if not self.absolute:
            return f"{'rise' if self.worse > 0 else 'drop'} ≤ {self.value:g} %"
        return f"{'≤' if self.worse > 0 else '≥'} {self.value:g}{_unit(self.option.unit)}"

    @property
    def name(self) -> str:
        """What a JUnit test case calls the check (after the step)."""
        return self.label if not self.absolute else f"{self.label} {self.bound}"


def _unit(unit: str) -> str:
    return f" {unit}" if unit else ""


# A verdict's outcome.
PASSED, FAILED, NOT_JUDGED = "passed", "failed", "not judged"


@dataclass(frozen=True)
class Verdict:
    run: str                      # the run judged (NEW, for a relative limit)
    step: str
    limit: Limit
    base: float | None            # relative: BASE's figure
    new: float | None             # relative: NEW's figure; absolute: the step's figure
    change_percent: float | None  # relative only
    significant: bool | None      # relative: outside the noise; None: no noise estimate, or absolute
    failed: bool
    message: str
    invalid: str = ""             # what a validity warning says of a step judged (summary.csv `valid`)
    judged: bool = True           # False: the check could not be made (neither passed nor failed)

    @property
    def name(self) -> str:
        return f"{self.step} {self.limit.name}"

    @property
    def outcome(self) -> str:
        return FAILED if self.failed else PASSED if self.judged else NOT_JUDGED


# --- the options ---------------------------------------------------------------------------------

def parse_value(text: str, option: LimitOption) -> float:
    """A limit's number: '5%', '5', '5.0 %' for percentages, '50' or '50ms' for ms; a one-line
    error saying what to give otherwise."""
    what = {"%": "a percentage such as 5%", "ms": "a number of ms such as 50", "": "a number such as 800"}[option.unit]
    cleaned = str(text).strip()
    if option.unit and cleaned.endswith(option.unit):
        cleaned = cleaned[:-len(option.unit)].strip()
    try:
        value = float(cleaned)
    except ValueError:
        raise EsbperfError(f"{option.flag} {text!r}: give {what}") from None
    # A share is at most 100 %, a relative move below 1000 %; ms and TPS have no top.
    if option.absolute:
        in_range, bounds = (value <= 100, "0 to 100") if option.unit == "%" else (True, "0 or more")
    else:
        in_range, bounds = value < 1000, "0 to below 1000"
    if not (math.isfinite(value) and value >= 0 and in_range):
        raise EsbperfError(f"{option.flag} {text!r}: give {what} ({bounds})")
    return value


def parse_limits(values: dict[str, Any], options: Iterable[LimitOption] = RELATIVE_OPTIONS + ABSOLUTE_OPTIONS
                 ) -> list[Limit]:
    """The limits given on the command line: `values` by the options' keywords (click's), None
    where not given."""
    return [Limit(o, parse_value(values[o.param], o)) for o in options if values.get(o.param) is not None]


def check_output_files(files: dict[str, Path | None], out: Path | None, limits: list[Limit]) -> None:
    """--junit and --markdown need a limit, and never write into a report folder: neither the one
    being written (--out) nor an earlier one (a folder holding report.html)."""
    given = {flag: Path(path) for flag, path in files.items() if path is not None}
    if given and not limits:
        flags = " and ".join(given)
        raise EsbperfError(f"{flags} needs a limit (e.g. --max-p99-ms 50, or with compare --max-tps-drop 5%)")
    if len({p.absolute() for p in given.values()}) < len(given):
        raise EsbperfError(f"{' and '.join(given)} name the same file; give each its own")
    for flag, path in given.items():
        where = path.absolute()
        if where.is_dir():
            raise EsbperfError(f"{flag} {path}: is a folder; give a file name")
        if out is not None and Path(out).absolute() in where.parents:
            raise EsbperfError(f"{flag} {path}: inside the report folder {out}; reports are written whole, once "
                               "(give a path outside it)")
        if (where.parent / "report.html").exists():
            raise EsbperfError(f"{flag} {path}: {where.parent} is a report folder, and reports are never written "
                               "into again; give a path outside it")


# --- the figures -----------------------------------------------------------------------------------

class Figures(Protocol):
    """What the gate reads of an analysis (analysis/report.py's Analysis has these)."""

    summary: pl.DataFrame                      # one row per step and iteration
    aggregate: pl.DataFrame                    # one row per run and step, iterations pooled
    histograms: dict[tuple, StepHistograms]    # stats.KEYS values -> iterations pooled


# The figures the report takes from a step's pooled distributions (response times, percentiles).
_POOLED_FROM_HISTOGRAMS = set(distribution_figures(StepHistograms()))


@dataclass
class _Step:
    """One step of one run: its iterations (summary rows) and its pooled distributions."""

    iterations: pl.DataFrame
    pooled: StepHistograms | None
    step_histograms: dict[tuple, StepHistograms] | None = None   # each iteration's, by (run, step_dir, test)

    @property
    def forks(self) -> int:
        """The engine processes that measured the step (summary.csv `fork`; 1 without the column)."""
        return self.iterations["fork"].n_unique() if "fork" in self.iterations.columns else 1

    @property
    def bound(self) -> str | None:
        """What bounded the step: the first in the bounds' precedence any iteration had (aggregate.csv's)."""
        return pooled_bound(self.iterations["bound"].to_list())[0] if "bound" in self.iterations.columns else None

    def sample(self, figure: str) -> forks.Sample:
        return figure_sample(self.iterations.to_dicts(), self.step_histograms or {}, figure)

    def values(self, figure: str) -> list[float]:
        """The figure of each iteration."""
        return [v for v in self.iterations[figure].to_list() if v is not None and not math.isnan(v)]

    def figure(self, figure: str) -> float | None:
        """As the report shows it: pooled from the data where the report pools it, else the mean
        of the iterations."""
        if self.pooled is not None and figure in _POOLED_FROM_HISTOGRAMS:
            return distribution_figures(self.pooled)[figure]
        values = self.values(figure)
        return sum(values) / len(values) if values else None



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


def rank_interval(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics X(l) ≤ X(u) that bound a distribution-free
    `confidence` interval of the q-quantile (0 < q < 1) of n values: the number of values below
    the quantile is Binomial(n, q), and l, u are the ranks it falls short of or reaches with
    probability at most (1 − confidence) / 2 each. None on a side where no rank is far enough
    out (too few values: the interval is open there)."""
    if n <= 0:
        return None, None
    tail = (1 - confidence) / 2
    # The binomial's mass beyond 12 standard deviations (+10) of its mean is far below 1e-20.
    spread = math.sqrt(n * q * (1 - q))
    ranks = np.arange(max(0, math.floor(n * q - 12 * spread - 10)), min(n, math.ceil(n * q + 12 * spread + 10)) + 1)
    cdf = scipy_stats.binom.cdf(ranks, n, q)     # P(at most k values below the quantile)
    low, high = ranks[cdf <= tail], ranks[cdf >= 1 - tail]
    lower = int(low[-1]) + 1 if low.size else None            # P(fewer than `lower` values below) ≤ tail
    upper = int(high[0]) + 1 if high.size and high[0] + 1 <= n else None   # P(`upper` or more below) ≤ tail
    return lower, upper


def value_at_rank(h: Histogram, rank: int) -> int:
    """The rank-th smallest value (1-based) as the report's percentiles read it: its bucket's
    lower bound, exact below 2048 µs."""
    seen = 0
    for lo, n in h.items():
        seen += n
        if seen >= rank:
            return max(lo, h.min)
    return h.max


def percentile_interval(h: Histogram, p: float) -> tuple[float | None, float | None]:
    """The distribution-free 95 % interval of percentile p of a histogram's values, in ms; None
    on a side that is open (too few values)."""
    low, high = rank_interval(h.n, p / 100.0)
    return tuple(None if r is None else value_at_rank(h, r) / 1000.0 for r in (low, high))


def _ms(value: float | None) -> str:
    return "∞" if value is None else f"{value:.4g}"


def _noise(limit: Limit, base: _Step, new: _Step, moved: float) -> tuple[bool | None, str, bool]:
    """Whether a move of `moved` is outside the noise (None: no estimate), how the message says
    so, and whether the noise test could be made: a percentile's intervals must be closed on the
    side the move would leave the other's (too few transactions open them there)."""
    p = PERCENTILE_FIGURES.get(limit.figure)
    if p is not None and base.pooled is not None and new.pooled is not None:
        (a_lo, a_hi), (b_lo, b_hi) = percentile_interval(base.pooled.response, p), \
            percentile_interval(new.pooled.response, p)
        apart = (b_lo is not None and a_hi is not None and b_lo > a_hi) or \
                (a_lo is not None and b_hi is not None and b_hi < a_lo)
        where = (f"95 % order-statistic intervals {_ms(a_lo)}–{_ms(a_hi)} and {_ms(b_lo)}–{_ms(b_hi)} ms "
                 + ("do not overlap" if apart else "overlap"))
        sides = (b_lo, a_hi) if moved >= 0 else (a_lo, b_hi)
        return apart, where, apart or None not in sides
    half = difference_half_width(base.values(limit.figure), new.values(limit.figure))
    if half is None:
        return None, "one iteration: no noise estimate", True
    return abs(moved) > half, f"noise ±{half:.3g} by Student's t over the iterations", True


def unmeasured(limit: Limit, parts: dict[str, StepHistograms | None]) -> str:
    """Why a percentile limit cannot judge a step: `<p> not measured: n transactions in <where>, a
    <p> needs m` (stats.describe leaves a percentile from too few values empty), or ""."""
    p = PERCENTILE_FIGURES.get(limit.figure)
    if p is None:
        return ""
    short = [f"{h.response.n} transactions in {where}" for where, h in parts.items()
             if h is not None and 0 < h.response.n < min_transactions(p)]
    return f"{limit.label} not measured: {', '.join(short)}, a {limit.label} needs {min_transactions(p)}" if short else ""


def _held_back(limit: Limit, verdict: Verdict, bounds: dict[str, str | None]) -> Verdict:
    """A verdict on a step the testbed bounded (BOUND_TEST): `bounds` by where ("the new run", "the
    base run", "the step") and what held the figure a step's worse side can only have been better
    than what it read. A failure of a bounded NEW (or step), and a pass against a bounded BASE, are
    claims the bound hides: not judged."""
    if not verdict.judged or limit.figure not in BOUNDED_FIGURES:
        return verdict
    hiding = [where for where, bound in bounds.items() if testbed_bound(bound)
              and verdict.failed == (where != "the base run")]
    if not hiding:
        return verdict
    said = "; ".join(f"{where}'s step was bounded by {BOUND_NAMES[bounds[where]]}" for where in hiding)
    return replace(verdict, failed=False, judged=False, significant=None,
                   message=f"{verdict.message}: not judged ({said}: its target answers at least its TPS, within at "
                           "most its response times, which hides whether the limit held)")


def _judge_relative(limit: Limit, run: str, step: str, base: _Step, new: _Step | None,
                    forked: dict | None = None, family: forks.Family | None = None) -> Verdict:
    verdict = _judge_relative_unbounded(limit, run, step, base, new, forked, family)
    return _held_back(limit, verdict, {"the base run": base.bound, "the new run": None if new is None else new.bound})


def _judge_relative_unbounded(limit: Limit, run: str, step: str, base: _Step, new: _Step | None,
                              forked: dict | None, family: forks.Family | None) -> Verdict:
    why = unmeasured(limit, {"the base run": base.pooled, "the new run": None if new is None else new.pooled})
    if why:
        return Verdict(run, step, limit, None, None, None, None, False, f"{run}: {step}: {why}; not judged",
                       judged=False)
    a = base.figure(limit.figure)
    b = None if new is None else new.figure(limit.figure)
    if b is None:
        return Verdict(run, step, limit, a, None, None, None, True,
                       f"{run}: {step}: no {limit.label} in the new run (the step is missing or has no transaction)")
    if a is None or a == 0:
        why = f"no {limit.label} in the base run" if a is None else f"the base run's {limit.label} is 0"
        return Verdict(run, step, limit, a, b, None, None, False,
                       f"{run}: {step}: {why} (no successful transaction), so no change can be reckoned from it "
                       f"({_figure(a)} → {_figure(b)}): not judged", judged=False)
    change = (b - a) / a * 100
    if base.forks > 1 and new.forks > 1:
        return _judge_on_forks(limit, run, step, base, new, a, b, change, forked, family)
    beyond = change * limit.worse > limit.value
    significant, noise, testable = _noise(limit, base, new, b - a)
    if beyond and not testable:
        return Verdict(run, step, limit, a, b, change, None, False,
                       f"{run}: {step}: {limit.label} {'rose' if change >= 0 else 'fell'} {abs(change):.1f} % "
                       f"({a:.4g} → {b:.4g}; limit {limit.value:g} %; {noise}: too few transactions to tell the "
                       "move from noise: not judged)", judged=False)
    failed = beyond and significant is not False
    verdict = ("outside the noise" if significant else "inside the noise: not a failure" if significant is False
               else "the limit alone decides") if beyond else ""
    text = (f"{run}: {step}: {limit.label} {'rose' if change >= 0 else 'fell'} {abs(change):.1f} % "
            f"({a:.4g} → {b:.4g}; limit {limit.value:g} %; {noise}" + (f": {verdict}" if verdict else "") + ")")
    return Verdict(run, step, limit, a, b, change, significant, failed, text)


def _judge_on_forks(limit: Limit, run: str, step: str, base: _Step, new: _Step, a: float, b: float,
                    change: float, forked: dict | None = None, family: forks.Family | None = None) -> Verdict:
    """A relative limit with forks on both sides (FORKS_TEST): judged on the interval of NEW ÷ BASE, at
    the level of the family of such checks (`judge` gives it; 95 % without one). `forked` keeps each
    check's interval (95 %) for the family and its second look."""
    key = (run, step, limit.figure)
    found = None if forked is None else forked.get(key)
    if found is None:
        found = forks.ratio(new.sample(limit.figure), base.sample(limit.figure))
        if forked is not None:
            forked[key] = found
    moved = f"{limit.label} {'rose' if change >= 0 else 'fell'} {abs(change):.1f} % ({a:.4g} → {b:.4g}; limit {limit.value:g} %"
    if not found.has_interval:
        return Verdict(run, step, limit, a, b, change, None, False,
                       f"{run}: {step}: {moved}; {found.why_none}: not judged)", judged=False)
    control = ""
    if family is not None:
        found = forks.at_confidence(found, family.confidence)
        q = dict(zip(forked, family.q)).get(key) if forked is not None else None
        if family.judged > 1 and q is not None:
            control = f"; Benjamini–Hochberg over {family.judged} checks, q {q_text(q)}"
    line = 1 + limit.worse * limit.value / 100          # the limit as a ratio NEW ÷ BASE
    beyond = found.low > line if limit.worse > 0 else found.high < line
    within = found.high <= line if limit.worse > 0 else found.low >= line
    level = percent_level(family.confidence if family is not None else CONFIDENCE)
    where = (f"{level} interval of the change {signed_percent(found.low - 1)} to "
             f"{signed_percent(found.high - 1)} % over "
             f"{base.forks} and {new.forks} forks{control}")
    significant = not found.low <= 1 <= found.high
    if beyond:
        return Verdict(run, step, limit, a, b, change, significant, True, f"{run}: {step}: {moved}; {where}: beyond "
                                                                          "the limit as a whole)")
    if within:
        return Verdict(run, step, limit, a, b, change, significant, False, f"{run}: {step}: {moved}; {where}: within "
                                                                           "the limit)")
    return Verdict(run, step, limit, a, b, change, significant, False,
                   f"{run}: {step}: {moved}; {where}: across the limit, so the forks cannot tell; more forks "
                   "would (docs/regression-gate.md): not judged)", judged=False)


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def step_name(row: dict) -> str:
    where = f"{row['scenario']} {row['target']} {row.get('payload_label') or row['payload_bytes']}"
    load = f"{row['rate']:g}/s" if row.get("model") == "open" and row.get("rate") else f"{row['users']} users"
    test = f" test {row['test']}" if (row.get("step_tests") or 1) > 1 else ""
    return f"{where} {load}{test}"


def _pooled(data: Figures, rows: pl.DataFrame) -> StepHistograms | None:
    if rows.is_empty() or not all(k in rows.columns for k in KEYS):
        return None
    first = rows.row(0, named=True)
    return data.histograms.get(tuple(first[k] for k in KEYS))


def compare_runs(data: Figures, base_run: str, new_run: str, limits: list[Limit], forked: dict | None = None,
                 family: forks.Family | None = None) -> list[Verdict]:
    """Every step of `base_run` against the same step of `new_run`, for each relative limit; the checks
    on forks (FORKS_TEST) at `family`'s level, their intervals kept in `forked`."""
    summary = data.summary
    keys = [k for k in STEP_FIELDS if k in summary.columns]
    base = summary.filter(pl.col("run") == base_run)
    new = summary.filter(pl.col("run") == new_run)
    if base.is_empty():
        raise EsbperfError(f"run {base_run} has no steps to gate against")
    verdicts, compared = [], 0
    for step_keys, base_step in base.group_by(keys, maintain_order=True):
        match = pl.all_horizontal([(pl.col(k) == v) if v is not None else pl.col(k).is_null()
                                   for k, v in zip(keys, step_keys)])
        new_step = new.filter(match)
        compared += not new_step.is_empty()
        iterations = getattr(data, "step_histograms", None)
        mine = _Step(base_step, _pooled(data, base_step), iterations)
        theirs = None if new_step.is_empty() else _Step(new_step, _pooled(data, new_step), iterations)
        name = step_name(base_step.row(0, named=True))
        invalid = invalid_steps({"the base run": base_step, "the new run": new_step})
        verdicts += [_noted(_judge_relative(limit, new_run, name, mine, theirs, forked, family), invalid)
                     for limit in limits]
    if not compared:
        raise EsbperfError(f"nothing compared: {new_run} has no step in common with {base_run} (steps match by "
                           "scenario, target, payload, users, model, rate and test); gate runs of the same steps")
    return verdicts


def hold(data: Figures, limits: list[Limit]) -> list[Verdict]:
    """Every step of every run against each absolute limit (aggregate.csv's figures, the report's)."""
    verdicts = []
    for limit in limits:
        rows = [r for r in data.aggregate.iter_rows(named=True) if not limit.option.open_only or r["model"] == "open"]
        if not rows:
            raise EsbperfError(f"{limit.option.flag}: no step it applies to (it limits open-model steps, and these "
                               "runs have none); leave it out")
        for r in rows:
            value = r[limit.figure]
            value = None if value is None or math.isnan(value) else value
            unit = _unit(limit.option.unit)
            name = step_name(r)
            why = unmeasured(limit, {"the step": data.histograms.get(tuple(r[k] for k in KEYS))})
            if why:
                verdicts.append(_noted(Verdict(r["run"], name, limit, None, None, None, None, False,
                                               f"{r['run']}: {name}: {why}; not judged", judged=False),
                                       invalid_steps({"the step": pl.DataFrame([r])})))
                continue
            if value is None:
                failed, text = True, f"{r['run']}: {name}: no {limit.label} (no transaction); limit {limit.bound}"
            else:
                failed = (value - limit.value) * limit.worse > 0
                side = ("above" if limit.worse > 0 else "below") if failed else "within"
                text = f"{r['run']}: {name}: {limit.label} {value:.4g}{unit}, {side} the limit {limit.bound}"
            verdict = Verdict(r["run"], name, limit, None, value, None, None, failed, text)
            if value is not None:
                verdict = _held_back(limit, verdict, {"the step": r.get("bound")})
            verdicts.append(_noted(verdict, invalid_steps({"the step": pl.DataFrame([r])})))
    return verdicts


def invalid_steps(frames: dict[str, pl.DataFrame]) -> str:
    """What the validity warnings say of the steps judged (their rows' `valid`, stats.with_verdicts):
    `the base run: drift; the new run: errors, drift`, or "" when every one is valid."""
    said = []
    for where, rows in frames.items():
        names = sorted({n for v in (rows["valid"] if "valid" in rows.columns else []) if v and v != "yes"
                        for n in v.split(";")})
        if names:
            said.append(f"{where}: {', '.join(names)}")
    return "; ".join(said)


def _noted(verdict: Verdict, invalid: str) -> Verdict:
    """The verdict, saying so when it judged a step that is not a valid measurement."""
    if not invalid:
        return verdict
    return replace(verdict, message=f"{verdict.message} [not a valid measurement: {invalid}]", invalid=invalid)


def judge(data: Figures, runs: list[str], limits: list[Limit]) -> list[Verdict]:
    """Every check of `limits`: the relative ones of each later run in `runs` against the first,
    the absolute ones on every step of every run."""
    relative = [lim for lim in limits if not lim.absolute]
    verdicts = []
    if relative:
        if len(runs) < 2:
            flags = ", ".join(lim.option.flag for lim in relative)
            raise EsbperfError(f"nothing compared: {flags} judge a later run against the first, and one run was "
                               "given; give BASE and NEW, or hold one run to absolute limits (--max-p99-ms, …)")
        base, *later = runs
        forked: dict = {}                # the checks on forks: one family, judged once its p-values are known
        for new in later:
            compare_runs(data, base, new, relative, forked)
        family = forks.family([forks.p_value(found) for found in forked.values()])
        for new in later:
            verdicts += compare_runs(data, base, new, relative, forked, family)
    return verdicts + hold(data, [lim for lim in limits if lim.absolute])


# --- the outputs -----------------------------------------------------------------------------------

def headline(verdicts: list[Verdict]) -> str:
    """`gate failed|not judged|passed: <failed> of <n> check(s) broke a limit, <k> not judged, <m> passed`."""
    counts = {o: sum(v.outcome == o for v in verdicts) for o in (FAILED, NOT_JUDGED, PASSED)}
    status = FAILED if counts[FAILED] else NOT_JUDGED if counts[NOT_JUDGED] else PASSED
    return (f"gate {status}: {counts[FAILED]} of {len(verdicts)} check(s) broke a limit, "
            f"{counts[NOT_JUDGED]} not judged, {counts[PASSED]} passed")


# `esbperf report` and `compare` exit with these: a broken limit outweighs a check not judged.
EXIT_FAILED, EXIT_NOT_JUDGED = 1, 3


def exit_code(verdicts: list[Verdict]) -> int:
    """0: every check passed; EXIT_FAILED: a step broke a limit; EXIT_NOT_JUDGED: none broke one,
    but a check could not be made (a gate that judged nothing must not pass)."""
    if any(v.failed for v in verdicts):
        return EXIT_FAILED
    return EXIT_NOT_JUDGED if any(not v.judged for v in verdicts) else 0


def noise_tests(limits: list[Limit]) -> list[str]:
    """The noise tests of these limits' relative ones, in words."""
    relative = [lim for lim in limits if not lim.absolute]
    return ([f"TPS and mean: {REPLICATES_TEST}"] if any(lim.figure not in PERCENTILE_FIGURES for lim in relative)
            else []) + \
        ([f"percentiles: {ORDER_STATISTICS_TEST}"] if any(lim.figure in PERCENTILE_FIGURES for lim in relative)
         else []) + ([f"forks: {FORKS_TEST}"] if relative else [])


def write_atomically(path: Path, text: str) -> None:
    """Write a whole file or nothing: into a hidden file beside it, then renamed over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise EsbperfError(f"could not write {path}: {e.strerror or e}") from None


def write_junit(verdicts: list[Verdict], path: Path, suite: str) -> None:
    """JUnit XML, one test case per step and limit (class: the run judged), so CI systems list
    the gate as tests; the suite's properties name the noise tests."""
    failures = sum(v.failed for v in verdicts)
    errors = sum(v.outcome == NOT_JUDGED for v in verdicts)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr(suite)} tests="{len(verdicts)}" failures="{failures}" errors="{errors}">']
    tests = noise_tests([v.limit for v in verdicts])
    if tests:
        lines.append("  <properties>")
        lines += [f'    <property name="noise test" value={quoteattr(t)}/>' for t in tests]
        lines.append("  </properties>")
    for v in verdicts:
        body = (f"<failure message={quoteattr(v.message)}>{escape(v.message)}</failure>" if v.failed else
                f"<error message={quoteattr(v.message)}>{escape(v.message)}</error>" if not v.judged
                else f"<system-out>{escape(v.message)}</system-out>")
        lines += [f'  <testcase classname={quoteattr(v.run)} name={quoteattr(v.name)}>', f'    {body}',
                  '  </testcase>']
    lines.append('</testsuite>')
    write_atomically(path, "\n".join(lines) + "\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v: Verdict) -> str:
    unit = _unit(v.limit.option.unit) if v.limit.absolute else ""
    if v.limit.absolute:
        return "–" if v.new is None else f"{v.new:,.4g}{unit}"
    if v.base is None or v.new is None or v.change_percent is None:     # no percentage of a 0 base
        return f"{'–' if v.base is None else f'{v.base:,.4g}'} → {'–' if v.new is None else f'{v.new:,.4g}'}"
    return f"{v.base:,.4g} → {v.new:,.4g} ({v.change_percent:+.1f} %)"


def _outcome(v: Verdict) -> str:
    noise = ("" if v.significant is None or v.limit.absolute else
             " (outside the noise)" if v.significant else " (inside the noise)")
    return ("**FAIL**" if v.failed else "pass" if v.judged else "**NOT JUDGED**") + noise


def markdown(verdicts: list[Verdict], what: str) -> str:
    """A headline and a table (step, figure, value, limit, verdict) for a pull-request comment:
    the failed checks in view, the passed ones folded."""
    several = len({v.run for v in verdicts}) > 1

    def table(rows: list[Verdict]) -> list[str]:
        out = ["| step | figure | value | limit | verdict |", "|---|---|---|---|---|"]
        for v in rows:
            step = f"{v.run}: {v.step}" if several else v.step
            out.append("| " + " | ".join(_cell(c) for c in (step, v.limit.label, _value(v), v.limit.bound,
                                                             _outcome(v))) + " |")
        return out

    shown = [v for v in verdicts if v.outcome != PASSED]     # failed and not judged: in view
    passed = [v for v in verdicts if v.outcome == PASSED]
    lines = [f"**esbperf {headline(verdicts)}** ({what})", ""]
    if shown:
        lines += table(shown) + [""]
    if passed:
        lines += ["<details><summary>" + f"{len(passed)} check(s) passed" + "</summary>", ""] + table(passed) + \
                 ["", "</details>", ""]
    lines += [f"Noise tests of the relative limits: {'; '.join(noise_tests([v.limit for v in verdicts]))}."] \
        if noise_tests([v.limit for v in verdicts]) else []
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(verdicts: list[Verdict], path: Path, what: str) -> None:
    write_atomically(path, markdown(verdicts, what))
