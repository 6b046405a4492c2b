"""Forks through the analysis (analysis/verdicts.py, analysis/forks.py): runs whose targets were
measured in several engine processes, as the runner lays them out (step.json `fork`, `…/fork-<F>/
iter-<n>`): summary.csv's `fork`, aggregate.csv's intervals over the forks and variance at each
level, verdicts for every pair of targets (the report, verdicts.csv), `esbperf compare` printing
them, and the gate judging a TPS drop on the interval, never on the point estimate."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from esbperf.analysis import synthetic
from esbperf.analysis.report import build_report
from esbperf.cli import main as cli_main

TARGETS = {"direct": 1.0, "camel": 2.0}


def forked_run(folder: Path, name: str, targets: dict[str, float], forks: int = 3, iterations: int = 2,
               fork_speed: dict | None = None, seed: int = 1) -> Path:
    return synthetic.round_run(folder / name, "forked", targets, ["proxy"], {"1KB": 1024}, [20], iterations,
                               forks=forks, fork_speed=fork_speed, noise=0.02, seed=seed)


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> tuple[Path, object]:
    """camel against direct, 3 forks of 2 iterations; camel's second process 10 % slower."""
    run = forked_run(tmp_path_factory.mktemp("forked"), "run", TARGETS, fork_speed={("camel", 2): 0.9})
    out, analysis = build_report([run], tmp_path_factory.mktemp("report") / "out")
    return out, analysis


def test_the_analysis_reads_each_steps_fork_and_nests_its_iterations_in_it(forked):
    out, analysis = forked
    summary = pl.read_csv(out / "summary.csv")
    camel = summary.filter(pl.col("target") == "camel").sort("fork", "iteration")
    assert camel.select("fork", "iteration").rows() == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert camel["step_dir"].to_list()[2] == "camel/proxy/1KB/20/fork-2/iter-1"
    agg = analysis.aggregate.filter(pl.col("target") == "camel").row(0, named=True)
    assert (agg["iterations"], agg["forks"], agg["interval_over"]) == (6, 3, "forks")
    # The mean of the forks' means, its interval from the forks' spread with 2 degrees of freedom.
    means = camel.group_by("fork").agg(pl.col("tps").mean())["tps"]
    assert agg["tps"] == pytest.approx(means.mean())
    assert agg["tps_ci95"] == pytest.approx(4.303 * means.std() / 3 ** 0.5, rel=1e-3)
    # The slow process shows as variance between processes, beyond what the iterations scatter by.
    assert agg["tps_var_between"] > agg["tps_var_within"] > 0
    assert agg["rt_p99_ms_ci_low"] < agg["rt_p99_ms"] < agg["rt_p99_ms_ci_high"]


def test_every_pair_of_targets_gets_a_verdict_per_figure_on_the_interval_over_forks(forked):
    out, analysis = forked
    verdicts = pl.read_csv(out / "verdicts.csv")
    assert set(verdicts["figure"]) == {"tps", "p50", "p99"} and verdicts.height == 3
    tps = verdicts.filter(pl.col("figure") == "tps").row(0, named=True)
    assert (tps["a"], tps["b"], tps["forks"], tps["one_fork"]) == ("direct", "camel", 3, False)
    assert 2 <= tps["df"] <= 4          # Welch–Satterthwaite's, from the forks' 2 and 2
    assert tps["ratio_low"] < tps["ratio"] < tps["ratio_high"]
    assert tps["sentence"].startswith("direct is faster than camel by ") and "(95 %: " in tps["sentence"]
    html = (out / "report.html").read_text()
    assert "<h2 id=\"verdicts\">Verdicts</h2>" in html and "direct is faster than camel by" in html
    # How many forks: the run is its own pilot.
    [camel] = [a for a in analysis.advice if a.target == "camel"]
    assert camel.forks == 3 and camel.between > 0 and [r.difference for r in camel.needed] == [0.05, 0.10]
    assert "to resolve a difference of 5%: " in camel.describe()


def run_cli(capsys, *args) -> tuple[int, str]:
    try:
        cli_main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().out


@pytest.mark.parametrize("speed, code, said", [
    (0.80, 1, "beyond the limit as a whole"),          # 20 % slower in every process
    (1.00, 0, "within the limit"),                     # the same engine again
])
def test_compare_with_forks_prints_verdicts_and_the_gate_judges_on_the_interval(tmp_path, capsys, speed, code, said):
    base = forked_run(tmp_path, "base", {"camel": 2.0}, seed=1)
    new = forked_run(tmp_path, "new", {"camel": 2.0 / speed}, seed=5)
    status, out = run_cli(capsys, "compare", base, new, "--out", tmp_path / "cmp", "--max-tps-drop", "10%")
    assert status == code, out
    said_tps = [line.strip() for line in out.splitlines() if line.strip().startswith("verdict: proxy 1KB 20 users: ")
                and ("faster" in line or ", TPS: " in line)]
    assert len(said_tps) == 1, out
    if code:
        assert said_tps[0].startswith("verdict: proxy 1KB 20 users: camel (base) is faster than camel (new) by ")
        assert any(line.startswith("  FAIL ") and said in line and "over 3 and 3 forks" in line
                   for line in out.splitlines()), out
    assert "esbperf: gate " + ("failed" if code else "passed") in out
    # The verdicts printed are one family's: under which control, and what chance alone would show.
    assert any(line.startswith("esbperf: verdicts (verdicts.csv): ") and "of 3 verdicts show a difference" in line
               and "would show about 0 by chance" in line for line in out.splitlines()), out


def test_a_drop_beyond_the_limit_whose_interval_straddles_it_is_not_judged(tmp_path, capsys):
    """The point estimate falls 8 % against a 5 % limit, but the processes scatter by more than
    that (one fork of the new run is 25 % slower): the interval over the forks reaches both sides
    of the limit, and the gate does not pass or fail on the point alone."""
    base = forked_run(tmp_path, "base", {"camel": 2.0}, seed=1)
    new = forked_run(tmp_path, "new", {"camel": 2.0}, seed=5, fork_speed={("camel", 1): 0.75})
    status, out = run_cli(capsys, "compare", base, new, "--out", tmp_path / "cmp", "--max-tps-drop", "5%")
    assert status == 3, out
    assert any(line.startswith("  NOT JUDGED") and "across the limit" in line for line in out.splitlines()), out


def test_a_fork_costs_its_start_and_one_warm_up_however_many_forks_the_run_had():
    """The forks benchmark (docs/benchmarks/forks.md): Camel in 5 forks, each warmed about 118 s, TPS
    varying by 6.1 % between processes and 17.5 % within one, an iteration of its steps 18.6 s. A fork
    costs its start and ONE warm-up (10 + 118 s), not the run's five; at that cost Kalibera & Jones'
    optimum is 8 iterations a fork, and 26 forks resolve 5 % (about 120 min a target)."""
    from esbperf.analysis import verdicts

    five = {"target_warmup": [{"seconds": 60, "targets": [{"target": "camel", "fork": f, "scenario": "proxy",
                                                           "seconds": 118.0}]} for f in range(1, 6)]}
    assert verdicts.fork_costs([five]) == {"camel": pytest.approx(128.0)}
    # One warm-up at two kinds of step is one fork's: its parts add up.
    both = {"target_warmup": [{"targets": [{"target": "direct", "scenario": "cbr", "seconds": 8.8},
                                           {"target": "direct", "scenario": "json", "seconds": 8.4}]}]}
    assert verdicts.fork_costs([both]) == {"direct": pytest.approx(10 + 17.2)}
    # Two runs: the mean of all their warm-ups.
    one = {"target_warmup": [{"targets": [{"target": "camel", "seconds": 60.0}]}]}
    assert verdicts.fork_costs([five, one]) == {"camel": pytest.approx(10 + (5 * 118 + 60) / 6)}

    # 5 forks of 2 iterations whose variance components are exactly the benchmark's.
    mean, d = 4000.0, 0.175 * 4000 / 2 ** 0.5                    # within: 2 d² = (17.5 %)²
    spread = ((0.061 * mean) ** 2 + d ** 2) ** 0.5                 # between: S²(means) − within / 2 = (6.1 %)²
    rows = [{"run": "r", "target": "camel", "scenario": "proxy", "payload_bytes": 1024, "users": 20, "rate": None,
             "test": 1, "fork": f, "tps": mean + spread * (f - 3) / 2.5 ** 0.5 + sign * d}
            for f in range(1, 6) for sign in (-1, 1)]
    [camel] = verdicts.advice(pl.DataFrame(rows), verdicts.fork_costs([five]), {"camel": 18.6})
    assert (camel.between ** 0.5, camel.within ** 0.5) == pytest.approx((0.061, 0.175), rel=1e-6)
    assert [(r.forks, r.iterations) for r in camel.needed] == [(26, 8), (8, 8)]
    assert "a fork costs 128 s" in camel.describe() and "5%: 26 forks × 8 iteration(s) (about 120 min a target)" \
        in camel.describe()


def test_a_family_of_verdicts_holds_its_false_discoveries_and_its_intervals_agree_with_it():
    """220 pairs judged as one family, as a report's or a round's verdicts are: 200 of two targets alike
    (5 forks each) and 20 a third apart. 95 % intervals alone show about 10 of the 200 by chance;
    Benjamini–Hochberg (forks.family, on each verdict's own t statistic) shows almost none of them and
    most of the 20. Every verdict shows a difference exactly when its printed interval (at the family's
    level) leaves out none, and exactly when its q is at most 5 %; its p-value is below 5 % exactly when
    its 95 % interval leaves out none. The sentences say which control applied, the family how many
    chance alone would show."""
    import numpy as np

    from esbperf.analysis import forks, verdicts
    from test_fork_statistics import tps_sample

    rng = np.random.default_rng(43)
    pending = []
    for i in range(220):
        apart = i < 20
        found = forks.ratio(tps_sample(rng, 1300.0 if apart else 1000.0, 5, 2), tps_sample(rng, 1000.0, 5, 2))
        pending.append(verdicts.Pending({"plan": "p", "scenario": "proxy", "users": i, "figure": "tps", "a": "camel",
                                         "b": "synapse", "a_target": "camel", "b_target": "synapse"}, "tps", found))
    frame = verdicts.judged(pending).with_row_index("i")
    alike, apart = frame.filter(pl.col("i") >= 20), frame.filter(pl.col("i") < 20)
    by_chance = sum(not p.found.low <= 1 <= p.found.high for p in pending[20:])
    assert 4 <= by_chance <= 20, by_chance                          # what 95 % intervals alone would show
    assert alike["shown"].sum() <= 1 and apart["shown"].sum() >= 15, (alike["shown"].sum(), apart["shown"].sum())
    level = frame["confidence"][0]
    assert 0.95 < level < 1 and (frame["confidence"] == level).all()
    for row, v in zip(frame.iter_rows(named=True), pending):
        outside = row["ratio_low"] > 1 or row["ratio_high"] < 1
        assert row["shown"] == outside == (row["q"] <= forks.FALSE_DISCOVERIES)
        assert (row["p"] < 0.05) == (not v.found.low <= 1 <= v.found.high)
        assert ("q = " in row["sentence"] or "q < 0.001" in row["sentence"]) and \
            "Benjamini–Hochberg over 220 verdicts" in row["sentence"]
        assert f"({verdicts.percent_level(level)}: " in row["sentence"]
        assert row["control"].startswith("Benjamini–Hochberg over 220 verdicts")
    line = verdicts.family_line(frame)
    shown = frame["shown"].sum()
    assert line.startswith(f"{shown} of 220 verdicts show a difference with their false discoveries held to 5 %")
    assert line.endswith("220 intervals at 95 % would show about 11 by chance")


def test_the_gates_checks_on_forks_are_one_family(tmp_path, capsys):
    """Two relative limits on forks, TPS and the mean: the checks are judged as one family (the same
    control as verdicts.csv's), the message naming it and the level of the interval it judged on."""
    base = forked_run(tmp_path, "base", {"camel": 2.0}, seed=1)
    new = forked_run(tmp_path, "new", {"camel": 2.0 / 0.8}, seed=5)
    status, out = run_cli(capsys, "compare", base, new, "--out", tmp_path / "cmp", "--max-tps-drop", "10%",
                          "--max-mean-rise", "10%")
    fails = [line for line in out.splitlines() if line.startswith("  FAIL ")]
    assert status == 1 and len(fails) == 2, out
    assert all("Benjamini–Hochberg over 2 checks, q " in line and "% interval of the change" in line for line in fails)
