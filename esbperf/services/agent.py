"""Grinder agents on the client host. Each agent is one JVM with its own working folder
(file cache, logs) that connects to the console and, when told, starts worker JVMs.
Agents run in daemon mode, so they reconnect when the console restarts."""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time
from pathlib import Path

import click

from esbperf.core import procs
from esbperf.core import topology
from esbperf.core.config import AgentConfig, state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import GRINDER_HOME, HTTP_CLIENT, ROOT, ensure_built
from esbperf.core.topology import testbed_option

# The main class of the worker JVMs an agent starts: the client's monitor watches them by it.
WORKER_MAIN = "net.grinder.engine.process.WorkerProcessEntryPoint"
# What the workers' class-data archive holds (class_archive), and how long making it may take.
ARCHIVED_IMPORTS = ROOT / "grinder-scripts" / "worker_classes.py"
ARCHIVE_TIMEOUT_S = 120


def _accepts(java: str, option: str) -> bool:
    return subprocess.run([java, option, "-version"], capture_output=True).returncode == 0


def worker_jvm_args(java: str, cfg: AgentConfig) -> list[str]:
    """The workers' JVM options. Grinder calls Thread.yield() before every timed section; on a
    busy host each yield can cost a whole scheduler time slice between transactions, so we make
    yield a no-op where the JVM allows it (HotSpot up to JDK 22: -XX:+DontYieldALot)."""
    extra = ["-XX:+DontYieldALot"] if _accepts(java, "-XX:+DontYieldALot") else []
    return cfg.worker_jvm_args + extra


def class_archive(java: str, classpath: str, worker_args: list[str], folder: Path) -> list[str]:
    """The workers' class-data sharing (CDS) option, `-XX:SharedArchiveFile=…`: every step starts
    new worker JVMs, and each spends about 2 s of CPU loading and verifying Jython, Grinder and the
    client; from an archive of those classes, about a quarter less (docs/benchmarks/). The archive
    is made once per JVM, classpath and options by a JVM that imports what a worker does
    (ARCHIVED_IMPORTS), and kept in `folder`. [] when it cannot be made: the workers then load their
    classes as before, and so they do when the JVM finds the archive stale (-Xshare:auto)."""
    jars = sorted(GRINDER_HOME.lib.glob("*.jar")) + [HTTP_CLIENT.jar]
    facts = [os.path.realpath(java), os.stat(os.path.realpath(java)).st_mtime_ns, classpath, worker_args,
             [(str(j), j.stat().st_size, j.stat().st_mtime_ns) for j in jars if j.exists()],
             ARCHIVED_IMPORTS.read_bytes()]
    archive = folder / f"workers-{hashlib.sha256(repr(facts).encode()).hexdigest()[:16]}.jsa"
    if not archive.exists():
        folder.mkdir(parents=True, exist_ok=True)
        making = archive.with_suffix(f".{os.getpid()}.tmp")
        try:
            done = subprocess.run([java, f"-XX:ArchiveClassesAtExit={making}", *worker_args,
                                   f"-Dpython.cachedir={folder / 'jython-cache'}", "-classpath", classpath,
                                   "org.python.util.jython", str(ARCHIVED_IMPORTS)],
                                  capture_output=True, timeout=ARCHIVE_TIMEOUT_S, cwd=folder)
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is None or done.returncode != 0 or not making.exists():
            making.unlink(missing_ok=True)
            return []
        for old in folder.glob("workers-*.jsa"):
            old.unlink(missing_ok=True)
        os.replace(making, archive)
    return [f"-XX:SharedArchiveFile={archive}"]


def agent_processes(console_host: str, console_port: int, count: int = 1, host_id: str | None = None,
                    cfg: AgentConfig | None = None, workdir: Path | None = None) -> list[procs.Process]:
    """`count` agent processes (not started) that connect to console_host:console_port."""
    if count < 1:
        raise EsbperfError(f"--count must be at least 1, got {count}")
    cfg = cfg or AgentConfig.load()
    ensure_built(GRINDER_HOME, HTTP_CLIENT)
    # Workers inherit the agent's classpath: Grinder, and the scripts' HTTP client.
    classpath = os.pathsep.join([str(GRINDER_HOME.grinder_jar), str(HTTP_CLIENT.jar)])
    workdir = workdir or state_dir() / "agents"
    prefix = host_id or socket.gethostname().split(".")[0]
    java = procs.java_executable()
    worker_args = worker_jvm_args(java, cfg)
    worker_args += class_archive(java, classpath, worker_args, workdir / "class-archive")
    processes = []
    for k in range(1, count + 1):
        name = f"{prefix}-{k}" if count > 1 or not host_id else prefix
        folder = workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        properties = {
            "grinder.consoleHost": console_host,
            "grinder.consolePort": console_port,
            "grinder.hostID": name,
            "grinder.logDirectory": folder / "logs",
            # Workers run on the agent's own JVM, not whatever `java` is first on PATH.
            "grinder.jvm": java,
            "grinder.jvm.arguments": " ".join(worker_args + [f"-Dpython.cachedir={folder / 'jython-cache'}"]),
        }
        (folder / "agent.properties").write_text("".join(f"{k_}={v}\n" for k_, v in properties.items()))
        argv = [java, *cfg.agent_jvm_args, "-cp", classpath, "net.grinder.Grinder",
                "-daemon", str(cfg.reconnect_seconds), "agent.properties"]
        processes.append(procs.Process(f"agent {name}", argv, folder / "agent.log", cwd=folder))
    return processes


def connected(process: procs.Process) -> bool:
    return "connected to console" in process.tail(50)


@click.command()
@testbed_option
@click.option("--console", "console_address", metavar="HOST:PORT",
              help="Console to connect to (default: the testbed's client host and console port).")
@click.option("--count", default=1, show_default=True, help="Number of agents to start on this host.")
@click.option("--host-id", help="Agent name (grinder.hostID); numbered when --count > 1. Default: this host's name.")
def agent(testbed_name: str | None, console_address: str | None, count: int, host_id: str | None) -> None:
    """Start Grinder agents that connect to the console; Ctrl-C stops them and their workers."""
    if console_address:
        host, _, port = console_address.rpartition(":")
        if not host or not port.isdigit():
            raise EsbperfError(f"--console must be HOST:PORT, got {console_address!r}")
        console_host, console_port = host.strip("[]"), int(port)
    else:
        testbed = topology.load(testbed_name)
        console_host, console_port = testbed.client.address, testbed.console_port
    group = procs.ProcessGroup()
    try:
        for p in agent_processes(console_host, console_port, count, host_id):
            group.add(p).start()
        for p in group.processes:
            click.echo(f"{p.name}: connecting to the console at {console_host}:{console_port} "
                       f"(reconnects if it restarts); log {p.log}")
        click.echo("agents: Ctrl-C to stop")
        procs.raise_on_sigterm()
        while all(p.alive() for p in group.processes):
            time.sleep(0.5)
        dead = [p for p in group.processes if not p.alive()]
        raise EsbperfError(f"{dead[0].name} exited; see {dead[0].log}:\n{dead[0].tail()}")
    except KeyboardInterrupt:
        pass
    finally:
        group.stop_all()
