"""The validity warnings as they are given: pinned on a broad set of step rows, so that the rules can be
restated without changing a word of what they say.

The rows: the published rounds' summary.csv (docs/round-1, docs/round-2) with their runs' run.json; the
same rows turned so that every rule trips (each step a set of faults in turn, warm-ups of every outcome,
steps left out, runs stopped, unwatched or on other testbeds); and the demo's runs of
analysis/synthetic.py, analysed from their logs as the report tests analyse them. What is pinned: every
warning in order (its kind, its text, its `what`, the items it lists, their unit and the steps it
names), the kinds summary.csv's `valid` gets (`step_verdicts`), and what `faults` keeps of every `valid`
cell the published files hold.

A deliberate change of a warning's words rewrites the pinned file: ESBPERF_WRITE_PINNED=1, then read
its diff. A new rule (a row of analysis/validity.py's RULES) needs a fault here that trips it (in
`_faulty`: the summary columns it reads), the pin rewritten, and a line in docs/report.md's table of
warnings, which must name every rule and no other, and say of each what the rule spoils."""
from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import polars as pl
import pytest

from esbperf.analysis import compare, synthetic
from esbperf.analysis.runs import Run, Step, load_runs
from esbperf.analysis.stats import analyse_steps, summary_frame
from esbperf.analysis.validity import RULES, ValidityWarning, faults, step_verdicts, validity_warnings
from esbperf.core import steady
from esbperf.core.roles import ordered as ordered_roles

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tests" / "data" / "validity-warnings.json"
WRITE_ENV = "ESBPERF_WRITE_PINNED"
ROUNDS = ("round-1", "round-2")

# A target's warm-up as step.json `target_warm` holds it, of every outcome steady.settling gives (None:
# a run from before target warm-ups).
WARMTH = (None,
          {"settled": True, "outcome": steady.SETTLED, "reason": "settled: +0.4 %/min over the last 60 s"},
          {"settled": False, "outcome": steady.MOVING, "reason": "still climbing: +20.6 %/min over the last 60 s"},
          {"settled": None, "outcome": steady.UNRESOLVED, "reason": "not resolved: about 158 s would resolve it"},
          {"settled": None, "outcome": "not warmed", "reason": ""},
          {"settled": False})
# Seconds the step's workers had run under load when its window opened (None: step.json does not say).
UNDER_LOAD_S = (30.0, 3.5, None, 9.9, 10.0, 0.0)


def _faulty(row: dict, n: int) -> dict:
    """The n-th set of faults, each tripping a rule or two (and a row of the open model for those
    only it can have)."""
    users = row["users"]
    open_model = {"model": "open", "rate": 50.0}
    faults_in_turn = [
        {"errors": 3, "error_percent": 0.25, "failed_rt_mean_ms": 1.5, "failed_rt_p99_ms": None,
         "error_statuses": "500:3"},
        {"transactions": 0, "log_files": 2},
        {"threads_seen": max(users - 1, 0), "log_files": 1, "threads_by_file": "client-0-data.log:1"},
        {"threads_seen": max(users - 1, 0), "log_files": 1, "client_bound": True, "client_bound_by": "client 96 %"},
        {**open_model, "behind_schedule": True, "due_requests": 120, "starts": 100, "started_after_end": 2,
         "never_started": 20, "late_starts": 7, "max_lag_ms": 12.5, "lag_growth_ms": None},
        {**open_model, "lat_p50_ms": None, "transactions": 90},
        {"malformed_lines": 3, "malformed_by_file": "client-0-data.log:2;client-1-data.log:1"},
        {"console_check": "disagrees", "console_min": 90, "console_max": 95, "console_tests": 120,
         "console_errors": None},
        {"console_check": "not checked", "window_s": 1.0, "report_interval_ms": 500},
        {"xcheck_failed": True, "xcheck_tps": 1500.0, "xcheck_tps_ratio": 0.71, "xcheck_mean_ms": 1.1,
         "xcheck_mean_diff_ms": 0.4},
        {"target_drift": True, "xcheck_tps": 1200.0, "xcheck_drift": 0.08, "xcheck_noise": 0.03},
        {"xcheck_errors": 4},
        {"delayed_ack_stall": True, "stall_share": 0.62},
        {"warmup_steady": False, "warmup_used_s": 30.0, "warmup_unsteady": "throughput still rising"},
        {"drift": True, "drift_moves": "tps -12 % at 4.0 s"},
        {**open_model, "poisson_arrivals": False, "arrivals_test": "KS D 0.09, p 0.001"},
        {"monitor_malformed_lines": 2},
        {"esb_gap_s": 2.5, "ws2_gap_s": 1.0},
        {"network_faults": "ws1: loss 1 %"},
        {"clock_skew_change_ms": -140.0, "clock_skew_change_role": "ws3"},
        {"clock_skew_change_ms": 4.0, "clock_skew_change_role": "ws3"},
        {"esb_neighbours_cpu_mean": 31.0},
        {"esb_jit_mean": 12.5},
        {"client_bound": True, "client_bound_by": "client workers 91 %", "bound": "client"},
        {"bound": "backends", "console_check": "disagrees", "console_min": 9, "console_max": 10,
         "console_tests": 30, "console_errors": 1},
        {},
    ]
    return faults_in_turn[n % len(faults_in_turn)]


def _rows(round_name: str, steps_per_run: int | None = None) -> list[dict]:
    """The round's summary.csv rows as the analysis made them, without the `valid` its warnings gave
    them (an empty `monitor_missing` is "", none missing; Round 1's rows, from before forks, of fork
    1); `steps_per_run`: those of each run's first steps only."""
    frame = pl.read_csv(ROOT / "docs" / round_name / "report" / "summary.csv", infer_schema_length=None,
                        schema_overrides={"rate": pl.Float64})
    rows = [{"fork": 1, **r, "monitor_missing": r["monitor_missing"] or ""} for r in frame.drop("valid").to_dicts()]
    if steps_per_run is None:
        return rows
    steps: dict[str, dict[str, None]] = {}
    for r in rows:
        steps.setdefault(r["run"], {})[r["step_dir"]] = None
    kept = {(run, step) for run, mine in steps.items() for step in list(mine)[:steps_per_run]}
    return [r for r in rows if (r["run"], r["step_dir"]) in kept]


def _runs(round_name: str, rows: list[dict], turned: bool) -> list[Run]:
    """The round's runs as the analysis holds them, their steps from `rows`; `turned`: each step's
    target warm-up and workers' time under load in turn (WARMTH, UNDER_LOAD_S), else settled and long."""
    infos = {p.parent.name: json.loads(p.read_text())
             for p in sorted((ROOT / "docs" / round_name / "runs").glob("*/run.json"))}
    steps: dict[str, dict[str, dict]] = {}
    for r in rows:
        steps.setdefault(r["run"], {}).setdefault(r["step_dir"], r)
    runs, n = [], 0
    for name, info in infos.items():
        if name not in steps:
            continue          # a capacity search: its probes are no summary row
        run_dir = Path("docs") / round_name / "runs" / name
        mine = []
        for step_dir, r in steps[name].items():
            n += 1
            warmth = WARMTH[n % len(WARMTH)] if turned else WARMTH[1]
            under_load = UNDER_LOAD_S[n % len(UNDER_LOAD_S)] if turned else 60.0
            meta = {"scenario": r["scenario"], "target": r["target"], "payload_bytes": r["payload_bytes"],
                    "users": r["users"], "iteration": r["iteration"], "fork": r["fork"], "plan": info["plan"]["name"],
                    "first_report_ms": 1_000_000, "warmup_end_ms": 1_060_000, "end_ms": 1_070_000}
            if under_load is not None:
                meta["workers_ready_ms"] = meta["warmup_end_ms"] - int(under_load * 1000)
            if warmth is not None:
                meta["target_warm"] = warmth
            if turned and n % 17 == 0:
                meta["warmup_s"] = 0
            mine.append(Step(run_dir / step_dir, meta))
        runs.append(Run(run_dir, info, mine, 0, name=name, plan_name=info["plan"]["name"], plan=info["plan"],
                        target="/".join(sorted({s.meta["target"] for s in mine}))))
    return runs


def _published(round_name: str) -> tuple[dict, list[dict], tuple[str, ...]]:
    rows = _rows(round_name)
    runs = _runs(round_name, rows, turned=False)
    return compare.plan_groups(runs), rows, _roles(runs)


def _roles(runs: list[Run]) -> tuple[str, ...]:
    return tuple(ordered_roles({role for run in runs for role in run.roles}))


def _turned(round_name: str, steps_per_run: int | None = None) -> tuple[dict, list[dict], tuple[str, ...]]:
    """The round's rows with faults in turn, every seventh step left out (missing iterations), and its
    runs turned: the first stopped, with a folder skipped and no monitor file for ws2; the second on
    another testbed, with a folder skipped and no monitor file for ws1; the third with no warm-up in
    its plan."""
    rows = [{**r, **_faulty(r, n)} for n, r in enumerate(_rows(round_name, steps_per_run))]
    kept = {step for n, step in enumerate(dict.fromkeys((r["run"], r["step_dir"]) for r in rows)) if n % 7 != 3}
    rows = [r for r in rows if (r["run"], r["step_dir"]) in kept]
    runs = _runs(round_name, rows, turned=True)
    runs[0].info = {**runs[0].info, "finished": None}
    runs[0].unfinished_steps = 2
    unwatched = {runs[0].name: "ws2"}
    if len(runs) > 1:
        runs[1].info = {**runs[1].info, "testbed": {"name": "mylab", "emulated": False}}
        runs[1].unfinished_steps = 1
        unwatched[runs[1].name] = "ws1"
    rows = [{**r, "monitor_missing": unwatched[r["run"]]} if r["run"] in unwatched else r for r in rows]
    if len(runs) > 2:
        runs[2].plan = {**runs[2].plan, "warmup_s": 0}
    return compare.plan_groups(runs), rows, _roles(runs)


def _both_rounds() -> tuple[dict, list[dict], tuple[str, ...]]:
    """A run of each round reported together (Round 1's cbr, Round 2's control pair): two plans, one
    without the baseline, cores shared two ways, the columns of two versions."""
    rows, runs = [], []
    for round_name, wanted in (("round-1", "round-1-cbr-"), ("round-2", "round-2-control-")):
        mine = [r for r in _rows(round_name) if r["run"].startswith(wanted)]
        rows += mine
        runs += _runs(round_name, mine, turned=False)
    columns = dict.fromkeys(k for r in rows for k in r)      # Round 1 predates some columns
    return compare.plan_groups(runs), [{k: r.get(k) for k in columns} for r in rows], _roles(runs)


def _demo(root: Path) -> tuple[dict, list[dict], tuple[str, ...]]:
    """The demo's three runs of analysis/synthetic.py, not warmed and the first steps unsteady, their
    rows analysed from their logs."""
    runs = load_runs(synthetic.demo_runs(root, warm=False, iterations=1, unsteady=3))
    roles = tuple(ordered_roles({role for run in runs for role in run.roles}))
    rows = [row for run in runs for step in analyse_steps(run, roles) for row, _ in step]
    return compare.plan_groups(runs), rows, roles


def _warnings(case: tuple[dict, list[dict], tuple[str, ...]]) -> dict:
    plans, rows, roles = case
    warnings = validity_warnings(plans, summary_frame(rows), list(roles))
    assert all(isinstance(w, ValidityWarning) for w in warnings)
    return {"warnings": [{"kind": w.kind, "text": str(w), "what": w.what, "items": list(w.items), "unit": w.unit,
                          "steps": [list(s) for s in w.steps]} for w in warnings],
            "valid": [[*step, kinds] for step, kinds in step_verdicts(warnings).items()]}


def _valid_cells() -> list[str]:
    """Every `valid` cell of the published rounds' files (summary, figures, verdicts, capacity probes)."""
    cells = []
    for round_name in ROUNDS:
        for path in sorted((ROOT / "docs" / round_name).rglob("*.csv")):
            with open(path, newline="") as f:
                for r in csv.DictReader(f):
                    cells += [r[c] for c in ("valid", "valid_a", "valid_b") if c in r]
    return sorted(set(cells))


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict:
    cases = {**{f"{r} as published": _published(r) for r in ROUNDS},
             "round-1 turned": _turned("round-1", steps_per_run=40),
             "round-2 turned": _turned("round-2"),
             "both rounds together": _both_rounds(),
             "the demo, not warmed": _demo(tmp_path_factory.mktemp("demo"))}
    return {"cases": {name: _warnings(case) for name, case in cases.items()},
            "faults": {cell: faults(cell) for cell in _valid_cells()}}


def test_every_warning_is_given_as_pinned(found):
    if os.environ.get(WRITE_ENV) == "1":
        PINNED.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    assert found["faults"] == pinned["faults"]
    assert list(found["cases"]) == list(pinned["cases"])
    for name, case in found["cases"].items():
        mine = pinned["cases"][name]
        assert [w["kind"] for w in case["warnings"]] == [w["kind"] for w in mine["warnings"]], name
        for got, want in zip(case["warnings"], mine["warnings"]):
            assert got == want, (name, want["kind"])
        assert case["valid"] == mine["valid"], name


def test_the_pinned_cases_trip_every_rule(found):
    """The rows are broad enough to pin every warning the rules give, the notes and the faults."""
    kinds = {w["kind"] for case in found["cases"].values() for w in case["warnings"]}
    assert kinds == {rule.kind for rule in RULES}


def report_table() -> dict[str, str]:
    """docs/report.md's table of validity warnings: each kind its first column names, with what its
    third says of the steps the warning names."""
    text = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Validity warnings"):]
    section = section[:section.index("\n## ", 1)]
    table: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        kinds, _, steps = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for kind in re.findall(r"`([^`]+)`", kinds):
            assert kind not in table, f"docs/report.md names {kind} twice"
            table[kind] = steps
    return table


def test_the_reports_table_of_warnings_has_a_line_for_every_rule_and_no_other():
    table = report_table()
    rules = {rule.kind: rule for rule in RULES}
    assert not set(rules) - set(table), f"rules with no line in docs/report.md: {sorted(set(rules) - set(table))}"
    assert not set(table) - set(rules), f"docs/report.md names warnings no rule gives: {sorted(set(table) - set(rules))}"
    for kind, steps in table.items():
        said = re.match(r"(not valid|valid|none)\b", steps.replace("**", ""))
        assert said and said.group(1) == rules[kind].spoils, (kind, rules[kind].spoils, steps[:60])
