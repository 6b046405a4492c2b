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
    assert (tps["a"], tps["b"], tps["forks"], tps["df"], tps["one_fork"]) == ("direct", "camel", 3, 4, False)
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


def test_a_drop_beyond_the_limit_whose_interval_straddles_it_is_not_judged(tmp_path, capsys):
    """The point estimate falls 8 % against a 5 % limit, but the processes scatter by more than
    that (one fork of the new run is 25 % slower): the interval over the forks reaches both sides
    of the limit, and the gate does not pass or fail on the point alone."""
    base = forked_run(tmp_path, "base", {"camel": 2.0}, seed=1)
    new = forked_run(tmp_path, "new", {"camel": 2.0}, seed=5, fork_speed={("camel", 1): 0.75})
    status, out = run_cli(capsys, "compare", base, new, "--out", tmp_path / "cmp", "--max-tps-drop", "5%")
    assert status == 3, out
    assert any(line.startswith("  NOT JUDGED") and "across the limit" in line for line in out.splitlines()), out
