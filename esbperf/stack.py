"""Every service of a testbed on this machine, started in order and checked ready: the echo back
ends, the ESB under test, the console and its agent, and a monitor per host. On an emulated
testbed each runs inside its host's network namespace (the commands of `esbperf testbed
commands`); the caller, in the root namespace, reaches them all through the bridge."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from esbperf import procs
from esbperf import console
from esbperf.echo import MAIN_CLASS as ECHO_MAIN
from esbperf.testbed import host_commands
from esbperf.topology import Testbed

# What each host's monitor watches besides the whole host: the service JVM found by its command line.
ESB_MAIN = {"camel": "org.apache.camel.main.Main", "synapse": "org.apache.synapse.SynapseServer"}
START_TIMEOUT_S = 120   # an ESB's first start on a busy 2-core machine can take a while


def _service_port(testbed: Testbed, role: str, kind: str, esb: str | None) -> tuple[str, int] | None:
    """The address:port that shows a command's service is up (None: checked another way)."""
    host = testbed.hosts[role]
    return {
        "echo": lambda: (host.address, host.echo_port),
        "esb": lambda: (host.address, host.esb_ports[esb]),
        "monitor": lambda: (host.address, host.monitor_port),
        "console": lambda: (testbed.api_host, testbed.api_port),
    }.get(kind, lambda: None)()


def state_dir_of(workdir: Path, role: str) -> Path:
    """The state folder (ESBPERF_STATE) of the services of `role` started by `start`."""
    return workdir / role


def state_dirs(workdir: Path) -> list[Path]:
    """The state folders of every role's services started by `start` (where their logs, the
    agent's working folder and the GC logs are)."""
    return [state_dir_of(workdir, role) for role in ("client", "esb", "ws1", "ws2", "ws3")]


def console_token_file(workdir: Path) -> Path:
    """The token file of the console `start` starts (in the client's state folder)."""
    return console.token_file(state_dir_of(workdir, "client") / "console")


def esb_restarter(group: procs.ProcessGroup, testbed: Testbed) -> Callable[[str], int]:
    """Restart the ESB that `start` started (a plan with `restart: per-step`): the same command,
    stopped and started again, ready when its port answers; returns the pid of the ESB's JVM."""
    def restart(esb: str) -> int:
        [process] = [p for p in group.processes if p.name == "esb esb"]
        host = testbed.hosts["esb"]
        process.stop()
        process.start()
        process.wait_until(lambda: procs.port_open(host.address, host.esb_ports[esb]), START_TIMEOUT_S,
                           f"answering at {host.address}:{host.esb_ports[esb]}")
        return procs.listener_pid(host.address, host.esb_ports[esb], process.netns) or process.pid
    return restart


def start(testbed: Testbed, esb: str | None, workdir: Path, echo=print) -> procs.ProcessGroup:
    """Start everything; on any failure stop what was started and raise."""
    esb = esb or next(iter(testbed.hosts["esb"].esb_ports), None)   # as host_commands chooses
    group = procs.ProcessGroup()
    try:
        commands = host_commands(testbed, str(testbed.path), esb)
        for role in ("ws1", "ws2", "ws3", "esb", "client"):
            for argv in commands[role]:
                kind = argv[argv.index("esbperf") + 1]   # echo, esb, console, agent or monitor
                argv = [part for token in argv for part in ([sys.executable, "-m", "esbperf"] if token == "esbperf" else [token])]
                if kind == "monitor":
                    watch = (ESB_MAIN.get(esb or "", "") if role == "esb"
                             else f"{ECHO_MAIN} --id {role}" if role.startswith("ws") else "")
                    if watch:
                        argv += ["--match", watch]
                name = f"{kind} {role}"
                process = group.add(procs.Process(name, argv, workdir / f"{role}-{kind}.log", cwd=workdir,
                                                  env={"ESBPERF_STATE": str(state_dir_of(workdir, role))}))
                process.start()
                where = _service_port(testbed, role, kind, esb)
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
