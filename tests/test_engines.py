"""The engines' registry (esbperf/services/esb.py) without a JVM: where the shipped testbeds put
each ESB and floor, what `esbperf testbed commands|start` start on the esb host and what its
monitor watches there, the floors' configs (nginx and HAProxy started for real: they start in a
blink), and the refusal, before anything starts, of a scenario a target does not serve. The
engines end to end, behind real echo back ends: tests/test_esb.py."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import child_pids
from esbperf.core import plan as plans, procs, scenarios, topology
from esbperf.core.errors import EsbperfError
from esbperf.core.roles import BACKENDS
from esbperf.run import runner, verify
from esbperf.services import esb
from esbperf.testbed import hosts

ESBPERF = [sys.executable, "-m", "esbperf"]
HOST = "127.0.0.1"
FLOOR_PORTS = {"nginx": 19318, "haproxy": 19328}   # nothing needs to listen behind them here
NOWHERE = {ws: f"http://{HOST}:{19191 + i}" for i, ws in enumerate(BACKENDS)}   # nothing listens
SHIPPED = ["local", "emulated", "emulated-ssh", "lan-example"]
NOT_A_PROXY = ["cbr", "json", "xslt", "cbr-raw"]   # what a plain reverse proxy cannot do


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize("name", SHIPPED)
def test_every_engine_has_a_port_and_a_target_in_every_shipped_testbed(name):
    tb = topology.load(name)
    ports = tb.hosts["esb"].esb_ports
    assert set(ports) == set(esb.ENGINES) and list(ports)[0] == "camel"   # Camel first: `testbed start`'s default
    assert len(set(ports.values())) == len(ports)
    for engine in esb.ENGINES:
        assert (tb.target(engine).kind, tb.target(engine).esb) == ("esb", engine)


def test_the_floors_serve_the_proxy_scenarios_and_the_esbs_every_one():
    names = scenarios.names()
    assert esb.ESBS == ["camel", "spring-integration", "synapse"] and esb.FLOORS == ["haproxy", "nginx"]
    for name in esb.FLOORS:
        assert esb.unserved(name, names) == NOT_A_PROXY
    for name in esb.ESBS:
        assert esb.unserved(name, names) == []
    assert esb.unserved("mule", names) == []   # a team's own ESB: `esbperf verify` tells whether it meets the contract
    with pytest.raises(EsbperfError, match=r"^target nginx \(a floor\) serves only proxy, hbr, raw, hbr-raw, "
                                           r"not cbr, json: leave those scenarios out"):
        esb.refuse_unserved("nginx", "nginx", ["proxy", "cbr", "json"])
    with pytest.raises(EsbperfError, match=r"^target fast \(floor haproxy\) serves only .*, not xslt"):
        esb.refuse_unserved("fast", "haproxy", ["xslt"])
    esb.refuse_unserved("nginx", "nginx", ["hbr-raw", "proxy"])   # served: no error
    with pytest.raises(EsbperfError, match=r"^unknown engine 'mule' \(ESBs: camel, spring-integration, synapse; "
                                           r"floors: haproxy, nginx; reference engines: reference, reference-twin; an engine is a folder "
                                           r"with an engine.yaml"):
        esb.engine("mule")


def _on_esb_host(services: list[hosts.Service]) -> tuple[list[str], list[str]]:
    """(the names of the esb host's services, the texts its monitor matches)."""
    names = [s.name for s in services if s.role == "esb"]
    [monitor] = [s.argv for s in services if s.role == "esb" and s.name == "monitor"]
    return names, [monitor[i + 1] for i, arg in enumerate(monitor) if arg == "--match"]


def test_testbed_start_puts_the_floors_beside_the_esb_and_the_monitor_watches_each(tmp_path):
    tb = topology.load("local")
    every_engine = ["org.apache.camel.main.Main", "org.apache.synapse.SynapseServer",
                    "esbperf.springintegration.EsbApplication", "nginx:", "haproxy -db -f",
                    "esbperf.standard=reference", "esbperf.standard=twin"]
    names, matches = _on_esb_host(hosts.plan(tb, "spring-integration", lambda role: "local", floors=True))
    assert names == ["esb-spring-integration", "esb-nginx", "esb-haproxy", "monitor"]
    # The monitor watches every engine the host has a port for: one started by hand later is seen too.
    assert matches == every_engine
    # The plain demo starts its ESB alone; a floor chosen as the engine is not started twice.
    assert _on_esb_host(hosts.plan(tb, None, lambda role: "local")) == (["esb-camel", "monitor"], every_engine)
    assert _on_esb_host(hosts.plan(tb, "haproxy", lambda role: "local", floors=True))[0] == \
        ["esb-haproxy", "esb-nginx", "monitor"]
    # A testbed without the floors' ports starts none; an ESB the registry does not know is not watched.
    data = yaml.safe_load(topology.resolve("local").read_text())
    data["hosts"]["esb"]["esb_ports"] = {"mule": 18400, "camel": 18280}
    data["targets"] = {"direct": {"kind": "direct"}}
    path = tmp_path / "own-esb.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert _on_esb_host(hosts.plan(topology.load(path), None, lambda role: "x", floors=True)) == \
        (["esb-mule", "monitor"], ["org.apache.camel.main.Main"])


def test_testbed_commands_print_the_floors():
    result = subprocess.run([*ESBPERF, "testbed", "commands", "--testbed", "local", "--esb", "spring-integration"],
                            capture_output=True, text=True, check=True)
    # On a machine of several cores the local testbed pins each host: its lines start with taskset.
    lines = [re.sub(r"^taskset -c \S+ ", "", line) for line in result.stdout.splitlines()]
    for engine in ("spring-integration", "nginx", "haproxy"):
        assert f"esbperf esb {engine} --testbed local" in lines
    assert "esbperf esb camel --testbed local" not in lines


def test_a_run_and_verify_refuse_a_scenario_a_target_does_not_serve(tmp_path):
    refused = one_line_error(subprocess.run(
        [*ESBPERF, "run", "--dry-run", "--plan", "public-rounds-files", "--target", "camel", "--target", "haproxy"],
        capture_output=True, text=True))
    assert refused.startswith("esbperf: error: target haproxy (a floor) serves only proxy, hbr, raw, hbr-raw, "
                              "not cbr-raw: "), refused
    plan_file = tmp_path / "mixed.yaml"
    plan_file.write_text(yaml.safe_dump({"name": "mixed", "scenarios": ["proxy", "cbr", "json"], "payloads": ["1KB"],
                                         "users": [1], "duration_s": 2, "warmup_s": 1}))
    refused = one_line_error(subprocess.run([*ESBPERF, "run", "--dry-run", "--plan", str(plan_file), "--target", "nginx"],
                                            capture_output=True, text=True))
    assert "target nginx (a floor) serves only proxy, hbr, raw, hbr-raw, not cbr, json:" in refused
    # What they serve passes, beside an ESB and the baseline.
    fine = subprocess.run([*ESBPERF, "run", "--dry-run", "--plan", "smoke", "--target", "spring-integration",
                           "--target", "haproxy", "--target", "nginx", "--target", "direct"],
                          capture_output=True, text=True, check=True).stdout
    assert "against spring-integration, haproxy, nginx, direct: 16 steps" in fine
    refused = one_line_error(subprocess.run([*ESBPERF, "verify", "--target", "nginx", "--scenario", "proxy",
                                             "--scenario", "xslt"], capture_output=True, text=True))
    assert "target nginx (a floor) serves only proxy, hbr, raw, hbr-raw, not xslt:" in refused
    # A real run is refused before it contacts anything (the local testbed's console is not asked).
    with pytest.raises(EsbperfError, match=r"target nginx \(a floor\) serves only .*, not cbr, json"):
        runner.start(plans.load(plan_file), ["direct", "nginx"], topology.load("local"), tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_verify_checks_what_a_floor_serves():
    tb = topology.load("local")
    assert verify.to_check(tb.target("nginx")) == ["proxy", "hbr", "raw", "hbr-raw"]
    assert verify.to_check(tb.target("spring-integration")) == scenarios.names()
    assert verify.to_check(tb.target("direct"), ["cbr"]) == ["cbr"]
    with pytest.raises(EsbperfError, match="unknown scenario 'nope'"):
        verify.to_check(tb.target("haproxy"), ["nope"])


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_floor_configs_are_valid_and_listen_only_where_told(host, tmp_path):
    backends = {ws: url.replace(HOST, f"[{host}]" if ":" in host else host) for ws, url in NOWHERE.items()}
    nginx_argv = esb.command("nginx", host, 19318, backends, tmp_path / "nginx", 5000)
    subprocess.run([*nginx_argv, "-t", "-q"], check=True)
    conf = (tmp_path / "nginx" / "nginx.conf").read_text()
    listen = "[::1]:19318" if host == "::1" else "127.0.0.1:19318"
    assert [line.strip() for line in conf.splitlines() if line.strip().startswith("listen ")] == [f"listen {listen};"]
    assert "proxy_read_timeout 5000ms;" in conf and "keepalive 4096;" in conf
    haproxy_argv = esb.command("haproxy", host, 19328, backends, tmp_path / "haproxy", 5000)
    subprocess.run([haproxy_argv[0], "-c", "-q", *haproxy_argv[2:]], check=True)
    cfg = (tmp_path / "haproxy" / "haproxy.cfg").read_text()
    bind = "[::1]:19328" if host == "::1" else "127.0.0.1:19328"
    assert [line.strip() for line in cfg.splitlines() if line.strip().startswith("bind ")] == [f"bind {bind}"]
    assert not [line for line in cfg.splitlines() if line.strip().startswith("stats")]   # no admin socket or page
    assert "timeout server 5000ms" in cfg


def _pids_matching(text: str) -> set[int]:
    """What the monitor's --match finds: processes whose arguments, joined by spaces, hold text."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            except OSError:
                continue
            if text in b" ".join(args).decode(errors="replace"):
                found.add(int(entry.name))
    return found


def test_each_floor_starts_and_its_monitor_text_finds_its_processes(tmp_path):
    started = {}
    try:
        for name, port in FLOOR_PORTS.items():
            started[name] = esb.start_esb(name, HOST, port, NOWHERE, tmp_path / name, backend_timeout_s=5)
        for name, process in started.items():
            ours = {process.pid, *child_pids(process.pid)}
            assert ours <= _pids_matching(esb.ENGINES[name].match), name
        assert child_pids(started["nginx"].pid), "nginx's workers do the work: they must be watched too"
        assert not _pids_matching(esb.ENGINES["nginx"].match) & {started["haproxy"].pid}
    finally:
        for process in started.values():
            process.stop()
    assert not any(procs.port_open(HOST, port) for port in FLOOR_PORTS.values())


@pytest.mark.parametrize("floor", esb.FLOORS)
def test_a_floor_never_outlives_its_command_even_when_that_is_killed(floor, tmp_path):
    """`esbperf esb nginx` killed outright (SIGKILL): nginx's master must not leave its workers
    serving on the port (they would take the next start's port, and a run's traffic)."""
    port = FLOOR_PORTS[floor]
    command = subprocess.Popen([*ESBPERF, "esb", floor, "--listen", f"{HOST}:{port}", "--backends",
                                ",".join(f"{ws}={url}" for ws, url in NOWHERE.items())],
                               env={**os.environ, "ESBPERF_STATE": str(tmp_path)}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert "listening at" in command.stdout.readline() + command.stdout.readline()
        engine = [pid for pid in child_pids(command.pid)]
        assert engine and all(esb.ENGINES[floor].match in _command_line(pid) for pid in engine)
        workers = {child for pid in engine for child in child_pids(pid)}
    finally:
        command.kill()
        command.wait()
    left = set(engine) | workers
    for _ in range(50):   # a killed process is gone once it is a zombie and its port is closed
        left = {pid for pid in left if Path(f"/proc/{pid}").exists() and _state(pid) != "Z"}
        if not left and not procs.port_open(HOST, port):
            break
        time.sleep(0.1)
    assert not left, f"{floor} outlived its command: {sorted(left)}"
    assert not procs.port_open(HOST, port)


def _command_line(pid: int) -> str:
    return b" ".join(Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")).decode(errors="replace")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_floor_whose_program_is_missing_is_one_line(monkeypatch):
    monkeypatch.setattr(esb.shutil, "which", lambda program: None)
    with pytest.raises(EsbperfError, match=r"^haproxy is not installed on this host \(Debian: apt-get install -y "
                                           r"haproxy\); without it, leave haproxy out of the "
                                           r"testbed's hosts.esb.esb_ports$"):
        esb.esb_process("haproxy", HOST, 19328, NOWHERE)


def test_verify_ends_with_a_one_line_verdict(tmp_path):
    """A target that does not answer: the table, then one line saying how many checks failed and
    the first one's cause (exit 2). The verdict of a passing target is tests/test_esb.py's."""
    path = tmp_path / "nowhere.yaml"
    path.write_text(yaml.safe_dump({
        "hosts": {"client": {"address": HOST}, "esb": {"address": HOST, "esb_ports": {"camel": 19195}},
                  **{ws: {"address": HOST, "echo_port": 19191 + i} for i, ws in enumerate(BACKENDS)}},
        "targets": {"camel": {"kind": "esb"}}}))
    result = subprocess.run([*ESBPERF, "verify", "--target", "camel", "--testbed", str(path), "--timeout", "2"],
                            capture_output=True, text=True)
    verdict = one_line_error(result)
    assert verdict.startswith("esbperf: error: verify camel: 16 of 16 checks failed (first: proxy ws1: "), verdict
    assert "Connection refused" in verdict


def test_testbed_commands_end_with_the_preflight_and_the_run_of_the_esb_started():
    lines = subprocess.run([*ESBPERF, "testbed", "commands", "--testbed", "local", "--esb", "synapse"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[-2:] == ["esbperf testbed check --testbed local --target synapse",
                          "esbperf run --plan PLAN --target synapse --target direct --testbed local"]
