"""Reaching a testbed host over ssh, as a person would: plain OpenSSH with the user's own keys and
ssh config (`ssh:` is `user@host` or an alias of it; the testbed's `ssh_config:` is passed as -F),
never a password (BatchMode), and a short ConnectTimeout so a dead host fails in seconds.

On the host, esbperf lives in the host's install folder (`dir:`, relative to the login's home
unless absolute), put there by `esbperf testbed install`: the project, its light Python
dependencies in `pylib/`, and the host's state (pid files, logs, agents' folders) in `state/`.

`SshAgents` is the runner's fetcher (esbperf/run/collect.py) for the agents of one ssh host: it copies
a step's log folder home with rsync and removes it on the host once copied.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from esbperf.core.errors import EsbperfError
from esbperf.core.procs import AGENT_IDLE_WAIT_S, StillWriting
from esbperf.core.topology import Testbed

CONNECT_TIMEOUT_S = 5
STATE = "state"          # the host's state folder, inside its install folder
PYLIB = "pylib"          # the light Python dependencies (click, PyYAML), inside the install folder
PYTHON = "python3"       # the host's Python (3.11+; `testbed install` checks it)
UNREACHABLE = 255        # ssh's own exit status: it could not connect or log in


def options(testbed: Testbed) -> list[str]:
    """ssh's options for every host of the testbed."""
    opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "LogLevel=ERROR",
            "-o", "ServerAliveInterval=10"]
    if testbed.ssh_config:
        if not testbed.ssh_config.is_file():
            raise EsbperfError(f"{testbed.path}: ssh_config {testbed.ssh_config}: no such file")
        opts += ["-F", str(testbed.ssh_config)]
    if testbed.emulated:
        from esbperf.testbed import sshd

        opts += sshd.client_options(testbed)
    return opts


class Ssh:
    """One host reached over ssh, with esbperf installed in its folder."""

    def __init__(self, testbed: Testbed, role: str):
        host = testbed.hosts[role]
        if not host.ssh:
            raise EsbperfError(f"{testbed.path}: hosts.{role} has no ssh:")
        self.role = role
        self.dest = host.ssh
        self.dir = host.dir
        self.cpus = host.cpus
        self.options = options(testbed)

    def __str__(self) -> str:
        return f"{self.role} ({self.dest})"

    def argv(self, command: str) -> list[str]:
        return ["ssh", *self.options, self.dest, command]

    def rsh(self) -> str:
        """The ssh command for rsync's -e."""
        return shlex.join(["ssh", *self.options])

    def path(self, *parts: str) -> str:
        """A path on the host (relative ones: to the login's home, where ssh starts)."""
        return "/".join([self.dir, *parts])

    def remote(self, relative: str) -> str:
        """A path on the host as rsync names it."""
        return f"{self.dest}:{self.path(relative)}"

    def esbperf_python(self, args: list[str], pinned: bool = False) -> str:
        """A shell command that runs `python3 ARGS` in the install folder with the installed esbperf
        importable (pinned: on the host's `cpus`, what its services run on)."""
        pin = ["taskset", "-c", ",".join(map(str, self.cpus))] if pinned and self.cpus else []
        # Absolute ($PWD after the cd): the services it starts run in the state folder.
        return (f"cd {shlex.quote(self.dir)} && PYTHONPATH=\"$PWD/{PYLIB}:$PWD\" exec "
                + shlex.join([*pin, PYTHON, *args]))

    def run(self, command: str, input: str | bytes | None = None, timeout: float = 180,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a shell command on the host. An unreachable host, or (check) a command that fails,
        raises with one line naming the host and the cause."""
        try:
            result = subprocess.run(self.argv(command), input=input, capture_output=True, timeout=timeout,
                                    text=not isinstance(input, bytes))
        except subprocess.TimeoutExpired:
            raise EsbperfError(f"{self}: no answer over ssh within {timeout:.0f} s") from None
        except FileNotFoundError:
            raise EsbperfError("ssh is not installed here (Debian: apt-get install openssh-client)") from None
        if result.returncode == UNREACHABLE:
            raise EsbperfError(f"{self}: cannot reach it over ssh: {last_line(result.stderr) or 'ssh failed'}")
        if check and result.returncode != 0:
            raise EsbperfError(f"{self}: {last_line(result.stderr) or f'exit status {result.returncode}'}")
        return result


def last_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def rsync(argv: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["rsync", *argv], capture_output=True, text=True)
    except FileNotFoundError:
        raise EsbperfError(f"{what}: rsync is not installed here (Debian: apt-get install rsync)") from None


class SshAgents:
    """The runner's fetcher (collect.Fetcher) for the agents on one ssh host: an agent named after
    the host's role (`load2`, `load2-1`) keeps its logs in <install folder>/state/agents/<agent>/."""

    def __init__(self, testbed: Testbed, role: str):
        self.ssh = Ssh(testbed, role)
        self.role = role

    def serves(self, agent: str) -> bool:
        return agent == self.role or agent.startswith(f"{self.role}-")

    def __call__(self, agent: str, relative: str, into: Path, workers_stay: bool = False) -> bool:
        if not self.serves(agent):
            return False
        folder = f"{STATE}/agents/{agent}"
        exists = self.ssh.run(f"test -d {shlex.quote(self.ssh.path(folder, relative))}", check=False)
        if exists.returncode != 0:
            return False
        into.mkdir(parents=True, exist_ok=True)
        # The workers' JVMs may still be writing their last rows (esbperf/core/procs.py, wait_workers_gone).
        waited = self.ssh.run(self.ssh.esbperf_python(["-m", "esbperf.core.procs", folder, f"{folder}/{relative}",
                                                       *(["--logs-only"] if workers_stay else [])]), check=False)
        copied = rsync(["-a", "--remove-source-files", "-e", self.ssh.rsh(),
                        self.ssh.remote(f"{folder}/{relative}") + "/", f"{into}/"], f"agent {agent}")
        if copied.returncode != 0:
            raise EsbperfError(f"{self.ssh}: agent {agent}'s logs could not be copied: {last_line(copied.stderr)}")
        # The emptied folders go too, up to the agent's folder (rmdir -p stops at the first that is not empty).
        self.ssh.run(f"cd {shlex.quote(self.ssh.path(folder))} && rmdir -p {shlex.quote(relative)} 2>/dev/null; true")
        if waited.returncode != 0:
            raise StillWriting(agent, AGENT_IDLE_WAIT_S)
        return True


def agent_fetchers(testbed: Testbed) -> list[SshAgents]:
    """A fetcher for every load host (client and load*) reached over ssh."""
    return [SshAgents(testbed, role) for role in testbed.load_roles if testbed.hosts[role].ssh]


