"""The demo's whole path on an emulated five-host testbed of its own (namespaces, bridge, 1 Gbit/s
links): three echo services, Camel, the console, an agent and five monitors in their namespaces,
a smoke plan through Camel and against the baseline, the report, and a clean tear-down."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from conftest import emulated_testbed_data
from esbperf import testbed as testbeds
from esbperf.core import topology
from esbperf.cli.demo import run_demo

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

PREFIX = "esbd-"


def emulated_testbed(path: Path) -> Path:
    path.write_text(yaml.safe_dump(emulated_testbed_data("demo-test", PREFIX, "198.18.220"), sort_keys=False))
    return path


def test_demo_path_on_an_emulated_testbed(tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    testbed_file = emulated_testbed(tmp_path / "demo-test.yaml")
    plan_file = tmp_path / "tiny.yaml"
    plan_file.write_text(yaml.safe_dump({"name": "tiny", "scenarios": ["proxy"], "payloads": ["1KB", "100KB"],
                                         "users": [4], "duration_s": 3, "warmup_s": 4, "timeout_s": 10,
                                         "restart": "per-step"}))
    later_file = tmp_path / "tiny-later.yaml"
    later_file.write_text(yaml.safe_dump({"name": "tiny-later", "scenarios": ["proxy"], "payloads": ["1KB"],
                                          "users": [2], "duration_s": 2, "warmup_s": 1, "timeout_s": 10}))
    testbeds.down(topology.load(testbed_file))   # a killed earlier run's leftovers: the demo would keep them
    report = run_demo(testbed_file, "camel", tmp_path / "results", Console(), plan_names=(plan_file, later_file))

    assert (report / "report.html").is_file() and (report / "summary.csv").is_file()
    [run] = [p for p in report.parent.iterdir() if (p / "run.json").is_file() and p.name.startswith("tiny-camel")]
    # The demo's next run takes the first's warm workers: no new worker JVM, none warmed again.
    [later] = [p for p in report.parent.iterdir() if p.name.startswith("tiny-later-")]
    first, second = (json.loads((r / "run.json").read_text()) for r in (run, later))
    assert first["workers"].get("kept_for_next_run") and second["workers"]["carried_from"] == run.name, second["workers"]
    assert second["workers"]["starts"] == first["workers"]["starts"]
    assert second["workers_warmup"] == {"carried_from": run.name}
    for step in later.glob("*/proxy/*/2/iter-1/step.json"):
        meta = json.loads(step.read_text())
        assert meta["summary"]["transactions"] > 0 and meta["summary"]["errors"] == 0, step
        assert meta["workers_reused"] is True, step
    skews = json.loads((run / "run.json").read_text())["clock_skew"]["hosts"]
    assert sorted(skews) == ["client", "esb", "ws1", "ws2", "ws3"]
    assert json.loads((run / "run.json").read_text())["samplers"] == {r: "sigar" for r in skews}
    assert all(abs(s["skew_ms"]) <= s["error_ms"] + 5 for s in skews.values()), skews   # one machine, one clock
    # The ESB and its baseline interleaved, step by step, in one run.
    assert [t["name"] for t in json.loads((run / "run.json").read_text())["targets"]] == ["camel", "direct"]
    steps = sorted(run.glob("*/proxy/*/4/iter-1"))
    assert [s.relative_to(run).parts[0] for s in steps] == ["camel", "camel", "direct", "direct"]
    # A fresh ESB for each of its steps (restart: per-step), verified before the warm-up; none for direct.
    assert json.loads((run / "run.json").read_text())["restart"] == "per-step"
    restarts = [json.loads((s / "step.json").read_text()).get("esb_restart") for s in steps]
    assert restarts[2:] == [None, None] and restarts[0]["pid"] != restarts[1]["pid"], restarts
    for step in steps:
        meta = json.loads((step / "step.json").read_text())
        totals = dict(zip(meta["console"]["columns"], meta["console"]["totals"]))
        assert totals["Tests"] > 0 and totals["Errors"] == 0, (step, totals)
        assert meta["hosts"]["esb"]["address"] == "198.18.220.20"
        for role in ("client", "esb", "ws1", "ws2", "ws3"):
            samples = (step / f"monitor-{role}.csv").read_text().splitlines()
            assert samples[0] == "time_ms,phase,metric,subject,value" and len(samples) > 20, role
            assert any(",measure,net.rx_bytes,eth0," in line for line in samples), role
        gc_roles = {"ws1", "ws2", "ws3"} | ({"esb"} if step.relative_to(run).parts[0] == "camel" else set())
        assert set(meta["gc_logs"]) == gc_roles and all((step / f"gc-{r}.log").is_file() for r in gc_roles)

    # Torn down: nothing of the test's testbed is left, and no process runs in its namespaces.
    assert testbeds.status(topology.load(testbed_file))["state"] == "down"
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert PREFIX not in namespaces
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert PREFIX not in links
