"""The preflight of a testbed (`esbperf testbed check`): is every service of every host
reachable, do the clocks agree, and what versions and OS tuning does each host run.

- Reachability: a TCP connect to each service port with a timeout; a monitor must also say it
  samples the right role, an echo service must answer as the right back end.
- Clock skew: the monitor stamps every answer with its host's clock (X-Monitor-Time-Ms); the
  skew is that stamp minus the middle of our request's round trip, best of a few tries, and
  its uncertainty is half that round trip.
- Versions and tuning: a small shell script prints the kernel, java, esbperf, the open-file
  limit and the testbed file's sysctls. It runs here for the host we are on, in the namespace
  for an emulated host (root), and over ssh for a real host with `ssh: user@host`.
"""
from __future__ import annotations

import http.client
import json
import os
import shlex
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from esbperf.core.errors import EsbperfError
from esbperf.core.topology import Host, Testbed
from esbperf.testbed import hosts

SKEW_TRIES = 5


@dataclass
class Probe:
    role: str
    service: str
    address: str
    port: int
    ok: bool = False
    detail: str = ""          # round-trip time, or why it failed
    warning: str = ""         # reachable, but not what was expected

    @property
    def where(self) -> str:
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"


@dataclass
class HostReport:
    role: str
    address: str
    probes: list[Probe] = field(default_factory=list)
    skew_ms: float | None = None
    skew_error_ms: float | None = None
    facts: dict[str, str] = field(default_factory=dict)
    facts_from: str = ""      # "this machine", "namespace X", "ssh user@host", or why there are none


def _probes(testbed: Testbed, host: Host, esbs: set[str] | None) -> list[Probe]:
    probes = []
    if host.role == "client":
        probes.append(Probe("client", "console", host.address, testbed.console_port))
        probes.append(Probe("client", "console API", testbed.api_host, testbed.api_port))
    for service, port in host.services().items():
        if service.startswith("esb ") and esbs is not None and service[4:] not in esbs:
            continue
        probes.append(Probe(host.role, service, host.address, port))
    return probes


def _http_get(address: str, port: int, path: str, timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response, response.read()
    finally:
        conn.close()


def _probe(probe: Probe, timeout: float, token: Path | None = None) -> None:
    start = time.monotonic()
    try:
        socket.create_connection((probe.address, probe.port), timeout=timeout).close()
    except socket.timeout:
        probe.detail = f"no answer within {timeout:g} s"
        return
    except OSError as e:
        probe.detail = e.strerror or str(e)
        return
    probe.ok = True
    probe.detail = f"{(time.monotonic() - start) * 1000:.1f} ms"
    try:   # who answers: the right monitor, the right echo back end, which console
        if probe.service == "monitor":
            _, body = _http_get(probe.address, probe.port, "/status", timeout)
            role = json.loads(body).get("role")
            if role != probe.role:
                probe.warning = f"the monitor there samples role {role!r}, not {probe.role}"
        elif probe.service == "echo":
            answer, _ = _http_get(probe.address, probe.port, "/echo?wsdl", timeout)
            backend = answer.getheader("X-Echo-Backend")
            if backend != probe.role:
                probe.warning = f"the echo there answers as {backend!r}, not {probe.role}"
        elif probe.service == "console API":
            probe.detail += ", " + _console_version(probe, timeout, token)
    except (OSError, http.client.HTTPException, ValueError, AttributeError, EsbperfError) as e:
        probe.warning = f"accepts connections but does not answer HTTP as a {probe.service} ({e})"


def _console_version(probe: Probe, timeout: float, token_file: Path | None) -> str:
    """The console's version through its control API, with the token when this machine has it: the
    token file of the console `testbed up` started here, else as the runner finds it."""
    from esbperf.services.console import ControlClient, read_token

    token = read_token(token_file)
    host = f"[{probe.address}]" if ":" in probe.address else probe.address
    try:
        return str(ControlClient(f"http://{host}:{probe.port}", token, timeout).version())
    except EsbperfError as e:
        if "wants its token" in str(e):
            return ("answers; this machine holds no token for it (a runner here needs $ESBPERF_CONSOLE_TOKEN "
                    "or --token-file)")
        raise


def clock_skew(address: str, port: int, timeout: float) -> tuple[float, float] | None:
    """(skew, uncertainty) in ms of the monitor's clock against ours; None if it does not answer."""
    best = None
    for _ in range(SKEW_TRIES):
        try:
            conn = http.client.HTTPConnection(address, port, timeout=timeout)
            conn.connect()
            sent = time.time()
            conn.request("GET", "/status")
            response = conn.getresponse()
            received = time.time()
            response.read()
            conn.close()
            stamp = response.getheader("X-Monitor-Time-Ms")
        except (OSError, http.client.HTTPException):
            return None
        if stamp is None or not stamp.isdigit():
            return None
        rtt = received - sent
        if best is None or rtt < best[1]:
            best = (int(stamp) - (sent + received) / 2 * 1000, rtt * 1000 / 2)
    return best


# Prints "ready", then the host's clock (ns since the epoch) for each line it reads: so the round
# trip that brackets a reading is one exchange on an open connection, not ssh's log-in.
CLOCK_SCRIPT = "echo ready; while read x; do date +%s%N; done"


def ssh_clock_skew(testbed: Testbed, role: str, timeout: float = 15) -> tuple[float, float] | None:
    """(skew, uncertainty) in ms of an ssh host's clock against ours (a load host with no monitor);
    None when it cannot be read."""
    from esbperf.testbed.ssh import Ssh

    argv = Ssh(testbed, role).argv("sh -c " + shlex.quote(CLOCK_SCRIPT))
    try:
        shell = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, bufsize=1)
    except OSError:
        return None
    best = None
    try:
        deadline = time.monotonic() + timeout
        if shell.stdout.readline().strip() != "ready" or time.monotonic() > deadline:
            return None
        for _ in range(SKEW_TRIES):
            sent = time.time()
            shell.stdin.write("\n")
            shell.stdin.flush()
            line = shell.stdout.readline().strip()
            received = time.time()
            if not line.isdigit():
                return None
            rtt = received - sent
            if best is None or rtt < best[1]:
                best = (int(line) / 1e6 - (sent + received) / 2 * 1000, rtt * 1000 / 2)
    except OSError:
        return None
    finally:
        shell.kill()
        shell.wait()
    return best


# The facts script prints key=value lines; keys from the testbed's sysctl list are read from /proc.
FACTS_SCRIPT = r"""
echo "kernel=$(uname -sr)"
echo "java=$(java -version 2>&1 | sed -n 's/.*version "\(.*\)".*/\1/p' | head -n 1)"
echo "esbperf=$( (esbperf --version || .venv/bin/esbperf --version) 2>/dev/null | sed 's/.*version //')"
echo "nofile=$(ulimit -n)"
for key in "$@"; do
  echo "sysctl.$key=$(tr -s '\t ' '  ' < "/proc/sys/$(echo "$key" | tr . /)" 2>/dev/null)"
done
"""


def _facts_command(testbed: Testbed, host: Host) -> tuple[list[str] | None, str]:
    """How to run the facts script on host's machine, and a description of where that is."""
    keys = list(testbed.sysctl)
    if testbed.emulated:
        if os.geteuid() != 0:
            return None, "not collected: entering the namespaces needs root"
        ns = testbed.netns(host.role)
        return ["ip", "netns", "exec", ns, "sh", "-c", FACTS_SCRIPT, "sh", *keys], f"namespace {ns}"
    if host.ssh:
        # The remote login shell gets one string: the script and its arguments, quoted.
        remote = "sh -c " + shlex.quote(FACTS_SCRIPT) + " sh " + " ".join(map(shlex.quote, keys))
        return (["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host.ssh, remote],
                f"ssh {host.ssh}")
    if _is_local(host.address):
        return ["sh", "-c", FACTS_SCRIPT, "sh", *keys], "this machine"
    return None, "not collected: give the host an `ssh: user@host` in the testbed file"


def _is_local(address: str) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
            return True
        except OSError:
            return False


def host_facts(testbed: Testbed, host: Host, timeout: float = 15) -> tuple[dict[str, str], str]:
    argv, where = _facts_command(testbed, host)
    if argv is None:
        return {}, where
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {}, f"not collected from {where}: {e}"
    if result.returncode != 0:
        return {}, f"not collected from {where}: {result.stderr.strip().splitlines()[-1:] or result.returncode}"
    facts = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return {k: v.strip() for k, v in facts.items()}, where


def check(testbed: Testbed, esbs: set[str] | None = None, roles: list[str] | None = None,
          timeout: float = 3.0) -> list[HostReport]:
    """Probe every host of the testbed (or those of `roles`) in parallel. `esbs`: the ESB ports to
    probe (None: all of them; empty: none, for the no-ESB baseline)."""
    timeout = min(timeout, 5.0)
    token = hosts.console_token(testbed)
    reports = [HostReport(role, host.address, _probes(testbed, host, esbs))
               for role, host in testbed.hosts.items() if not roles or role in roles]

    def one(report: HostReport) -> None:
        host = testbed.hosts[report.role]
        for probe in report.probes:
            _probe(probe, timeout, token)
        monitor = next((p for p in report.probes if p.service == "monitor" and p.ok), None)
        if monitor:
            skew = clock_skew(monitor.address, monitor.port, timeout)
            if skew:
                report.skew_ms, report.skew_error_ms = skew
        report.facts, report.facts_from = host_facts(testbed, host)

    with ThreadPoolExecutor(max_workers=len(reports) or 1) as pool:
        list(pool.map(one, reports))
    return reports


def problems(testbed: Testbed, reports: list[HostReport], max_skew_ms: float,
             all_esbs: bool = False) -> tuple[list[str], list[str]]:
    """(failures, warnings) as one-line texts. Failures: an unreachable service, a clock off by
    more than max_skew_ms. Warnings: wrong service on a port, unknown skew, tuning or versions
    that differ from the file or between hosts."""
    failures, warnings = [], []
    for r in reports:
        for p in r.probes:
            if not p.ok:
                hint = "; only one ESB runs at a time? --target NAME checks just its port" \
                    if p.service.startswith("esb ") and all_esbs else ""
                failures.append(f"{p.where} ({p.service} on {r.role}) unreachable: {p.detail}{hint}")
            elif p.warning:
                warnings.append(f"{p.where} ({p.service} on {r.role}): {p.warning}")
        if r.skew_ms is not None and abs(r.skew_ms) - r.skew_error_ms > max_skew_ms:
            failures.append(f"{r.role}'s clock is {r.skew_ms:+.0f} ms off this machine's (limit ±{max_skew_ms:g} ms); "
                            "synchronise the clocks (NTP/chrony)")
        elif r.skew_ms is None and any(p.service == "monitor" and p.ok for p in r.probes):
            warnings.append(f"{r.role}: clock skew unknown (its monitor sends no X-Monitor-Time-Ms)")
        for key, want in testbed.sysctl.items():
            have = r.facts.get(f"sysctl.{key}")
            if r.facts and have != want:
                warnings.append(f"{r.role}: sysctl {key} is {have or 'unknown'!s}, the testbed file wants {want}")
    for name in ("esbperf", "java", "kernel"):
        seen = {r.facts[name] for r in reports if r.facts.get(name)}
        if len(seen) > 1:
            warnings.append(f"hosts run different {name} versions: {', '.join(sorted(seen))}")
    return failures, warnings
