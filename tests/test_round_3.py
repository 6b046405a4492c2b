"""Round 3's definition (console-config/rounds/round-3.yaml): the three ESBs and direct at the five headline
cells in one part, so that each fork of an ESB is warmed once for all of them; the floors and the reference
engine as the context, a part of their own; Camel's control pair; the capacity at proxy 1 KB; each fitting
its time budget by the runner's own estimate with room left for the forks the verdicts ask for; a wrong
`context` refused in one line."""
from __future__ import annotations

import json

import pytest
import yaml

from esbperf.core.project import ROOT
from esbperf.cli import round as round_cli
from esbperf.core import rounds, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import estimate

HEADLINE = [("proxy", 1024), ("proxy", 102400), ("cbr", 1024), ("json", 1024), ("xslt", 1024)]
ESBS = ("camel", "synapse", "spring-integration")
# The runner's medians as `esbperf round --quick` measured them here (tests/test_round.py's MEASURED).
MEASURED = {"startup_s": 2.9, "tail_s": 0.55, "auto_warmup_s": 5.0, "run_overhead_s": 4.7, "calibration_s": 8.5,
            "round_setup_s": 31.0, "round_report_per_step_s": 0.14}


def test_round_3_measures_the_headline_cells_of_the_esbs_in_one_part_and_the_floors_apart():
    rnd = rounds.load("round-3")
    testbed = topology.load(rnd.testbed)
    parts = rnd.full.parts(testbed)
    assert [(p.kind, p.targets) for p in parts] == [
        ("closed", ("direct", *ESBS)), ("context", ("nginx", "haproxy", "reference")), ("control", ("camel",)),
        ("capacity", ESBS)]
    closed, context, control, capacity = (p.plan for p in parts)
    assert closed.cells() == HEADLINE and closed.users == [20] and closed.forks == 3 and closed.order == "random"
    assert control.cells() == HEADLINE and control.forks == 3, "the control pair compares every headline cell"
    assert context.cells() == [("proxy", 1024), ("proxy", 102400)]
    assert capacity.cells() == [("proxy", 1024)] and capacity.capacity.p99_ms == 20
    assert rnd.reference == "reference"
    # Each fork of an ESB is warmed under all five cells, up to 180 s in all.
    assert closed.target_warmup("esb") == (40, 180)
    [quick] = rnd.quick.parts(testbed)
    assert quick.targets == ("direct", *ESBS) and quick.plan.cells() == [("proxy", 1024)] and quick.plan.forks == 3


@pytest.mark.parametrize("quick, budget_s", [(False, 100 * 60), (True, 15 * 60)])
def test_round_3_fits_its_time_budget_with_room_for_the_forks_its_verdicts_ask_for(quick, budget_s, tmp_path,
                                                                                    monkeypatch):
    """The full round within 100 minutes by the estimate: 2 hours less the runner's estimate's error on
    Round 2 (16 % short) leaves about 20 minutes for forks added where verdicts are unresolved."""
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path))
    estimate.remember(**MEASURED)
    rnd = rounds.load("round-3")
    rows, total = round_cli.estimate_seconds(rnd, quick, topology.load(rnd.testbed))
    assert total <= budget_s, (total, rows)


def test_a_wrong_context_is_refused_in_one_line(tmp_path):
    good = yaml.safe_load((ROOT / "console-config/rounds/round-3.yaml").read_text())

    def refused(change, message):
        data = json.loads(json.dumps(good))
        change(data)
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(EsbperfError, match=message) as e:
            rounds.load(path)
        assert "\n" not in str(e.value)

    refused(lambda d: d["full"]["context"].update(targets=["camel"]),
            r"field 'full.context' must be .*; its targets must be targets the closed plan does not measure")
    refused(lambda d: d["full"]["context"].update(closed="round-3-capacity-1kb"), "is not a closed-model plan")
    refused(lambda d: d["full"].update(context=["nginx"]), r"field 'full.context' must be")
    # The reference may be a target of the context; of neither, it is refused.
    refused(lambda d: d["full"]["context"].update(targets=["nginx", "haproxy"]), "field 'reference' must be")
