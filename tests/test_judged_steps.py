"""Steps that judge themselves, in the analysis: a window that drifted is named (summary.csv
`drift`, a validity warning, its series in the report), a percentile from too few transactions
is not shown, an `arrivals: poisson` step whose starts were not Poisson is named, and each step
gets one verdict (`valid`) that the tables, graphs, `esbperf compare` and the gate carry. Every
data log is written here with the rows the expected figures follow from."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from esbperf.analysis import synthetic
from esbperf.analysis.report import analyse, build_report
from test_analysis import END, WARMUP_END, data_log, ok_row, write_meta
from test_gate import esbperf


def paced_rows(per_second: list[int], ms: list[int], start: int = WARMUP_END) -> list[tuple]:
    """Rows of a 10-second window: in second k, per_second[k] transactions of ms[k] ms, evenly
    spaced, over 4 threads; a second's count varies by up to 2 (k % 3), as a real one does."""
    rows = []
    for k, (n, t) in enumerate(zip(per_second, ms)):
        n += k % 3
        rows += [ok_row(start + k * 1000 + i * 1000 // n, t, thread=i % 4, us=t * 1000 + (i % 7) * 10) for i in range(n)]
    return rows


def closed_step(run: Path, users: int, rows: list[tuple], iteration: int = 1, **meta) -> Path:
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", "1KB", users, iteration), "proxy", "camel", 1024,
                                  "1KB", users, iteration, warmup_s=30, duration_s=10)
    data_log(folder / "logs" / "client-0-data.log", rows)
    if meta:
        write_meta(folder, **meta)
    return folder


STEADY = paced_rows([200] * 10, [1] * 10)
SLOWED = paced_rows([200] * 6 + [100] * 4, [1] * 6 + [2] * 4)     # half as fast from 6 s on


def test_a_window_that_slowed_is_named_with_its_series_and_marked_everywhere(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    closed_step(run, 1, STEADY, warmup_used_s=12.5)
    closed_step(run, 20, SLOWED)
    out, analysis = build_report([run], tmp_path / "out")
    rows = {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert rows[1]["drift"] is False and not rows[1]["drift_moves"] and "drift" not in rows[1]["valid"]
    assert rows[20]["drift"] is True and "drift" in rows[20]["valid"].split(";")
    assert rows[20]["drift_moves"] == ("throughput fell 50% at 6 s (change point); "      # 1.03 → 2.03 ms:
                                       "mean response time rose 97% at 6 s (change point)")    # + 97 %
    # step.json's warm-up, else the workers' first report (synthetic: 0.5 s after the start) to the window
    assert (rows[1]["warmup_used_s"], rows[20]["warmup_used_s"]) == (12.5, 29.5)
    [warning] = [w for w in analysis.warnings if w.kind == "drift"]
    assert warning.steps == ((run.name, "proxy/1KB/20/iter-1"),) and "fell 50% at 6 s" in warning

    [graph] = analysis.series_graphs                                   # its intervals, in the report
    tps = {s.label: s for s in graph.panels[0].series}["camel measured"]
    assert tps.x == [float(k) for k in range(10)] and tps.y[0] == 200 and tps.y[-1] == 100 + 9 % 3
    html = (out / "report.html").read_text()
    assert 'id="drift"' in html and graph.name in html
    assert "not valid: drift" in html and 'class="invalid"' in html
    svg = ET.parse(out / "graphs" / "proxy-tps-vs-users.svg")         # the drifted step's point is hollow
    assert "invalid-camel" in {e.get("id") for e in svg.iter()}
    [agg] = analysis.aggregate.filter(pl.col("users") == 20).to_dicts()
    assert "drift" in agg["valid"].split(";")


def test_a_window_too_short_for_the_drift_test_is_not_judged(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "r", "camel")
    folder = closed_step(run, 1, [ok_row(WARMUP_END + i * 5, 1) for i in range(100)])
    write_meta(folder, end_ms=WARMUP_END + 500)                        # 0.5 s: five intervals of 100 ms
    [row] = analyse([run]).summary.to_dicts()
    # Judged at 1 s or coarser (steady.DRIFT_MIN_INTERVAL_S): half a second holds no whole interval.
    assert row["drift"] is None and row["drift_moves"] == "not judged: 0 interval(s) of 1 s, fewer than 10"


def test_percentiles_from_too_few_transactions_are_not_shown(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "r", "camel")
    closed_step(run, 1, [ok_row(WARMUP_END + i * 50, 1, us=1000 + i) for i in range(100)])
    out, analysis = build_report([run], tmp_path / "out")
    [row] = pl.read_csv(out / "summary.csv").to_dicts()
    assert row["rt_p50_ms"] == pytest.approx(1.049) and row["rt_p95_ms"] == pytest.approx(1.094)   # 6 and 72 needed
    assert row["rt_p99_ms"] is None and row["rt_p99_9_ms"] is None                                # 368 and 3 688
    html = (out / "report.html").read_text()
    assert '<span title="not measured: 100 transactions, a p99 needs 368">–</span>' in html
    assert '<span title="not measured: 100 transactions, a p99.9 needs 3,688">–</span>' in html
    assert "p99 368, p99.9 3,688" in html                                 # the note under the table
    [pct] = [g for g in analysis.graphs if g.name.endswith("percentiles")]
    assert [y is None for y in pct.panels[0].series[0].y] == [False] * 4 + [True] * 5   # p50–p95 shown


def poisson_run(run_dir: Path, schedules: dict[float, np.ndarray]) -> Path:
    """An `arrivals: poisson` run of open-model steps, one per rate, each logged by two worker
    processes whose starts are `schedules[rate]` (gaps in s) in whole ms."""
    run = synthetic.write_run(run_dir, "camel", plan=synthetic.plan_dict("open", rates=list(schedules),
                                                                         arrivals="poisson", seed=1))
    for rate, gaps in schedules.items():
        folder = synthetic.write_step(run_dir / "proxy" / "1KB" / f"r{rate:g}" / "it1", "proxy", "camel", 1024,
                                      "1KB", 20, 1, warmup_s=30, duration_s=10, rate=rate, plan="open")
        for process in range(2):
            starts = synthetic.whole_ms(gaps[process::2]) - synthetic.BASE_MS + WARMUP_END
            rows = [(i % 10, i, 1, int(t), 2, 0, 200, 1024, 1100, 2000, 2300, 300) for i, t in enumerate(starts)
                    if t < END]
            data_log(folder / "logs" / f"client-{process}-data.log", rows, synthetic.OPEN_DATA_LOG_HEADER)
    return run


def test_poisson_steps_whose_starts_were_not_poisson_are_named(tmp_path: Path):
    rng = np.random.default_rng(3)
    run = poisson_run(tmp_path / "open", {100.0: rng.exponential(1 / 50, 2000),       # each process 50/s
                                          200.0: np.full(4000, 1 / 100)})              # evenly spaced
    analysis = analyse([run])
    rows = {r["rate"]: r for r in analysis.summary.to_dicts()}
    assert rows[100.0]["poisson_arrivals"] is True and rows[200.0]["poisson_arrivals"] is False
    assert rows[200.0]["arrivals_test"].startswith("KS distance 0.6")
    [warning] = [w for w in analysis.warnings if w.kind == "not-poisson"]
    assert len(warning.steps) == 1 and "r200" in warning.steps[0][1]
    assert rows[200.0]["valid"] == "not-poisson" and rows[100.0]["valid"] == "yes"


def test_steps_of_uniform_arrivals_are_not_tested_for_poisson(tmp_path: Path):
    run = poisson_run(tmp_path / "open", {200.0: np.full(4000, 1 / 100)})
    info = json.loads((run / "run.json").read_text())
    del info["plan"]["arrivals"], info["plan"]["seed"]
    (run / "run.json").write_text(json.dumps(info))
    [row] = analyse([run]).summary.to_dicts()
    assert row["poisson_arrivals"] is None and row["arrivals_test"] == ""


def test_compare_and_the_gate_say_when_a_step_is_not_valid(tmp_path: Path, capsys):
    base, new = (synthetic.write_run(tmp_path / name, "camel") for name in ("base", "new"))
    closed_step(base, 1, STEADY)
    closed_step(new, 1, SLOWED)
    code, out, _ = esbperf(capsys, "compare", base, new, "--out", tmp_path / "cmp", "--max-tps-drop", "5%",
                           "--junit", tmp_path / "gate.xml")
    assert code == 1, out
    assert "esbperf: 1 of 1 compared step(s) hold a step that is not a valid measurement" in out
    # Both steps are named by Little's law too (one user, four threads): `valid` lists every warning.
    said = "[not a valid measurement: the base run: littles-law; the new run: drift, littles-law]"
    assert said in out and "esbperf: 1 check(s) judged a step that is not a valid measurement" in out
    [ratio] = pl.read_csv(tmp_path / "cmp" / "ratios.csv").to_dicts()
    assert (ratio["valid"], ratio["valid_reference"]) == ("drift;littles-law", "littles-law")
    assert "drift, littles\u2011law / littles\u2011law" in (tmp_path / "cmp" / "report.html").read_text()
    [case] = ET.parse(tmp_path / "gate.xml").getroot().iter("testcase")
    assert said in case.find("failure").get("message")


def test_the_gate_does_not_judge_a_percentile_it_cannot_measure(tmp_path: Path, capsys):
    run = synthetic.write_run(tmp_path / "r", "camel")
    closed_step(run, 1, [ok_row(WARMUP_END + i * 50, 2) for i in range(100)])
    code, out, _ = esbperf(capsys, "report", run, "--out", tmp_path / "rep", "--max-p99-ms", "1")
    assert code == 3, out   # not judged: neither passed nor failed (docs/regression-gate.md)
    assert "gate not judged: 0 of 1 check(s) broke a limit, 1 not judged, 0 passed" in out
    assert "p99 not measured: 100 transactions in the step, a p99 needs 368; not judged" in out


def test_a_step_whose_auto_warm_up_found_no_steady_state_is_named_with_its_intervals(tmp_path: Path):
    """warmup_s: auto reached warmup_max_s with the series still moving: the step is measured all the
    same, named (`no-steady-state`), not valid, and its intervals are drawn; a steady one is not."""
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    closed_step(run, 1, STEADY, warmup_s="auto", warmup_used_s=3.2,
                warmup={"steady": True, "reason": "", "interval_s": 0.25, "tps": [], "mean_us": []})
    closed_step(run, 20, STEADY, warmup_s="auto", warmup_used_s=60.0,
                warmup={"steady": False, "reason": "throughput rose 25% 6 s ago", "interval_s": 0.25,
                        "tps": [], "mean_us": []})
    out, analysis = build_report([run], tmp_path / "out")
    rows = {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert rows[1]["warmup_steady"] is True and "no-steady-state" not in rows[1]["valid"]
    assert rows[20]["warmup_steady"] is False and rows[20]["warmup_unsteady"] == "throughput rose 25% 6 s ago"
    assert "no-steady-state" in rows[20]["valid"].split(";")
    [warning] = [w for w in analysis.warnings if w.kind == "no-steady-state"]
    assert warning.steps == ((run.name, "proxy/1KB/20/iter-1"),)
    assert "60 s of warm-up; throughput rose 25% 6 s ago" in warning
    [graph] = analysis.series_graphs
    assert "no steady state (throughput rose 25% 6 s ago)" in graph.title.replace("\n", " ")


def test_a_step_whose_client_was_busy_is_client_bound_whatever_the_target_did(tmp_path: Path):
    """Hyperfoil's watchdog: a load host above 80 % of its cores, or whose worker JVMs are, in the
    window makes the step client-bound (the synthetic client is pinned to one core)."""
    from test_analysis import T0
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    for users, client_cpu, workers in ((1, 30.0, (20.0,)), (20, 93.0, (60.0,)), (40, 50.0, (50.0, 45.0))):
        folder = closed_step(run, users, STEADY)
        synthetic.write_monitor(folder, "client", T0, WARMUP_END, END, cpu_percent=client_cpu, rx_mbit=1, tx_mbit=1,
                                proc_cpu=workers)
        synthetic.write_monitor(folder, "esb", T0, WARMUP_END, END, cpu_percent=20.0, rx_mbit=1, tx_mbit=1)
    out, analysis = build_report([run], tmp_path / "out")
    rows = {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert rows[1]["client_bound"] is False and not rows[1]["client_bound_by"]
    assert rows[20]["client_bound"] is True and rows[20]["client_bound_by"] == "client:cpu 93%"
    # Two worker JVMs at 50 % and 45 % of a core: 95 % of the client's one core.
    assert rows[40]["client_bound"] is True and rows[40]["client_bound_by"] == "client:workers 95%"
    assert not rows[40]["bottlenecks"], "80 % is the client's limit, not the saturation rule's 85 %"
    assert [rows[u]["bound"] for u in (1, 20, 40)] == ["none", "client", "client"]
    [warning] = [w for w in analysis.warnings if w.kind == "client-bound"]
    assert {s[1] for s in warning.steps} == {"proxy/1KB/20/iter-1", "proxy/1KB/40/iter-1"}
    # A bound, not a fault: the warning lists the step, and its `valid` does not name it.
    assert "client-bound" not in rows[20]["valid"].split(";")


def test_the_esb_hosts_engines_are_told_apart_and_busy_neighbours_are_named(tmp_path: Path):
    """run.json's engine_matches tell the esb host's watched processes apart: the target's CPU is its
    own engine's, the others are its neighbours, which must be idle while it is measured."""
    from test_analysis import T0
    run = synthetic.write_run(tmp_path / "camel-run", "camel",
                              engine_matches={"camel": "org.apache.camel.main.Main", "nginx": "nginx:"})
    info = json.loads((run / "run.json").read_text())
    info["targets"] = [{"name": "camel", "kind": "esb", "esb": "camel"}, {"name": "direct", "kind": "direct", "esb": None}]
    (run / "run.json").write_text(json.dumps(info))
    quiet, busy = closed_step(run, 1, STEADY), closed_step(run, 20, STEADY)
    for folder, nginx in ((quiet, 0.5), (busy, 30.0)):
        synthetic.write_monitor(folder, "esb", T0, WARMUP_END, END, cpu_percent=40.0, rx_mbit=1, tx_mbit=1,
                                proc_cpu=(70.0, nginx))
        csv_path = folder / "monitor-esb.csv"   # name the watches as the monitor does: by --match text
        text = csv_path.read_text().replace("pid 4000", "org.apache.camel.main.Main").replace("pid 4001", "nginx:")
        csv_path.write_text(text)
    out, analysis = build_report([run], tmp_path / "out")
    rows = {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert rows[1]["esb_proc_cpu_mean"] == 70.0 and rows[1]["esb_neighbours_cpu_mean"] == 0.5
    assert rows[20]["esb_neighbours_cpu_mean"] == 30.0 and "busy-neighbours" in rows[20]["valid"].split(";")
    [warning] = [w for w in analysis.warnings if w.kind == "busy-neighbours"]
    assert warning.steps == ((run.name, "proxy/1KB/20/iter-1"),) and "neighbours 30 % of a core" in warning


def test_a_step_on_a_target_not_judged_warm_is_named_whatever_its_window_showed(tmp_path: Path):
    """The shipped smoke plan warms no target: against a freshly started Camel its steps are named
    (step.json `target_warm` as the runner writes it); so is a step whose target's warm-up ended
    with its throughput still moving; a settled one is not, nor an older run that does not say."""
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    closed_step(run, 1, STEADY, target_warm={"settled": None, "reason": "the plan warms no target up"})
    closed_step(run, 20, STEADY, target_warm={"settled": False, "reason": "throughput still climbing: +9.0 % over 120 s"})
    closed_step(run, 40, STEADY, target_warm={"settled": True, "reason": "settled"})
    closed_step(run, 80, STEADY)
    out, analysis = build_report([run], tmp_path / "out")
    valid = {r["users"]: r["valid"] for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert "target-not-warm" in valid[1].split(";") and "target-not-warm" in valid[20].split(";")
    assert "target-not-warm" not in valid[40] and "target-not-warm" not in valid[80]
    [warning] = [w for w in analysis.warnings if w.kind == "target-not-warm"]
    assert "still climbing" in warning and "warms no target" in warning


def test_a_target_warm_up_not_resolved_is_a_note_and_only_one_still_moving_spoils(tmp_path: Path):
    """steady.settling's three answers as step.json `target_warm` carries them: still moving spoils the
    step (target-not-warm); not resolved leaves it valid, named by a note that says what would resolve it."""
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    closed_step(run, 1, STEADY, target_warm={"settled": None, "outcome": "not resolved",
                                             "reason": "not resolved: +1.0 %/min …; about 90 s of this noise would resolve it"})
    closed_step(run, 20, STEADY, target_warm={"settled": False, "outcome": "still moving",
                                              "reason": "still climbing: +9.0 %/min …"})
    closed_step(run, 40, STEADY, target_warm={"settled": True, "outcome": "settled", "reason": "settled: …"})
    out, analysis = build_report([run], tmp_path / "out")
    valid = {r["users"]: r["valid"] for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert "target-not-warm" in valid[20].split(";")
    assert not {"target-not-warm", "target-warm-unresolved"} & set(valid[1].split(";") + valid[40].split(";"))
    [note] = [w for w in analysis.warnings if w.kind == "target-warm-unresolved"]
    assert "would resolve it" in note and note.steps == ((run.name, "proxy/1KB/1/iter-1"),)


def test_a_bracket_that_moved_names_the_target_not_the_client(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    def bracketed(before: float, after: float) -> dict:
        mean = (before + after) / 2
        return {**synthetic.xcheck_record(mean, 5.0, 20), "bracketed": True, "drift": (after - before) / mean,
                "before": synthetic.xcheck_record(before, 5.0, 20), "after": synthetic.xcheck_record(after, 5.0, 20)}
    # esbperf read 200 TPS; wrk 190 before and 260 after: the target climbed across the step, and
    # esbperf's figure lies above the slower run: target-drift, not a client problem.
    moving = closed_step(run, 20, STEADY, xcheck=bracketed(190, 260))
    # wrk 260 before and after: esbperf at 200 is its client's fault.
    still = closed_step(run, 40, STEADY, xcheck=bracketed(260, 262))
    out, _ = build_report([run], tmp_path / "out")
    rows = {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}
    assert rows[20]["target_drift"] is True and rows[20]["xcheck_failed"] is False
    assert "target-drift" in rows[20]["valid"] and "wrk-cross-check" not in rows[20]["valid"]
    assert rows[40]["target_drift"] is False and rows[40]["xcheck_failed"] is True
    assert "wrk-cross-check" in rows[40]["valid"] and "target-drift" not in rows[40]["valid"]
    assert moving and still


def test_a_bracket_allows_the_machines_wander_between_its_windows():
    """Two wrk windows seconds apart on a flat target differ by the machine's wander as well as by
    their own noise (Round 2: the reference moved up to 8 % between brackets whose steps spread
    0.3 %); the allowance adds the two, so a steady step's allowance is the wander's alone."""
    from esbperf.analysis.checks import XCHECK_WANDER, bracket_noise
    steady = [1000.0, 1001.0, 999.0, 1000.0]                # a window's mean known to 0.03 %
    assert bracket_noise(steady) == pytest.approx(1.96 * 2 ** 0.5 * XCHECK_WANDER, rel=1e-3)
    assert 0.05 < bracket_noise(steady) < 0.10               # a 5 % move is chance; a 10 % move is not
    noisy = [800.0, 1200.0, 900.0, 1100.0]                  # SE 9.1 %: the window's own noise dominates
    assert bracket_noise(noisy) == pytest.approx(1.96 * 2 ** 0.5 * ((0.1826 / 2) ** 2 + XCHECK_WANDER ** 2) ** 0.5,
                                                 rel=1e-2)
    assert bracket_noise([1000.0, 1000.0]) is None          # too few intervals to tell
