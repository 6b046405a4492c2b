"""Poisson arrivals in the open model (issue 27.3), through the real console, agents and echo:
the gaps between due starts are exponential (their coefficient of variation near 1, where evenly
spaced ones have near 0), the seed is drawn once and recorded, and the rate is the step's total;
a pool that keeps up is never called behind its schedule, whatever the number its draw made due."""
from __future__ import annotations

import json
import statistics

import pytest

from conftest import write_plan
from esbperf.analysis.report import analyse
from esbperf.core import plan as plans, topology
from esbperf.results import layout
from esbperf.run import runner

pytestmark = pytest.mark.slow


def due_gaps_ms(step_dir) -> list[float]:
    """The gaps between the due starts (start - lag) of each worker's rows, over all workers."""
    gaps = []
    for log in layout.data_logs(step_dir):
        lines = log.read_text().splitlines()
        names = [n.strip() for n in lines[0].split(",")]
        start, lag = names.index("Start time (ms since Epoch)"), names.index("Start lag us")
        due = sorted(int(f[start]) - int(f[lag]) / 1000 for f in (line.split(", ") for line in lines[1:]))
        gaps += [b - a for a, b in zip(due, due[1:])]
    return gaps


def test_poisson_arrivals_have_exponential_gaps_and_a_recorded_seed(grinder, echoes, testbed_file, tmp_path):
    testbed = topology.load(testbed_file)
    cv = {}
    for arrivals in ("uniform", "poisson"):
        the_plan = plans.load(write_plan(tmp_path / f"{arrivals}.yaml", rates=[100], users=[8], duration_s=4,
                                         warmup_s=1, arrivals=arrivals))
        run_dir = runner.start(the_plan, "direct", testbed, tmp_path / arrivals)
        recorded = json.loads((run_dir / "run.json").read_text())["plan"]
        [step_dir] = [p.parent for p in run_dir.rglob("step.json") if ".failed" not in str(p)]
        gaps = due_gaps_ms(step_dir)
        assert len(gaps) > 200
        # 100/s over the step's two worker processes (one per agent): 50/s, a gap of 20 ms each.
        assert statistics.mean(gaps) == pytest.approx(20, rel=0.15), statistics.mean(gaps)
        cv[arrivals] = statistics.pstdev(gaps) / statistics.mean(gaps)
        if arrivals == "poisson":
            assert isinstance(recorded["seed"], int) and recorded["arrivals"] == "poisson"
        else:
            assert "seed" not in recorded and "arrivals" not in recorded
    assert cv["uniform"] < 0.2 and 0.8 < cv["poisson"] < 1.2, cv


def test_a_kept_up_poisson_step_is_not_behind_schedule(grinder, echoes, testbed_file, tmp_path):
    """20 arrivals a second over 2-second windows: the number due in a window is Poisson(40), short
    of 0.95 × 40 in about a third of the windows, which the old test (starts against the offered
    rate) called behind schedule. Four threads keep up with it: every request due in the window
    started, and no step is flagged."""
    the_plan = plans.load(write_plan(tmp_path / "poisson.yaml", rates=[20], users=[4], duration_s=2, warmup_s=2,
                                     iterations=3, arrivals="poisson", seed=11))
    run_dir = runner.start(the_plan, "direct", topology.load(testbed_file), tmp_path / "results")
    rows = analyse([run_dir]).summary.to_dicts()
    assert len(rows) == 3
    for row in rows:
        assert row["never_started"] == 0 and row["due_requests"] == row["starts"] > 0, row
        assert row["started_after_end"] <= 2 and row["errors"] == 0, row
        assert not row["behind_schedule"], row


def test_arrivals_apply_to_open_model_plans_and_a_seed_to_poisson_arrivals(tmp_path):
    from esbperf.core.errors import EsbperfError
    with pytest.raises(EsbperfError, match="field 'arrivals' applies to an open-model plan"):
        plans.load(write_plan(tmp_path / "closed.yaml", arrivals="poisson"))
    with pytest.raises(EsbperfError, match="field 'seed' is the seed of Poisson arrivals"):
        plans.load(write_plan(tmp_path / "seeded.yaml", rates=[10], seed=3))
    with pytest.raises(EsbperfError, match="field 'arrivals' must be how an open-model plan's requests arrive: uniform .* got 'bursty'"):
        plans.load(write_plan(tmp_path / "bursty.yaml", rates=[10], arrivals="bursty"))
    plan = plans.load(write_plan(tmp_path / "poisson.yaml", rates=[10], arrivals="poisson", seed=3))
    assert plans.Plan.from_dict(plan.to_dict(), "run.json").seed == 3
