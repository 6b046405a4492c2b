"""Numbers an independent client confirms (issue 22), through the real console, agents and echo
services: `--cross-check wrk` measures every closed-model step again with wrk and records it in
step.json (the analysis sets it beside esbperf's figures); a step wrk cannot send is said so; each
target is warmed up before its first step, and run.json records it; and on a real step whose
back end sets the pace, esbperf's figures and wrk's agree."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ECHO_PORTS, HOST, write_plan, write_testbed
from esbperf.analysis.report import analyse
from esbperf.core import plan as plans, topology
from esbperf.run import runner

SLOW_WS1_PORT = 16098   # a ws1 of this file's own, answering 20 ms late

pytestmark = pytest.mark.slow


def step_records(run_dir) -> dict[str, dict]:
    return {str(p.parent.relative_to(run_dir)): json.loads(p.read_text()) for p in run_dir.rglob("step.json")
            if not any(part.startswith(".") for part in p.relative_to(run_dir).parts)}


@pytest.fixture(scope="module")
def checked(grinder, echoes, testbed_file, tmp_path_factory):
    """One cross-checked run that two tests below read (a run pays the machine wander's 30-s probe
    first): proxy and cbr at 1 and 2 users, two iterations, wrk measuring the first only
    (`cross_check_iterations: [1]`). Yields (plan, run folder, a scratch folder)."""
    tmp_path = tmp_path_factory.mktemp("checked")
    the_plan = plans.load(write_plan(tmp_path / "checked.yaml", scenarios=["proxy", "cbr"], users=[1, 2],
                                     duration_s=2, warmup_s=1, target_warmup_s=2, iterations=2,
                                     cross_check_iterations=[1]))
    run_dir = runner.start(the_plan, "direct", topology.load(testbed_file), tmp_path / "results", cross_check="wrk")
    return the_plan, run_dir, tmp_path


def test_cross_check_measures_each_closed_step_with_wrk_and_says_why_not_where_it_cannot(checked):
    the_plan, run_dir, _ = checked
    record = json.loads((run_dir / "run.json").read_text())
    assert record["cross_check"] == "wrk"
    [warmed] = record["target_warmup"]
    # Warmed under every load it is measured at: the heaviest first (most users; in step order among equals),
    # the first step's last (esbperf/run/warmup.py loads_of).
    assert warmed["seconds"] == 2 and [(t["target"], t["scenario"], t["users"]) for t in warmed["targets"]] == \
        [("direct", "proxy", 2), ("direct", "cbr", 2), ("direct", "cbr", 1), ("direct", "proxy", 1)]
    assert all(t["transactions"] > 0 and t["errors"] == 0 for t in warmed["targets"]), warmed
    # The machine's own wander, measured on the esb host's cores before the first step: wrk's bracket allows for it.
    wander = record["machine_wander"]
    assert wander["window_s"] == the_plan.duration_s and wander["pairs"] > 100 and 0 <= wander["wander"] < 1, wander
    steps = {where: meta for where, meta in step_records(run_dir).items() if where.endswith("/iter-1")}
    assert len(steps) == 4
    for where, meta in steps.items():
        xcheck = meta["xcheck"]
        if "/cbr/" in where:   # the baseline's cbr goes to ws1, ws2 and ws3: three hosts
            assert xcheck == {"skipped": xcheck["skipped"]} and "go to 3 hosts" in xcheck["skipped"], xcheck
            continue
        assert xcheck["tool"] == "wrk" and xcheck["connections"] == meta["users"], xcheck
        assert xcheck["url"].endswith("/echo") and xcheck["errors"] == 0 and xcheck["tps"] > 10, xcheck
        assert 0 < xcheck["p50_ms"] <= xcheck["p99_ms"] and xcheck["mean_ms"] > 0, xcheck
        # Bracketed: wrk before the step and after it, never beside it; the step is judged on their mean.
        before, after = xcheck["before"], xcheck["after"]
        assert xcheck["bracketed"] and before["ended_ms"] <= meta["start_ms"]
        assert after["started_ms"] - before["started_ms"] >= 1000 * wander["gap_s"], "the probe's gap is a bracket's least"
        assert after["started_ms"] >= meta["end_ms"], "wrk ran after the step, never beside it"
        assert xcheck["tps"] == pytest.approx((before["tps"] + after["tps"]) / 2)
        assert xcheck["drift"] == pytest.approx((after["tps"] - before["tps"]) / xcheck["tps"])
        assert min(meta["phases_s"]["xcheck"], meta["phases_s"]["xcheck_before"]) >= the_plan.duration_s


def test_cross_check_leaves_open_model_steps_alone_and_a_missing_wrk_is_one_line(grinder, echoes, testbed_file,
                                                                                 tmp_path, monkeypatch):
    # The machine's wander (a 30-s probe before the first step) is for wrk's brackets, which an open-model
    # step never has: the probe is asserted on above, and left out of this run.
    monkeypatch.setattr(runner, "_machine_wander", lambda *_: {"skipped": "not measured by this test"})
    the_plan = plans.load(write_plan(tmp_path / "open.yaml", rates=[50], users=[4], duration_s=2, warmup_s=1))
    run_dir = runner.start(the_plan, "direct", topology.load(testbed_file), tmp_path / "results", cross_check="wrk")
    [meta] = step_records(run_dir).values()
    assert meta["xcheck"] == {"skipped": meta["xcheck"]["skipped"]} and "open-model" in meta["xcheck"]["skipped"]

    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    out = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", "smoke", "--target", "direct",
                          "--testbed", str(testbed_file), "--cross-check", "wrk", "--out", str(tmp_path / "never")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == \
        "esbperf: error: --cross-check wrk: wrk is not installed (Debian: apt-get install -y wrk)", out.stderr
    assert not (tmp_path / "never").exists()


def test_a_plans_cross_check_iterations_choose_the_steps_wrk_measures(checked):
    """`cross_check_iterations: [1]`: wrk measures the first iteration's steps only; the others carry
    no `xcheck` at all (no wrk time, nothing skipped), and the analysis's cross-check columns hold
    the first iteration's figures alone."""
    from esbperf.analysis.report import write_report
    import polars as pl

    _, run_dir, tmp_path = checked
    steps = step_records(run_dir)
    assert sorted(steps) == [f"direct/{s}/1KB/{u}/iter-{i}" for s in ("cbr", "proxy") for u in (1, 2) for i in (1, 2)]
    for scenario in ("proxy", "cbr"):
        for users in (1, 2):
            first, second = (steps[f"direct/{scenario}/1KB/{users}/iter-{i}"] for i in (1, 2))
            if scenario == "proxy":
                assert first["xcheck"]["tool"] == "wrk" and first["xcheck"]["tps"] > 10 and "xcheck" in first["phases_s"]
            else:   # three hosts: skipped, and said why
                assert "3 hosts" in first["xcheck"]["skipped"]
            assert "xcheck" not in second and "xcheck" not in second["phases_s"]
    summary = pl.read_csv(write_report([run_dir], tmp_path / "report") / "summary.csv")
    for users in (1, 2):
        proxy = summary.filter((pl.col("scenario") == "proxy") & (pl.col("users") == users)).sort("iteration")
        first = steps[f"direct/proxy/1KB/{users}/iter-1"]
        assert proxy["xcheck_tps"][0] == pytest.approx(first["xcheck"]["tps"], abs=1e-3) and proxy["xcheck_tps"][1] is None
        assert proxy["xcheck_skipped"].fill_null("").to_list() == ["", ""]
        cbr = summary.filter((pl.col("scenario") == "cbr") & (pl.col("users") == users)).sort("iteration")
        assert cbr["xcheck_tps"].to_list() == [None, None]
        assert "3 hosts" in cbr["xcheck_skipped"][0] and cbr["xcheck_skipped"].fill_null("")[1] == ""


def test_esbperf_wrk_and_the_console_agree_on_a_real_step(grinder, echoes, tmp_path):
    """4 users against a ws1 answering 20 ms late, measured for 3 s well after the worker JVM's
    compilation (12 s warm-up): both clients see the back end's pace (on a shared 2-core machine a
    client's own costs, a fraction of a ms, would set a faster echo's figures), so the step passes
    the cross-check (TPS within 0.9 of wrk's, means within 10 % of wrk's), and wrk had no error to
    void it. The console's own count lies in the range the data logs allow; without one of the
    two workers' logs it does not, and the check fires on this 3-second window."""
    from esbperf.services.echo import start_echo

    ws1 = start_echo("ws1", HOST, SLOW_WS1_PORT, delay_ms=20, workdir=tmp_path / "ws1")
    try:
        testbed = topology.load(write_testbed(tmp_path / "slow.yaml", {**ECHO_PORTS, "ws1": SLOW_WS1_PORT}))
        the_plan = plans.load(write_plan(tmp_path / "agree.yaml", users=[4], duration_s=3, warmup_s=12,
                                         target_warmup_s=3))
        run_dir = runner.start(the_plan, "direct", testbed, tmp_path / "results", cross_check="wrk")
    finally:
        ws1.stop()
    [row] = analyse([run_dir]).summary.to_dicts()
    assert row["xcheck_errors"] == 0 and row["errors"] == 0, row
    assert row["xcheck_failed"] is False, (row["tps"], row["xcheck_tps"], row["rt_mean_ms"], row["xcheck_mean_ms"])
    assert 0.9 <= row["xcheck_tps_ratio"] <= 1.1 and row["rt_mean_ms"] > 20, row
    assert row["console_check"] == "agrees", (row["console_min"], row["console_max"], row["console_tests"])
    [log, _] = sorted((run_dir / row["step_dir"] / "logs").glob("*-data.log"))    # a worker on each agent
    log.unlink()
    [row] = analyse([run_dir]).summary.to_dicts()
    assert row["console_check"] == "disagrees", (row["console_min"], row["console_max"], row["console_tests"])
