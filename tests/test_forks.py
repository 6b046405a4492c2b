"""Forks (plan `forks: N`): the engine process as the unit. Each fork starts the engines under test
(and for `direct`, its back ends) afresh, warms each target until settled, and runs every iteration;
the forks of all targets follow each other; step folders and step.json name the fork; `--resume`
starts the fork it resumes afresh and says so."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import ONE_STEP_PLAN, write_plan
from esbperf.analysis.report import analyse
from esbperf.core import plan as plans, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import runner


# Two forks of two iterations of one step of 2 users.
FORKED_PLAN = {**ONE_STEP_PLAN, "users": [2], "warmup_s": 1, "forks": 2, "iterations": 2}


def test_a_plan_of_forks_runs_each_fork_of_every_target_in_a_folder_of_its_own(tmp_path):
    plan = plans.load(write_plan(tmp_path / "forked.yaml", FORKED_PLAN))
    steps = plan.steps(["camel", "direct"])
    assert len(steps) == 2 * 2 * 2
    assert [s.fork for s in steps] == [1, 1, 1, 1, 2, 2, 2, 2], "fork 1 of every target, then fork 2"
    assert steps[0].relative_dir() == Path("camel/proxy/1KB/2/fork-1/iter-1")
    assert "fork 2 iter 1" in steps[4].describe()
    assert plans.Plan.from_dict(plan.to_dict(), "run.json").steps(["camel", "direct"]) == steps
    one = plans.load(write_plan(tmp_path / "one.yaml", FORKED_PLAN, forks=1))
    assert one.steps(["camel"])[0].relative_dir() == Path("camel/proxy/1KB/2/iter-1"), "one fork: no fork level"
    assert "forks" not in one.to_dict()
    with pytest.raises(EsbperfError, match="forks.*restart: per-step"):
        plans.load(write_plan(tmp_path / "both.yaml", FORKED_PLAN, restart="per-step"))
    with pytest.raises(EsbperfError, match="field 'forks' must be"):
        plans.load(write_plan(tmp_path / "zero.yaml", FORKED_PLAN, forks=0))


def test_a_plan_in_random_order_shuffles_each_forks_cells_and_each_cells_targets_the_same_way_every_time(tmp_path):
    """`order: random` (randomised interleaved trials): each fork and iteration its cells (scenario,
    payload, load) in an order of its own, each cell's targets too, every step once; drawn from the
    plan's name, fork and iteration, so the plan, as run.json keeps it, runs in the same order again."""
    grid = {**FORKED_PLAN, "scenarios": ["proxy", "cbr", "xslt"], "payloads": ["1KB", "100KB"], "forks": 3,
            "iterations": 1}
    targets = ["camel", "synapse", "spring-integration"]
    planned = plans.load(write_plan(tmp_path / "planned.yaml", grid))
    shuffled = plans.load(write_plan(tmp_path / "random.yaml", grid, order="random"))
    steps = shuffled.steps(targets)
    assert sorted(map(repr, steps)) == sorted(map(repr, planned.steps(targets))), "every step once"
    cells = {f: [(s.scenario, s.payload_bytes) for s in steps if s.fork == f][::3] for f in (1, 2, 3)}
    assert len({tuple(c) for c in cells.values()}) == 3, "each fork its own order of cells"
    assert all(len(set(c)) == 6 for c in cells.values())
    firsts = {tuple(s.target for s in steps[n:n + 3]) for n in range(0, len(steps), 3)}
    assert len(firsts) > 1 and all(sorted(t) == sorted(targets) for t in firsts), "each cell its targets, shuffled"
    assert plans.Plan.from_dict(shuffled.to_dict(), "run.json").steps(targets) == steps
    assert "order" not in planned.to_dict() and shuffled.to_dict()["order"] == "random"
    with pytest.raises(EsbperfError, match="field 'order' must be"):
        plans.load(write_plan(tmp_path / "bad.yaml", grid, order="sorted"))


@pytest.mark.slow   # its fixtures start the console, two agents and the echoes (JVMs)
def test_a_run_of_forks_without_a_launcher_is_refused_in_one_line(grinder, echoes, testbed_file, tmp_path):
    plan = plans.load(write_plan(tmp_path / "unlaunched.yaml", FORKED_PLAN))
    with pytest.raises(EsbperfError, match="runs 2 forks.*esbperf's launcher"):
        runner.start(plan, "direct", topology.load(testbed_file), tmp_path / "results")


@pytest.mark.slow
def test_each_fork_starts_the_back_ends_afresh_warms_them_and_resume_knows_forks(grinder, echoes, testbed_file,
                                                                               tmp_path):
    restarted: list[str] = []

    def restart(name: str) -> int:
        """The launcher's restart, as the runner calls it; the session's echoes stay up (they are
        shared by every test), so each call is recorded and answered with a made-up pid."""
        restarted.append(name)
        return 1000 + len(restarted)

    plan = plans.load(write_plan(tmp_path / "forked.yaml", FORKED_PLAN, target_warmup_s=2, target_warmup_horizon_s=1))
    run_dir = runner.start(plan, "direct", topology.load(testbed_file), tmp_path / "results", restart_esb=restart)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and record["plan"]["forks"] == 2
    assert restarted == ["ws1", "ws2", "ws3"] * 2, "direct's back ends, afresh before each fork"
    assert [s["fork"] for s in record["fork_starts"]] == [1, 2]
    assert record["fork_starts"][1]["pids"] == {"ws1": 1004, "ws2": 1005, "ws3": 1006}
    assert [t["fork"] for e in record["target_warmup"] for t in e["targets"]] == [1, 2], "each fork warmed"
    for step in plan.steps(["direct"]):
        meta = json.loads((run_dir / step.relative_dir() / "step.json").read_text())
        assert meta["fork"] == step.fork and meta["target_warm"]["fork"] == step.fork

    # An interrupted run: fork 2 half done. The resume starts fork 2 afresh and says so.
    shutil.rmtree(run_dir / "direct/proxy/1KB/2/fork-2/iter-2")
    record["finished"] = None
    (run_dir / "run.json").write_text(json.dumps(record))
    restarted.clear()
    runner.resume(run_dir, restart_esb=restart)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and restarted == ["ws1", "ws2", "ws3"]
    assert record["fork_starts"][-1] == {**record["fork_starts"][-1], "fork": 2, "resumed": 1}

    # A fork added after the plan's own (what esbperf round adds where a verdict needs it): the resume
    # runs fork 3 alone, starting the back ends afresh and warming them, and the report reads three forks.
    record["plan"]["added_forks"] = [["direct"]]
    (run_dir / "run.json").write_text(json.dumps(record))
    restarted.clear()
    runner.resume(run_dir, restart_esb=restart)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and restarted == ["ws1", "ws2", "ws3"]
    assert record["fork_starts"][-1]["fork"] == 3 and "resumed" not in record["fork_starts"][-1]
    assert record["target_warmup"][-1]["targets"][-1]["fork"] == 3
    assert sorted(analyse([run_dir]).summary["fork"].to_list()) == [1, 1, 2, 2, 3, 3]
