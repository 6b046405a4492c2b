"""The engine process as the unit of a measurement (docs/analysis.md, "Forks: the process as the
unit"), after Kalibera & Jones, "Rigorous benchmarking in reasonable time" (ISMM 2013): a target
measured in N forks (each a freshly started engine process, warmed to steady) of r iterations each
has two levels of variance, between processes and between iterations of one process, and its
figures are as certain as its processes allow, not its iterations.

- `components`: the two variances (their method-of-moments estimates).
- `interval`: a figure's 95 % interval, Student's t with the forks' degrees of freedom.
- `ratio`, `difference`: the interval of A ÷ B (A − B) of two targets' figures, by a bootstrap over
  the forks: each resample's figure taken from the resampled forks' pooled data (their TPS, their
  pooled histograms' percentile), its spread the interval's standard error, the forks the degrees
  of freedom.
- `family`: a family of verdicts judged together (Benjamini–Hochberg on `p_value`s from the same t
  statistics as their intervals), and the level each interval is then given at (`at_confidence`).
- `repetitions`: how many forks and iterations a difference of 5 % or 10 % needs, from a pilot's
  variance components.

With one fork the iterations are the units: every interval then says it leaves out the variance
between processes (`Interval.one_fork`), which no number of iterations of one process measures.
What the intervals say in words (a verdict's sentence, a family's line) is analysis/verdicts.py's."""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as scipy_stats

from esbperf.results.histogram import Histogram, nearest_rank

CONFIDENCE = 0.95
# The bootstrap enumerates every distinct resample of the units (weighted by its multinomial
# probability: the ideal bootstrap, no Monte-Carlo noise, the same figures every time) while there
# are at most this many, i.e. up to 7 units; beyond, RESAMPLES drawn from a generator seeded with SEED.
EXACT_RESAMPLES = 5000
RESAMPLES = 2000
SEED = 2013
# Resamples of pooled histograms evaluated at once (each a row over every bucket of the step).
BATCH = 256
# Two samples whose forks differ are paired over those they share when they share at least this many:
# over 2 the paired interval has 1 degree of freedom (t at 95 %: 12.7), wider than the unpaired one of
# the synthetic Round 2's spoiled forks (72 of its 88 verdicts reproduced paired over 2, 78 unpaired).
MIN_COMMON_FORKS = 3


@functools.lru_cache(maxsize=None)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (scipy's; kept, as a round asks for the same few thousands of times)."""
    return float(scipy_stats.t.ppf(p, df))


def welch_df(parts: Iterable[tuple[float, float]]) -> float:
    """Welch–Satterthwaite's degrees of freedom of a sum of independent variance estimates, each given
    as (variance, its degrees of freedom): (Σ v)² ÷ Σ (v² ÷ df). Between the fewest of the parts' and
    their sum: near the noisier side's alone when its variance dominates (a pooled n_A + n_B − 2 then
    claims more than that side's few units know: with 3 units a side spread by 30 % and 2 %, a 95 %
    interval on the pooled 4 covered the true ratio in 90.4 % of 2,000 seeded experiments, on these
    95.0 % (94.4 % over ten such seeds); tests/test_fork_statistics.py).
    Both variances 0 (every unit alike): the sum."""
    parts = [(v, df) for v, df in parts if df]
    total = sum(v for v, _ in parts)
    spread = sum(v * v / df for v, df in parts)
    return total * total / spread if spread > 0 else float(sum(df for _, df in parts))


# --- a figure's data ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One target's figure at one step: its iterations, each with the fork (process) that measured it.

    Either `values` (a figure of each iteration averaged over them: TPS, a capacity; the figure of
    several is their mean, of forks their forks' means) or `histograms` (each iteration's response
    times, µs; the figure of several is the percentile `p` of their pooled histogram, or its mean
    when `p` is None). `left_out` says which iterations the caller left out, and why."""

    forks: tuple[int, ...]
    values: tuple[float, ...] = ()
    histograms: tuple[Histogram, ...] = ()
    p: float | None = None
    left_out: str = ""
    scale: float = 1.0        # a pooled figure's unit per histogram unit (0.001: µs to ms)
    unit: str = "iteration"   # what one fork's repetitions are called (a capacity's: "search")

    @classmethod
    def of_values(cls, values: Iterable[float | None], forks: Iterable[int] | None = None, left_out: str = "",
                  unit: str = "iteration") -> "Sample":
        pairs = [(int(f), float(v)) for v, f in zip(values, forks if forks is not None else itertools.repeat(1))
                 if v is not None and not (isinstance(v, float) and math.isnan(v))]
        return cls(tuple(f for f, _ in pairs), values=tuple(v for _, v in pairs), left_out=left_out, unit=unit)

    @classmethod
    def of_histograms(cls, histograms: Iterable[Histogram | None], forks: Iterable[int] | None, p: float | None,
                      left_out: str = "", scale: float = 1.0) -> "Sample":
        pairs = [(int(f), h) for h, f in zip(histograms, forks if forks is not None else itertools.repeat(1))
                 if h is not None and h.n]
        return cls(tuple(f for f, _ in pairs), histograms=tuple(h for _, h in pairs), p=p, left_out=left_out,
                   scale=scale)

    @property
    def pooled(self) -> bool:
        return bool(self.histograms)

    @property
    def iterations(self) -> int:
        return len(self.forks)

    @property
    def fork_count(self) -> int:
        return len(set(self.forks))

    @property
    def one_fork(self) -> bool:
        return self.fork_count < 2

    def groups(self) -> list[list[int]]:
        """The iterations' indices per unit: per fork with two forks or more, else each iteration
        alone (one fork: the iterations are all there is to resample)."""
        if self.one_fork:
            return [[i] for i in range(self.iterations)]
        by_fork: dict[int, list[int]] = {}
        for i, f in enumerate(self.forks):
            by_fork.setdefault(f, []).append(i)
        return [by_fork[f] for f in sorted(by_fork)]

    def of_forks(self, chosen: Iterable[int]) -> "Sample":
        """The iterations of these forks only."""
        keep = [i for i, f in enumerate(self.forks) if f in set(chosen)]
        return Sample(tuple(self.forks[i] for i in keep), tuple(self.values[i] for i in keep) if self.values else (),
                      tuple(self.histograms[i] for i in keep) if self.histograms else (), self.p, self.left_out,
                      self.scale, self.unit)

    def iteration_values(self) -> list[float]:
        """Each iteration's own figure (a percentile of its own histogram, for pooled figures)."""
        if not self.pooled:
            return list(self.values)
        return [_figure_of(h, self.p) * self.scale for h in self.histograms]

    def figure(self) -> float | None:
        """The figure of all iterations: the mean of the forks' means (of the iterations with one
        fork), or the percentile of all histograms pooled."""
        if not self.forks:
            return None
        return float(_Units.of(self).statistic(np.ones((1, len(self.groups()))))[0])


def _figure_of(h: Histogram, p: float | None) -> float:
    return float(h.mean if p is None else h.percentile(p))


class _Units:
    """A sample's resampling units as arrays: a statistic of any weighting of them at once."""

    def __init__(self, sample: Sample, groups: list[list[int]]):
        self.sample, self.n = sample, len(groups)
        if not sample.pooled:
            self.means = np.array([np.mean([sample.values[i] for i in g]) for g in groups])
            return
        keys = [np.fromiter(h.counts.keys(), np.int64, len(h.counts)) for h in sample.histograms]
        self.lows = np.unique(np.concatenate(keys)).astype(np.float64)
        counts = np.zeros((self.n, len(self.lows)))
        for u, g in enumerate(groups):
            for i in g:
                h = sample.histograms[i]
                np.add.at(counts[u], np.searchsorted(self.lows, keys[i]), np.fromiter(h.counts.values(), np.float64,
                                                                                      len(h.counts)))
        self.totals = np.array([float(sum(sample.histograms[i].total for i in g)) for g in groups])
        self.sizes = np.array([float(sum(sample.histograms[i].n for i in g)) for g in groups])
        self.mins = np.array([float(min(sample.histograms[i].min for i in g)) for g in groups])
        self.cumulative = np.cumsum(counts, axis=1)

    @classmethod
    def of(cls, sample: Sample) -> "_Units":
        return cls(sample, sample.groups())

    def statistic(self, weights: np.ndarray) -> np.ndarray:
        """The figure of each row of `weights` (how often each unit is taken)."""
        if not self.sample.pooled:
            return weights @ self.means / weights.sum(axis=1)
        if self.sample.p is None:
            return weights @ self.totals / (weights @ self.sizes) * self.sample.scale
        out = np.empty(len(weights))
        for start in range(0, len(weights), BATCH):
            w = weights[start:start + BATCH]
            n = w @ self.sizes
            ranks = np.array([nearest_rank(self.sample.p, k) for k in np.rint(n).astype(np.int64).tolist()])
            cumulative = np.zeros((len(w), self.cumulative.shape[1]))
            for u in range(self.n):       # a sum of n scaled rows: no BLAS threads for a small product
                cumulative += w[:, u, None] * self.cumulative[u]
            index = np.argmax(cumulative >= ranks[:, None] - 1e-9, axis=1)
            lowest = np.where(w > 0, self.mins, np.inf).min(axis=1)
            out[start:start + BATCH] = np.maximum(self.lows[index], lowest)   # as Histogram.percentile reads it
        return out * self.sample.scale


@functools.lru_cache(maxsize=None)
def _resamples(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap's resamples of n units (how often each is taken) and their probabilities:
    every distinct one while there are at most EXACT_RESAMPLES, else RESAMPLES seeded draws."""
    if math.comb(2 * n - 1, n) <= EXACT_RESAMPLES:
        rows = np.array([np.bincount(c, minlength=n) for c in itertools.combinations_with_replacement(range(n), n)])
        log_p = (math.lgamma(n + 1) - np.sum([[math.lgamma(k + 1) for k in r] for r in rows], axis=1)
                 - n * math.log(n))
        return rows.astype(np.float64), np.exp(log_p)
    rng = np.random.default_rng(SEED + n)
    rows = rng.multinomial(n, np.full(n, 1.0 / n), size=RESAMPLES).astype(np.float64)
    return rows, np.full(RESAMPLES, 1.0 / RESAMPLES)


@dataclass(frozen=True)
class _Spread:
    """A figure's point value and the variance of its estimate, on a log scale or not."""

    value: float
    variance: float      # of log(value) when `log`, else of value
    units: int
    log: bool


def _spread(sample: Sample, log: bool) -> _Spread | None:
    """The figure and the variance of its estimate: the bootstrap's variance over the units' resamples,
    times n / (n − 1), the ideal bootstrap's shortfall for a mean (its variance of a mean of n
    resampled units is (n − 1)/n of s²/n). Units are resampled at the top level only: an iteration
    resampled again inside a resampled fork would count the within-process variance twice (it is
    in the spread of the forks' means already; Davison & Hinkley, Bootstrap Methods and their
    Application, 1997, §3.8)."""
    groups = sample.groups()
    if len(groups) < 2:
        return None
    units = _Units(sample, groups)
    value = float(units.statistic(np.ones((1, len(groups))))[0])
    weights, probability = _resamples(len(groups))
    figures = units.statistic(weights)
    if log:
        if value <= 0 or np.any(figures <= 0):
            return None
        figures = np.log(figures)
    mean = float(probability @ figures)
    variance = float(probability @ (figures - mean) ** 2) * len(groups) / (len(groups) - 1)
    return _Spread(value, variance, len(groups), log)


# --- intervals -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """A figure (or a ratio, or a difference of figures) and its 95 % interval."""

    value: float | None
    low: float | None
    high: float | None
    forks: int               # the fewest forks of the sides (1: one fork, the iterations are the units)
    units: int               # the fewest units of the sides: forks, or iterations with one fork
    df: float | None         # Student's t degrees of freedom; None without an interval
    one_fork: bool           # True: the interval leaves out the variance between processes
    se: float | None = None  # its standard error (of the log for a ratio or a pooled figure)
    log: bool = False        # the interval is symmetric in log(value)
    why_none: str = ""       # why there is no interval
    paired: bool = False     # two sides measured by the same forks, each fork's A against its own B

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        return None if not self.has_interval else (self.high - self.low) / 2

    def note(self) -> str:
        """What the interval leaves out, or why there is none; "" when neither."""
        if not self.has_interval:
            return self.why_none
        return "one fork: the interval leaves out the variance between processes" if self.one_fork else ""


def _none(value: float | None, sides: Sequence[Sample], why: str) -> Interval:
    return Interval(value, None, None, min((s.fork_count for s in sides), default=0),
                    min((len(s.groups()) for s in sides), default=0), None, any(s.one_fork for s in sides),
                    why_none=why)


def _units_word(sample: Sample) -> str:
    return sample.unit if sample.one_fork else "fork"


def interval(sample: Sample, confidence: float = CONFIDENCE) -> Interval:
    """A figure's interval. A mean (TPS, a capacity): the forks' means ± t(n − 1) × their standard
    deviation ÷ √n (Kalibera & Jones), the iterations' with one fork. A pooled figure (a percentile):
    symmetric in its log, t(n − 1) bootstrap standard errors (`_spread`)."""
    value = sample.figure()
    n = len(sample.groups())
    if n < 2:
        return _none(value, [sample], f"one {_units_word(sample)}: no interval" if n else "not measured")
    q = t_quantile((1 + confidence) / 2, n - 1)
    if not sample.pooled:
        units = _Units.of(sample)
        se = float(np.std(units.means, ddof=1) / math.sqrt(n))
        return Interval(value, value - q * se, value + q * se, sample.fork_count, n, n - 1, sample.one_fork, se)
    spread = _spread(sample, log=True)
    if spread is None:
        return _none(value, [sample], "a figure of 0: no interval on its scale")
    se = math.sqrt(spread.variance)
    return Interval(value, *_widened(value, q * se), sample.fork_count, n, n - 1,
                    sample.one_fork, se, log=True)


def common_forks(a: Sample, b: Sample) -> list[int]:
    """The forks both samples have."""
    return sorted(set(a.forks) & set(b.forks))


def pairable(a: Sample, b: Sample) -> bool:
    """Whether two samples can be paired by fork: at least two forks both measured (the caller knows
    they are of one run: its fork N started both sides' engines and measured them back to back). A
    fork only one side has (one `esbperf round` added for the other's verdicts) is no pair, and is left
    out of the paired interval; with fewer than MIN_COMMON_FORKS in common (a fork a validity warning
    left out of one side of three), the unpaired interval over every fork is the narrower."""
    common = common_forks(a, b)
    return not a.one_fork and not b.one_fork and (
        common == sorted(set(a.forks)) == sorted(set(b.forks)) or len(common) >= MIN_COMMON_FORKS)


def _paired(a: Sample, b: Sample, log: bool, confidence: float) -> Interval | None:
    """A ÷ B (A − B) from each fork's own pair: t(n − 1) on the forks' log ratios (differences).
    What the machine did during a fork (a neighbour, a slower minute: the development VM's speed
    moved ±10 % between runs minutes apart) falls on both sides of its pair and drops out, where
    the unpaired interval counts it twice (Abedi & Brecht, ICPE 2017: randomized multiple
    interleaved trials). The value is the figures' own ratio, as unpaired, over the forks both have."""
    forks = common_forks(a, b)
    if len(forks) < len(set(a.forks)) or len(forks) < len(set(b.forks)):
        a, b = a.of_forks(forks), b.of_forks(forks)
    mine, theirs = (np.asarray(_Units.of(s).statistic(np.eye(len(forks))), dtype=float) for s in (a, b))
    value_a, value_b = a.figure(), b.figure()
    if value_a is None or value_b is None:
        return None
    if log:
        if value_a <= 0 or value_b <= 0 or np.any(mine <= 0) or np.any(theirs <= 0):
            return None
        value, each = value_a / value_b, np.log(mine) - np.log(theirs)
    else:
        value, each = value_a - value_b, mine - theirs
    n = len(forks)
    se = float(np.std(each, ddof=1) / math.sqrt(n))
    q = t_quantile((1 + confidence) / 2, n - 1)
    low, high = _widened(value, q * se) if log else (value - q * se, value + q * se)
    return Interval(value, low, high, n, n, n - 1, False, se, log, paired=True)


def _two(a: Sample, b: Sample, log: bool, confidence: float, memo: dict | None, paired: bool = False) -> Interval:
    if paired and pairable(a, b):
        found = _paired(a, b, log, confidence)
        if found is not None:
            return found
    sides = [a, b]
    few = [s for s in sides if len(s.groups()) < 2]
    if few:
        value_a, value_b = a.figure(), b.figure()
        if value_a is None or value_b is None:
            return _none(None, sides, "not measured")
        value = (value_a / value_b if value_b else None) if log else value_a - value_b
        return _none(value, sides, f"one {_units_word(few[0])} a side: no interval")
    ours, theirs = (_remembered(s, log, memo) for s in (a, b))
    if ours is None or theirs is None:
        value_a, value_b = a.figure(), b.figure()
        return _none(value_a / value_b if log and value_b else None if log else value_a - value_b, sides,
                     "a figure of 0: no ratio")
    value = ours.value / theirs.value if log else ours.value - theirs.value
    df = welch_df([(ours.variance, ours.units - 1), (theirs.variance, theirs.units - 1)])
    se = math.sqrt(ours.variance + theirs.variance)
    q = t_quantile((1 + confidence) / 2, df)
    low, high = _widened(value, q * se) if log else (value - q * se, value + q * se)
    return Interval(value, low, high, min(a.fork_count, b.fork_count), min(ours.units, theirs.units), df,
                    a.one_fork or b.one_fork, se, log)


def _remembered(sample: Sample, log: bool, memo: dict | None) -> _Spread | None:
    if memo is None:
        return _spread(sample, log)
    key = (id(sample), log)
    if key not in memo:
        memo[key] = _spread(sample, log)
    return memo[key]


def ratio(a: Sample, b: Sample, confidence: float = CONFIDENCE, memo: dict | None = None,
          paired: bool = False) -> Interval:
    """A ÷ B and its interval: symmetric in log(A ÷ B), whose standard error is the two sides'
    bootstrap standard errors (`_spread`) together, with Welch–Satterthwaite's degrees of freedom
    (`welch_df`: from n_A − 1 and n_B − 1, weighted by the sides' variances). `memo`
    keeps each sample's bootstrap for the next ratio it is in (the caller keeps the samples).
    `paired`: the two sides are targets of one run, so each fork measured both; with the same forks
    on both sides (`pairable`), the interval is the forks' pairs' (`_paired`)."""
    return _two(a, b, True, confidence, memo, paired)


def difference(a: Sample, b: Sample, confidence: float = CONFIDENCE, memo: dict | None = None,
               paired: bool = False) -> Interval:
    """A − B (e.g. the latency an ESB adds to direct's, a difference of pooled percentiles) and its
    interval, as `ratio` on the figures' own scale."""
    return _two(a, b, False, confidence, memo, paired)


def agreement(first: Interval, second: Interval, log: bool, confidence: float = CONFIDENCE
              ) -> tuple[bool | None, float | None, float | None]:
    """Whether two measurements of one figure agree: the interval of their ratio (log) or difference
    contains 1 (0), from their own standard errors, with Welch–Satterthwaite's degrees of freedom
    (`welch_df`). A side of one unit (no interval of its own) is a single draw: it varies as one of
    the other side's units, √n times that side's standard error (a prediction interval), estimated
    by that side's variance and so on its degrees of freedom. (agrees, low, high); None when neither
    side has an interval."""
    if first.value is None or second.value is None:
        return None, None, None
    if log and (first.value <= 0 or second.value <= 0):
        return None, None, None
    sides = [s for s in (first, second) if s.se is not None and s.df]
    if not sides:
        return None, None, None
    parts: list[tuple[float, float]] = []
    for s, other in ((first, second), (second, first)):
        if s.se is not None and s.df:
            variance = (s.se if s.log == log else _rescaled(s, log)) ** 2
            if other.se is None or not other.df:     # the other's single draw, on this side's estimate
                variance *= 1 + s.units
            parts.append((variance, s.df))
    se2, df = sum(v for v, _ in parts), welch_df(parts)
    center = math.log(second.value / first.value) if log else second.value - first.value
    half = t_quantile((1 + confidence) / 2, df) * math.sqrt(se2)
    low, high = center - half, center + half
    if log:
        low, high = math.exp(low), math.exp(high)
        return low <= 1 <= high, low, high
    return low <= 0 <= high, low, high


def _rescaled(i: Interval, log: bool) -> float:
    """A standard error on the other scale (delta method): se(log x) ≈ se(x) ÷ x."""
    return i.se / abs(i.value) if log else i.se * abs(i.value)


# --- the variance at each level ---------------------------------------------------------------------

@dataclass(frozen=True)
class Components:
    """Kalibera & Jones' two levels: `within`, the variance between iterations of one process
    (S²_W, the mean of the forks' own sample variances), and `between`, the variance between
    processes beyond what their iterations explain (τ² = S²(forks' means) − S²_W × mean(1 / r),
    floored at 0); None where the data cannot tell (one fork; forks of one iteration)."""

    mean: float
    forks: int
    iterations: float            # per fork, on average
    within: float | None
    between: float | None
    means_variance: float | None  # S² of the forks' means

    def relative(self) -> tuple[float | None, float | None]:
        """(between, within) as squared coefficients of variation (÷ mean²)."""
        if not self.mean:
            return None, None
        m2 = self.mean ** 2
        return (None if self.between is None else self.between / m2, None if self.within is None else self.within / m2)


def components(sample: Sample) -> Components | None:
    """The sample's variance components, from each iteration's own figure (`iteration_values`)."""
    values = sample.iteration_values()
    if not values:
        return None
    by_fork: dict[int, list[float]] = {}
    for f, v in zip(sample.forks, values):
        by_fork.setdefault(f, []).append(v)
    groups = list(by_fork.values())
    variances = [np.var(g, ddof=1) for g in groups if len(g) > 1]
    within = float(np.mean(variances)) if variances else None
    means = [float(np.mean(g)) for g in groups]
    means_variance = float(np.var(means, ddof=1)) if len(groups) > 1 else None
    between = None      # one fork, or forks of one iteration each: the levels cannot be told apart
    if means_variance is not None and within is not None:
        between = max(0.0, means_variance - within * float(np.mean([1 / len(g) for g in groups])))
    return Components(float(np.mean(means)), len(groups), float(np.mean([len(g) for g in groups])), within,
                      between, means_variance)


# --- how many forks and iterations --------------------------------------------------------------------

MAX_ITERATIONS = 20      # the most iterations per fork advised (a between-process variance of ~0 asks for ∞)


@dataclass(frozen=True)
class Repetitions:
    """Forks and iterations per fork that resolve a relative `difference` at 95 %: the ratio of two
    targets measured alike has an interval whose half-width is at most the difference."""

    difference: float
    forks: int | None           # None: not within MAX_FORKS
    iterations: int
    seconds: float | None       # what one target then costs: forks × (fork cost + iterations × iteration cost)


MAX_FORKS = 200


def iterations_per_fork(between: float, within: float, fork_cost_s: float, iteration_cost_s: float) -> int:
    """The iterations per fork that make the interval narrowest for the time spent (Kalibera &
    Jones' optimum; the classic two-stage sampling one, Cochran, Sampling Techniques, 1977, §10.6):
    Var(mean) = τ²/n + σ²/(n·r) at a cost n·(c_fork + r·c_iter) is least for r = √(c_fork·σ² ÷
    (c_iter·τ²)), rounded up, between 1 and MAX_ITERATIONS."""
    if within <= 0:
        return 1
    if between <= 0:
        return MAX_ITERATIONS
    return max(1, min(MAX_ITERATIONS, math.ceil(math.sqrt(fork_cost_s * within / (iteration_cost_s * between)))))


def repetitions(between: float, within: float, fork_cost_s: float, iteration_cost_s: float,
                difference: float, confidence: float = CONFIDENCE) -> Repetitions:
    """The fewest forks (of iterations_per_fork iterations) for which two targets with these relative
    variance components (squared coefficients of variation) have a ratio interval no wider than
    ±`difference` (0.05: 5 %): t(2n − 2) × √(2 (τ² + σ²/r) / n) ≤ ln(1 + difference)."""
    r = iterations_per_fork(between, within, fork_cost_s, iteration_cost_s)
    target = math.log(1 + difference)
    for n in range(2, MAX_FORKS + 1):
        if t_quantile((1 + confidence) / 2, 2 * n - 2) * math.sqrt(2 * (between + within / r) / n) <= target:
            return Repetitions(difference, n, r, n * (fork_cost_s + r * iteration_cost_s))
    return Repetitions(difference, None, r, None)


def _widened(value: float, reach: float) -> tuple[float, float]:
    """value ÷ e^reach and value × e^reach: an interval symmetric in the log; past any float, no bound."""
    return (value * math.exp(-reach), value * math.exp(reach)) if reach < 700 else (0.0, math.inf)


# --- a family of verdicts: its false discoveries ------------------------------------------------------

# The share of a family's shown differences that may be false (Benjamini–Hochberg), and what a single
# 95 % interval risks on its own.
FALSE_DISCOVERIES = 1 - CONFIDENCE


def p_value(found: Interval) -> float | None:
    """The two-sided p-value of "no difference" (a ratio of 1, a difference of 0) from the interval's
    own t statistic: its value over its standard error, on its scale (the log of a ratio) and its
    degrees of freedom. Below 1 − c exactly when the interval at confidence c leaves out no
    difference (`at_confidence`), so a verdict's p-value and its interval never disagree. None
    without an interval."""
    if not found.has_interval or found.se is None or found.df is None or found.value is None:
        return None
    if found.log and found.value <= 0:
        return None
    centre = math.log(found.value) if found.log else found.value
    if found.se == 0:
        return 0.0 if centre else 1.0
    return float(2 * scipy_stats.t.sf(abs(centre) / found.se, found.df))


def at_confidence(found: Interval, confidence: float) -> Interval:
    """The same estimate's interval at another confidence: its value, standard error and degrees of
    freedom, Student's t at that level."""
    if not found.has_interval or found.se is None or found.df is None or found.value is None:
        return found
    q = t_quantile((1 + confidence) / 2, found.df)
    if found.log:   # a unit or two of wild spread at a family's level: a bound past any float is no bound
        low, high = _widened(found.value, q * found.se)
    else:
        low, high = found.value - q * found.se, found.value + q * found.se
    return Interval(found.value, low, high, found.forks, found.units, found.df, found.one_fork, found.se, found.log,
                    found.why_none, found.paired)


@dataclass(frozen=True)
class Family:
    """A family of verdicts (a report's, a round's, a `compare`'s, a gate's) judged together, its false
    discoveries controlled by Benjamini–Hochberg at FALSE_DISCOVERIES: `q` is each member's adjusted
    p-value (None: not judged), a member shows a difference when q ≤ FALSE_DISCOVERIES, `shown` of
    the `judged`. Each member's interval is given at `confidence`, 1 − max(shown, 1) × α ÷ judged
    (Benjamini & Yekutieli's false-coverage-rate adjusted level, JASA 2005), at which a member's
    interval leaves out no difference exactly when its q shows one: with every member shown, 95 %.

    `looks`: how many times the family may be judged as its data grow (`esbperf round` adds forks where
    verdicts are unresolved, then judges again): α is spent evenly over them, α ÷ looks each (each
    look's p-values × looks before Benjamini–Hochberg, its intervals at 1 − max(shown, 1) × α ÷
    (judged × looks)), so that the false discoveries of all looks together stay within α whichever
    look the data stop at (the false discovery rate of a union of looks is at most the sum of theirs)."""

    p: tuple[float | None, ...]
    q: tuple[float | None, ...]
    judged: int
    shown: int
    confidence: float
    looks: int = 1

    @property
    def by_chance(self) -> float:
        """How many of the judged would show a difference at 95 % each were there none at all."""
        return FALSE_DISCOVERIES * self.judged



def family(p_values: Sequence[float | None], looks: int = 1) -> Family:
    """Benjamini–Hochberg's adjusted p-values of a family (scipy's false_discovery_control), the
    members without a p-value (not judged) left out of it; α spent over `looks` (Family)."""
    judged = [min(1.0, p * looks) for p in p_values if p is not None]
    adjusted = iter(scipy_stats.false_discovery_control(judged, method="bh").tolist() if judged else [])
    q = tuple(None if p is None else float(next(adjusted)) for p in p_values)
    shown = sum(v is not None and v <= FALSE_DISCOVERIES for v in q)
    confidence = 1 - max(shown, 1) * FALSE_DISCOVERIES / (len(judged) * looks) if judged else CONFIDENCE
    return Family(tuple(p_values), q, len(judged), shown, confidence, looks)
