"""The host monitor (agents/monitor): starting one per host role, and asking it for its status
and for the samples of a time window.

Each monitor samples with sigar (or OSHI where sigar cannot load), keeps its samples in a bounded
spool in its state folder and serves them over HTTP; after a step the runner pulls the step's
window from every monitor (esbperf/run/monitors.py). See docs/monitoring.md for why it is a pull,
the spool and the CSV format.
"""
from __future__ import annotations

import csv
import http.client
import io
import ipaddress
import json
import urllib.error
import urllib.request
import time
from pathlib import Path
from typing import Sequence

import click

from esbperf.core import procs, roles, topology
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import MONITOR, ensure_built
from esbperf.core.topology import Testbed, testbed_option

NATIVE_DIR = MONITOR.dir / "target" / "native"   # sigar's JNI libraries, unpacked by the build
SAMPLERS = ("sigar", "oshi")   # sigar by default; OSHI where sigar cannot load, or when asked for
MAIN_CLASS = "esbperf.monitor.Monitor"
# A small heap, one GC thread and the quick compiler only: the monitor must cost its host ~nothing.
JVM_ARGS = ["-Xms8m", "-Xmx48m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:CICompilerCount=1", "-XX:-UsePerfData", "-Xss512k"]

INTERVAL_MS = 1000          # the monitor's sampling period (Monitor.INTERVAL_MS)
PULL_TIMEOUT_S = 5.0

# One sample as the monitor sends it: (time_ms, metric, subject, value as text).
Sample = tuple[int, str, str, str]


# ---- starting a monitor ------------------------------------------------------------------

def monitor_process(role: str, host: str, port: int, pids: Sequence[int] = (), matches: Sequence[str] = (),
                    workdir: Path | None = None, testbed: Testbed | None = None, sampler: str = "sigar",
                    spool_max_bytes: int | None = None, spool_max_age_s: int | None = None) -> procs.Process:
    """A monitor for `role` (not started) serving on host:port, watching `pids` and the processes
    whose command line contains one of `matches`. With `testbed`, it runs on that role's host
    (inside its network namespace when the testbed is emulated). `workdir` is its state folder:
    its log and its spool (`workdir/spool`, kept across restarts); the spool's bounds default to
    the monitor's own (64 MiB, 24 h). A host the testbed pins to some cores (`cpus`) has the CPU
    of those cores as its own (`--cpus`)."""
    roles.check(role)
    if sampler not in SAMPLERS:
        raise EsbperfError(f"unknown sampler '{sampler}' (samplers: {', '.join(SAMPLERS)})")
    for match in matches:
        if not match.strip():
            raise EsbperfError("--match needs a non-empty text")
    ensure_built(MONITOR)
    workdir = (workdir or state_dir() / f"monitor-{role}").absolute()   # the monitor runs in it
    # (Without sigar's library in NATIVE_DIR the monitor falls back to OSHI and says so in its log.)
    argv = [procs.java_executable(), *JVM_ARGS, f"-Dorg.hyperic.sigar.path={NATIVE_DIR}",
            "-cp", MONITOR.classpath(), MAIN_CLASS, "--role", role, "--listen", _host_port(host, port),
            "--sampler", sampler, "--state", str(workdir)]
    if spool_max_bytes is not None:
        argv += ["--spool-max-bytes", str(spool_max_bytes)]
    if spool_max_age_s is not None:
        argv += ["--spool-max-age-s", str(spool_max_age_s)]
    cpus = testbed.hosts[role].cpus if testbed is not None and role in testbed.hosts else None
    if cpus:
        argv += ["--cpus", topology.cpu_list(cpus)]
    for pid in pids:
        argv += ["--pid", str(pid)]
    for match in matches:
        argv += ["--match", match]
    if testbed is None or not testbed.emulated:
        # (An emulated host's address exists only inside its namespace; there the monitor
        # itself reports a port in use, in one line too.)
        procs.check_port_free(host, port, f"{role} monitor")
    if testbed is not None:
        argv = testbed.command(role, argv)
    return procs.Process(f"{role} monitor", argv, workdir / "monitor.log", cwd=workdir)


def start_monitor(role: str, host: str, port: int, pids: Sequence[int] = (), matches: Sequence[str] = (),
                  workdir: Path | None = None, testbed: Testbed | None = None,
                  timeout: float = 30, sampler: str = "sigar", spool_max_bytes: int | None = None,
                  spool_max_age_s: int | None = None) -> procs.Process:
    """Start a monitor and return once it serves samples (arguments as monitor_process)."""
    process = monitor_process(role, host, port, pids, matches, workdir, testbed, sampler, spool_max_bytes,
                              spool_max_age_s)
    log_size = _log_size(process)
    process.start()
    _wait_serving(process, host, port, timeout, log_size)
    return process


def _log_size(process: procs.Process) -> int:
    """The log is appended to: errors of this start are after this offset."""
    return process.log.stat().st_size if process.log.exists() else 0


def _wait_serving(process: procs.Process, host: str, port: int, timeout: float, log_size: int) -> None:
    """Wait until the monitor answers; if it fails, raise its own one-line error."""
    try:
        process.wait_until(lambda: status(host, port) is not None, timeout,
                           f"its samples served at {_base_url(host, port)}")
    except BaseException as e:
        process.stop()
        if isinstance(e, EsbperfError):
            raise EsbperfError(_failure_line(process, log_size) or str(e).splitlines()[0]) from None
        raise


def _log_lines(process: procs.Process, log_size: int) -> list[str]:
    """This start's part of the monitor's log."""
    try:
        with open(process.log, "rb") as log:
            log.seek(log_size)
            return log.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def sampler_notice(process: procs.Process, log_size: int = 0) -> str | None:
    """The monitor's one line saying it samples through OSHI and why, if it does."""
    return next((line for line in _log_lines(process, log_size)
                 if line.startswith("monitor: ") and "sampling through OSHI" in line), None)


def _failure_line(process: procs.Process, log_size: int) -> str | None:
    """The monitor's "monitor: error: ..." line from this start's part of its log."""
    for line in _log_lines(process, log_size):
        if line.startswith("monitor: error: "):
            return f"{process.name}: {procs.name_port_holders(line[len('monitor: error: '):], process.netns)}"
    if process.popen is not None and process.popen.returncode is not None:
        return f"{process.name} exited (status {process.popen.returncode}) before serving samples; see {process.log}"
    return None


def status(host: str, port: int, timeout: float = 0.5) -> dict | None:
    """The monitor's /status document, or None when nothing answers there."""
    try:
        with urllib.request.urlopen(_base_url(host, port) + "/status", timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError, http.client.HTTPException):
        return None


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _base_url(host: str, port: int) -> str:
    return f"http://{_host_port(host, port)}"



# ---- its samples ----------------------------------------------------------------------

def pull(host: str, port: int, from_ms: int, to_ms: int) -> tuple[list[Sample], str | None, int | None, str | None]:
    """(samples, error, clock skew in ms, sampler) from one monitor; an unreachable monitor is
    an error line, not an exception."""
    url = f"{_base_url(host, port)}/samples?from={from_ms}&to={to_ms}"
    sent = time.time() * 1000
    where = _host_port(host, port)
    try:
        with urllib.request.urlopen(url, timeout=PULL_TIMEOUT_S) as response:
            body = response.read().decode()
            monitor_now = response.headers.get("X-Monitor-Time-Ms")
            sampler = response.headers.get("X-Monitor-Sampler")
    except urllib.error.HTTPError as e:
        return [], f"monitor at {where} answered HTTP {e.code} to {url}", None, None
    except (OSError, http.client.HTTPException) as e:   # refused, timed out, cut off mid-answer
        reason = getattr(e, "reason", None) or e.__class__.__name__
        return [], f"monitor at {where} does not answer ({reason})", None, None
    skew = round(int(monitor_now) - (sent + time.time() * 1000) / 2) if monitor_now else None
    rows = csv.reader(io.StringIO(body))
    if next(rows, None) != ["time_ms", "metric", "subject", "value"]:
        return [], f"monitor at {where} answered something that is not its samples CSV", skew, sampler
    try:
        samples = [(int(t), metric, subject, value) for t, metric, subject, value in rows]
    except ValueError:
        return [], f"monitor at {where} answered a malformed samples CSV", skew, sampler
    return samples, None, skew, sampler


# ---- the command -------------------------------------------------------------------------

def _parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise EsbperfError(f"--listen must be HOST:PORT with a port 1-65535, got '{value}'")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise EsbperfError(f"--listen host must be an IP address, got '{host}'") from None
    if address.is_unspecified:
        raise EsbperfError("--listen must name one address (loopback or the testbed address), not all interfaces")
    return host, int(port)


@click.command()
@click.option("--role", required=True, help="The host role this monitor samples (client, esb, ws1-ws3, load2, ...).")
@click.option("--pid", "pids", type=click.IntRange(min=1), multiple=True, metavar="PID",
              help="Also sample this process's CPU and memory (repeatable).")
@click.option("--match", "matches", multiple=True, metavar="TEXT",
              help="Also sample the processes whose command line contains TEXT, e.g. the ESB's main "
                   "class; found again when they restart (repeatable).")
@click.option("--listen", metavar="HOST:PORT",
              help="Where to serve samples (default: the role's address and monitor_port in the testbed).")
@click.option("--sampler", type=click.Choice(SAMPLERS), default="sigar", show_default=True,
              help="Read the host through sigar (falling back to OSHI where it cannot load) or through OSHI.")
@testbed_option
def monitor(role: str, pids: tuple[int, ...], matches: tuple[str, ...], listen: str | None, sampler: str,
            testbed_name: str | None) -> None:
    """Sample this host's CPU, memory and network once a second (watched processes every 2 s),
    keep the samples in a spool in the state folder and serve them to the runner; Ctrl-C stops it."""
    testbed = topology.load(testbed_name)
    if role not in testbed.hosts:
        raise EsbperfError(f"--role {role}: {testbed.path} has no such host (hosts: {', '.join(testbed.hosts)})")
    if listen:
        host, port = _parse_listen(listen)
    else:
        host, port = testbed.hosts[role].address, testbed.hosts[role].monitor_port
        if not port:
            raise EsbperfError(f"{testbed.path}: hosts.{role} has no monitor_port; give --listen HOST:PORT")
    process = monitor_process(role, host, port, pids, matches, testbed=testbed, sampler=sampler)
    log_size = _log_size(process)

    def banner() -> None:
        _wait_serving(process, host, port, 30, log_size)
        click.echo(f"monitor: {role} samples at {_base_url(host, port)}/samples?from=MS&to=MS "
                   f"(status: {_base_url(host, port)}/status)")
        notice = sampler_notice(process, log_size)
        if notice:
            click.echo(notice)
        watched = [*map(str, pids), *matches]
        if watched:
            click.echo(f"monitor: watching {', '.join(watched)}")
        click.echo(f"monitor: log {process.log}; spool {process.log.parent / 'spool'}; Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
