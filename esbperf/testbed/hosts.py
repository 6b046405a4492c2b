"""Every service of a testbed started on its host, in order, each checked ready —
the echo back ends on ws1-ws3, the ESB under test on esb (and the floors, plain reverse proxies
to compare it with, when the testbed gives them a port), the console and an agent on the client,
an agent on each load host (named after its role, so the runner knows where its logs are), and a
monitor on every host with a monitor_port. `esbperf testbed start|stop|status` and `esbperf demo
--ssh` use it; the plain demo starts the same plan of services as child processes (services.py).

Where a service runs: a host with `ssh:` is reached over ssh and runs the esbperf installed in its
folder (`esbperf testbed install`), with its state (pid files, logs, agents' folders) in
<dir>/state; a host without runs it on this machine — inside its network namespace when the
testbed is emulated — with its state in <state>/services/<testbed>/<role> (or the caller's
folder). Either way the host's own `esbperf.testbed.background` starts each service detached, with
a pid file, and stops exactly those again by their pid files.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.roles import BACKENDS
from esbperf.core.topology import Testbed
from esbperf.services import console
from esbperf.services.agent import WORKER_MAIN
from esbperf.services.echo import MAIN_CLASS as ECHO_MAIN
from esbperf.services.esb import ENGINES, FLOORS, setting_arguments
from esbperf.testbed import ssh as sshmod

# An engine's first start on a busy 2-core machine can take a while (Spring Integration's most).
START_TIMEOUT_S = max(120, *(e.start_timeout_s for e in ENGINES.values()))
AGENT_WAIT_S = 60
REMOTE_TESTBED = "testbed.yaml"   # the testbed file as `testbed start` copies it into an ssh host's state


@dataclass(frozen=True)
class Service:
    role: str
    name: str                          # unique on its host: echo, esb-camel, esb-nginx, console, agent, monitor
    argv: tuple[str, ...]              # the esbperf command, `esbperf` first
    ready: tuple[str, int] | None      # the address that answers once it is up (None: an agent)

    @property
    def kind(self) -> str:
        return self.argv[1]

    @property
    def where(self) -> str:
        return f"{self.ready[0]}:{self.ready[1]}" if self.ready else f"agent {self.agent_name}"

    @property
    def agent_name(self) -> str:
        return self.role


def engines_on_esb_host(testbed: Testbed, esb: str | Sequence[str] | None, floors: bool) -> list[str]:
    """What runs on the esb host: `esb` (one engine, or several: a round measures them all;
    default: the first of hosts.esb.esb_ports), and with `floors` every floor the testbed gives a
    port, so a run can draw them beside it."""
    ports = testbed.hosts["esb"].esb_ports
    chosen = [esb] if isinstance(esb, str) else list(esb) if esb else list(ports)[:1]
    return chosen + [name for name in ports if floors and name in FLOORS and name not in chosen]


def plan(testbed: Testbed, esb: str | Sequence[str] | None, testbed_arg: Callable[[str], str], watch: bool = True,
         floors: bool = False, settings: dict[str, dict[str, object]] | None = None) -> list[Service]:
    """Every service of the testbed in the order they start, host by host: the back ends, the ESB
    (with `floors`: then each floor with a port in the testbed), the client (console first, then
    its agent), the load hosts; each host's monitor after its services (watch: the monitor also
    samples the host's service processes: on the esb host, those of every engine it has a port
    for; on the client and load hosts, the agents' worker JVMs). `testbed_arg(role)`: the --testbed argument as that host sees the file.
    `settings`: by engine, the settings it starts with (esb.settings_for), on its command line, so a
    restart (a fork, `restart: per-step`) starts it with the same."""
    esbs = engines_on_esb_host(testbed, esb, floors)
    services = []
    for role in [*BACKENDS, "esb", "client", *(r for r in testbed.load_roles if r != "client")]:
        host = testbed.hosts[role]
        f = ["--testbed", testbed_arg(role)]
        if role in BACKENDS:
            services.append(Service(role, "echo", ("esbperf", "echo", "--id", role, "--listen",
                                                   f"{host.address}:{host.echo_port}", "--runtime", testbed.echo_runtime),
                                    (host.address, host.echo_port)))
        elif role == "esb":
            services += [Service(role, f"esb-{name}", ("esbperf", "esb", name, *f,
                                                       *setting_arguments((settings or {}).get(name, {}))),
                                 (host.address, host.esb_ports[name]))
                         for name in esbs]
        elif role == "client":
            services.append(Service(role, "console", ("esbperf", "console", *f), (testbed.api_host, testbed.api_port)))
        if role in testbed.load_roles:
            services.append(Service(role, "agent", ("esbperf", "agent", *f, "--count", "1", "--host-id", role), None))
        if host.monitor_port:
            argv = ["esbperf", "monitor", "--role", role, *f]
            # The processes of what the host serves, found by their command lines: on the esb host
            # every engine with a port there, also one started by hand later (an engine the registry
            # does not know, a team's own ESB, is not watched).
            matches = [ENGINES[name].match for name in host.esb_ports if name in ENGINES] if role == "esb" else \
                [f"{ECHO_MAIN} --id {role}"] if role in BACKENDS else \
                [WORKER_MAIN] if role in testbed.load_roles else []
            if watch:
                for text in matches:
                    argv += ["--match", text]
            services.append(Service(role, "monitor", tuple(argv), (host.address, host.monitor_port)))
    return services


def host_commands(testbed: Testbed, file_arg: str, esb: str | None = None,
                  settings: dict[str, dict[str, object]] | None = None) -> dict[str, list[list[str]]]:
    """What to start by hand on each host, in order (wrapped for the namespaces and CPUs when the
    testbed is emulated): what `esbperf testbed commands` prints."""
    commands: dict[str, list[list[str]]] = {}
    # Each monitor watches its host's service JVMs (--match), so a run started by hand gets their CPU too.
    for s in plan(testbed, esb, lambda role: file_arg, floors=True, settings=settings):
        commands.setdefault(s.role, []).append(testbed.command(s.role, list(s.argv)))
    return commands


def local_state(testbed: Testbed, role: str, root: Path | None = None) -> Path:
    """The state folder of the services of `role` when they run on this machine."""
    return (root or state_dir() / "services" / testbed.name) / role


def console_token(testbed: Testbed, root: Path | None = None) -> Path | None:
    """The token file of the console `start` ran on this machine (None: it did not run one here)."""
    if testbed.client.ssh:
        return None
    path = console.token_file(local_state(testbed, "client", root) / "console")
    return path if path.is_file() else None


def local_agent_states(testbed: Testbed, root: Path | None = None) -> list[Path]:
    """The state folders of the agents this launcher runs on this machine (for the runner)."""
    return [local_state(testbed, r, root) for r in testbed.load_roles if not testbed.hosts[r].ssh]


# --- one host ----------------------------------------------------------------------------

class HostAccess:
    """How to ask a host's `esbperf.testbed.background` to start, stop or list its services."""

    def __init__(self, testbed: Testbed, role: str, root: Path | None):
        self.testbed = testbed
        self.role = role
        self.root = root
        host = testbed.hosts[role]
        self.ssh = sshmod.Ssh(testbed, role) if host.ssh else None
        self.state = sshmod.STATE if self.ssh else str(local_state(testbed, role, root))
        self.label = f"{role} ({host.ssh or host.address})"

    def testbed_arg(self) -> str:
        return REMOTE_TESTBED if self.ssh else str(self.testbed.path)

    def prepare(self) -> None:
        """An ssh host: check esbperf is installed there, and give it the testbed file."""
        if not self.ssh:
            return
        from esbperf.testbed.install import MARKER

        s = self.ssh
        script = (f"test -f {s.path(MARKER)} || {{ echo 'esbperf is not installed in {s.dir}: run "
                  f"`esbperf testbed install` first' >&2; exit 3; }}; mkdir -p {s.path(sshmod.STATE)} && "
                  f"cat > {s.path(sshmod.STATE, REMOTE_TESTBED)}")
        s.run(script, input=self.testbed.path.read_bytes(), timeout=30)

    def request(self, args: list[str], start: bool = False, timeout: float = 60) -> object:
        """Run `python3 -m esbperf.testbed.background ARGS` on the host; its JSON answer."""
        module = ["-m", "esbperf.testbed.background", *args[:1], "--state", self.state, *args[1:]]
        try:
            if self.ssh:
                result = self.ssh.run(self.ssh.esbperf_python(module, pinned=start), timeout=timeout, check=False)
            else:
                argv = [sys.executable, *module]
                if start:   # in the host's namespace, on its CPUs
                    argv = self.testbed.command(self.role, argv)
                result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EsbperfError(f"{self.label}: no answer within {timeout:.0f} s") from None
        if result.returncode != 0:
            cause = sshmod.last_line(result.stderr).removeprefix("esbperf: error: ")
            raise EsbperfError(f"{self.label}: {cause or f'exit status {result.returncode}'}")
        return json.loads(result.stdout)


def esb_restarter(testbed: Testbed, needed: bool, root: Path | None = None) -> Callable[[str], int] | None:
    """For a plan with `restart: per-step` or several forks (`needed`): restart an engine that
    `start` started on the esb host, by name, or a back end by its role (ws1..ws3), and return the
    new pid of its service (None: no ESB was started that way)."""
    if not needed:
        return None
    host = HostAccess(testbed, "esb", root)
    try:
        running = {s["name"] for s in host.request(["list"], timeout=30) if s["alive"]}
    except EsbperfError:
        return None
    if not any(name.startswith("esb-") for name in running):
        return None

    def restart_esb(name: str) -> int:
        if name in BACKENDS:
            return HostAccess(testbed, name, root).request(["restart", "--name", "echo", "--timeout",
                                                            str(START_TIMEOUT_S)], start=True,
                                                           timeout=START_TIMEOUT_S + 60)["pid"]
        if f"esb-{name}" not in running:
            raise EsbperfError(f"{host.label}: `esbperf testbed start` started {', '.join(sorted(running))}, "
                               f"not esb {name}; start it with --esb {name}")
        return host.request(["restart", "--name", f"esb-{name}", "--timeout", str(START_TIMEOUT_S)],
                            start=True, timeout=START_TIMEOUT_S + 60)["pid"]
    return restart_esb


def _hosts(testbed: Testbed, root: Path | None) -> dict[str, HostAccess]:
    return {role: HostAccess(testbed, role, root) for role in testbed.hosts}


def _each(hosts: dict[str, HostAccess], call: Callable[[HostAccess], object]) -> dict[str, object]:
    """call(host) for every host at once (they are independent machines); a failure is its result."""
    def one(host: HostAccess) -> object:
        try:
            return call(host)
        except EsbperfError as e:
            return e
    with ThreadPoolExecutor(max_workers=len(hosts) or 1) as pool:
        return dict(zip(hosts, pool.map(one, hosts.values())))


# --- start, stop, status -----------------------------------------------------------------

@dataclass(frozen=True)
class Started:
    role: str
    name: str
    where: str
    pid: int

    def line(self) -> str:
        return f"{self.role:8} {self.name:22} {self.where:24} pid {self.pid}"


def start(testbed: Testbed, esb: str | None = None, echo: Callable[[str], None] = print,
          root: Path | None = None, settings: dict[str, dict[str, object]] | None = None) -> list[Started]:
    """Start every service of the testbed on its host; print a line per service as it answers.
    On any failure (a host that cannot be reached, a port in use, a service that dies on start)
    stop what this call started and raise one line naming the host and the cause. `settings`: by
    engine, the settings it starts with."""
    esb = esb or next(iter(testbed.hosts["esb"].esb_ports), None)   # as `testbed commands` chooses
    if esb and esb not in testbed.hosts["esb"].esb_ports:
        raise EsbperfError(f"{testbed.path}: hosts.esb.esb_ports has no port for '{esb}' "
                           f"(known: {', '.join(testbed.hosts['esb'].esb_ports) or 'none'})")
    hosts = _hosts(testbed, root)
    # Every ssh host reached (and given the testbed file) before anything starts anywhere.
    for role, outcome in _each({r: h for r, h in hosts.items() if h.ssh}, HostAccess.prepare).items():
        if isinstance(outcome, EsbperfError):
            raise outcome
    started: list[Started] = []
    try:
        for service in plan(testbed, esb, lambda role: hosts[role].testbed_arg(), floors=True, settings=settings):
            host = hosts[service.role]
            ready = ["--ready", service.where, "--timeout", str(START_TIMEOUT_S)] if service.ready else []
            record = host.request(["start", "--name", service.name, *ready, "--", *service.argv],
                                  start=True, timeout=START_TIMEOUT_S + 30)
            started.append(Started(service.role, service.name, service.where, record["pid"]))
            if service.kind == "agent":
                _wait_for_agent(testbed, host, service)
            echo(started[-1].line())
        return started
    except BaseException:
        _stop_started(hosts, started)
        raise


def _wait_for_agent(testbed: Testbed, host: HostAccess, service: Service) -> None:
    """An agent is ready when the console lists it; fail early if it dies."""
    client = console.control_client(testbed, console_token(testbed, host.root))
    deadline = time.monotonic() + AGENT_WAIT_S
    checked = time.monotonic()
    while not any(a.get("name") == service.agent_name for a in client.agents()):
        if time.monotonic() > checked + 2:   # over ssh this costs a login: not every poll
            checked = time.monotonic()
            mine = [s for s in host.request(["list"]) if s["name"] == service.name]
            if mine and not mine[0]["alive"]:
                raise EsbperfError(f"{host.label}: agent exited on start: {mine[0]['last_line'] or 'no output'} "
                                   f"(log {mine[0]['log']})")
        if time.monotonic() > deadline:
            raise EsbperfError(f"{host.label}: agent {service.agent_name} did not connect to the console at "
                               f"{testbed.client.address}:{testbed.console_port} within {AGENT_WAIT_S} s")
        time.sleep(0.3)


def _stop_started(hosts: dict[str, HostAccess], started: list[Started]) -> None:
    by_role: dict[str, list[str]] = {}
    for s in started:
        by_role.setdefault(s.role, []).append(s.name)
    _each({r: hosts[r] for r in by_role}, lambda h: h.request(["stop", *by_role[h.role]], timeout=90))


def stop(testbed: Testbed, root: Path | None = None) -> tuple[list[str], list[str]]:
    """Stop every service started on the testbed's hosts, by their pid files. Returns (lines,
    problems): a line per service stopped, and one per host that could not be asked."""
    outcomes = _each(_hosts(testbed, root), lambda h: h.request(["stop"], timeout=90))
    lines, problems = [], []
    for role, outcome in outcomes.items():
        if isinstance(outcome, EsbperfError):
            problems.append(str(outcome))
            continue
        for s in outcome:
            lines.append(f"{role:8} {s['name']:22} pid {s['pid']} {s['was']}")
    return lines, problems


def status(testbed: Testbed, root: Path | None = None) -> dict[str, list[dict] | str]:
    """What runs where: per host, its services (name, pid, alive, address, log; why a dead one
    ended), or why the host could not be asked."""
    outcomes = _each(_hosts(testbed, root), lambda h: h.request(["list"], timeout=30))
    return {role: str(o) if isinstance(o, EsbperfError) else o for role, o in outcomes.items()}
