"""The LAN testbed driven over ssh, for real on this machine: the emulated testbed's ssh mode (an
OpenSSH server in each namespace, on the host's address, a key made for the testbed), esbperf
installed in each host's own folder, the services started in the background on their hosts, a
plan whose users are split over agents on two load hosts (client, and load2 over ssh), the data
logs of both brought home and counted, the report, and everything stopped and torn down."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from conftest import emulated_testbed_data
from esbperf import testbed as testbeds
from esbperf.core import topology
from esbperf.core.errors import EsbperfError
from esbperf.cli.demo import run_demo
from esbperf.testbed import fault, hosts, install

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and sshd need root")]

PREFIX = "esbh-"
NET = "198.18.230"
HOSTS = {"client": 10, "load2": 11, "esb": 20, "ws1": 31, "ws2": 32, "ws3": 33}


@pytest.fixture(scope="module")
def ssh_testbed(tmp_path_factory) -> Path:
    """A testbed file in the ssh mode: every host but the client reached over ssh, each with an
    install folder of its own (kept for the module, so the second install has nothing to send)."""
    folder = tmp_path_factory.mktemp("ssh-testbed")
    data = emulated_testbed_data("ssh-test", PREFIX, NET, HOSTS)
    for role in HOSTS:
        if role != "client":
            data["hosts"][role].update(ssh=f"root@{NET}.{HOSTS[role]}", dir=str(folder / "hosts" / role))
    path = folder / "ssh-test.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    testbeds.down(topology.load(path))   # a killed earlier run's leftovers
    return path


def test_ssh_demo_runs_agents_on_two_load_hosts_and_brings_both_logs_home(ssh_testbed, tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    plan_file = tmp_path / "tiny.yaml"
    plan_file.write_text(yaml.safe_dump({"name": "tiny", "scenarios": ["proxy"], "payloads": ["1KB"],
                                         "users": [4], "duration_s": 3, "warmup_s": 2, "timeout_s": 10,
                                         "restart": "per-step", "iterations": 2}))
    report = run_demo(ssh_testbed, "camel", tmp_path / "results", Console(), plan_names=(plan_file,), ssh=True)

    [run] = [p for p in report.parent.iterdir() if (p / "run.json").is_file()]
    record = json.loads((run / "run.json").read_text())
    assert sorted(a["name"] for a in record["agents"]) == ["client", "load2"]
    assert "load2" in record["monitored_roles"] and "load2" in record["clock_skew"]["hosts"]
    steps = sorted(run.glob("*/proxy/1KB/4/iter-*"))
    assert len(steps) == 4
    for step in steps:
        data_logs = sorted(p.name for p in (step / "logs").glob("*-data.log"))
        # One worker per agent; load2's came home over ssh (rsync), nothing of it stays there.
        assert [name.split("-")[0] for name in data_logs] == ["client", "load2"], data_logs
        assert all(len((step / "logs" / name).read_text().splitlines()) > 10 for name in data_logs)
        assert (step / "monitor-load2.csv").is_file()
    assert not list((ssh_testbed.parent / "hosts" / "load2" / "state" / "agents").rglob("*-data.log"))
    # A fresh ESB for each camel step, restarted over ssh by its pid file.
    restarts = [json.loads((s / "step.json").read_text()).get("esb_restart") for s in steps]
    assert restarts[0]["pid"] != restarts[1]["pid"] and restarts[2:] == [None, None], restarts

    from esbperf.analysis.report import build_report
    _, analysis = build_report([run], tmp_path / "again")
    for row in analysis.summary.rows(named=True):
        # Both hosts' transactions counted, and their sum agrees with the console's count.
        assert row["log_files"] == 2 and "client-" in row["threads_by_file"] and "load2-" in row["threads_by_file"]
        assert row["transactions"] > 100
    assert not [w for w in analysis.warnings if "console's statistics disagree" in w], analysis.warnings
    # Everything stopped and torn down.
    assert not [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if ns.startswith(PREFIX)]
    assert not list((ssh_testbed.parent / "hosts").glob("*/state/run/*.pid"))


def _listen(netns: str, address: str, port: int) -> subprocess.Popen:
    """Something else holding a service's port on a host."""
    holder = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c",
                               "import socket, time; s = socket.socket(); "
                               f"s.bind(('{address}', {port})); s.listen(); print('up', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "up"
    return holder


def test_install_is_idempotent_and_start_fails_in_one_line_stopping_what_it_started(ssh_testbed, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("ESBPERF_STATE", str(tmp_path / "state"))
    tb = topology.load(ssh_testbed)
    with testbeds.emulated(tb):
        install.install(tb, echo=lambda line: None)
        again = install.install(tb, echo=lambda line: None)
        assert len(again) == 5 and all("up to date" in line for line in again), again

        # A port in use on ws2: one line naming the host and the port; ws1's services stop again.
        holder = _listen(tb.netns("ws2"), tb.hosts["ws2"].address, 8080)
        try:
            with pytest.raises(EsbperfError, match=r"ws2 .*8080"):
                hosts.start(tb, "camel", echo=lambda line: None)
        finally:
            holder.kill()
        status = hosts.status(tb)
        assert not [s for found in status.values() for s in found if s["alive"]], status

        # A host that does not answer: one line naming it, and nothing starts anywhere.
        fault.apply(tb, "load2", fault.Fault(100.0, 0.0, 0.0))
        try:
            began = time.monotonic()
            with pytest.raises(EsbperfError, match=r"load2 \(root@.*\): cannot reach it over ssh"):
                hosts.start(tb, "camel", echo=lambda line: None)
            assert time.monotonic() - began < 30
        finally:
            fault.clear(tb, "load2")
        assert not [s for found in hosts.status(tb).values() for s in found if s["alive"]]
