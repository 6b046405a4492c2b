"""A JVM started by an esbperf command dies with that command, however the command dies
(SIGKILL here), and a port in use names the process that holds it (issue 16).

The commands run as a user starts them (`.venv/bin/esbperf ...`, their own testbed file and
state folder), on ports 16900-16999; the emulated case uses namespaces `esbk-*` on
198.18.216.0/24."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from esbperf import testbed as testbeds
from esbperf.core import procs, topology
from esbperf.services import console

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ESBPERF = str(ROOT / ".venv" / "bin" / "esbperf")
HOST = "127.0.0.1"
CONSOLE_PORT, API_PORT = 16972, 16973
CAMEL_PORT, ECHO_PORT, MONITOR_PORT = 16980, 16981, 16990
GONE_WITHIN_S = 5.0
IS_ROOT = os.geteuid() == 0 and all(shutil.which(tool) for tool in ("ip", "tc", "taskset"))
# A Grinder script that only waits: the workers must be running, not busy.
WAITING_SCRIPT = """\
from net.grinder.script.Grinder import grinder

class TestRunner:
    def __call__(self):
        grinder.sleep(200, 0)
"""


def loopback_testbed(path: Path) -> Path:
    data = {
        "name": "procs",
        "console": {"port": CONSOLE_PORT, "api_host": HOST, "api_port": API_PORT},
        "hosts": {
            "client": {"address": HOST},
            "esb": {"address": HOST, "esb_ports": {"camel": CAMEL_PORT}, "monitor_port": MONITOR_PORT},
            **{ws: {"address": HOST, "echo_port": ECHO_PORT + n} for n, ws in enumerate(("ws1", "ws2", "ws3"))},
        },
        "targets": {"direct": {"kind": "direct"}, "camel": {"kind": "esb", "esb": "camel"}},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Command:
    """An esbperf command started as a user would, its output in a file."""

    def __init__(self, tmp_path: Path, *args: str, prefix: tuple[str, ...] = ()):
        self.output = tmp_path / f"{args[0]}-{time.monotonic_ns()}.out"
        env = dict(os.environ, ESBPERF_STATE=str(tmp_path / "state"))
        with open(self.output, "w") as out:
            self.popen = subprocess.Popen([*prefix, ESBPERF, *args], stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env)

    def text(self) -> str:
        return self.output.read_text()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text():
            assert self.popen.poll() is None, f"exited ({self.popen.returncode}):\n{self.text()}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout} s:\n{self.text()}"
            time.sleep(0.1)

    def kill(self) -> None:
        self.popen.kill()
        self.popen.wait(10)


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def running(pid: int) -> bool:
    """Some thread of it is still alive: a zombie main thread does not count (an orphan's zombie
    may wait for a reaper that never comes), but the JVM's other threads, which may still hold
    its sockets, do."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            if Path(f"/proc/{pid}/task/{task}/stat").read_text().rpartition(")")[2].split()[0] not in "ZX":
                return True
        except OSError:
            continue
    return False


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def jvm_of(command: Command, timeout: float = 10) -> int:
    """The java process the command started (through `ip netns exec` and `taskset` too: they exec)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in children(command.popen.pid):
            if Path(cmdline(pid).split(" ")[0]).name == "java":
                return pid
        time.sleep(0.1)
    raise AssertionError(f"no java child of {command.popen.pid}")


def still_running_after(pids: list[int], timeout: float = GONE_WITHIN_S) -> list[str]:
    deadline = time.monotonic() + timeout
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"{pid}: {cmdline(pid)[:160]}" for pid in pids if running(pid)]


def kill_leftovers(pids: list[int]) -> None:
    """On the old code the JVMs outlive their command: end them so later tests find free ports."""
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def test_killed_echo_takes_its_jvm_and_a_second_echo_names_the_holder(tmp_path):
    first = Command(tmp_path, "echo", "--id", "ws1", "--listen", f"{HOST}:{ECHO_PORT}")
    jvms = []
    try:
        first.wait_for("Ctrl-C to stop")
        jvms.append(jvm_of(first))
        second = subprocess.run([ESBPERF, "echo", "--id", "ws2", "--listen", f"{HOST}:{ECHO_PORT}"],
                                capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, ESBPERF_STATE=str(tmp_path / "state")))
        assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1, second.stderr
        expected = (f"cannot listen on {HOST}:{ECHO_PORT} for the echo back end ws2: Address already in use "
                    f"(held by pid {jvms[0]}: java … esbperf.echo.EchoMain --id ws1 ")
        assert expected in second.stderr, second.stderr
        first.kill()
        assert not still_running_after(jvms)
        assert not procs.port_open(HOST, ECHO_PORT)
    finally:
        first.popen.kill()
        kill_leftovers(jvms)


def test_killed_esb_and_monitor_take_their_jvms(tmp_path):
    testbed = loopback_testbed(tmp_path / "procs.yaml")
    commands = [Command(tmp_path, "esb", "camel", "--testbed", str(testbed)),
                Command(tmp_path, "monitor", "--role", "esb", "--testbed", str(testbed))]
    jvms = []
    try:
        for command in commands:
            command.wait_for("Ctrl-C to stop")
            jvms.append(jvm_of(command))
        for command in commands:
            command.kill()
        assert not still_running_after(jvms)
        assert not procs.port_open(HOST, CAMEL_PORT) and not procs.port_open(HOST, MONITOR_PORT)
    finally:
        for command in commands:
            command.popen.kill()
        kill_leftovers(jvms)


def test_killed_agent_takes_its_jvm_and_workers_and_killed_console_its_jvm(tmp_path):
    testbed = loopback_testbed(tmp_path / "procs.yaml")
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "waiting.py").write_text(WAITING_SCRIPT)
    (dist / "grinder.properties").write_text("grinder.script = waiting.py\ngrinder.processes = 2\n"
                                              "grinder.threads = 1\ngrinder.runs = 0\ngrinder.duration = 120000\n")
    (tmp_path / "console.yaml").write_text("distribution_directory: dist\n")
    console_command = Command(tmp_path, "console", "--testbed", str(testbed),
                              "--config", str(tmp_path / "console.yaml"))
    agent_command = None
    jvms = []
    try:
        console_command.wait_for("Ctrl-C to stop")
        console_jvm = jvm_of(console_command)
        jvms.append(console_jvm)
        agent_command = Command(tmp_path, "agent", "--testbed", str(testbed), "--host-id", "orphan")
        agent_command.wait_for("Ctrl-C to stop")
        agent_jvm = jvm_of(agent_command)
        jvms.append(agent_jvm)
        client = console.control_client(topology.load(testbed),
                                        console.token_file(tmp_path / "state" / "console"), timeout=30)
        client.wait_for_agents(1, 60)
        client.distribute()
        started = client.start_workers_and_wait({}, 2, timeout=90)
        deadline = time.monotonic() + 60
        while client.running_workers() != started or len(children(agent_jvm)) < 2:
            assert time.monotonic() < deadline, "the workers did not get running"
            time.sleep(0.2)
        workers = children(agent_jvm)
        jvms += workers
        assert all("WorkerProcessEntryPoint" in cmdline(w) for w in workers)

        agent_command.kill()
        assert not still_running_after([agent_jvm]), "the agent JVM outlived `esbperf agent`"
        # Workers notice their agent's end (their standard input closes) and finish their run.
        assert not still_running_after(workers, 15), "worker JVMs outlived their agent"
        console_command.kill()
        assert not still_running_after([console_jvm])
        assert not procs.port_open(HOST, CONSOLE_PORT) and not procs.port_open(HOST, API_PORT)
    finally:
        for command in (console_command, agent_command):
            if command:
                command.popen.kill()
        kill_leftovers(jvms)


def sleeper_launcher(tmp_path: Path, how: str) -> tuple[subprocess.Popen, int]:
    """A Python process that starts `sleep 60` with procs.Process: `how` starts `sleeper` (a
    Process) and puts its pid in `started`. Returns the launcher and the sleep's pid."""
    script = "\n".join([
        f"import sys, threading, time; sys.path.insert(0, {str(ROOT)!r})",
        "from pathlib import Path",
        "from esbperf.core import procs",
        "started = []",
        f"log = Path({str(tmp_path / 'sleep.log')!r})",
        how,
        "print(started[0], flush=True)",
        "time.sleep(60)"])
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        return launcher, int(launcher.stdout.readline())
    except ValueError:
        launcher.kill()
        raise


def test_a_child_started_from_a_helper_thread_outlives_the_thread_not_the_process(tmp_path):
    """The parent-death signal fires when the forking *thread* ends: a child started from a
    helper thread must live on after that thread, and still die with the process."""
    launcher, sleeper = sleeper_launcher(tmp_path, (
        "helper = threading.Thread(target=lambda: started.append("
        "procs.Process('sleeper', ['sleep', '60'], log).start().pid))\n"
        "helper.start(); helper.join()"))
    try:
        time.sleep(0.5)
        assert running(sleeper), "the child died with the helper thread that started it"
        launcher.kill()
        launcher.wait(10)
        assert not still_running_after([sleeper])
    finally:
        launcher.kill()
        kill_leftovers([sleeper])


def test_a_detached_child_outlives_its_launcher(tmp_path):
    """What a background launcher (`esbperf testbed start`) does with the commands it starts."""
    launcher, sleeper = sleeper_launcher(
        tmp_path, "started.append(procs.Process('sleeper', ['sleep', '60'], log, detached=True).start().pid)")
    try:
        launcher.kill()
        launcher.wait(10)
        time.sleep(1)
        assert running(sleeper)
    finally:
        launcher.kill()
        kill_leftovers([sleeper])


def test_holder_lookup_cuts_long_command_lines_and_falls_back_quietly():
    java = ["/opt/jdk/bin/java", "-Xmx1g", "-cp", "a.jar:" * 200, "-Dx=y", "esbperf.echo.EchoMain",
            "--id", "ws1", "--host", "127.0.0.1", "--port", "16081", "--runtime", "jaxws", "--delay-ms", "0",
            "--max-body-mb", "16", "--threads", "400"]
    short = procs.short_command(java)
    assert short.startswith("java … esbperf.echo.EchoMain --id ws1 --host") and short.endswith("…")
    assert len(short) == procs.COMMAND_CHARS
    assert procs.short_command(["/usr/bin/python3", "-m", "http.server"]) == "python3 -m http.server"
    with socket.create_server((HOST, 16995)):
        assert procs.held_by(HOST, 16995) == f" (held by pid {os.getpid()}: {procs.short_command(_own_argv())})"
        assert procs.held_by(HOST, 16996) == ""        # nobody listens there
        line = f"monitor: error: cannot listen on {HOST}:16995: Address already in use"
        assert procs.name_port_holders(line) == line + procs.held_by(HOST, 16995)
        assert procs.name_port_holders(procs.name_port_holders(line)) == procs.name_port_holders(line)
        assert procs.name_port_holders(line, netns="esbk-none") == line   # no such namespace: as today
        with pytest.raises(Exception, match=rf"in use \(held by pid {os.getpid()}: "):
            procs.check_port_free(HOST, 16995, "test")


def _own_argv() -> list[str]:
    return [a.decode() for a in Path("/proc/self/cmdline").read_bytes().split(b"\0")[:-1]]


# ---- the emulated testbed: `ip netns exec` and `taskset` between the command and its JVM --------

def emulated_testbed(path: Path) -> topology.Testbed:
    net = "198.18.216"
    data = {
        "name": "procs-emulated", "emulated": True, "prefix": "esbk-",
        "bridge": {"name": "esbk-br0", "address": f"{net}.1/24"},
        "console": {"port": 6372, "api_host": f"{net}.10", "api_port": 6373},
        "hosts": {
            "client": {"address": f"{net}.10"},
            "esb": {"address": f"{net}.20", "monitor_port": 7090, "esb_ports": {"camel": 8280}, "cpus": [0]},
            **{ws: {"address": f"{net}.3{n}", "echo_port": 8080} for n, ws in enumerate(("ws1", "ws2", "ws3"), 1)},
        },
        "targets": {"direct": {"kind": "direct"}, "camel": {"kind": "esb", "esb": "camel"}},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return topology.load(path)


@pytest.mark.root
@pytest.mark.skipif(not IS_ROOT, reason="needs root, iproute2 and taskset: creates network namespaces")
def test_emulated_monitor_dies_through_netns_exec_and_taskset_and_names_a_holder(tmp_path):
    tb = emulated_testbed(tmp_path / "emulated.yaml")
    esb = tb.hosts["esb"]
    ns = tb.netns("esb")
    with testbeds.emulated(tb):
        # As `esbperf testbed commands` and the demo run it: the command itself in the namespace.
        command = Command(tmp_path, "monitor", "--role", "esb", "--testbed", str(tb.path),
                          prefix=("ip", "netns", "exec", ns))
        jvms = []
        try:
            command.wait_for("Ctrl-C to stop", 60)
            jvm = jvm_of(command)
            jvms.append(jvm)
            assert os.sched_getaffinity(jvm) == {0}     # it went through taskset
            command.kill()
            assert not still_running_after(jvms)
        finally:
            command.popen.kill()
            kill_leftovers(jvms)

        # A port taken inside the namespace: only the monitor JVM there sees it, and says so; esbperf
        # names the holder, found in that namespace's socket table.
        listen = (f"import socket, time; s = socket.create_server(('{esb.address}', {esb.monitor_port})); "
                  "print('listening', flush=True); time.sleep(60)")
        holder = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", listen],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "listening"
            failed = subprocess.run([ESBPERF, "monitor", "--role", "esb", "--testbed", str(tb.path)],
                                    capture_output=True, text=True, timeout=60,
                                    env=dict(os.environ, ESBPERF_STATE=str(tmp_path / "state")))
            assert failed.returncode == 2 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
            expected = (f"esb monitor: cannot listen on {esb.address}:{esb.monitor_port}: Address already in use "
                        f"(held by pid {holder.pid}: {Path(sys.executable).name} -c import socket")
            assert expected in failed.stderr, failed.stderr
        finally:
            holder.kill()
            holder.wait(10)
