"""Child processes that esbperf starts and must stop: JVMs for the console, agents, echo
services, ESBs and monitors. Each runs in its own process group with its output in a log
file; stopping sends SIGTERM to the group, then SIGKILL after a grace period. A child dies
with the esbperf process that started it, however that ends (see `_die_with_parent`)."""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import ipaddress
import os
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from esbperf.core.errors import EsbperfError


def java_executable() -> str:
    """The java to run: $ESBPERF_JAVA, else $JAVA_HOME/bin/java, else java on PATH."""
    explicit = os.environ.get("ESBPERF_JAVA")
    if explicit:
        return explicit
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise EsbperfError("no java found: install a JDK 17+ or set JAVA_HOME")
    return os.path.realpath(found)


def check_port_free(host: str, port: int, what: str) -> None:
    """Fail with a clear message if host:port cannot be bound (in use, or not our address);
    a port in use names the process that holds it where the OS tells."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            held = held_by(host, port) if e.errno == errno.EADDRINUSE else ""
            raise EsbperfError(f"cannot listen on {host}:{port} for the {what}: {e.strerror}{held}") from None


# ---- who holds a port ----------------------------------------------------------------------

COMMAND_CHARS = 100     # a holder's command line is cut to about this length
# The one-line error our JVMs (echo, monitor) print when their port is taken (once per line:
# a command relaying it has named the holder already).
_JVM_PORT_IN_USE = re.compile(r"cannot listen on \[?([^\s\]]+?)\]?:(\d+): .*already in use(?! \(held by)")
_TCP_LISTEN = "0A"
# java options that take the next argument as their value (so it is not the main class).
_JAVA_VALUE_OPTIONS = {"-cp", "-classpath", "--class-path", "-p", "--module-path", "--add-modules",
                       "--add-opens", "--add-exports", "--add-reads", "--patch-module", "--limit-modules",
                       "--upgrade-module-path", "-jar"}


def held_by(host: str, port: int, netns: str | None = None) -> str:
    """' (held by pid N: COMMAND)' for the process listening on host:port, in the network
    namespace `netns` (default: ours); '' when the OS does not tell (another namespace, no
    permission to see the process)."""
    try:
        holder = listener_pid(host, port, netns)
        if holder is None:
            return ""
        with open(f"/proc/{holder}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return ""
    return f" (held by pid {holder}: {short_command(argv)})" if argv else f" (held by pid {holder})"


def name_port_holders(text: str, netns: str | None = None) -> str:
    """`text` (a JVM's own error lines) with the holder added to each "cannot listen on HOST:PORT:
    Address already in use" line."""
    def add(match: re.Match) -> str:
        return match.group(0) + held_by(match.group(1), int(match.group(2)), netns)
    return _JVM_PORT_IN_USE.sub(add, text)


def short_command(argv: Sequence[str], limit: int = COMMAND_CHARS) -> str:
    """A command line for one line of text: the program's name, and for java the main class and
    what follows it (the options and class path before it are long and say little)."""
    words = [os.path.basename(argv[0]), *argv[1:]]
    if words[0] == "java":
        for i in range(1, len(words)):
            if not words[i].startswith("-") and words[i - 1] not in _JAVA_VALUE_OPTIONS:
                words = ["java", "…", *words[i:]]
                break
    line = " ".join(words)
    return line if len(line) <= limit else line[:limit - 1] + "…"


def listener_pid(host: str, port: int, netns: str | None = None) -> int | None:
    """The (lowest) pid of a process holding the socket that listens on host:port."""
    tables = f"/proc/{_pid_in_netns(netns)}/net" if netns else "/proc/self/net"
    try:
        wanted = ipaddress.ip_address(host)
    except ValueError:
        wanted = None           # a name: any listener on the port
    inodes = set()
    for name in ("tcp", "tcp6"):
        try:
            with open(f"{tables}/{name}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, _, local_port = fields[1].partition(":")
            if fields[3] != _TCP_LISTEN or int(local_port, 16) != port or fields[9] == "0":
                continue
            if wanted is None or _covers(_proc_net_address(address), wanted):
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(_readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                return pid
        except OSError:         # gone, or not ours to see
            continue
    return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _proc_net_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp{,6}: 32-bit words in hex, each in the host's byte order."""
    packed = b"".join(struct.pack("=I", int(text[i:i + 8], 16)) for i in range(0, len(text), 8))
    return ipaddress.ip_address(packed)


def _covers(listening, wanted) -> bool:
    """Whether a listener on `listening` takes binds to `wanted` (same address, or all addresses)."""
    if listening.version == 6 and listening.ipv4_mapped:
        listening = listening.ipv4_mapped
    return listening == wanted or listening.is_unspecified or wanted.is_unspecified


def _pid_in_netns(netns: str) -> int:
    """A process inside the named network namespace (its /proc/PID/net shows that namespace)."""
    wanted = os.stat(f"/run/netns/{netns}").st_ino
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat(f"/proc/{p}/ns/net").st_ino == wanted:
                    return int(p)
            except OSError:
                continue
    raise FileNotFoundError(f"no process in network namespace {netns}")



# --- a Grinder agent's worker JVMs, seen from the agent's host ------------------------------------

AGENT_IDLE_WAIT_S = 15     # a stopped worker's JVM takes well under a second to exit


def _pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rpartition(b")")[2].split()[1])   # the field after the command's ")"
    except (OSError, ValueError, IndexError):
        return None


def holders(folder: Path) -> set[int]:
    """The processes holding a file under `folder` open (those /proc lets us see)."""
    prefix = os.path.realpath(folder) + os.sep
    found = set()
    for pid in _pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        if any((_readlink(f"/proc/{pid}/fd/{fd}") or "").startswith(prefix) for fd in fds):
            found.add(pid)
    return found


def grinder_agents(folder: Path) -> set[int]:
    """The Grinder agent JVMs working in `folder` (`esbperf agent` runs each in its own folder)."""
    folder = os.path.realpath(folder)
    found = set()
    for pid in _pids():
        if _readlink(f"/proc/{pid}/cwd") == folder:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"net.grinder.Grinder" in f.read():
                        found.add(pid)
            except OSError:
                continue
    return found


class StillWriting(EsbperfError):
    """An agent's logs were brought home, but its worker JVMs had not all ended (or something
    still held the logs open) within wait_workers_gone's wait: their last rows may be missing."""

    def __init__(self, agent: str, wait_s: float):
        super().__init__(f"agent {agent}: its workers had not ended, or still held their logs open, {wait_s:g} s "
                         "after the step (their last rows may be missing)")


def wait_workers_gone(agent_folder: Path, logs: Path, timeout: float = AGENT_IDLE_WAIT_S) -> bool:
    """Wait until the Grinder agent working in `agent_folder` has no worker JVM left (each exited
    and reaped by the agent) and no process holds a file under `logs` open; False after `timeout`.

    A worker tells the console it has FINISHED before it writes its final statistics and before its
    JVM's exit flushes the last block (up to 64 KB) of its data log: logs read then lose their last
    rows or end in a cut line. And its agent discards a start signal that reaches it before it has
    reaped the worker (Grinder drops pending starts once its workers are gone): a start sent then
    costs the runner a resend, 3 s later. Without /proc (not Linux) there is nothing to wait for."""
    deadline = time.monotonic() + timeout
    while True:
        agents = grinder_agents(agent_folder)
        workers = [pid for pid in _pids() if _parent(pid) in agents] if agents else []
        if not workers and not holders(logs):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)

def wait_logs_closed(logs: Path, timeout: float = AGENT_IDLE_WAIT_S) -> bool:
    """Wait until no process holds a file under `logs` open (warm workers close a step's logs
    and stay); False after `timeout`."""
    deadline = time.monotonic() + timeout
    while holders(logs):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ---- children that die with their launcher --------------------------------------------------
#
# A JVM must not outlive the esbperf command that started it, however the command ends: a
# Grinder agent in daemon mode would join the next console and take part in later runs, an
# echo or ESB would keep its port. Of the ways to tie them together, the parent-death signal
# (Linux prctl PR_SET_PDEATHSIG, set in the child before exec) is the robust one: the kernel
# sends it even when the command is SIGKILLed, whereas a shared process group only helps when
# the whole group is signalled, and a pipe to watch needs code in every JVM (Grinder, Camel and
# Synapse are not ours). It survives the exec of `ip netns exec` and `taskset` (not of set-uid
# programs). The signal is SIGKILL: nobody is left to escalate a JVM slow to shut down (Camel
# waits for its routes), and its port must be free for the next start.
# It fires when the *thread* that forked the child ends, so children are forked by a thread
# that lives as long as this process: the main thread, or `_launcher` for helper threads.
# Grinder's workers follow their agent by themselves: they stop when their standard input,
# the agent's control stream, closes (net.grinder.engine.process.GrinderProcess).
# A background launcher (the commands of a host started to outlive an ssh session) starts the
# esbperf command `detached`; that command still owns its JVM.

PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """The child's last step before exec: ask for SIGKILL when the parent dies, and die now if
    it already has (it may have gone between fork and prctl)."""
    def in_child() -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
    return in_child


class _Launcher:
    """A thread that lasts as long as this process and forks the children that helper threads
    ask for (a child forked by a helper thread would die with that thread)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="esbperf-launcher", daemon=True).start()

    def _serve(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                done.set_result(job())
            except BaseException as e:
                done.set_exception(e)

    def run(self, job: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((job, done))
        return done.result()


_launcher: _Launcher | None = None
_launcher_lock = threading.Lock()


def _in_a_lasting_thread(job: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    global _launcher
    if threading.current_thread() is threading.main_thread():
        return job()
    with _launcher_lock:
        _launcher = _launcher or _Launcher()
    return _launcher.run(job)


class Process:
    """One supervised child process. It dies with this one unless `detached` (see above)."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None, detached: bool = False):
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.cwd = cwd
        self.env = env
        self.detached = detached
        # The network namespace it runs in (Testbed.command puts `ip netns exec` first).
        self.netns = self.argv[3] if self.argv[:3] == ["ip", "netns", "exec"] and len(self.argv) > 3 else None
        self.popen: subprocess.Popen | None = None

    def start(self) -> "Process":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd:
            self.cwd.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **(self.env or {}))
        tie = None if self.detached or _prctl is None else _die_with_parent(os.getpid())

        def fork() -> subprocess.Popen:
            with open(self.log, "ab") as out:
                return subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, preexec_fn=tie)
        self.popen = fork() if tie is None else _in_a_lasting_thread(fork)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait for `ready()`; fail early, with the log's last lines, if the process dies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise EsbperfError(f"{self.name} exited (status {self.popen.returncode}) before {what}; "
                                   f"see {self.log}:\n{name_port_holders(self.tail(), self.netns)}")
            if ready():
                return
            time.sleep(0.1)
        raise EsbperfError(f"{self.name} did not get {what} within {timeout:.0f} s; see {self.log}:\n{self.tail()}")

    def start_until(self, ready: Callable[[], bool], timeout: float, what: str) -> "Process":
        """Start, and return once `ready()`; if it dies or times out, stop it and raise with its log's end."""
        self.start()
        try:
            self.wait_until(ready, timeout, what)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 10.0) -> None:
        if not self.alive():
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(5)


class ProcessGroup:
    """Processes started together and stopped together, last started first."""

    def __init__(self) -> None:
        self.processes: list[Process] = []

    def add(self, process: Process) -> Process:
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for p in reversed(self.processes):
            p.stop()
        self.processes.clear()

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()


@contextlib.contextmanager
def on_cores(cpus: Sequence[int] | None) -> Iterator[None]:
    """This process on `cpus` for the block, then back where it was (None: unchanged). The runner
    is the client host's program: on one machine it keeps to the client's cores as its console,
    agents and workers do."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def raise_on_sigterm() -> None:
    """Make SIGTERM, and SIGHUP (its terminal closed), stop a foreground command the way Ctrl-C
    does, so its children are stopped gently; SIGHUP stays ignored under nohup."""
    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, terminate)


def run_foreground(process: Process, banner: Callable[[], None]) -> int:
    """For `esbperf console|echo|esb|…`: start, show where it listens, wait; Ctrl-C stops it."""
    raise_on_sigterm()
    process.start()
    try:
        banner()
        return process.popen.wait()
    except KeyboardInterrupt:
        process.stop()
        return 0
    finally:
        process.stop()


if __name__ == "__main__":   # on a load host, over ssh: python3 -m esbperf.core.procs AGENT_FOLDER LOGS [--logs-only]
    if sys.argv[3:] == ["--logs-only"]:   # warm workers: they stay; their logs of the step must be closed
        sys.exit(0 if wait_logs_closed(Path(sys.argv[2])) else 1)
    sys.exit(0 if wait_workers_gone(Path(sys.argv[1]), Path(sys.argv[2])) else 1)
