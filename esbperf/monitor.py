"""The host monitors: starting one per host role, pulling each step's samples from all of them
into the step's folder, and the per-step verdict on CPU and link saturation.

Each monitor samples with sigar (or OSHI where sigar cannot load), keeps its samples in a bounded
spool in its state folder and serves them over HTTP (agents/monitor); after a step the runner
pulls the step's window from every monitor (`collect_step`). See docs/monitoring.md for why it
is a pull, the spool, the CSV format and the verdict rule.
"""
from __future__ import annotations

import csv
import http.client
import io
import ipaddress
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterable, Sequence

import click

from esbperf import bottleneck, procs, topology
from esbperf.config import state_dir
from esbperf.console import testbed_option
from esbperf.errors import EsbperfError
from esbperf.project import MONITOR, ensure_built
from esbperf.topology import ROLES, Testbed, is_role

NATIVE_DIR = MONITOR.dir / "target" / "native"   # sigar's JNI libraries, unpacked by the build
SAMPLERS = ("sigar", "oshi")   # sigar by default; OSHI where sigar cannot load, or when asked for
MAIN_CLASS = "esbperf.monitor.Monitor"
# A small heap, one GC thread and the quick compiler only: the monitor must cost its host ~nothing.
JVM_ARGS = ["-Xms8m", "-Xmx48m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:CICompilerCount=1", "-XX:-UsePerfData", "-Xss512k"]

INTERVAL_MS = 1000          # the monitor's sampling period (Monitor.INTERVAL_MS)
GAP_AFTER_MS = 2 * INTERVAL_MS   # samples further apart than this leave a gap
PULL_TIMEOUT_S = 5.0
CSV_HEADER = ["time_ms", "phase", "metric", "subject", "value"]

# The verdict's rule and thresholds live in esbperf/bottleneck.py (shared with the analysis).
THRESHOLD_PERCENT, SUSTAIN_SAMPLES = bottleneck.THRESHOLD_PERCENT, bottleneck.SUSTAIN_SAMPLES


# ---- starting a monitor ------------------------------------------------------------------

def monitor_process(role: str, host: str, port: int, pids: Sequence[int] = (), matches: Sequence[str] = (),
                    workdir: Path | None = None, testbed: Testbed | None = None, sampler: str = "sigar",
                    spool_max_bytes: int | None = None, spool_max_age_s: int | None = None) -> procs.Process:
    """A monitor for `role` (not started) serving on host:port, watching `pids` and the processes
    whose command line contains one of `matches`. With `testbed`, it runs on that role's host
    (inside its network namespace when the testbed is emulated). `workdir` is its state folder:
    its log and its spool (`workdir/spool`, kept across restarts); the spool's bounds default to
    the monitor's own (64 MiB, 24 h)."""
    if not is_role(role):
        raise EsbperfError(f"unknown role '{role}' (roles: {', '.join(ROLES)}, load2, load3, ...)")
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


# ---- collecting a step -------------------------------------------------------------------

def collect_step(testbed: Testbed, step_dir: Path, warmup_start_ms: int, measure_start_ms: int,
                 end_ms: int, roles: Iterable[str] | None = None) -> dict:
    """Pull the samples of [warmup_start_ms, end_ms) from the monitor of every role that has a
    monitor_port (or of `roles`) into step_dir/monitor-<role>.csv, and judge the measurement
    window [measure_start_ms, end_ms). A monitor that does not answer, or whose samples stop,
    leaves `gap` rows and an error line for that role; it never stops the run."""
    if not warmup_start_ms <= measure_start_ms < end_ms:
        raise EsbperfError(f"collect_step: the step's times must satisfy warmup start <= measure start < end, "
                           f"got {warmup_start_ms}, {measure_start_ms}, {end_ms}")
    chosen = [r for r, h in testbed.hosts.items() if h.monitor_port] if roles is None else list(roles)
    for role in chosen:
        if role not in testbed.hosts:
            raise EsbperfError(f"collect_step: unknown role '{role}' (roles: {', '.join(ROLES)})")
        if not testbed.hosts[role].monitor_port:
            raise EsbperfError(f"collect_step: {testbed.path}: hosts.{role} has no monitor_port")
    if chosen:
        _wait_for_last_sample(end_ms)
    step_dir.mkdir(parents=True, exist_ok=True)
    window = StepWindow(warmup_start_ms, measure_start_ms, end_ms)
    result: dict = {"bottlenecks": [], "monitors": {}}
    for role in chosen:
        host = testbed.hosts[role]
        samples, error, skew, sampler = _pull(host.address, host.monitor_port, window)
        gaps = _gaps(samples, window, error)
        _write_csv(step_dir / f"monitor-{role}.csv", samples, gaps, window)
        result["monitors"][role] = {
            "rows": len(samples),
            "gaps_ms": sum(g[2] for g in gaps),
            "error": error,
            "clock_skew_ms": skew,
            "sampler": sampler,
        }
        result["bottlenecks"] += verdict(role, samples, host.link_mbit, window, host.interface)
    return result


class StepWindow:
    """One step's times: [warmup, measure) is the warm-up, [measure, end) the measurement."""

    def __init__(self, warmup: int, measure: int, end: int):
        self.warmup, self.measure, self.end = warmup, measure, end

    def phase(self, time_ms: int) -> str:
        return "measure" if time_ms >= self.measure else "warmup"


# One sample as the monitor sent it: (time_ms, metric, subject, value as text).
Sample = tuple[int, str, str, str]


def _wait_for_last_sample(end_ms: int) -> None:
    """Collecting right at the step's end would miss the last second: give it time to be taken."""
    lead = end_ms - time.time() * 1000
    if lead > INTERVAL_MS:
        raise EsbperfError(f"collect_step: the step ends {lead / 1000:.1f} s in the future; "
                           "collect a step once it has ended")
    time.sleep(max(0.0, (end_ms + INTERVAL_MS + 200 - time.time() * 1000) / 1000))


def _pull(host: str, port: int, window: StepWindow) -> tuple[list[Sample], str | None, int | None, str | None]:
    """(samples, error, clock skew in ms, sampler) from one monitor; an unreachable monitor is
    an error line, not an exception."""
    url = f"{_base_url(host, port)}/samples?from={window.warmup}&to={window.end}"
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


def _gaps(samples: list[Sample], window: StepWindow, error: str | None) -> list[tuple[int, str, int]]:
    """(start_ms, reason, span_ms) of the parts of the window without host samples, split at
    the measurement's start so each phase's loss is known. A sample at t covers the second
    before t (its CPU figures are since the previous sample), so one late or failed sample
    loses nothing; two seconds without any do."""
    reason = error or "no samples"
    ticks = sorted({t for t, metric, _, _ in samples if metric == "cpu.total"})
    spans = []
    if not ticks:
        spans.append((window.warmup, window.end))
    else:
        if ticks[0] - window.warmup > GAP_AFTER_MS:
            spans.append((window.warmup, ticks[0] - INTERVAL_MS))
        for before, after in zip(ticks, ticks[1:]):
            if after - before > GAP_AFTER_MS:
                spans.append((before, after - INTERVAL_MS))
        if window.end - ticks[-1] > GAP_AFTER_MS:
            spans.append((ticks[-1], window.end))
    gaps = []
    for start, stop in spans:
        for part_start, part_stop in ((start, min(stop, window.measure)), (max(start, window.measure), stop)):
            if part_stop > part_start:
                gaps.append((part_start, reason, part_stop - part_start))
    return gaps


def _write_csv(path: Path, samples: list[Sample], gaps: list[tuple[int, str, int]], window: StepWindow) -> None:
    """Written to a temporary file and renamed, so a reader never sees half a file."""
    rows = [(t, window.phase(t), metric, _plain(subject), value) for t, metric, subject, value in samples]
    rows += [(t, window.phase(t), "gap", _plain(reason), str(span)) for t, reason, span in gaps]
    rows.sort(key=lambda r: r[0])   # stable: a tick's rows keep the monitor's order
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        writer.writerows(rows)
    os.replace(partial, path)


def _plain(subject: str) -> str:
    """Subjects never need CSV quoting (the analysis reads the files without quote handling)."""
    return subject.replace(",", ";").replace('"', "'").replace("\r", " ").replace("\n", " ")


# ---- the verdict -------------------------------------------------------------------------

def verdict(role: str, samples: list[Sample], link_mbit: float | None, window: StepWindow,
            interface: str | None = None) -> list[dict]:
    """The host's resources that exceeded THRESHOLD_PERCENT during the measurement window, by
    the one rule of esbperf/bottleneck.py (which the analysis applies to the monitor files too)."""
    cpu = [(t, float(v)) for t, metric, _, v in samples if metric == "cpu.total"]
    counters: dict[str, dict[str, list]] = {"rx": {}, "tx": {}}
    for t, metric, subject, value in samples:
        if metric in ("net.rx_bytes", "net.tx_bytes"):
            counters[metric[4:6]].setdefault(subject, []).append((t, float(value)))
    return bottleneck.assess(role, cpu, counters["rx"], counters["tx"], window.measure, link_mbit,
                             interface).bottlenecks


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
