"""Child processes that esbperf starts and must stop: JVMs for the console, agents, echo
services, ESBs and monitors. Each runs in its own process group with its output in a log
file; stopping sends SIGTERM to the group, then SIGKILL after a grace period."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from esbperf.errors import EsbperfError


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
    """Fail with a clear message if host:port cannot be bound (in use, or not our address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise EsbperfError(f"cannot listen on {host}:{port} for the {what}: {e.strerror}") from None


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class Process:
    """One supervised child process."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, cwd: Path | None = None,
                 env: dict[str, str] | None = None):
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.cwd = cwd
        self.env = env
        self.popen: subprocess.Popen | None = None

    def start(self) -> "Process":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd:
            self.cwd.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **(self.env or {}))
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
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
                                   f"see {self.log}:\n{self.tail()}")
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


def raise_on_sigterm() -> None:
    """Make SIGTERM stop a foreground command the way Ctrl-C does, so its children are stopped."""
    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)


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
