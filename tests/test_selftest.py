"""`esbperf selftest --quick` as a user types it, on an emulated testbed of its own: the A/A check
(two runs of the reference engine compared with `esbperf compare` and its gate), the interleaved
check (the reference and its twin in one run, an A/A and a known difference × 2), the warm-up
check (a reference whose work falls by half over 90 s, its warm-up cut at 45 s) and the wrk bracket's
(the flat reference bracketed by wrk, the machine's wander measured first) run end to end, and
their table says what a working rule says: the gate did not fail two identical runs, and a warm-up
still falling was not called settled. The published rates, with their counts, come from the full
run (docs/benchmarks/known-answers.md); this one only shows a broken rule."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from esbperf import testbed as testbeds
from esbperf.core import topology
from esbperf.core.project import CONSOLE_CONFIG

# About ten minutes (make test-long): the rules it runs are tested on crafted data in test_settling.py and
# test_known_answers.py, and end to end on real runs by test_demo.py.
pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.long,
              pytest.mark.timeout(1800),   # four checks' runs, two of them of two targets: past the default 600 s
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

PREFIX = "esbk-"


def own_testbed(path: Path) -> Path:
    """The shipped emulated testbed on namespaces and addresses of this test's own."""
    data = yaml.safe_load((CONSOLE_CONFIG / "testbeds" / "emulated.yaml").read_text())
    data.update(name="selftest-test", prefix=PREFIX, bridge={"name": f"{PREFIX}br0", "address": "198.18.221.1/24"})
    data["console"]["api_host"] = "198.18.221.10"
    for host in data["hosts"].values():
        host["address"] = host["address"].replace("198.18.0.", "198.18.221.")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_quick_selftest_runs_its_checks_and_a_working_rule_passes_them(tmp_path):
    testbed_file = own_testbed(tmp_path / "selftest-test.yaml")
    testbeds.down(topology.load(testbed_file))   # a killed earlier run's leftovers
    done = subprocess.run([sys.executable, "-m", "esbperf", "selftest", "--quick", "--check", "aa", "--check", "warmup",
                           "--check", "interleaved", "--check", "bracket",
                           "--testbed", str(testbed_file), "--out", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=1700,
                          env={**os.environ, "ESBPERF_STATE": str(tmp_path / "state")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [folder] = (tmp_path / "results").iterdir()
    with (folder / "known-answers.csv").open() as f:
        rates = {(r["check"], r["judgment"]): r for r in csv.DictReader(f)}

    verdicts = rates[("A/A: reference", "any figure: a difference called shown")]
    assert int(verdicts["count"]) == 3   # one step (1 KB, 20 users): TPS, p50 and p99
    gate = rates[("A/A: reference", "the gate at 5 % fails (exit 1)")]
    assert (gate["count"], gate["hits"]) == ("1", "0"), gate
    [falling] = [r for (check, _), r in rates.items()   # the rule as shipped (not "its throughput alone")
                 if check.startswith("warm-up: reference falling 50%") and "throughput alone" not in check]
    assert (falling["count"], falling["hits"]) == ("1", "0"), falling
    assert "| A/A: reference |" in (folder / "known-answers.md").read_text()
    # The reference beside its twin in one run, each fork measuring both: paired verdicts.
    aa = rates[("A/A interleaved: reference beside its twin", "any figure: a difference called shown")]
    assert aa["count"] == "3", aa
    shown = rates[("known difference interleaved: twin's work × 2", "tps: the difference shown, with the right sign")]
    assert (shown["count"], shown["hits"]) == ("1", "1"), shown
    # The flat reference bracketed by wrk (2 forks of 3 iterations): every target-drift on it is false.
    drift = rates[("wrk bracket: flat reference", "steps named by `target-drift` (the target moved across the step)")]
    assert drift["count"] == "6", drift
    [paired] = (folder / "interleaved-difference-report-1").rglob("verdicts.csv")
    with paired.open() as f:
        assert {r["paired"] for r in csv.DictReader(f)} == {"true"}
