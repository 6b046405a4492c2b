"""The known-answer checks' arithmetic (analysis/known_answers.py): what counts as a false verdict, a
right sign, a covered truth, a warm-up judged settled too soon — on hand-made inputs whose answers
are known, so that `esbperf selftest`'s rates mean what docs/benchmarks/known-answers.md says."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from esbperf.analysis import known_answers as ka
from esbperf.core import steady


def verdicts(rows: list[dict]) -> pl.DataFrame:
    base = {"payload_bytes": 1024, "users": 20, "a_run": "b-run", "b_run": "a-run"}
    return pl.DataFrame([{**base, **r} for r in rows])


def test_an_aa_difference_shown_is_false_whichever_way_and_unjudged_ones_do_not_count():
    frame = verdicts([
        {"figure": "tps", "ratio": 1.02, "ratio_low": 0.97, "ratio_high": 1.07, "shown": False},
        {"figure": "p50", "ratio": 0.90, "ratio_low": 0.85, "ratio_high": 0.95, "shown": True},
        {"figure": "p99", "ratio": 1.30, "ratio_low": None, "ratio_high": None, "shown": None},   # no interval
    ])
    rates = {r.judgment: r for r in ka.aa_rates("A/A", [ka.Comparison("c1", frame, "b-run", gate_exit=3)])}
    assert (rates["any figure: a difference called shown"].hits, rates["any figure: a difference called shown"].count) == (1, 2)
    gate = rates["the gate at 5 % fails (exit 1)"]
    assert (gate.hits, gate.count, gate.met) == (0, 1, True) and "1 not judged" in gate.note


def test_a_verdict_the_user_is_told_not_to_take_is_no_judgment_and_is_counted_apart():
    """A side a validity warning names ("not a valid measurement") or a testbed bound ("not judged")
    makes no claim: such a verdict is neither a false difference nor a missed one (an interleaved run
    whose client stalled mid-run gave three of them, with intervals of ±40 %)."""
    frame = verdicts([
        {"figure": "tps", "ratio": 1.02, "ratio_low": 0.97, "ratio_high": 1.07, "shown": False,
         "short": "none shown (−3 to +7 %)", "valid_a": "yes", "valid_b": "yes"},
        {"figure": "tps", "ratio": 0.99, "ratio_low": 0.67, "ratio_high": 1.46, "shown": False,
         "short": "none shown (−33 to +46 %)", "valid_a": "littles-law", "valid_b": "yes"},
        {"figure": "tps", "ratio": 1.40, "ratio_low": 1.20, "ratio_high": 1.60, "shown": False,
         "short": "not judged (bound)", "valid_a": "yes", "valid_b": "yes"},
    ])
    [tps] = [r for r in ka.aa_rates("A/A", [ka.Comparison("c1", frame, "b-run")]) if r.judgment.startswith("tps")]
    assert (tps.hits, tps.count) == (0, 1) and "2 more not judged" in tps.units, tps


def test_a_known_difference_is_right_only_shown_with_the_truths_sign_and_covered_only_inside_its_interval():
    # verdicts.csv says a ÷ b; here a is the run compared (the second, "b-run"): B ÷ A as it stands.
    frame = verdicts([
        {"figure": "tps", "ratio": 0.91, "ratio_low": 0.88, "ratio_high": 0.94, "shown": True},
        {"figure": "p50", "ratio": 1.05, "ratio_low": 0.98, "ratio_high": 1.12, "shown": False},
        {"figure": "p99", "ratio": 1.20, "ratio_low": 1.12, "ratio_high": 1.29, "shown": True},
    ])
    truth = {(1024, 20): {"tps": 0.92, "p50": 1.09, "p99": 1.09}}
    found = {r.judgment: r for r in ka.difference_rates("diff", [ka.Comparison("c1", frame, "b-run", truth=truth)])}
    assert found["tps: the difference shown, with the right sign"].hits == 1
    assert found["tps: the 95 % interval covers the truth"].hits == 1
    assert found["p50: the difference shown, with the right sign"].hits == 0      # not shown: no sign
    assert found["p50: the 95 % interval covers the truth"].hits == 1
    assert found["p99: the 95 % interval covers the truth"].hits == 0             # 1.09 below 1.12
    # The same verdicts written the other way round (a = the first run) read the same.
    flipped = frame.with_columns(pl.lit("a-run").alias("a_run"), pl.lit("b-run").alias("b_run"),
                                 (1 / pl.col("ratio")).alias("ratio"), (1 / pl.col("ratio_high")).alias("ratio_low"),
                                 (1 / pl.col("ratio_low")).alias("ratio_high"))
    again = {r.judgment: r.hits for r in ka.difference_rates("diff", [ka.Comparison("c1", flipped, "b-run", truth=truth)])}
    assert again == {j: r.hits for j, r in found.items()}
    # Two targets of one run (the interleaved check): the second side named by its target, a either.
    for written, a_target, b_target in ((frame, "reference-twin", "reference"), (flipped, "reference", "reference-twin")):
        one_run = written.with_columns(pl.lit("run").alias("a_run"), pl.lit("run").alias("b_run"),
                                       pl.lit(a_target).alias("a_target"), pl.lit(b_target).alias("b_target"))
        same = ka.difference_rates("diff", [ka.Comparison("c1", one_run, "reference-twin", truth=truth)])
        assert {r.judgment: r.hits for r in same} == {j: r.hits for j, r in found.items()}


def test_the_truth_pools_each_sides_wrk_windows():
    load = lambda tps, p50: {"payload_bytes": 1024, "users": 20, "tps": tps, "p50_ms": p50, "p99_ms": 2 * p50}
    truth = ka.pooled_truth([([load(100, 2.0)], [load(90, 2.2)]), ([load(110, 1.8)], [load(92, 2.0)])])
    assert truth[(1024, 20)]["tps"] == pytest.approx(91 / 105)
    assert truth[(1024, 20)]["p50"] == pytest.approx(2.1 / 1.9)


def account(factor_start: float, span_s: float, since_s: float) -> dict:
    """The reference's account: 160 µs of work a request at factor 1, 40 µs besides."""
    return {"settings": {"warmup-factor": factor_start, "warmup-s": span_s, "step-at": 0, "step-factor": 1},
            "factor": 1.0, "work_us_per_request": 160.0, "requests": 100_000, "work_cpu_s": 16.0,
            "process_cpu_s": 20.5, "work_calibration": {"cpu_s": 0.5}, "seconds_since_first_request": since_s}


def test_a_falling_reference_judged_settled_early_is_counted_with_how_far_it_still_had_to_go():
    # Its work falls from 1.5 to 1 over 120 s, and its warm-up's series says nothing: flat at 4,000.
    # A series flat from the start is settled early, when the curve still had far to go: wrong.
    series = list(4000 * (1 + np.random.default_rng(3).normal(0, 0.01, 100)))
    run = {"target_warmup": [{"targets": [{"fork": 1, "seconds": 100, "outcome": "not resolved", "reason": "",
                                           "least_s": 5, "horizon_s": 60, "bucket_s": 1.0, "tps": series,
                                           "account": account(1.5, 120, 101)}]}]}
    [w] = ka.warmings(run)
    assert w.settled_at is not None and w.settled_at < 60
    # At that moment the factor was 1 + 0.5 (1 − t/120): (f·160 + 40) ÷ 200 − 1 to go.
    f = 1 + 0.5 * (1 - (w.settled_at + 1) / 120)
    assert w.remaining == pytest.approx((f * 160 + 40) / 200 - 1, rel=1e-6)
    [rate] = ka.warmup_rates([], [w], falling_label="reference falling 33 % over 120 s")
    assert (rate.hits, rate.count, rate.met) == (1, 1, False)


def test_a_flat_reference_settled_late_or_called_moving_counts_against_the_rule():
    flat = [ka.Warming(1, 75, "settled", "", 40.0, steady.SETTLED), ka.Warming(2, 75, "not resolved", "", None,
                                                                            steady.UNRESOLVED),
            ka.Warming(3, 75, "still moving", "", None, steady.MOVING)]
    soon, moving = ka.warmup_rates(flat, [])
    assert (soon.hits, soon.count) == (1, 3) and (moving.hits, moving.count) == (1, 3)


def test_valid_steps_count_each_step_once_and_each_warning_by_the_steps_it_names():
    summary = pl.DataFrame({"run": ["r"] * 4, "step_dir": ["a", "a", "b", "c"],
                            "valid": ["yes", "yes", "drift;littles-law", "drift"]})
    rates = {r.judgment: r for r in ka.valid_rates("demo", summary)}
    assert (rates["steps marked valid"].hits, rates["steps marked valid"].count) == (1, 3)
    assert rates["steps named by `drift`"].hits == 2 and rates["steps named by `littles-law`"].hits == 1


def test_a_bracket_on_a_flat_target_counts_each_bracketed_step_once_and_every_drift_as_false():
    summary = pl.DataFrame({"run": ["r"] * 5, "step_dir": ["a", "a", "b", "c", "d"], "fork": [1, 1, 1, 2, 2],
                            "target_drift": [True, True, False, False, None],       # d: not bracketed
                            "xcheck_drift": [0.09, 0.09, -0.01, 0.03, None],
                            "xcheck_noise": [0.07, 0.07, 0.07, 0.08, None],
                            "xcheck_failed": [False, False, True, None, None]})
    rate, crossed = ka.bracket_rates("wrk bracket", summary)
    assert (crossed.hits, crossed.count) == (1, 3)
    assert (rate.hits, rate.count, rate.units) == (1, 3, "steps of 2 forks") and rate.goal == 0.05
    assert "median 3.0 %" in rate.note and "at most 9.0 %" in rate.note and "allowed a median 7.0 %" in rate.note
    assert ka.bracket_rates("wrk bracket", summary.filter(pl.col("step_dir") == "d")) == []


def test_a_rate_has_its_exact_binomial_interval():
    low, high = ka.Rate("c", "j", 2, 40, 0.05).interval()
    assert low == pytest.approx(0.0061, abs=1e-4) and high == pytest.approx(0.1692, abs=1e-4)
    assert ka.Rate("c", "j", 0, 0).rate is None and ka.Rate("c", "j", 0, 0).met is None


def test_the_work_share_between_two_readings_leaves_the_process_start_out():
    """A fork's account at its warm-up's end and after the run (one process): the share of its CPU
    its work took in between, with the JVM's start in neither reading's difference."""
    calibration = {"rounds": 1000, "runs": 3000, "cpu_s": 0.38}
    warm = {"work_calibration": calibration, "uptime_s": 16.0, "requests": 20851, "work_cpu_s": 2.74, "process_cpu_s": 7.39}
    end = {"work_calibration": calibration, "uptime_s": 35.3, "requests": 45690, "work_cpu_s": 5.60, "process_cpu_s": 13.27}
    assert ka.work_share_between(warm, end) == pytest.approx(2.86 / 5.88)
    assert ka.work_share([end]) == pytest.approx(5.60 / 13.27)        # the whole life: its start as not work
    assert ka.work_share_between(end, warm) is None                    # not a later reading
    assert ka.work_share_between({**warm, "work_calibration": {"rounds": 1}}, end) is None   # another process
    assert ka.work_share_between(None, end) is None
