"""The Grinder foundation end to end: a real console with the esbperf control API, real agents
and worker JVMs running Jython 2.7 scenario scripts against real echo services."""
from __future__ import annotations

import glob
import subprocess
import threading
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ECHO_PORTS, HOST, IMPOSTOR_PORT, gather_logs, relative_logs, write_testbed
from esbperf.core import procs, topology
from esbperf.core.errors import EsbperfError
from esbperf.services import agent, console
from esbperf.services.console import ControlClient, statistics

pytestmark = pytest.mark.slow


def direct_properties(ws1_port: int = ECHO_PORTS["ws1"], **overrides) -> dict:
    properties = {
        "grinder.processes": 1, "grinder.threads": 2, "grinder.runs": 0, "grinder.duration": 3000,
        "esbperf.scenario": "proxy", "esbperf.target.kind": "direct", "esbperf.payload.bytes": 1024,
        "esbperf.backend.ws1": f"http://{HOST}:{ws1_port}",
        "esbperf.backend.ws2": f"http://{HOST}:{ECHO_PORTS['ws2']}",
        "esbperf.backend.ws3": f"http://{HOST}:{ECHO_PORTS['ws3']}",
    }
    properties.update(overrides)
    return properties


def run_workers(client: ControlClient, properties: dict, log_dir: Path, expected_workers: int = 2,
                agents_root: Path | None = None) -> tuple[dict, set]:
    """Start workers on every agent, wait for them to end, bring their logs into log_dir, return the
    console's totals."""
    client.recording("stop")
    client.recording("reset")
    client.recording("start")
    relative = relative_logs(log_dir)
    workers = client.start_workers_and_wait({**properties, "grinder.logDirectory": relative}, expected_workers)
    assert client.wait_workers_finished(workers, 60)
    time.sleep(1.5)   # the workers' last reports reach the console's next sample
    gather_logs(relative, log_dir, agents_root)
    return statistics(client.data()), workers


def test_two_agents_run_workers_against_a_valid_target(grinder, echoes, tmp_path):
    agents = grinder.agents()
    assert sorted(a["name"] for a in agents) == ["test-1", "test-2"]
    totals, workers = run_workers(grinder, direct_properties(), tmp_path)
    assert len(workers) == 2, "one worker process per agent"
    assert totals["Tests"] > 0 and totals["Errors"] == 0, totals
    data_logs = sorted(Path(p).name for p in glob.glob(str(tmp_path / "*-data.log")))
    assert [n.split("-")[1] for n in data_logs] == ["1", "2"], data_logs   # both agents worked
    rows = sum(len(Path(p).read_text().splitlines()) - 1 for p in glob.glob(str(tmp_path / "*-data.log")))
    assert rows == totals["Tests"], "the console counts exactly the transactions in the data logs"
    header = (tmp_path / data_logs[0]).read_text().splitlines()[0]
    assert header.endswith("Errors, HTTP status, Request bytes, Response bytes, Response us")


def test_a_wrong_answer_is_an_error_not_a_transaction(grinder, echoes, tmp_path):
    totals, _ = run_workers(grinder, direct_properties(ws1_port=IMPOSTOR_PORT), tmp_path)
    # The console's "Tests" are successful transactions only: every answer came from ws9.
    assert totals["Errors"] > 0 and totals["Tests"] == 0, totals
    worker_log = next(p for p in glob.glob(str(tmp_path / "*.log")) if not p.endswith("-data.log"))
    assert "answered by ws9, expected ws1" in Path(worker_log).read_text()


def test_stop_workers_ends_a_duration_bound_run_early(grinder, echoes, tmp_path):
    grinder.recording("reset")
    workers = grinder.start_workers_and_wait(
        {**direct_properties(**{"grinder.duration": 120000}), "grinder.logDirectory": relative_logs(tmp_path)}, 2)
    time.sleep(2)
    stopped_at = time.monotonic()
    grinder.stop_workers()
    assert grinder.wait_workers_finished(workers, 30)
    assert time.monotonic() - stopped_at < 15, "stop-workers must end a 120 s run within seconds"


# A worker's state change at the console must never wait for Grinder's 500 ms reader sleep.
STATE_SEEN_WITHIN_MS = 150


def test_the_console_shows_each_worker_state_change_within_150_ms(grinder, echoes, tmp_path):
    """Three runs of a 1.5 s worker on each agent. RUNNING is timed from the "start time is <ms> since
    Epoch" a worker logs just before sending it, FINISHED from that plus the "elapsed time" it logs
    just after. With Grinder's readers alone (-Desbperf.console.readerPollMs=0) a hop took 0.17 s
    (RUNNING) and 0.23 s (FINISHED) at the median and 16 of 40 were under 150 ms, so twelve under it
    by chance is rarer than one run in a hundred; with esbperf's reader (20 ms): 16 ms (RUNNING) and
    12 ms (FINISHED) at the median, 38 ms at most."""
    seen: dict[tuple[str, str], float] = {}   # (worker name, state) -> when the API first showed it (ms)
    watching = threading.Event()

    def watch():
        while not watching.is_set():
            agents = grinder.agents()
            now = time.time() * 1000   # after the answer: the state was there by then, at the latest
            for w in (w for a in agents for w in a.get("workers", [])):
                seen.setdefault((w["name"], w["state"]), now)
            time.sleep(0.005)

    hops, others = [], []
    grinder.settle()
    for run in range(3):
        seen.clear()
        watching.clear()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        relative = relative_logs(tmp_path / f"run{run}")
        try:
            workers = grinder.start_workers_and_wait(direct_properties(**{
                "grinder.threads": 1, "grinder.duration": 1500, "grinder.logDirectory": relative}), 2)
            names = {w["name"] for a in grinder.agents() for w in a.get("workers", []) if w["id"] in workers}
            assert grinder.wait_workers_finished(workers, 30)
            time.sleep(0.2)   # the watcher's last look
        finally:
            watching.set()
            watcher.join(5)
        logs = [log for log in gather_logs(relative, tmp_path / f"run{run}") if not log.name.endswith("-data.log")]
        # A worker may still be writing its log as it ends (the file moved is the one it writes: once
        # on a busy machine a log was read with its first three lines only): wait for its last line.
        ends = time.monotonic() + 5
        while time.monotonic() < ends and not all("elapsed time is" in log.read_text() for log in logs):
            time.sleep(0.2)
        for log in logs:
            text = log.read_text()
            started = re.search(r"start time is (\d+) ms since Epoch", text)
            # Only the workers this start returned: a start signal sent again (start_workers_and_wait)
            # may reach an agent whose 1.5-s workers have ended, and start two more after the watch.
            if started is None or log.stem not in names:
                others.append(f"{log.name}: {text[-300:]!r}")
                continue
            threads_started = int(started.group(1))
            finished = threads_started + int(re.search(r"elapsed time is (\d+) ms", text).group(1))
            for state, sent in (("RUNNING", threads_started), ("FINISHED", finished)):
                shown = seen.get((log.stem, state))
                hops.append((log.stem, state, None if shown is None else round(shown - sent)))
    late = [hop for hop in hops if hop[2] is None or hop[2] > STATE_SEEN_WITHIN_MS]
    assert len(hops) == 12 and not late, f"late or never shown (ms): {late}; all: {hops}; other logs: {others}"


def test_settle_stops_the_workers_of_a_start_whose_sender_was_killed(grinder, echoes, tmp_path):
    """A runner killed just after a start signal: its workers reach the console only once their
    JVMs are up, after a quiet spell of a few seconds; the next run's settle() must still catch
    them (a CI run once took such a worker for the next run's own)."""
    grinder.settle()
    seen: set[str] = set()
    watching = threading.Event()

    def watch():   # the console forgets finished workers after a few seconds: note every one
        while not watching.is_set():
            seen.update(grinder.worker_ids())
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        grinder.start_workers({**direct_properties(**{"grinder.duration": 60000}),
                               "grinder.logDirectory": relative_logs(tmp_path)})
        next_run = ControlClient(grinder.url, grinder.token)   # the killed runner's successor, at once
        next_run.settle()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert not next_run.running_workers(), "a worker of the killed runner's start runs on after settle()"
            time.sleep(0.2)
    finally:
        watching.set()
        watcher.join(5)
    assert seen, "the start launched workers (settle() waited for them and stopped them)"


def call(url: str, method: str = "GET", body: bytes | None = None, token: str | None = None,
         headers: dict | None = None) -> tuple[int, dict]:
    """One request to the control API, as the runner sends it unless `headers` say otherwise."""
    sent = {"Content-Type": "application/json"}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    request = urllib.request.Request(url, data=body, method=method, headers={k: v for k, v in sent.items() if v})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_api_errors_are_json_messages_not_stack_traces(lone_console, tmp_path):
    testbed, _ = lone_console
    base, token = testbed.api_url, console.read_token(console.token_file(tmp_path / "console"))
    status, body = call(base + "/agents/start-workers", "POST", b'{"grinder.threads": ', token)
    assert status == 400 and body["error"].startswith("request body is not valid JSON")
    status, body = call(base + "/agents/start-workers", "POST", b'[1, 2]', token)
    assert status == 400 and "JSON object of grinder properties" in body["error"]
    status, body = call(base + "/agents/start-workers", "POST", b'{"grinder.threads": {"a": 1}}', token)
    assert status == 400 and "grinder.threads" in body["error"]
    status, body = call(base + "/no/such/thing", token=token)
    assert status == 404 and body["error"] == "no such resource: /no/such/thing"
    status, body = call(base + "/agents/start-workers", token=token)
    assert status == 405
    status, body = call(base + "/agents/start-workers", "POST", b'{"grinder.threads": 1}', token)
    assert status == 409 and "no agent is connected" in body["error"] and "esbperf agent" in body["error"]
    for text in (json.dumps(body),):
        assert "Exception" not in text and "\tat " not in text
    status, body = call(base + "/version", token=token)
    assert status == 200 and body == "The Grinder 3.11"


def test_only_the_holder_of_the_token_drives_the_api_and_only_with_allowed_properties(grinder, state_dir, tmp_path):
    """What made the API remote code execution on a lab LAN is refused: worker properties that choose
    the program agents run, no or a wrong token, a cross-site text/plain POST, a rebound Host name."""
    base, token = grinder.url, grinder.token
    token_path = console.token_file(state_dir / "console")
    assert token_path.stat().st_mode & 0o777 == 0o600 and token_path.read_text().strip() == token
    marker = tmp_path / "owned"
    start = direct_properties(**{"grinder.logDirectory": "tests/refused"})
    refusals = [
        ({**start, "grinder.jvm.arguments": f"-XX:OnError=touch {marker}"}, {}, 400, "grinder.jvm.arguments"),
        ({**start, "grinder.jvm": "/bin/sh"}, {}, 400, "worker property grinder.jvm is not allowed"),
        ({**start, "grinder.logDirectory": str(tmp_path)}, {}, 400, "grinder.logDirectory must be a relative path"),
        ({**start, "grinder.script": "../../scenario.py"}, {}, 400, "grinder.script must be a relative path"),
        (start, {"Authorization": None}, 401, "a valid token is needed"),
        (start, {"Authorization": "Bearer not-the-token-not-the-token"}, 401, "a valid token is needed"),
        (start, {"Content-Type": "text/plain"}, 415, "must be application/json"),
        (start, {"Host": f"console.attacker.example:{grinder.url.rsplit(':', 1)[1]}"}, 403, "does not name"),
    ]
    before = grinder.worker_ids()
    for properties, headers, status, needle in refusals:
        got, body = call(base + "/agents/start-workers", "POST", json.dumps(properties).encode(), token, headers)
        assert (got, needle in body.get("error", "")) == (status, True), (headers, properties, got, body)
        assert "\n" not in body["error"]
    assert call(base + "/agents/status", headers={"Authorization": None})[0] == 401, "reading needs the token too"
    time.sleep(4)
    assert not grinder.worker_ids() - before, "no worker started"
    assert not marker.exists()
    assert not list(state_dir.glob("agents/*/tests/refused")), "no worker wrote a log"
    # The runner's own properties pass (every runner and grinder test relies on it too).
    totals, _ = run_workers(grinder, direct_properties(), tmp_path / "logs")
    assert totals["Tests"] > 0


def listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on `port`, from /proc/net/tcp{,6}."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:   # 0A: LISTEN
                found.add(address[-8:] if width == 32 and address.startswith("0000000000000000FFFF0000") else address)
    return found


def test_control_api_listens_on_loopback_only(lone_console):
    testbed, _ = lone_console
    # 0100007F is 127.0.0.1 as the kernel prints it; a wildcard address would be wider.
    assert listening_addresses(testbed.api_port) == {"0100007F"}
    assert listening_addresses(testbed.console_port) == {"0100007F"}


def test_a_port_in_use_is_a_one_line_error(lone_console):
    testbed, _ = lone_console
    with pytest.raises(EsbperfError, match=r"cannot listen on 127\.0\.0\.1:16472 for the console"):
        console.console_process(testbed)


def test_testbed_check_asks_the_console_started_here_with_its_own_token(state_dir, tmp_path, monkeypatch):
    """`testbed check` reads the console's version with the token of the console `testbed start`
    ran on this machine (it once looked only where the runner's default is, and said the token was
    not here); without any token it says so in the probe's detail, not as a failure."""
    from esbperf.testbed import hosts, preflight

    monkeypatch.delenv(console.TOKEN_ENV, raising=False)
    testbed = topology.load(write_testbed(tmp_path / "checked.yaml", ECHO_PORTS, console_port=16472, api_port=16473))
    workdir = hosts.local_state(testbed, "client") / "console"
    process = console.start_console(testbed, workdir=workdir)
    try:
        def api_probe():
            [client] = preflight.check(testbed, roles=["client"], timeout=2)
            return next(p for p in client.probes if p.service == "console API")

        api = api_probe()
        version = console.control_client(testbed, console.token_file(workdir)).version()
        assert api.ok and not api.warning and api.detail.endswith(f", {version}")
        console.token_file(workdir).rename(tmp_path / "token-elsewhere")
        api = api_probe()
        assert api.ok and api.detail.endswith(", answers; this machine holds no token for it (a runner here needs "
                                              "$ESBPERF_CONSOLE_TOKEN or --token-file)")
    finally:
        process.stop()


def test_agents_reconnect_when_the_console_restarts(state_dir, echoes, tmp_path):
    testbed = topology.load(write_testbed(tmp_path / "restart.yaml", ECHO_PORTS, console_port=16672, api_port=16673))
    first = console.start_console(testbed, workdir=tmp_path / "c1")
    [the_agent] = agent.agent_processes(HOST, 16672, 1, host_id="phoenix", workdir=tmp_path / "agents")
    the_agent.start()
    try:
        client = console.control_client(testbed, console.token_file(tmp_path / "c1"))
        assert client.wait_for_agents(1, 30)[0]["name"] == "phoenix"
        first.stop()
        second = console.start_console(testbed, workdir=tmp_path / "c2")
        try:
            client = console.control_client(testbed, console.token_file(tmp_path / "c2"))   # a new token
            assert client.wait_for_agents(1, 30)[0]["name"] == "phoenix"
            assert the_agent.alive()
        finally:
            second.stop()
    finally:
        the_agent.stop()
        first.stop()


def newer_jdk() -> str | None:
    """A second JDK (Temurin 25 on this machine) to prove the patch beyond 17."""
    for home in sorted(glob.glob("/usr/lib/jvm/*25*")) + sorted(glob.glob("/usr/lib/jvm/*21*")):
        java = Path(home) / "bin" / "java"
        if java.exists():
            return str(java)
    return None


@pytest.mark.skipif(newer_jdk() is None, reason="no JDK 21/25 under /usr/lib/jvm besides the default one")
def test_console_agent_and_workers_start_on_a_newer_jdk(state_dir, echoes, tmp_path, monkeypatch):
    monkeypatch.setenv("ESBPERF_JAVA", newer_jdk())
    testbed = topology.load(write_testbed(tmp_path / "jdk.yaml", ECHO_PORTS, console_port=16572, api_port=16573))
    console_process = console.start_console(testbed, workdir=tmp_path / "console")
    [the_agent] = agent.agent_processes(HOST, 16572, 1, host_id="newjdk", workdir=tmp_path / "agents")
    the_agent.start()
    try:
        client = console.control_client(testbed, console.token_file(tmp_path / "console"), timeout=30)
        client.wait_for_agents(1, 30)
        client.distribute()
        totals, _ = run_workers(client, direct_properties(), tmp_path / "logs", expected_workers=1,
                                agents_root=tmp_path / "agents")
        assert totals["Tests"] > 0 and totals["Errors"] == 0
        worker_log = next(p for p in glob.glob(str(tmp_path / "logs" / "*.log")) if not p.endswith("-data.log"))
        version = Path(newer_jdk()).resolve().parent.parent.name
        assert "incompatible version of Java" not in Path(worker_log).read_text()
        assert "Jython 2.7.4" in Path(worker_log).read_text(), version
    finally:
        the_agent.stop()
        console_process.stop()


def test_workers_do_not_yield_before_each_timed_section_where_the_jvm_allows():
    # Grinder calls Thread.yield() before every test; on a busy host that costs a time slice.
    from esbperf.services.agent import worker_jvm_args
    from esbperf.core.config import AgentConfig

    java = procs.java_executable()
    args = worker_jvm_args(java, AgentConfig.load())
    major = int(subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True)
                .stderr.split("java.specification.version = ")[1].split()[0])
    assert ("-XX:+DontYieldALot" in args) == (major < 23)


def test_workers_start_from_a_class_archive_made_once(tmp_path):
    """Every step starts new worker JVMs: the agent makes them a class-data archive of what a worker
    loads (Jython, Grinder, the client, the scenario's modules) once, and a JVM started with it
    loads those classes from it; asked again, the agent reuses the archive as it is."""
    from esbperf.core.config import AgentConfig
    from esbperf.core.project import GRINDER_HOME, HTTP_CLIENT

    java = procs.java_executable()
    classpath = f"{GRINDER_HOME.grinder_jar}:{HTTP_CLIENT.jar}"
    args = agent.worker_jvm_args(java, AgentConfig.load())
    [option] = agent.class_archive(java, classpath, args, tmp_path)
    archive = Path(option.split("=", 1)[1])
    made = archive.stat().st_mtime_ns
    assert agent.class_archive(java, classpath, args, tmp_path) == [option] and archive.stat().st_mtime_ns == made
    loaded = subprocess.run([java, option, "-Xlog:class+load=info", *args, "-classpath", classpath,
                             "org.python.util.jython", "-c", "import contract"],
                            cwd=agent.ARCHIVED_IMPORTS.parent, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    shared = [line for line in loaded.stdout.splitlines() if "shared objects file (top)" in line]
    assert len(shared) > 1000 and any("org.python.core.PySystemState " in line for line in shared), len(shared)
    # Another JVM, classpath or set of options is another archive.
    [other] = agent.class_archive(java, classpath, [*args, "-Xss1m"], tmp_path)
    assert other != option and Path(other.split("=", 1)[1]).exists() and not archive.exists()
