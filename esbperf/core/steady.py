"""Whether a step is a measurement: the statistics the runner's `warmup_s: auto` and the analysis's
validity rules share (docs/methodology.md, "Steps that judge themselves"). Pure numpy, no state.

- steady(): whether the warm-up may end. The per-interval throughput and mean response time seen
  so far are cut at their change points (PELT, as Barrett et al., "Virtual Machine Warmup Blows
  Hot and Cold", OOPSLA 2017, cut VM benchmarks' iteration times); the window may open once the
  last segment of both has lasted STEADY_INTERVALS and shows no trend (Mann-Kendall). Barrett et
  al. call a series whose last change point falls within its last iterations "no steady state".
- drift(): whether a measured window's series moved: a change point or a trend beyond the noise.
- exponential_gaps(): whether gaps between arrivals are exponential (Kolmogorov-Smirnov with the
  rate estimated from the data: Lilliefors' test, statsmodels'), allowing for the
  resolution of the start times.
- min_transactions(): the fewest transactions a percentile is shown from (its distribution-free
  confidence interval must lie within the data).

"Beyond the noise" means twice over: statistically, against the series' own noise (estimated
robustly from consecutive differences, so a series of 20 transactions a second gets its ~20 %
Poisson noise and one of 2000 its few %), and in size, at least MIN_MOVE_SHARE of the level: a
long window makes a 0.5 % move significant, and that is not a change worth a warning."""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as scipy_stats

_NORMAL = statistics.NormalDist()

# --- the series tests --------------------------------------------------------------------------

# The trend test's false-alarm level (two-sided).
ALPHA = 0.001
# PELT's penalty per change point, in units of the noise variance, is PENALTY × ln(number of
# points), raised for short series (penalty(): the normal and Student's ALPHA_PENALTY points, at
# NOISE_DF_SHARE degrees of freedom per interval): pure noise of 10 to 1200 points then shows a
# change point in fewer than 0.5 % of series (analysis/bench/steady_rates.py measures the drift
# test's false alarms, tests/test_steady.py bounds them). The BIC's would be 2 ln n; Barrett et
# al. chose 15 ln n on their mean-and-variance cost, which counts in other units.
PENALTY = 4.0
ALPHA_PENALTY = 0.01
NOISE_DF_SHARE = 0.5
# The largest consecutive differences left out of the noise estimate.
NOISE_TRIM = 0.1
# Fewest intervals between two change points.
MIN_SEGMENT = 3
# Fewest intervals a series is judged from: below this the trend test's normal approximation and
# the noise estimate are too coarse (drift() says "not judged").
MIN_INTERVALS = 10
# The warm-up ends when the last segment of both series has lasted this many intervals. Its tests
# err towards waiting (a false alarm costs an interval of warm-up, a window opened on a ramp a
# biased figure): the trend test at WARMUP_ALPHA, change points at WARMUP_PENALTY.
STEADY_INTERVALS = 10
WARMUP_ALPHA = 0.05
WARMUP_PENALTY = 2.0
# ... and the trend on the last TREND_INTERVALS: the slope there is the one that goes on (a JIT's
# warm-up slows as it ends; over a longer stretch its early rise would count as a slope still).
TREND_INTERVALS = 10
# The smallest move named, as a share of the series' level (its median).
MIN_MOVE_SHARE = 0.05
# An interval further than this many noise deviations from the median of its HAMPEL_HALF
# neighbours on each side is an outlier (Hampel's identifier): a one- to three-second stall (a GC
# pause, a retransmission) is not a change of level. It is replaced by that median.
OUTLIER_SIGMAS = 5.0
HAMPEL_HALF = 3
# Longer series are judged on averages of consecutive intervals (the pairwise trend test is
# quadratic in the number of points).
MAX_POINTS = 1200
# The shortest interval a window's series is counted in (series_interval_ms).
MIN_INTERVAL_MS = 100
# The shortest interval a move is judged at: on a one-machine testbed the system's speed wanders
# 10-30 % from one half-second to the next, in spells of a second or two, whatever the target
# (docs/benchmarks/noise.md). At a finer interval the consecutive differences miss that wander, so
# a flat target's short window shows it as change points (the demo's 2-s windows on the flat
# reference: 6 of 40 named `drift`). Finer series are merged to it; a window then needs
# MIN_INTERVALS of them to be judged.
DRIFT_MIN_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Move:
    """A move of a series beyond the noise: a change point (`at`: the interval of its new level)
    or a trend over the intervals judged (`at` None); `share` is the change against the level
    before it (a trend's: against its line's value at the start)."""

    series: str
    kind: str            # "change point" or "trend"
    share: float         # e.g. -0.12: fell 12 %
    at: int | None       # the interval where the new level starts (change point)
    before: float
    after: float

    def describe(self, interval_s: float) -> str:
        way = "rose" if self.share > 0 else "fell"
        where = ("over the window (trend)" if self.at is None
                 else f"at {self.at * interval_s:g} s (change point)")
        return f"{self.series} {way} {abs(self.share):.0%} {where}"


@dataclass(frozen=True)
class Steadiness:
    """steady()'s answer: whether the window may open, and if not, why not yet."""

    steady: bool
    reason: str = ""


@dataclass(frozen=True)
class Drift:
    """drift()'s answer: the moves found, or not `judged` when the window has fewer than
    MIN_INTERVALS intervals."""

    judged: bool
    moves: tuple[Move, ...] = ()
    intervals: int = 0
    interval_s: float = 1.0

    @property
    def drifted(self) -> bool | None:
        return bool(self.moves) if self.judged else None

    def describe(self) -> str:
        if not self.judged:
            return f"not judged: {self.intervals} interval(s) of {self.interval_s:g} s, fewer than {MIN_INTERVALS}"
        return "; ".join(m.describe(self.interval_s) for m in self.moves)


def finite(values: Iterable[float | None]) -> np.ndarray:
    """The values as floats, without None and NaN (an interval without a transaction has no mean)."""
    x = np.array([np.nan if v is None else v for v in values], dtype=float)
    return x[np.isfinite(x)]


def noise(x: np.ndarray) -> float:
    """The series' noise (a standard deviation per interval), robust to steps and trends: from
    consecutive differences (von Neumann's mean square successive difference: a difference holds
    two intervals' noise), less their median (a trend moves them all alike), without the largest
    NOISE_TRIM of them (a step or an outlier moves one or two), scaled back to a normal σ."""
    d = np.diff(x)
    d = d - np.median(d) if len(d) else d
    kept = np.sort(np.abs(d))[:len(d) - max(1, round(NOISE_TRIM * len(d)))] if len(d) >= 5 else np.abs(d)
    if len(kept) == 0 or not kept.any():
        kept = np.abs(d)              # all but a few alike (a handful of transactions an interval)
    if len(kept) == 0:
        return 0.0
    share = len(kept) / len(d)
    truncated = 1.0
    if share < 1:                     # E[Z²] of a normal Z within ±z, the kept share's bounds
        z = _NORMAL.inv_cdf((1 + share) / 2)
        truncated = 1 - 2 * z * _NORMAL.pdf(z) / share
    return math.sqrt(float(np.mean(kept * kept)) / truncated / 2)


def penalty(n: int, constant: float = PENALTY) -> float:
    """PELT's penalty for a series of n points, in units of the noise variance: PENALTY × ln n,
    times the squared ratio of Student's to the normal ALPHA_PENALTY point at the noise estimate's
    degrees of freedom (NOISE_DF_SHARE per interval), so that a noise estimated from few intervals
    does not make its chance lows into change points."""
    return constant * math.log(n) * _student_over_normal(n) ** 2


@functools.lru_cache(maxsize=None)
def _student_over_normal(n: int) -> float:
    """penalty()'s ratio of the two ALPHA_PENALTY points (scipy's quantiles), once per length."""
    df = max(1.0, NOISE_DF_SHARE * (n - 1))
    return float(scipy_stats.t.ppf(1 - ALPHA_PENALTY / 2, df) / scipy_stats.norm.ppf(1 - ALPHA_PENALTY / 2))


def without_outliers(x: np.ndarray, sigma: float) -> np.ndarray:
    """x with Hampel's outliers (OUTLIER_SIGMAS from the median of their neighbours) replaced by
    that median."""
    if len(x) < 2 * HAMPEL_HALF + 1 or sigma == 0.0:
        return x
    padded = np.pad(x, HAMPEL_HALF, mode="reflect")    # an end's neighbours are those inside
    medians = np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * HAMPEL_HALF + 1), axis=1)
    return np.where(np.abs(x - medians) > OUTLIER_SIGMAS * sigma, medians, x)


def change_points(x: np.ndarray, sigma: float, beta: float | None = None,
                  min_segment: int = MIN_SEGMENT) -> list[int]:
    """Where the series' mean changes: the segmentation minimising the segments' squared
    deviations from their means (in units of σ²) plus `beta` per change point (default
    penalty(n)): the optimal partitioning PELT computes (Killick, Fearnhead and Eckley, JASA
    2012), here without pruning (its rule does not hold with a minimum segment length, and a
    series is at most MAX_POINTS long). Returns each new segment's first index."""
    n = len(x)
    if sigma <= 0.0 or n < 2 * min_segment:
        return []
    beta = penalty(n) if beta is None else beta
    x = (x - np.median(x)) / sigma           # centred: the sums of squares keep their digits
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    previous = np.zeros(n + 1, dtype=int)
    for t in range(min_segment, n + 1):
        starts = np.arange(0, t - min_segment + 1)
        starts = starts[np.isfinite(best[starts])]
        length = t - starts
        total = s1[t] - s1[starts]
        cost = best[starts] + (s2[t] - s2[starts] - total * total / length) + beta
        i = int(np.argmin(cost))
        best[t], previous[t] = cost[i], starts[i]
    points, t = [], n
    while t > 0:
        t = int(previous[t])
        if t > 0:
            points.append(t)
    return sorted(points)


def _means(x: np.ndarray, points: Sequence[int]) -> list[float]:
    edges = [0, *points, len(x)]
    return [float(np.mean(x[a:b])) for a, b in zip(edges, edges[1:])]


def large_change_points(x: np.ndarray, points: list[int], level: float) -> list[int]:
    """The change points whose step is at least MIN_MOVE_SHARE of the level: the smallest step
    below it is dropped (its two segments merged) until none is left."""
    points = list(points)
    while points:
        means = _means(x, points)
        steps = [abs(b - a) for a, b in zip(means, means[1:])]
        i = int(np.argmin(steps))
        if steps[i] >= MIN_MOVE_SHARE * abs(level):
            break
        del points[i]
    return points


def mann_kendall(x: np.ndarray) -> tuple[float, float, float]:
    """Mann-Kendall's trend test (Kendall, Rank Correlation Methods, 1975): Kendall's tau between
    the series and time, with scipy's two-sided p-value (exact for a short series without ties,
    else the normal approximation with the ties' correction; 1 for a constant series: no trend),
    and Theil-Sen's line (scipy's theilslopes): its slope per interval (the median of the pairwise
    slopes) and its value at the first interval (the median of x − slope × t)."""
    t = np.arange(len(x))
    p = scipy_stats.kendalltau(t, x).pvalue if len(x) > 1 else 1.0
    line = scipy_stats.theilslopes(x, t, method="joint")
    return (1.0 if not np.isfinite(p) else float(p)), float(line.slope), float(line.intercept)


def _trend(x: np.ndarray, alpha: float = ALPHA, span: float | None = None) -> float | None:
    """The change along Theil-Sen's line over `span` intervals (default: the series'), as a share
    of the line's value at the series' start, when the Mann-Kendall test finds a trend at `alpha`
    and the change is at least MIN_MOVE_SHARE; else None."""
    if len(x) < MIN_INTERVALS:
        return None
    p, slope, start = mann_kendall(x)
    if p >= alpha or start == 0:
        return None
    share = slope * (len(x) - 1 if span is None else span) / abs(start)
    return share if abs(share) >= MIN_MOVE_SHARE else None


def _rss(x: np.ndarray, fitted: np.ndarray) -> float:
    return float(np.sum((x - fitted) ** 2))


def _coarse(x: np.ndarray) -> tuple[np.ndarray, int]:
    """x averaged over runs of `k` consecutive intervals so that at most MAX_POINTS remain, and k."""
    k = max(1, math.ceil(len(x) / MAX_POINTS))
    if k == 1:
        return x, 1
    whole = len(x) // k * k
    return x[:whole].reshape(-1, k).mean(axis=1), k


def moves(name: str, values: Iterable[float | None]) -> tuple[Move, ...] | None:
    """The moves of one series (a value per interval, None where there is none) beyond the noise:
    its change points, or its trend when a straight line fits it better than the change points'
    steps, each change point and the line's slope penalised alike (or it has no change point);
    None when it has fewer than MIN_INTERVALS values."""
    values = np.array([np.nan if v is None else v for v in values], dtype=float)
    at = np.flatnonzero(np.isfinite(values))          # each value's interval
    x, k = _coarse(values[at])
    if len(x) < MIN_INTERVALS:
        return None
    level = float(np.median(x))
    sigma = noise(x)
    x = without_outliers(x, sigma)
    points = large_change_points(x, change_points(x, sigma), level)
    trend = _trend(x)
    if trend is not None:
        t = np.arange(len(x))
        line = np.polyval(np.polyfit(t, x, 1), t)
        steps = np.repeat(_means(x, points), np.diff([0, *points, len(x)]))
        # A line is one parameter more than a flat series, as is each change point.
        if not points or (_rss(x, line) - _rss(x, steps)) / sigma ** 2 <= penalty(len(x)) * (len(points) - 1):
            return (Move(name, "trend", trend, None, float(line[0]), float(line[-1])),)
    means = _means(x, points)
    return tuple(Move(name, "change point", (b - a) / abs(a) if a else math.inf, int(at[p * k]), a, b)
                 for p, a, b in zip(points, means, means[1:]))


def series_interval_ms(window_ms: float) -> int:
    """The interval a measured window's series are counted in: a second; in a window shorter than
    MIN_INTERVALS seconds, a MIN_INTERVALS-th of it (at least MIN_INTERVAL_MS); in one longer than
    MAX_POINTS seconds, as many whole seconds as keep MAX_POINTS intervals."""
    if window_ms < MIN_INTERVALS * 1000:
        return max(MIN_INTERVAL_MS, int(window_ms // MIN_INTERVALS))
    return 1000 * max(1, math.ceil(window_ms / 1000 / MAX_POINTS))


def drift(tps: Iterable[float | None], mean_ms: Iterable[float | None], interval_s: float = 1.0) -> Drift:
    """Whether a measured window's throughput or mean response time (one value per interval of
    `interval_s`; None where an interval had no transaction) moved beyond the noise, judged at
    DRIFT_MIN_INTERVAL_S or coarser."""
    tps, mean_ms, interval_s = merged(list(tps), list(mean_ms), interval_s)
    found = [moves("throughput", tps), moves("mean response time", mean_ms)]
    judged = [m for m in found if m is not None]
    intervals = len(finite(tps))
    if not judged:
        return Drift(False, (), intervals, interval_s)
    return Drift(True, tuple(m for ms in judged for m in ms), intervals, interval_s)


def merged(tps: list[float | None], mean_ms: list[float | None], interval_s: float
           ) -> tuple[list[float | None], list[float | None], float]:
    """The two series over intervals of at least DRIFT_MIN_INTERVAL_S: each run of k consecutive
    intervals merged into one (its throughput their mean, its mean response time theirs weighted by
    their transactions), whole runs only; and the merged interval."""
    k = max(1, math.ceil(DRIFT_MIN_INTERVAL_S / interval_s - 1e-9)) if interval_s > 0 else 1
    if k == 1:
        return tps, mean_ms, interval_s
    out_tps, out_mean = [], []
    for i in range(0, len(tps) // k * k, k):
        rates = [float(v) if _known(v) else 0.0 for v in tps[i:i + k]]
        weighted = [(r, float(m)) for r, m in zip(rates, mean_ms[i:i + k]) if _known(m) and r > 0]
        out_tps.append(sum(rates) / k)
        weight = sum(r for r, _ in weighted)
        out_mean.append(sum(r * m for r, m in weighted) / weight if weight else None)
    return out_tps, out_mean, interval_s * k


def _known(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def steady(tps: Iterable[float | None], mean_ms: Iterable[float | None], interval_s: float = 1.0,
           horizon_s: float | None = None) -> Steadiness:
    """Whether the warm-up may end, from the throughput and mean response time of every interval
    since the load began (the runner asks once an interval): at this look and at the one before,
    both series' last segment after their last change point (of at least MIN_MOVE_SHARE) has
    lasted STEADY_INTERVALS intervals and has no trend that would move it by MIN_MOVE_SHARE over
    `horizon_s` (the measurement to come; default: the segment's own length). Two looks, because
    a test asked once a second until it passes passes by chance sooner than its level says."""
    for name, values in (("throughput", tps), ("mean response time", mean_ms)):
        x = finite(values)
        for look in (x, x[:-1]):
            reason = _unsteady(name, look, interval_s, horizon_s)
            if reason:
                return Steadiness(False, reason)
    return Steadiness(True)


def _unsteady(name: str, x: np.ndarray, interval_s: float, horizon_s: float | None) -> str:
    """Why a series seen so far is not steady yet (steady()), or ""."""
    if len(x) < STEADY_INTERVALS:
        return f"{name}: {len(x)} of {STEADY_INTERVALS} intervals seen"
    x, k = _coarse(x)
    level = float(np.median(x[-STEADY_INTERVALS:]))
    sigma = noise(x)
    x = without_outliers(x, sigma)
    points = large_change_points(x, change_points(x, sigma, penalty(len(x), WARMUP_PENALTY)), level)
    if points and len(x) - points[-1] < STEADY_INTERVALS:
        before, after = _means(x, points)[-2:]
        way = "rose" if after > before else "fell"
        return (f"{name} {way} {abs(after - before) / abs(before or 1):.0%} "
                f"{(len(x) - points[-1]) * k * interval_s:g} s ago")
    tail = (x[points[-1]:] if points else x)[-TREND_INTERVALS:]
    span = None if horizon_s is None else max(len(tail) - 1, horizon_s / (k * interval_s))
    trend = _trend(tail, WARMUP_ALPHA, span)
    if trend is None:
        return ""
    over = f"the next {horizon_s:g} s" if span is not None and span > len(tail) - 1 else \
        f"the last {len(tail) * k * interval_s:g} s"
    return f"{name} still {'rising' if trend > 0 else 'falling'} ({trend:+.0%} over {over})"


# --- arrivals ----------------------------------------------------------------------------------

# Kolmogorov-Smirnov against the exponential with its mean estimated from the same gaps
# (Lilliefors 1969): statsmodels' test and its table of critical distances, at this level.
GAPS_ALPHA = 0.01
# The test's gaps: at most this many, drawn at random (seeded) from a long step's; more would
# only make harmless departures significant (the schedule's generator, threads waking 0.1 ms late).
MAX_GAPS = 5000
# Fewest gaps tested.
MIN_GAPS = 50


@dataclass(frozen=True)
class GapTest:
    """exponential_gaps()'s answer. `exponential` is None when the gaps cannot be judged: too
    few, or too short for the times' resolution."""

    gaps: int                    # gaps tested
    d: float | None              # the KS distance from the exponential of their mean
    critical: float | None       # its 1 % critical value for `gaps`
    allowance: float | None      # what the times' resolution can add to it
    exponential: bool | None
    why: str = ""

    def describe(self) -> str:
        if self.exponential is None:
            return self.why
        return (f"KS distance {self.d:.3f} from the exponential over {self.gaps} gaps; limit {self.critical:.3f}"
                + (f" + {self.allowance:.3f} for the times' resolution" if self.allowance else ""))


def ks_critical(n: int) -> float:
    """The GAPS_ALPHA critical KS distance for n gaps, the exponential's mean estimated: the table
    statsmodels' lilliefors() reads its p-values from (its own module's; the public function gives
    a p-value, and the times' resolution is allowed for on the distance)."""
    from statsmodels.stats._lilliefors import get_lilliefors_table
    return float(get_lilliefors_table(dist="exp").crit(GAPS_ALPHA, n))


def exponential_gaps(sources: Iterable[np.ndarray], resolution: float = 0.0, seed: int = 0) -> GapTest:
    """Whether the gaps between consecutive times of each source (one schedule each, e.g. a worker
    process's starts) are exponential. Each source's gaps are divided by their own mean and pooled.

    The times are known to `resolution` only (the same unit: Grinder logs whole ms): each gap is
    then off by less than one resolution, and the gaps' distribution function by less than the
    exponential's rise over one resolution, 1 − exp(−resolution / mean gap). That is allowed on top
    of the critical distance; a schedule whose mean gap is below two resolutions is not judged."""
    pooled, means = [], []
    for times in sources:
        gaps = np.diff(np.sort(np.asarray(times, dtype=float)))
        if len(gaps) and gaps.mean() > 0:
            pooled.append(gaps / gaps.mean())
            means.append(gaps.mean())
    gaps = np.concatenate(pooled) if pooled else np.zeros(0)
    if len(gaps) < MIN_GAPS:
        return GapTest(len(gaps), None, None, None, None, f"not judged: {len(gaps)} gaps, fewer than {MIN_GAPS}")
    mean_gap = float(np.average(means, weights=[len(p) for p in pooled]))
    if resolution and mean_gap < 2 * resolution:
        return GapTest(len(gaps), None, None, None, None,
                       f"not judged: the mean gap ({mean_gap:g}) is below two resolutions of the times ({resolution:g})")
    if len(gaps) > MAX_GAPS:
        gaps = np.random.default_rng(seed).choice(gaps, MAX_GAPS, replace=False)
    from statsmodels.stats.diagnostic import lilliefors
    n = len(gaps)
    d = float(lilliefors(gaps, dist="exp", pvalmethod="table")[0])
    allowance = -math.expm1(-resolution / mean_gap) if resolution else 0.0
    critical = ks_critical(n)
    return GapTest(n, d, critical, allowance, d <= critical + allowance)


# --- percentiles -------------------------------------------------------------------------------

# A percentile is shown only where its distribution-free confidence interval at this level lies
# within the data: the smallest and largest order statistics bound it.
PERCENTILE_CONFIDENCE = 0.95


def min_transactions(p: float, confidence: float = PERCENTILE_CONFIDENCE) -> int:
    """The fewest values from which percentile p (in %) is measured: with n values the number
    below the p-th percentile is Binomial(n, p/100), and the largest value bounds a two-sided
    `confidence` interval of the percentile only when p/100 ^ n ≤ (1 − confidence) / 2
    (Le Boudec, Performance Evaluation of Computer and Communication Systems, 2010, §2.4.1).
    p99: 368 values, p99.9: 3 688, p50: 6."""
    q = p / 100.0
    if not 0 < q < 1:
        raise ValueError(f"percentile {p} is not between 0 and 100")
    return math.ceil(math.log((1 - confidence) / 2) / math.log(q) - 1e-9)


def percentile_measured(p: float, n: int) -> bool:
    return n >= min_transactions(p)


# --- a target's warm-up: settled, still moving, or not resolved ---------------------------------
#
# A JVM compiling its path climbs for a minute or more, slowly at the end, so a target's warm-up
# (and each fork's: every fresh engine process) is judged on its throughput per SETTLE_BUCKET_S,
# counted from the console's cumulative totals by time (bucket_rates), over the trailing stretch
# since its last change of level, at most the plan's `target_warmup_horizon_s`. The question is
# one of equivalence (Laaber et al., FSE 2020, and Traini et al., EMSE 2023, judge stability
# against the series' own noise; Barrett et al., OOPSLA 2017, name "no steady state" as an outcome
# of its own): is the trend there within ±SETTLE_RATE of the level per minute? Its interval (OLS
# with Newey-West errors, statsmodels: the buckets' noise is autocorrelated) gives one of three
# answers — inside the margin: settled; wholly outside it: still moving; across it: not resolved,
# with the stretch that would resolve it at the noise seen. tests/test_settling.py and
# docs/benchmarks/known-answers.md measure how often each answer is wrong.
SETTLE_BUCKET_S = 1.0
SETTLE_SKIP_S = 2.0        # the load's first seconds are not judged: connections open, threads start
SETTLE_MIN_S = 10.0        # the shortest stretch judged
# The margin: a trend of less than 3 % of the level per minute is settled. Asked once a second, a
# test passes by chance sooner than its level says: at 4 %/min the selftest's falling reference (its
# speed rising some 4 %/min, more than 5 % still to go) was settled in 30-47 % of simulated forks at
# 2-4 % noise a second, at 3 %/min in 5-8 % (analysis/bench/steady_rates.py).
SETTLE_RATE = 0.03
SETTLE_CONFIDENCE = 0.90   # settled: the slope's interval inside the margin, two one-sided tests at 5 % (TOST)
# Still moving spoils the target's steps, not resolved is a note: so still moving needs a surer
# interval wholly outside the margin (at 90 % a flat series with autocorrelated noise, whose
# Newey-West error a minute of seconds understates, was called moving in 8 % of simulated forks).
MOVING_CONFIDENCE = 0.99
SETTLE_CUT_SHARE = 0.35    # a level this far from the present one (a JIT's climb, not the machine's wander) …
SETTLE_CUT_S = 5.0         # … over this long (its median) ends the stretch judged
SETTLE_LEVEL_S = 10.0      # the present level: the median of the last this many seconds
SETTLE_LOOKS_S = (5.0,)   # settled only when the look this long before said so too (settling)
# Still falling only over a stretch this long at least: a shared machine's speed drops by a fifth for
# ten or twenty seconds now and then, and the stretch after such a drop is no trend (a flat reference
# engine was once called "still falling, -33 %/min over the last 21 s"). A climb whose surer interval
# lies wholly above the margin is still moving however short the stretch: a warm-up that ends there
# ends on an engine still compiling (the demo's Camel once ended at +64 to +958 %/min after 13.5 s).
SETTLE_MOVING_MIN_S = 30.0
SETTLED, MOVING, UNRESOLVED = "settled", "still moving", "not resolved"


@dataclass(frozen=True)
class Settling:
    """settling()'s answer. `slope` and its interval (`low`, `high`) are shares of the level per
    minute; `judged_s` the stretch judged; `resolve_s` the stretch that would resolve an answer
    not resolved at the noise seen (None when more data would not: a trend near the margin)."""

    outcome: str
    reason: str
    slope: float | None = None
    low: float | None = None
    high: float | None = None
    judged_s: float = 0.0
    resolve_s: float | None = None
    machine: float | None = None   # the machine's log speed's coefficient, where it was taken out

    @property
    def steady(self) -> bool:
        return self.outcome == SETTLED

    def record(self) -> dict:
        """What run.json keeps of it."""
        found = {"outcome": self.outcome, "judged_s": round(self.judged_s, 1)}
        if self.slope is not None:
            found.update(slope_per_min=round(self.slope, 4), low=round(self.low, 4), high=round(self.high, 4))
        if self.resolve_s is not None:
            found["resolve_s"] = round(self.resolve_s)
        if self.machine is not None:
            found["machine_coef"] = round(self.machine, 3)
        return found


def bucket_rates(polls: Sequence[tuple[float, float, float | None]], start_ms: float, bucket_s: float
                 ) -> tuple[list[float], list[float | None]]:
    """The throughput and mean response time per bucket of `bucket_s` from `start_ms`, from the
    console's cumulative totals read at times of our own: each poll (ms, transactions so far, their
    summed response time or None). A count at a bucket's edge is interpolated between the polls
    around it, so a poll missed (a busy client) costs resolution, not truth; the workers' report
    interval moves a count across an edge, which the next bucket gets back. Whole buckets only."""
    if len(polls) < 2:
        return [], []
    ms = np.array([p[0] for p in polls], dtype=float)
    counts = np.array([p[1] for p in polls], dtype=float)
    sums = np.array([np.nan if p[2] is None else p[2] for p in polls], dtype=float)
    whole = int((ms[-1] - start_ms) // (bucket_s * 1000))
    if whole < 1:
        return [], []
    edges = start_ms + np.arange(whole + 1) * bucket_s * 1000
    edges = edges[edges >= ms[0]]
    if len(edges) < 2:
        return [], []
    n = np.diff(np.interp(edges, ms, counts))
    tps = (n / bucket_s).tolist()
    summed = np.diff(np.interp(edges, ms, sums)) if np.isfinite(sums).all() else np.full(len(n), np.nan)
    mean = [float(s / k) if k > 0 and np.isfinite(s) else None for s, k in zip(summed, n)]
    return [float(v) for v in tps], mean


def _slope(x: np.ndarray, bucket_s: float) -> tuple[float, float, int]:
    """The slope of x (a share of its level) per minute, its Newey-West standard error (Bartlett
    kernel, the usual lag rule 4 (n/100)^(2/9); statsmodels) and the degrees of freedom."""
    import statsmodels.api as sm

    n = len(x)
    t = np.arange(n) * bucket_s / 60.0
    fit = sm.OLS(x, sm.add_constant(t)).fit(cov_type="HAC", cov_kwds={"maxlags": _lags(n), "use_correction": True})
    return float(fit.params[1]), float(fit.bse[1]), n - 2


def _lags(n: int) -> int:
    return max(1, math.floor(4 * (n / 100) ** (2 / 9)))


def machine_share(x: np.ndarray, machine: np.ndarray) -> tuple[float, float]:
    """How far x moves with the machine's log speed, and that figure's standard error: the slope of
    x's changes from one bucket to the next on the machine's (OLS, Newey-West errors). From the
    changes, not the levels: the machine's speed wanders from second to second, an engine's warm-up
    takes a minute, so the second-to-second co-movement is the machine's alone, where a regression
    on levels would give the machine any trend the two happen to share (a falling reference settled
    with 6 % of its climb to go, the machine's speed rising 8 % over the same minute)."""
    import statsmodels.api as sm

    dx, dm = np.diff(x), np.diff(machine)
    fit = sm.OLS(dx, sm.add_constant(dm)).fit(cov_type="HAC", cov_kwds={"maxlags": _lags(len(dx)),
                                                                        "use_correction": True})
    return float(fit.params[1]), float(fit.bse[1])


def machine_regressor(speeds: Sequence[float | None] | np.ndarray | None, n: int) -> np.ndarray | None:
    """The machine's speed per bucket (wander.Pace) as a regressor for a series of n buckets: its log
    over its median, or None where it cannot serve — missing buckets, or no movement at all."""
    if speeds is None or len(speeds) != n:
        return None
    m = np.array([np.nan if v is None else float(v) for v in speeds])
    if n == 0 or not np.isfinite(m).all() or (m <= 0).any():
        return None
    m = np.log(m / np.median(m))
    return m if float(np.std(m)) > 1e-6 else None


def _present_level_from(x: np.ndarray, bucket_s: float) -> int:
    """The first index after the last run of SETTLE_CUT_S whose median is more than
    SETTLE_CUT_SHARE away from the median of the last SETTLE_LEVEL_S (0 when none is)."""
    width = max(1, int(round(SETTLE_CUT_S / bucket_s)))
    level = float(np.median(x[-max(1, int(round(SETTLE_LEVEL_S / bucket_s))):]))
    if len(x) < width or level <= 0:
        return 0
    medians = np.median(np.lib.stride_tricks.sliding_window_view(x, width), axis=1)
    away = np.flatnonzero(np.abs(medians - level) > SETTLE_CUT_SHARE * level)
    return 0 if not len(away) else int(away[-1]) + width


def _look(tps: np.ndarray, bucket_s: float, horizon_s: float, machine: np.ndarray | None = None) -> Settling:
    """One judgment of a warm-up's throughput per bucket so far (settling); `machine`: the machine's
    speed per bucket, aligned with `tps` (or None)."""
    skip, keep = int(math.ceil(SETTLE_SKIP_S / bucket_s)), max(1, int(horizon_s / bucket_s))
    x = tps[skip:][-keep:]
    m = None if machine is None else machine_regressor(machine[skip:][-keep:], len(x))
    seen = len(x) * bucket_s
    needed = int(math.ceil(SETTLE_MIN_S / bucket_s))
    if len(x) < needed:
        return Settling(UNRESOLVED, f"{seen:g} s of load judged, {SETTLE_MIN_S:g} s needed", judged_s=seen)
    level = float(np.median(x))
    if level <= 0:
        return Settling(UNRESOLVED, "no throughput", judged_s=seen)
    x = x / level
    # The machine's part (its memory's speed moves the engine's by some power of it: the reference's
    # throughput here by 0.1-0.5 of the probe's, in logs), from the stretch's second-to-second changes,
    # taken out before the outliers and the present level are looked for: a level the machine set is
    # not the engine's.
    share, share_se = (0.0, 0.0) if m is None else machine_share(x, m)
    part = np.zeros(len(x)) if m is None else share * m
    sigma = noise(x - part)
    x = without_outliers(x - part, sigma) + part
    # From where it reached its present level on: a climb that ended inside the stretch (a JIT's,
    # twice or five times slower at first) is not a trend of what follows it. The stretch starts
    # after the last few seconds whose median lay more than SETTLE_CUT_SHARE from the last ten
    # seconds' level; a shared machine's speed wanders by less from one ten seconds to the next
    # (docs/benchmarks/noise.md), and a trend is judged, not cut.
    cut = _present_level_from(x - part, bucket_s)
    x, m = x[cut:], None if m is None else m[cut:]
    judged = len(x) * bucket_s
    if len(x) < needed:
        return Settling(UNRESOLVED, f"its level changed {judged:g} s ago; {SETTLE_MIN_S:g} s needed since",
                        judged_s=judged)
    mean = float(np.mean(x))
    slope, se, df = _slope((x - part[cut:]) / mean, bucket_s)
    coefficient = None
    if m is not None:
        # The machine's own trend over the stretch, times the share's error: what its estimate adds.
        coefficient = share
        se = math.hypot(se, _slope(m, bucket_s)[0] * share_se / mean)
    q = float(scipy_stats.t.ppf(0.5 + SETTLE_CONFIDENCE / 2, df))
    low, high = slope - q * se, slope + q * se
    taken = "" if coefficient is None else ", the machine's speed taken out"
    said = (f"{_per_min(slope)} over the last {judged:g} s{taken} ({SETTLE_CONFIDENCE * 100:.0f} %: "
            f"{_per_min(low)} to {_per_min(high)}")
    margin = f"±{SETTLE_RATE * 100:g} %/min"
    if -SETTLE_RATE < low and high < SETTLE_RATE:
        return Settling(SETTLED, f"settled: {said}, within {margin})", slope, low, high, judged, machine=coefficient)
    sure = float(scipy_stats.t.ppf(0.5 + MOVING_CONFIDENCE / 2, df)) * se
    moving_s = min(SETTLE_MOVING_MIN_S, horizon_s)
    if slope - sure > SETTLE_RATE or slope + sure < -SETTLE_RATE:
        way = "climbing" if slope > 0 else "falling"
        sure_said = (f"{MOVING_CONFIDENCE * 100:.0f} %: {_per_min(slope - sure)} to {_per_min(slope + sure)}, "
                     f"beyond {margin}")
        if judged >= moving_s or slope > 0:
            return Settling(MOVING, f"still {way}: {said}; {sure_said})", slope, slope - sure, slope + sure, judged,
                            machine=coefficient)
        # Sure of a fall, but over too short a stretch to call it (a shared machine's dips).
        return Settling(UNRESOLVED, f"not resolved: {way}, {said}; {sure_said}); still moving is called over "
                        f"{moving_s:g} s or more", slope, low, high, judged, moving_s, coefficient)
    # The interval that must clear the margin: the settled one when it straddles the margin, the surer
    # one when only that does. It narrows as the stretch's length^1.5: the length at which it would
    # clear the margin on the side its estimate is on (a trend right at the margin never does).
    straddles = low < SETTLE_RATE and high > -SETTLE_RATE
    where = (f"across {margin}" if straddles else
             f"beyond {margin}; across it at {MOVING_CONFIDENCE * 100:.0f} %: {_per_min(slope - sure)} to "
             f"{_per_min(slope + sure)}")
    gap = abs(SETTLE_RATE - abs(slope))
    width = q * se if straddles else sure
    resolve = judged * (width / gap) ** (2 / 3) if se > 0 and gap > SETTLE_RATE / 10 else None
    more = (f"; about {resolve:.0f} s of this noise would resolve it" if resolve is not None else
            "; a trend this close to the margin needs more than length to resolve")
    return Settling(UNRESOLVED, f"not resolved: {said}, {where}){more}", slope, low, high, judged, resolve,
                    coefficient)


def _per_min(share: float) -> str:
    return f"{share * 100:+.1f} %/min"


def settling(tps: Sequence[float | None], bucket_s: float, horizon_s: float,
             machine: Sequence[float | None] | None = None) -> Settling:
    """Whether a target's warm-up may end: its throughput per `bucket_s` since the load began
    (bucket_rates), judged over at most its last `horizon_s`; with `machine`, the machine's speed in
    the same buckets (wander.Pace), the trend is that left when the machine's part is taken out.
    Settled only when the looks SETTLE_LOOKS_S before this one said so too: a test asked every second
    until it passes passes by chance sooner than its level says, and a trend near the margin reads flat
    for a while now and then."""
    x = np.array([0.0 if v is None else float(v) for v in tps])
    m = None if machine is None or len(machine) != len(x) else \
        np.array([np.nan if v is None else float(v) for v in machine])
    now = _look(x, bucket_s, horizon_s, m)
    if now.outcome != SETTLED:
        return now
    for back in SETTLE_LOOKS_S:
        cut = int(round(back / bucket_s))
        if cut and (len(x) <= cut or _look(x[:-cut], bucket_s, horizon_s,
                                           None if m is None else m[:-cut]).outcome != SETTLED):
            return Settling(UNRESOLVED, f"not resolved yet: {now.reason.removeprefix('settled: ')}, not yet "
                            f"{back:g} s ago", now.slope, now.low, now.high, now.judged_s, machine=now.machine)
    return now
