"""Shared fixtures: real echo back ends, a real Grinder console with two agents, and a testbed
file pointing at them on this project's test ports (16xxx); and the helpers more than one test file
uses (a plan file, a back end that never answers, waiting for a condition, …)."""
from __future__ import annotations

import html
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

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


# --- helpers the test files share -----------------------------------------------------------------

# A plan of one short closed-model step: proxy, 1 KB, 1 user, 3 s of warm-up and 2 s measured.
ONE_STEP_PLAN = {"scenarios": ["proxy"], "payloads": ["1KB"], "users": [1], "duration_s": 2, "warmup_s": 3,
                 "timeout_s": 10}


def write_plan(path: Path, defaults: dict = ONE_STEP_PLAN, **fields) -> Path:
    """A plan file named after the file (`name`: its stem unless `fields` say otherwise): `defaults`
    (a test file's own plan, or ONE_STEP_PLAN), `fields` over them."""
    path.write_text(yaml.safe_dump({"name": path.stem, **defaults, **fields}, allow_unicode=True))
    return path


def round_refuser(tmp_path: Path, round_name: str) -> Callable:
    """refused(change, message): `change` applied to a copy of console-config/rounds/<round_name>.yaml
    makes rounds.load refuse it in one line matching `message`."""
    from esbperf.core import rounds
    from esbperf.core.errors import EsbperfError
    from esbperf.core.project import CONSOLE_CONFIG

    good = yaml.safe_load((CONSOLE_CONFIG / "rounds" / f"{round_name}.yaml").read_text())

    def refused(change: Callable[[dict], None], message: str) -> None:
        data = json.loads(json.dumps(good))
        change(data)
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(EsbperfError, match=message) as e:
            rounds.load(path)
        assert "\n" not in str(e.value)
    return refused


@pytest.fixture(scope="module")
def silent_backend(request):
    """A back end that accepts connections and never answers, on the test module's SILENT_PORT."""
    port = request.module.SILENT_PORT
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((HOST, port))
    server.listen(512)
    accepted, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://{HOST}:{port}"
    stop.set()
    thread.join()
    for c in accepted:
        c.close()
    server.close()


def soap_post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 30,
              soap_action: str = '""') -> tuple[int, dict[str, str], bytes]:
    """POST a SOAP message to HOST:port: the status, the headers (lower-case names) and the body."""
    connection = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        connection.request("POST", path, body, {"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": soap_action,
                                                **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def wait_for(predicate: Callable, timeout: float, what: str, every_s: float = 0.1):
    """The predicate's first true value, asked every `every_s` until `timeout` s have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")


def esbperf_process(*args: str, state_dir: Path) -> subprocess.Popen:
    """`esbperf ARGS` in the background, in a session of its own, with its state in `state_dir`; its
    output (stdout and stderr together) in `stdout`."""
    return subprocess.Popen([sys.executable, "-m", "esbperf", *args],
                            env=dict(os.environ, ESBPERF_STATE=str(state_dir)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def child_pids(pid: int) -> set[int]:
    """A process's children (not their own)."""
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


FIVE_HOSTS = {"client": 10, "esb": 20, "ws1": 31, "ws2": 32, "ws3": 33}   # each role's address in its /24


def emulated_testbed_data(name: str, prefix: str, net: str, hosts: dict[str, int] = FIVE_HOSTS) -> dict:
    """An emulated testbed of the five hosts (or `hosts`, each with the last byte of its address), its
    network namespaces named `prefix`…, addresses in `net`.0/24, 1 Gbit/s links; the direct target and
    Camel. As a testbed file holds it (yaml.safe_dump it with sort_keys=False)."""
    data = {
        "name": name, "emulated": True, "prefix": prefix,
        "bridge": {"name": f"{prefix}br0", "address": f"{net}.1/24"},
        "console": {"port": 6372, "api_host": f"{net}.10", "api_port": 6373},
        "hosts": {role: {"address": f"{net}.{n}", "link_mbit": 1000, "monitor_port": 7090}
                  for role, n in hosts.items()},
        "targets": {"direct": {"kind": "direct"}, "camel": {"kind": "esb", "esb": "camel"}},
    }
    data["hosts"]["esb"]["esb_ports"] = {"camel": 8280}
    for ws in ("ws1", "ws2", "ws3"):
        data["hosts"][ws]["echo_port"] = 8080
    return data


def mutate(original: bytes, mutation) -> bytes:
    """`original` cut at `cut` (kept whole when the cut is at its end), then each edit (at, how, bytes)
    applied: insert, replace or delete at `at` (past the end: at the end)."""
    cut, edits = mutation
    text = bytearray(original[:cut] if cut < len(original) - 1 else original)
    for at, how, data in edits:
        at = min(at, len(text))
        if how == "insert":
            text[at:at] = data
        elif how == "replace":
            text[at:at + len(data)] = data
        else:
            del text[at:at + len(data)]
    return bytes(text)


def check_one_line(path: Path, load, first: bool = False):
    """Load `path`; the only acceptable failure is one EsbperfError line that names the file (`first`:
    that starts with its name). None when refused."""
    from esbperf.core.errors import EsbperfError
    try:
        return load(path)
    except EsbperfError as e:
        message = str(e)
        assert message.startswith(str(path)) if first else str(path) in message, message
        assert "\n" not in message and len(message) < 600, message
        return None


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render_with_probe(report_dir: Path, scratch: Path, probe: str, window: tuple[int, int]) -> dict:
    """Render a copy of report.html with the `probe` script appended, in headless Chromium at `window`
    (width, height); what the probe wrote as JSON in `<pre id="probe-result">`."""
    copy = scratch / "probe"
    shutil.copytree(report_dir, copy)
    (copy / "probe.html").write_text((copy / "report.html").read_text().replace("</body>", probe + "</body>"))
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={scratch / 'profile'}", f"--window-size={window[0]},{window[1]}",
         "--virtual-time-budget=10000", "--dump-dom", (copy / "probe.html").as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(scratch)})
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', result.stdout, re.S)
    assert found, result.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


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
