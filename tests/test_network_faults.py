"""Network faults on the emulated testbed (`esbperf testbed fault`): loss and partitions drop what
they say, and a run through Camel with 1 % loss on ws1, and one with a 5 s partition of ws1 in the
middle of a step, counts the errors and timeouts, records the fault in the step, and goes on.

An emulated testbed of its own (prefix esbn-, 198.18.231.0/24) so nothing collides with other tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import emulated_testbed_data
from esbperf.core import plan as plans, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import runner
from esbperf.testbed import fault, netns, services

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

PREFIX, NET = "esbn-", "198.18.231"


def write_testbed(path: Path) -> Path:
    path.write_text(yaml.safe_dump(emulated_testbed_data("faults", PREFIX, NET), sort_keys=False))
    return path


@pytest.fixture
def testbed(tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    tb = topology.load(write_testbed(tmp_path / "faults.yaml"))
    netns.down(tb)   # a killed earlier run's leftovers
    netns.up(tb)
    try:
        yield tb
    finally:
        netns.down(tb)


RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 9999)); s.settimeout(1.5)
print("ready", flush=True)
n = 0
try:
    while True:
        s.recv(100); n += 1
except socket.timeout:
    print(n)
"""
SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(2000):
    s.sendto(b"x", (sys.argv[1], 9999))
    if i % 50 == 0:
        time.sleep(0.002)
"""


def delivered(tb, sender: str, receiver: str) -> int:
    """UDP datagrams of 2000 sent from one emulated host that reach another."""
    address = tb.hosts[receiver].address
    rx = subprocess.Popen(["ip", "netns", "exec", tb.netns(receiver), sys.executable, "-c", RECEIVER, address],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    subprocess.run(["ip", "netns", "exec", tb.netns(sender), sys.executable, "-c", SENDER, address], check=True)
    return int(rx.communicate(timeout=30)[0].strip())


def test_loss_and_partition_drop_what_they_say_in_both_directions(testbed):
    assert delivered(testbed, "ws2", "ws1") == 2000
    assert "ws1: 30 % loss on both directions" in fault.apply(testbed, "ws1", fault.Fault(30))
    assert fault.active(testbed) == {"ws1": fault.Fault(30).to_dict()}
    to_ws1, from_ws1 = delivered(testbed, "ws2", "ws1"), delivered(testbed, "ws1", "ws2")
    assert 1250 < to_ws1 < 1550 and 1250 < from_ws1 < 1550, (to_ws1, from_ws1)   # 1400 expected
    assert delivered(testbed, "ws2", "ws3") == 2000, "the other links are untouched"
    fault.apply(testbed, "ws1", fault.Fault(100))
    assert delivered(testbed, "ws2", "ws1") == 0 and delivered(testbed, "ws1", "ws2") == 0
    assert fault.clear(testbed) == ["ws1: fault removed"]
    assert delivered(testbed, "ws2", "ws1") == 2000 and fault.active(testbed) == {}
    spans = fault.during(testbed, 0, int(time.time() * 1000) + 1)
    assert [(s["host"], s["description"]) for s in spans] == [("ws1", "30 % loss"), ("ws1", "partition (every packet dropped)")]
    assert all(s["to_ms"] for s in spans), "both were removed"
    # Delay needs netem; a kernel without it says so in one line.
    if fault.has_netem():
        assert "20 ms delay" in fault.apply(testbed, "ws1", fault.Fault(delay_ms=20))
        fault.clear(testbed, "ws1")
    else:
        with pytest.raises(EsbperfError, match=r"^this kernel has no netem \(sch_netem\), so delay and jitter cannot"):
            fault.apply(testbed, "ws1", fault.Fault(delay_ms=20))
    process = subprocess.run([sys.executable, "-m", "esbperf", "testbed", "fault", "--testbed", str(testbed.path),
                              "--host", "ws9", "--loss", "1"], capture_output=True, text=True)
    assert process.returncode == 2 and process.stderr.startswith("esbperf: error: unknown host 'ws9'")


@pytest.mark.slow
@pytest.mark.long
def test_a_run_through_camel_under_loss_and_a_partition_counts_errors_and_goes_on(testbed, tmp_path):
    plan_file = tmp_path / "lossy.yaml"
    plan_file.write_text(yaml.safe_dump({"name": "lossy", "scenarios": ["proxy"], "payloads": ["1KB", "2KB"],
                                         "users": [4], "duration_s": 8, "warmup_s": 3, "timeout_s": 2}))
    the_plan = plans.load(plan_file)
    group = services.start(testbed, "camel", tmp_path / "stack", echo=lambda line: None)
    client_state = services.state_dirs(tmp_path / "stack")
    try:
        fault.apply(testbed, "ws1", fault.Fault(1))
        token = services.console_token_file(tmp_path / "stack")
        lossy = runner.start(the_plan, "camel", testbed, tmp_path / "results", local_state_dirs=client_state,
                             token_file=token)
        fault.clear(testbed)
        for step in lossy.glob("camel/proxy/*/4/iter-1/step.json"):
            meta = json.loads(step.read_text())
            [recorded] = meta["network_faults"]
            assert recorded["host"] == "ws1" and recorded["loss_percent"] == 1
            totals = dict(zip(meta["console"]["columns"], meta["console"]["totals"]))
            assert totals["Tests"] > 0, totals

        def partition_mid_step():
            deadline = time.monotonic() + 60
            while not list((tmp_path / "stack").glob("client/agents/*/runs/lossy-*/camel/proxy/1KB/4/iter-1/*/*-data.log")):
                assert time.monotonic() < deadline, "the first step never started"
                time.sleep(0.1)
            time.sleep(4)          # warm-up over, measuring
            fault.partition(testbed, "ws1", 5)
        cutter = threading.Thread(target=partition_mid_step, daemon=True)
        cutter.start()
        cut = runner.start(the_plan, "camel", testbed, tmp_path / "results", local_state_dirs=client_state,
                           token_file=token)
        cutter.join(30)
        meta = json.loads((cut / "camel/proxy/1KB/4/iter-1/step.json").read_text())
        [recorded] = meta["network_faults"]
        assert recorded["host"] == "ws1" and recorded["loss_percent"] == 100 and recorded["to_ms"] < meta["end_ms"]
        totals = dict(zip(meta["console"]["columns"], meta["console"]["totals"]))
        assert totals["Errors"] > 0 and totals["Tests"] > 0, totals   # timeouts counted, the step kept
        assert (cut / "camel/proxy/2KB/4/iter-1/step.json").is_file(), "the run went on"
    finally:
        fault.clear(testbed)
        group.stop_all()


def test_a_fault_ends_with_its_links_down_and_a_fresh_up_starts_without_one(tmp_path, monkeypatch):
    """A fault with no later "cleared" record (a killed partition, a `testbed down` without
    `fault --clear`) is not on the links that replace its own: no later step is flagged (issue 23.4)."""
    from esbperf import testbed as testbeds

    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    tb = topology.load(write_testbed(tmp_path / "faults.yaml"))
    netns.down(tb)
    try:
        testbeds.up(tb)
        fault.apply(tb, "ws1", fault.Fault(loss_percent=100))   # then killed: nothing clears it
        on = int(time.time() * 1000)
        time.sleep(0.05)
        assert [f["host"] for f in fault.during(tb, on, on + 1)] == ["ws1"]
        testbeds.down(tb)
        time.sleep(0.05)
        testbeds.up(tb)
        time.sleep(0.05)
        later = int(time.time() * 1000)
        assert fault.active(tb) == {}, "the fresh links carry no fault"
        assert fault.during(tb, later, later + 10_000) == [], "a step after the bring-up is not flagged"
        [span] = fault.during(tb, on, later)
        assert span["host"] == "ws1" and on - 1000 < span["from_ms"] <= on and span["to_ms"] < later
    finally:
        netns.down(tb)
