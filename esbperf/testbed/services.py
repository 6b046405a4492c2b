"""Every service of a testbed on this machine, started in order and checked ready: the echo back
ends, the ESB under test, the console and its agent, and a monitor per host. On an emulated
testbed each runs inside its host's network namespace (the commands of `esbperf testbed
commands`); the caller, in the root namespace, reaches them all through the bridge."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

from esbperf.core import procs
from esbperf.core import roles
from esbperf.core.topology import Testbed
from esbperf.services import console
from esbperf.testbed import hosts

START_TIMEOUT_S = hosts.START_TIMEOUT_S


def state_dir_of(workdir: Path, role: str) -> Path:
    """The state folder (ESBPERF_STATE) of the services of `role` started by `start`."""
    return workdir / role


def state_dirs(workdir: Path) -> list[Path]:
    """The state folders of every role's services started by `start` (where their logs, the
    agent's working folder and the GC logs are)."""
    return [state_dir_of(workdir, role) for role in roles.FIXED]


def console_token_file(workdir: Path) -> Path:
    """The token file of the console `start` starts (in the client's state folder)."""
    return console.token_file(state_dir_of(workdir, "client") / "console")


def process_name(service: hosts.Service) -> str:
    """A started service's name in the group (and its log's, `<role>-<name>.log`): `echo ws1`,
    `esb-camel esb`, `console client`."""
    return f"{service.name} {service.role}"


def esb_restarter(group: procs.ProcessGroup, testbed: Testbed) -> Callable[[str], int]:
    """Restart an engine that `start` started by its name, or a back end by its role (ws1..ws3): a
    plan with `restart: per-step`, or each fork of a plan of several. The same command, stopped and
    started again, ready when its port answers; returns the pid of the process that listens."""
    def restart(name: str) -> int:
        if name in roles.BACKENDS:
            wanted, host = f"echo {name}", testbed.hosts[name]
            port = host.echo_port
        else:
            wanted, host = f"esb-{name} esb", testbed.hosts["esb"]
            port = host.esb_ports[name]
        [process] = [p for p in group.processes if p.name == wanted]
        process.stop()
        process.start()
        process.wait_until(lambda: procs.port_open(host.address, port), START_TIMEOUT_S,
                           f"answering at {host.address}:{port}")
        return procs.listener_pid(host.address, port, process.netns) or process.pid
    return restart


def start(testbed: Testbed, esb: str | Sequence[str] | None, workdir: Path, echo=print,
          settings: dict[str, dict[str, object]] | None = None) -> procs.ProcessGroup:
    """Start everything, with on the esb host the engine `esb` (or each of several: a round starts
    every engine it measures at once), each with its `settings` (by engine); on any failure stop
    what was started and raise. A restart (esb_restarter) runs the same command: the same settings."""
    esb = esb or next(iter(testbed.hosts["esb"].esb_ports), None)   # as host_commands chooses
    group = procs.ProcessGroup()
    try:
        for service in hosts.plan(testbed, esb, lambda role: str(testbed.path), settings=settings):
            role = service.role
            argv = [part for token in testbed.command(role, list(service.argv))
                    for part in ([sys.executable, "-m", "esbperf"] if token == "esbperf" else [token])]
            name = process_name(service)
            process = group.add(procs.Process(name, argv, workdir / f"{role}-{service.name}.log", cwd=workdir,
                                              env={"ESBPERF_STATE": str(state_dir_of(workdir, role))}))
            process.start()
            where = service.ready
            if where:
                process.wait_until(lambda: procs.port_open(*where), START_TIMEOUT_S, f"answering at {where[0]}:{where[1]}")
            else:   # the agent: ready when the console sees it
                client = console.control_client(testbed, console_token_file(workdir))
                process.wait_until(lambda: bool(client.agents()), 60, "connecting to the console")
            echo(f"started {name}" + (f" at {where[0]}:{where[1]}" if where else ""))
        return group
    except BaseException:
        group.stop_all()
        raise
