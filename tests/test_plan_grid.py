"""What a plan's steps are beyond its grid: `scenario_payloads`, some scenarios measured at fewer of its
payloads (Round 3 measures proxy at 1 KB and 100 KB, cbr, json and xslt at 1 KB), and `added_forks`,
forks after the plan's own against some of its targets; the steps, the warm-up's loads and run.json's
record following them; what is wrong refused in one line naming the field."""
from __future__ import annotations

import pytest

from conftest import ONE_STEP_PLAN, write_plan
from esbperf.core import plan as plans
from esbperf.core.errors import EsbperfError
from esbperf.run import warmup

GRID = {**ONE_STEP_PLAN, "scenarios": ["proxy", "cbr", "xslt"], "payloads": ["1KB", "100KB"], "users": [20],
        "forks": 2, "order": "random"}


def test_a_scenario_measured_at_some_payloads_has_steps_at_those_only(tmp_path):
    plan = plans.load(write_plan(tmp_path / "cells.yaml", GRID, scenario_payloads={"cbr": ["1KB"], "xslt": ["1KB"]}))
    assert plan.cells() == [("proxy", 1024), ("proxy", 102400), ("cbr", 1024), ("xslt", 1024)]
    steps = plan.steps(["camel", "synapse"])
    assert sorted({(s.scenario, s.payload_bytes) for s in steps}) == sorted(plan.cells())
    assert len(steps) == 2 * 4 * 2, "2 forks × 4 cells × 2 targets"
    recorded = plan.to_dict()
    assert recorded["scenario_payloads"] == {"cbr": [1024], "xslt": [1024]}
    assert plans.Plan.from_dict(recorded, "run.json").steps(["camel", "synapse"]) == steps
    # The warm-up loads a target at every cell it is measured at, and at no other.
    first = steps[0]
    loads = warmup.loads_of(first.target, first, steps, plan)
    assert sorted((s.scenario, s.payload_bytes) for s in loads) == sorted(plan.cells())
    # A part of the plan with fewer scenarios (a round's split, --only) records only its own.
    part = plans.Plan(**{**plan.__dict__, "scenarios": ["proxy", "xslt"]})
    assert part.to_dict()["scenario_payloads"] == {"xslt": [1024]}
    assert "scenario_payloads" not in plans.load(write_plan(tmp_path / "all.yaml", GRID)).to_dict()


@pytest.mark.parametrize("value, message", [
    ({"json": ["1KB"]}, "field 'scenario_payloads': 'json' is not one of the plan's scenarios (proxy, cbr, xslt)"),
    ({"cbr": ["2KB"]}, "scenario_payloads.cbr[0]: '2KB' is not one of the plan's payload sizes (1KB, 100KB)"),
    ({"cbr": []}, "scenario_payloads.cbr: must be a non-empty list of the plan's payload sizes; got []"),
    ({"cbr": ["1KB", "1KB"]}, "scenario_payloads.cbr[1]: 1024 is listed twice"),
    (["cbr"], "field 'scenario_payloads' must be the payloads some scenarios are measured at"),
])
def test_a_wrong_scenario_payloads_is_one_line_naming_it(tmp_path, value, message):
    path = write_plan(tmp_path / "bad.yaml", GRID, scenario_payloads=value)
    with pytest.raises(EsbperfError) as e:
        plans.load(path)
    assert str(e.value).startswith(f"{path}: {message}") and "\n" not in str(e.value), str(e.value)


def test_forks_added_after_the_plans_own_measure_the_targets_they_name(tmp_path):
    """`added_forks` (what `esbperf round` adds where a verdict needs more processes): fork 3 against
    Camel and Synapse only, after the plan's 2 forks of every target; recorded in run.json and run again
    from it in the same order."""
    plan = plans.load(write_plan(tmp_path / "added.yaml", GRID, added_forks=[["camel", "synapse"], ["camel"]]))
    steps = plan.steps(["camel", "synapse", "spring-integration"])
    by_fork = {f: sorted({s.target for s in steps if s.fork == f}) for f in (1, 2, 3, 4)}
    assert by_fork == {1: ["camel", "spring-integration", "synapse"], 2: ["camel", "spring-integration", "synapse"],
                       3: ["camel", "synapse"], 4: ["camel"]}
    assert [s.fork for s in steps] == sorted(s.fork for s in steps), "the added forks after the plan's own"
    assert steps[-1].relative_dir().parts[-2] == "fork-4"
    assert plans.Plan.from_dict(plan.to_dict(), "run.json").steps(["camel", "synapse", "spring-integration"]) == steps
    assert plan.steps(["spring-integration"]) == [s for s in plan.steps(["spring-integration"]) if s.fork <= 2]
    with pytest.raises(EsbperfError, match="field 'added_forks' must be"):
        plans.load(write_plan(tmp_path / "bad.yaml", GRID, added_forks=["camel"]))
    with pytest.raises(EsbperfError, match="field 'added_forks' adds to a plan of forks"):
        plans.load(write_plan(tmp_path / "one.yaml", GRID, forks=1, added_forks=[["camel"]]))
