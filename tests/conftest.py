"""Shared fixtures: real echo back ends, a real Grinder console with two agents, and a testbed
file pointing at them on this project's test ports (16xxx)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

LONG_ENV = "ESBPERF_LONG_TESTS"   # 1: run the `long` tests too (make test-long)

HOST = "127.0.0.1"
ECHO_PORTS = {"ws1": 16081, "ws2": 16082, "ws3": 16083}
IMPOSTOR_PORT = 16089          # an echo that says it is ws9: any answer from it is a wrong one
CONSOLE_PORT, API_PORT = 16372, 16373


def write_testbed(path: Path, echo_ports: dict[str, int], console_port: int = CONSOLE_PORT,
                  api_port: int = API_PORT, **extra) -> Path:
    data = {
        "name": path.stem,
        "console": {"port": console_port, "api_host": HOST, "api_port": api_port},
        "hosts": {
            "client": {"address": HOST},
            "esb": {"address": HOST, "esb_ports": {"camel": 16280, "synapse": 16290}},
            **{ws: {"address": HOST, "echo_port": port} for ws, port in echo_ports.items()},
        },
        "targets": {"direct": {"kind": "direct"}, "camel": {"kind": "esb", "esb": "camel"},
                    "synapse": {"kind": "esb", "esb": "synapse"}},
        **extra,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def relative_logs(into: Path) -> str:
    """A relative grinder.logDirectory of its own (the control API takes no absolute one): each
    agent writes under its own working folder; `gather_logs` then moves the logs `into` a folder."""
    return f"tests/{into.name}-{time.time_ns()}"


def gather_logs(relative: str, into: Path, agents_root: Path | None = None) -> list[Path]:
    """Move every agent's logs of `relative` into `into`, as the runner does after a step."""
    into.mkdir(parents=True, exist_ok=True)
    root = agents_root or Path(os.environ["ESBPERF_STATE"]) / "agents"
    moved = []
    for source in root.glob(f"*/{relative}"):
        for f in source.iterdir():
            moved.append(Path(shutil.move(str(f), into / f.name)))
    return moved


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("esbperf-state")
    os.environ["ESBPERF_STATE"] = str(path)
    return path


@pytest.fixture(scope="session")
def echoes(state_dir):
    """ws1, ws2, ws3 and an impostor (ws9), real JAX-WS echo services on loopback."""
    from esbperf.services.echo import start_echo

    started = {}
    try:
        for ws, port in ECHO_PORTS.items():
            started[ws] = start_echo(ws, HOST, port, workdir=state_dir / ws)
        started["ws9"] = start_echo("ws9", HOST, IMPOSTOR_PORT, workdir=state_dir / "ws9")
        yield started
    finally:
        for p in started.values():
            p.stop()


@pytest.fixture(scope="session")
def testbed_file(tmp_path_factory) -> Path:
    return write_testbed(tmp_path_factory.mktemp("testbeds") / "tests.yaml", ECHO_PORTS)


@pytest.fixture(scope="session")
def grinder(state_dir, testbed_file):
    """A console with its control API and two agents connected; yields the API client."""
    from esbperf.services import agent, console
    from esbperf.core import topology

    testbed = topology.load(testbed_file)
    console_process = console.start_console(testbed, workdir=state_dir / "console")
    agents = agent.agent_processes(HOST, CONSOLE_PORT, count=2, host_id="test", workdir=state_dir / "agents")
    try:
        for a in agents:
            a.start()
        client = console.control_client(testbed, console.token_file(state_dir / "console"), timeout=30)
        client.wait_for_agents(2, 60)
        client.distribute()
        yield client
    finally:
        for a in agents:
            a.stop()
        console_process.stop()


@pytest.fixture
def lone_console(state_dir, tmp_path):
    """A console with no agent, on its own ports: yields (testbed, process); its token is in
    console.token_file(tmp_path / "console")."""
    from esbperf.services import console
    from esbperf.core import topology

    testbed = topology.load(write_testbed(tmp_path / "lone.yaml", ECHO_PORTS, console_port=16472, api_port=16473))
    process = console.start_console(testbed, workdir=tmp_path / "console")
    yield testbed, process
    process.stop()


# --- long tests: deselected by default, and said so at the end of every run ----------------------

def pytest_collection_modifyitems(config, items):
    if os.environ.get(LONG_ENV) == "1" or "long" in (config.getoption("-m") or ""):
        return
    long_tests = [item for item in items if item.get_closest_marker("long")]
    if long_tests:
        items[:] = [item for item in items if not item.get_closest_marker("long")]
        config.hook.pytest_deselected(items=long_tests)
        config._esbperf_long = [item.nodeid for item in long_tests]


def pytest_terminal_summary(terminalreporter, config):
    skipped_long = getattr(config, "_esbperf_long", [])
    if skipped_long:
        terminalreporter.write_line(
            f"{len(skipped_long)} long test(s) not run (marked `long`); `make test-long` runs them: "
            + ", ".join(skipped_long), yellow=True)
