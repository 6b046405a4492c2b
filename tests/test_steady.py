"""esbperf/core/steady.py on synthetic series, each drawn from a seeded generator: when the warm-up
test opens the window (a step change, a slow ramp, noise only, a series that never settles), what
the drift test names in a measured window (a slowdown after warm-up, a trend, an outlier), whether
gaps are exponential (and how often true exponential gaps are refused), and how many transactions
a percentile needs. Rates over many seeds are measured here, with bounds a few standard errors
above what the rules are set for."""
from __future__ import annotations

import numpy as np
import pytest

import inspect
from pathlib import Path

from esbperf.analysis import synthetic
from esbperf.analysis.synthetic import step_series, whole_ms
from esbperf.core import plan as plans, steady
from esbperf.core.config import ConsoleConfig
from esbperf.core.steady import STEADY_INTERVALS

ROOT = Path(__file__).resolve().parent.parent

def flat(t):
    return np.ones_like(t)


# The runner asks steady() once a console sample, over the step's duration_s to come (esbperf/run/
# step.py _until_steady): the warm-up tests look as it does, at every horizon a shipped plan with
# `warmup_s: auto` gives. Their shapes are in intervals (k × INTERVAL_S seconds): the rule counts
# intervals, STEADY_INTERVALS of them, whatever their length.
INTERVAL_S = synthetic.shipped_sample_interval_s()
HORIZONS = sorted({p.duration_s for p in (plans.load(f) for f in sorted((ROOT / "console-config/plans").glob("*.yaml")))
                   if p.warmup_auto})


def series(shape, seed: int, intervals: int = 240, poisson_level: float | None = None):
    """step_series at the shipped interval, `shape` of the interval's number."""
    return synthetic.step_series(lambda t: shape(t / INTERVAL_S), seed, n=intervals, poisson_level=poisson_level,
                                 interval_s=INTERVAL_S)


def opens(tps, mean, horizon_s: float, max_intervals: int = 80) -> int | None:
    """The look (an interval's number) at which the runner opens the window; None by max_intervals."""
    t = synthetic.window_opens(tps, mean, horizon_s=horizon_s, interval_s=INTERVAL_S,
                               max_s=max_intervals * INTERVAL_S)
    return None if t is None else round(t / INTERVAL_S)


def test_the_warm_up_tests_look_as_the_runner_does():
    """Defect 8 of issue 43: these tests judged 1-s samples over a 60-s horizon, where the runner
    judges the console's 0.25-s samples over the step's duration_s. The helper now takes both, and
    the tests take them from what ships."""
    assert INTERVAL_S == ConsoleConfig.load().sample_interval_ms / 1000 == 0.25
    parameters = inspect.signature(synthetic.window_opens).parameters
    assert all(parameters[p].default is inspect.Parameter.empty for p in ("horizon_s", "interval_s"))
    assert HORIZONS == [2, 4, 5, 300]


# --- the warm-up test ------------------------------------------------------------------------------

@pytest.mark.parametrize("horizon_s", HORIZONS)
@pytest.mark.parametrize("poisson_level", [None, 20.0], ids=["2000-per-s", "20-per-s-poisson"])
def test_noise_only_opens_after_the_steady_intervals_and_never_waits_long(poisson_level, horizon_s):
    opened = [opens(*series(flat, seed, poisson_level=poisson_level), horizon_s) for seed in range(40)]
    assert all(t is not None and t <= STEADY_INTERVALS + 15 for t in opened), opened
    # The earliest look that can pass is the STEADY_INTERVALS-th plus one (two looks must agree).
    assert min(opened) == STEADY_INTERVALS + 1
    assert sum(t == STEADY_INTERVALS + 1 for t in opened) >= 0.7 * len(opened), opened


@pytest.mark.parametrize("horizon_s", HORIZONS)
def test_a_step_change_opens_the_steady_intervals_after_the_step(horizon_s):
    step_at = 8
    opened = [opens(*series(lambda k: np.where(k < step_at, 0.5, 1.0), seed), horizon_s) for seed in range(30)]
    assert all(t is not None and t >= step_at + STEADY_INTERVALS for t in opened), opened
    assert np.median(opened) <= step_at + STEADY_INTERVALS + 3, opened


LONG_HORIZON_SHORTFALL = ("at 0.25-s samples the last 10 intervals are 2.5 s: a warm-up still rising 0.4 % an "
                          "interval hides in their noise, and a 300-s window then reads it 5.7 % (median; 13 % at "
                          "most) above its start; issue 43, reported to the lead")


@pytest.mark.parametrize("horizon_s", [pytest.param(h, marks=pytest.mark.xfail(strict=True, reason=LONG_HORIZON_SHORTFALL))
                                       if h > 60 else h for h in HORIZONS])
def test_a_slow_warm_up_opens_once_what_is_left_of_it_is_small(horizon_s):
    """Speed rising as 1 − 0.4 e^(−k/15) (k: intervals): the window opens no sooner than 15 looks,
    and what is left of the rise then is small against the level measured over the horizon. Over
    the thesis plans' 300 s it is not (LONG_HORIZON_SHORTFALL): strict, so that a fix says so."""
    shape = (lambda k: 1 - 0.4 * np.exp(-k / 15))
    left, opened = [], []
    for seed in range(30):
        t = opens(*series(shape, seed), horizon_s)
        opened.append(t)
        if t is not None:
            measured = shape(np.arange(t, t + max(1, round(horizon_s / INTERVAL_S)), dtype=float))
            left.append(1 - shape(np.float64(t)) / measured.mean())
    assert len(left) >= 0.9 * len(opened), opened
    assert all(t is None or t >= 15 for t in opened), opened
    assert np.median(left) < steady.MIN_MOVE_SHARE and max(left) < 2 * steady.MIN_MOVE_SHARE, left


@pytest.mark.parametrize("horizon_s", HORIZONS)
def test_a_ramp_that_goes_on_is_waited_for_or_named_in_the_window(horizon_s):
    """Speed rising 0.5 % an interval without end: within 10 intervals that hides in the noise, so
    the warm-up may open; then the analysis's drift test, on the window's own intervals
    (steady.series_interval_ms), names it as a rising trend wherever it moves the level by at least
    twice MIN_MOVE_SHARE over a window of MIN_INTERVALS seconds or more. At least half the seeds open
    (so the test says something), and where the window is that long every one opened is named."""
    named = judged = 0
    opened = []
    window = round(horizon_s / INTERVAL_S)
    per = max(1, round(steady.series_interval_ms(horizon_s * 1000) / 1000 / INTERVAL_S))   # samples a bin
    for seed in range(30):
        tps, mean = series(lambda k: 0.7 + 0.005 * k, seed, intervals=80 + window)
        t = opens(tps, mean, horizon_s)
        opened.append(t)
        if t is None or horizon_s < steady.MIN_INTERVALS or 0.005 * window / (0.7 + 0.005 * t) < 2 * steady.MIN_MOVE_SHARE:
            continue
        judged += 1
        bins = [x[t:t + window // per * per].reshape(-1, per).mean(axis=1) for x in (tps, mean)]
        found = steady.drift(*bins, per * INTERVAL_S)
        named += any(m.series == "throughput" and m.share > 0 for m in found.moves)
    assert sum(t is not None for t in opened) >= 15, opened
    assert named == judged and (judged > 0) == (horizon_s >= steady.MIN_INTERVALS), (named, judged)


def test_a_series_that_never_settles_keeps_the_window_shut():
    """The level moves by 15 % every 8 intervals: never STEADY_INTERVALS without a change point."""
    shape = (lambda k: 1 + 0.15 * ((k // 8) % 2))
    for horizon_s in HORIZONS:
        for seed in range(10):
            assert opens(*series(shape, seed), horizon_s) is None, (horizon_s, seed)
    answer = steady.steady(*series(shape, 0, intervals=60), INTERVAL_S, horizon_s=HORIZONS[0])
    assert not answer.steady and "ago" in answer.reason, answer


def test_too_few_intervals_say_so():
    answer = steady.steady([2000.0] * 4, [1.0] * 4)
    assert not answer.steady and answer.reason == f"throughput: 4 of {STEADY_INTERVALS} intervals seen"


# --- the drift test ----------------------------------------------------------------------------------

def test_a_slowdown_after_the_warm_up_is_named_where_it_happened():
    """Warm-up done (e^(−t/5)), then at 40 s the target slows by 20 %: the window opened before
    that, and its drift names both series' change point there. The analysis judges a window per
    second (steady.series_interval_ms); the window is placed by the warm-up test on the same seconds."""
    shape = (lambda t: np.where(t < 40, 1 - 0.5 * np.exp(-t / 5), 0.8))
    for seed in range(20):
        tps, mean = step_series(shape, seed)
        t = synthetic.window_opens(tps, mean, horizon_s=60, interval_s=1.0)
        t = None if t is None else int(t)
        assert t is not None and t < 40, (seed, t)
        found = steady.drift(tps[t:t + 60], mean[t:t + 60])
        named = {(m.series, m.kind): m for m in found.moves}
        tput, rt = named[("throughput", "change point")], named[("mean response time", "change point")]
        assert abs(tput.at - (40 - t)) <= 1 and abs(rt.at - (40 - t)) <= 1, found.describe()
        assert tput.share < -0.1 and rt.share > 0.15, found.describe()


def test_a_trend_is_named_as_a_trend_and_a_step_as_a_change_point():
    tps, mean = step_series(lambda t: 1 + 0.1 * t / 300, 1, n=300)
    found = steady.drift(tps, mean)
    assert {(m.series, m.kind) for m in found.moves} == {("throughput", "trend"), ("mean response time", "trend")}
    [tput] = [m for m in found.moves if m.series == "throughput"]
    assert tput.share == pytest.approx(0.1, abs=0.015), found.describe()
    assert found.describe().startswith(f"throughput rose {tput.share:.0%} over the window (trend)"), found.describe()
    tps, mean = step_series(lambda t: np.where(t < 100, 1.0, 0.9), 2, n=300)
    assert steady.drift(tps, mean).describe() == ("throughput fell 10% at 100 s (change point); "
                                                 "mean response time rose 11% at 100 s (change point)")


def test_a_one_second_stall_and_a_small_move_are_not_drift():
    tps, mean = step_series(flat, 3, n=60)
    tps[30], mean[30] = 0.3 * tps[30], 3.0           # a GC pause: a third of the second's work
    tps[40:] *= 0.98                                 # significant over 20 s, but 2 %
    assert steady.drift(tps, mean).drifted is False


@pytest.mark.parametrize("n, poisson_level", [(10, None), (60, None), (60, 20.0), (300, 90.0)])
def test_drift_false_alarms_on_noise_only(n, poisson_level):
    seeds = 400
    named = sum(bool(steady.drift(*step_series(flat, seed, n=n, poisson_level=poisson_level)).moves)
                for seed in range(seeds))
    # Set for under 1 % of steps (both series); measured 0.2–0.7 % at 10–60 intervals, 0 at 300.
    assert named / seeds <= 0.02, named


def test_a_window_of_few_intervals_is_not_judged():
    found = steady.drift([2000.0] * 6, [1.0] * 6)
    assert found.drifted is None and found.describe() == "not judged: 6 interval(s) of 1 s, fewer than 10"


def test_moves_are_judged_at_a_second_or_coarser():
    """The one-machine testbed's speed wanders in spells of a second or two (docs/benchmarks/noise.md):
    a 2-s window of 200-ms intervals whose last 0.8 s run 25 % slower is no drift it can judge (two
    intervals of 1 s), while a 20-s window of the same intervals with that step at 10 s is named there,
    and its throughput and mean response time merged to whole seconds (weighted by transactions)."""
    short = [1000.0] * 6 + [750.0] * 4
    found = steady.drift(short, [1000 / v for v in short], 0.2)
    assert found.drifted is None and found.describe() == "not judged: 2 interval(s) of 1 s, fewer than 10"
    tps, mean = step_series(lambda t: np.where(t < 50, 1.0, 0.75), 5, n=100)
    found = steady.drift(tps, mean, 0.2)
    named = {(m.series, m.kind): m for m in found.moves}
    assert found.interval_s == 1.0 and named[("throughput", "change point")].at == 10, found.describe()
    assert "at 10 s (change point)" in found.describe(), found.describe()
    assert steady.merged([10.0, 30.0, None, 0.0], [1.0, 3.0, None, None], 0.5) == ([20.0, 0.0], [2.5, None], 1.0)


def test_intervals_without_a_transaction_keep_their_place():
    tps, mean = step_series(lambda t: np.where(t < 30, 1.0, 0.7), 4, n=60)
    mean[[5, 6, 33]] = np.nan                           # no transaction, no mean
    [m] = [m for m in steady.drift(tps, mean).moves if m.series == "mean response time"]
    assert m.at == 30


def test_noise_is_robust_to_a_step_and_a_trend():
    rng = np.random.default_rng(5)
    noise = rng.normal(0, 1.0, 400)
    assert steady.noise(noise) == pytest.approx(1.0, rel=0.1)
    assert steady.noise(noise + np.where(np.arange(400) < 200, 0, 50)) == pytest.approx(1.0, rel=0.1)
    assert steady.noise(noise + 0.2 * np.arange(400)) == pytest.approx(1.0, rel=0.1)


# --- Poisson arrivals ------------------------------------------------------------------------------

def test_exponential_gaps_pass_and_regular_or_bursty_ones_do_not():
    rng = np.random.default_rng(6)
    rate, n = 50.0, 3000
    exponential = [whole_ms(rng.exponential(1 / rate, n)) for _ in range(2)]    # two worker processes
    assert steady.exponential_gaps(exponential, resolution=1.0).exponential is True
    regular = whole_ms(np.full(n, 1 / rate))
    jittered = whole_ms(1 / rate + rng.normal(0, 0.2 / rate, n))
    bursty = whole_ms(np.where(rng.random(n) < 0.5, rng.exponential(0.1 / rate, n), rng.exponential(1.9 / rate, n)))
    for times in (regular, jittered, bursty):
        found = steady.exponential_gaps([times], resolution=1.0)
        assert found.exponential is False and found.d > found.critical + found.allowance, found


def test_a_million_gaps_in_whole_ms_are_not_refused_for_their_resolution():
    rng = np.random.default_rng(7)
    found = steady.exponential_gaps([whole_ms(rng.exponential(1 / 300, 1_000_000))], resolution=1.0)
    assert found.exponential is True and found.gaps == steady.MAX_GAPS
    assert found.allowance == pytest.approx(1 - np.exp(-0.3), rel=0.01)
    assert "for the times' resolution" in found.describe()


def test_false_alarms_on_true_exponential_gaps():
    """Exact times: Stephens' 1 % point refuses about 1 % of samples; whole-ms times fewer still
    (their allowance)."""
    exact = sum(steady.exponential_gaps([np.cumsum(np.random.default_rng(s).exponential(0.02, 300))]).exponential
                is False for s in range(2000))
    assert 0.002 <= exact / 2000 <= 0.02, exact
    rounded = sum(steady.exponential_gaps([whole_ms(np.random.default_rng(s).exponential(0.02, 300))], 1.0)
                  .exponential is False for s in range(1000))
    assert rounded / 1000 <= 0.01, rounded


def test_gaps_too_few_or_too_short_for_the_resolution_are_not_judged():
    rng = np.random.default_rng(8)
    few = steady.exponential_gaps([whole_ms(rng.exponential(0.02, 20))], 1.0)
    assert few.exponential is None and few.describe() == "not judged: 19 gaps, fewer than 50"
    fast = steady.exponential_gaps([whole_ms(rng.exponential(1 / 1000, 2000))], 1.0)
    assert fast.exponential is None and "below two resolutions" in fast.describe()


# --- percentiles -------------------------------------------------------------------------------------

def test_a_percentile_needs_its_confidence_interval_inside_the_data():
    assert [steady.min_transactions(p) for p in (50, 90, 95, 99, 99.9)] == [6, 36, 72, 368, 3688]
    assert steady.percentile_measured(99, 368) and not steady.percentile_measured(99, 367)
    with pytest.raises(ValueError):
        steady.min_transactions(100)


def test_the_rule_is_where_the_gates_order_statistic_interval_closes():
    """The gate compares percentiles by the same distribution-free interval (analysis/gate.py):
    at min_transactions its upper rank exists, one value fewer it does not."""
    from esbperf.analysis.gate import rank_interval
    for p in (50, 90, 95, 99, 99.9):
        n = steady.min_transactions(p)
        assert rank_interval(n, p / 100)[1] is not None and rank_interval(n - 1, p / 100)[1] is None


@pytest.mark.parametrize("kind", ["normal-10", "normal-30", "poisson-10"])
def test_the_trend_tests_false_alarms_are_at_its_level_with_ties_too(kind):
    """Mann-Kendall's p-value is scipy's Kendall tau against time (issue 43: a well-kept library
    where one fits): exact for a short series without ties, tie-corrected otherwise. At 5 % it
    refuses 5 % of trendless series, also of Poisson counts (20/s steps: ties), where the
    continuity-corrected normal approximation it replaced refused 3.6 %. 2,000 draws: 3.8-6.2 %."""
    rng = np.random.default_rng(17)
    n = int(kind.split("-")[1])
    draw = (lambda: rng.poisson(5, n).astype(float)) if kind.startswith("poisson") else (lambda: rng.normal(0, 1, n))
    refused = sum(steady.mann_kendall(draw())[0] < 0.05 for _ in range(2000))
    assert 76 <= refused <= 124, refused


# --- the kept libraries' statistics --------------------------------------------------------------

def test_the_penalty_scales_by_students_quantile_over_the_normals_exactly():
    """scipy's t quantile at the noise estimate's degrees of freedom, not an expansion of it (which
    read 4.10 for the 4.29 of t(4.5) at 10 intervals)."""
    from scipy import stats
    for n in (10, 12, 20, 60, 300, 1200):
        df = max(1.0, steady.NOISE_DF_SHARE * (n - 1))
        ratio = stats.t.ppf(1 - steady.ALPHA_PENALTY / 2, df) / stats.norm.ppf(1 - steady.ALPHA_PENALTY / 2)
        assert steady.penalty(n) == pytest.approx(steady.PENALTY * np.log(n) * ratio ** 2, rel=1e-12), n
        assert steady.penalty(n, 2.0) == pytest.approx(2.0 * np.log(n) * ratio ** 2, rel=1e-12)


def test_the_trend_tests_line_is_scipys_theil_sen():
    """Mann-Kendall's p-value, and Theil-Sen's slope and start (the median of x − slope × t), as
    scipy's kendalltau and theilslopes give them."""
    from scipy import stats
    rng = np.random.default_rng(4)
    for x in (rng.normal(100, 3, 40) + 0.2 * np.arange(40), np.round(rng.normal(50, 1, 25)), np.full(12, 7.0)):
        t = np.arange(len(x))
        p, slope, start = steady.mann_kendall(x)
        line = stats.theilslopes(x, t, method="joint")
        assert (slope, start) == pytest.approx((line.slope, line.intercept))
        assert start == pytest.approx(np.median(x - slope * t))
        tau = stats.kendalltau(t, x).pvalue
        assert p == pytest.approx(tau if np.isfinite(tau) else 1.0)


def test_the_poisson_check_is_statsmodels_lilliefors_test():
    """The distance is statsmodels' Lilliefors statistic of the gaps over their mean, the limit its
    table's 1 % critical distance; with exact times (no allowance) the check refuses exactly what
    statsmodels' p-value puts below 1 %."""
    from statsmodels.stats.diagnostic import lilliefors
    disagree = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        gaps = rng.exponential(0.02, 300) if seed % 3 else rng.gamma(1.6, 0.0125, 300)    # some not exponential
        found = steady.exponential_gaps([np.cumsum(gaps)])       # the gaps after the first time
        d, p = lilliefors(gaps[1:] / gaps[1:].mean(), dist="exp", pvalmethod="table")
        assert found.d == pytest.approx(d) and found.allowance == 0.0
        disagree += found.exponential != (p >= 0.01) and abs(p - 0.01) > 1e-3     # the table's rounding aside
    assert disagree == 0
    assert steady.ks_critical(300) == pytest.approx(0.0774, abs=5e-4)      # statsmodels' table; Stephens' gave 0.0749
