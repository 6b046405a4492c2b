"""`esbperf testbed`: bring the emulated five-host testbed up or down, show it, check any
testbed (emulated or a real LAN) before a run, and print what to start on each host.

Python API (each takes a Testbed, a testbed name or a file):
    up(testbed) / down(testbed) -> list of what changed;  status(testbed) -> dict;
    with emulated(testbed): ...   # up for the block, down afterwards whatever happens
    check(testbed, target=None) -> (reports, failures, warnings)   # any testbed, no root needed
"""
from __future__ import annotations

import json
import shlex
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click

from esbperf import testbed_check, testbed_fault, testbed_netns, topology
from esbperf.errors import EsbperfError
from esbperf.topology import ROLES, Testbed

EMULATED = "emulated"


def _testbed(testbed: Testbed | str | Path | None) -> Testbed:
    return testbed if isinstance(testbed, Testbed) else topology.load(testbed, default=EMULATED)


def up(testbed: Testbed | str | Path | None = None) -> list[str]:
    return testbed_netns.up(_testbed(testbed))


def down(testbed: Testbed | str | Path | None = None) -> list[str]:
    return testbed_netns.down(_testbed(testbed))


def status(testbed: Testbed | str | Path | None = None) -> dict[str, Any]:
    return testbed_netns.status(_testbed(testbed))


@contextmanager
def emulated(testbed: Testbed | str | Path | None = None) -> Iterator[Testbed]:
    with testbed_netns.emulated(_testbed(testbed)) as tb:
        yield tb


def check(testbed: Testbed | str | Path, target: str | None = None, roles: list[str] | None = None,
          timeout: float = 3.0, max_skew_ms: float = 100.0
          ) -> tuple[list[testbed_check.HostReport], list[str], list[str]]:
    """The preflight of any testbed: (per-host reports, failures, warnings). `target`: probe
    only that target's ESB port (direct: none); default every ESB port."""
    tb = testbed if isinstance(testbed, Testbed) else topology.load(testbed)
    esbs = None
    if target:
        esb = tb.target(target).esb
        esbs = {esb} if esb else set()
    reports = testbed_check.check(tb, esbs, roles, timeout)
    failures, warnings = testbed_check.problems(tb, reports, max_skew_ms, all_esbs=esbs is None)
    return reports, failures, warnings


def _option(default: str):
    return click.option("--testbed", "testbed_name", metavar="NAME|FILE", default=default, show_default=True,
                        help="Testbed description: a name in console-config/testbeds or a file.")


@click.group()
def testbed() -> None:
    """Bring the emulated five-host testbed up or down, or check a LAN one."""


@testbed.command("up")
@_option(EMULATED)
def up_command(testbed_name: str) -> None:
    """Create the emulated testbed (namespaces, veths, bridge, rate limits); harmless when it is up."""
    tb = _testbed(testbed_name)
    done = up(tb)
    for line in done:
        click.echo(f"testbed: {line}")
    if not done:
        click.echo("testbed: already up and matching the file; nothing changed")
    _print_status(status(tb))


@testbed.command("down")
@_option(EMULATED)
def down_command(testbed_name: str) -> None:
    """Remove what `up` made (and end the processes still running in its namespaces)."""
    done = down(testbed_name)
    for line in done:
        click.echo(f"testbed: {line}")
    if not done:
        click.echo("testbed: nothing of it exists; nothing removed")


@testbed.command("status")
@_option(EMULATED)
@click.option("--json", "as_json", is_flag=True, help="Print the status document as JSON.")
def status_command(testbed_name: str, as_json: bool) -> None:
    """Show the emulated testbed's hosts, addresses, links and rates, and what exists of them."""
    report = status(testbed_name)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print_status(report)


def _mark(ok: bool) -> str:
    return "ok" if ok else "missing"


def _rate(mbit: float | None) -> str:
    return "unlimited" if mbit is None else f"{mbit:g}"


def _print_status(report: dict[str, Any]) -> None:
    b = report["bridge"]
    click.echo(f"testbed {report['name']} ({report['file']}): {report['state']}")
    click.echo(f"  bridge {b['name']} {b['address']}: "
               + ("ok" if b["exists"] and b["addressed"] and b["up"] else "missing" if not b["exists"] else "wrong"))
    rows = [("role", "address", "namespace", "link", "Mbit/s", "shaped from/to host", "cpus", "processes")]
    for role, h in report["hosts"].items():
        shaped = h["shaped_mbit"]
        rows.append((role, h["address"] + ("" if h["addressed"] or not h["netns_exists"] else " (not set)"),
                     f"{h['netns']} {_mark(h['netns_exists'])}", f"{h['link']} {_mark(h['link_exists'])}",
                     _rate(h["link_mbit"]),
                     f"{_rate(shaped['from_host'])}/{_rate(shaped['to_host'])}" + ("" if h["shaped_ok"] else " (differs)"),
                     ",".join(map(str, h["cpus"])) if h["cpus"] else "any", str(len(h["pids"]))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())


@testbed.command("check")
@_option("local")
@click.option("--target", "target_name", help="Probe only this target's ESB port (direct: no ESB). Default: every ESB port.")
@click.option("--role", "roles", multiple=True, type=click.Choice(ROLES), help="Check only these hosts (repeatable).")
@click.option("--timeout", default=3.0, show_default=True, type=click.FloatRange(0.1, 5.0),
              help="Seconds to wait for each TCP connect.")
@click.option("--max-skew-ms", default=100.0, show_default=True, type=click.FloatRange(min=0),
              help="Largest clock difference to this machine that passes.")
def check_command(testbed_name: str, target_name: str | None, roles: tuple[str, ...], timeout: float,
                  max_skew_ms: float) -> None:
    """Preflight: reachability of every service, clock skew, versions and OS tuning of every host."""
    tb = topology.load(testbed_name)
    reports, failures, warnings = check(tb, target_name, list(roles), timeout, max_skew_ms)
    click.echo(f"testbed {tb.name} ({tb.path})")
    for r in reports:
        skew = "clock: unknown" if r.skew_ms is None else f"clock {r.skew_ms:+.1f} ms ± {r.skew_error_ms:.1f}"
        click.echo(f"  {r.role} {r.address}  ({skew})")
        for p in r.probes:
            state = "ok" if p.ok and not p.warning else "WARN" if p.ok else "FAILED"
            click.echo(f"    {state:6} {p.service:12} {p.where:22} {p.detail}{'; ' + p.warning if p.warning else ''}")
        versions = ", ".join(f"{k} {r.facts[k] or '?'}" for k in ("esbperf", "java", "kernel") if k in r.facts)
        click.echo(f"    versions: {versions} (from {r.facts_from})" if r.facts else f"    versions: {r.facts_from}")
        if r.facts:
            tuning = [f"nofile {r.facts.get('nofile', '?')}"]
            tuning += [f"{k} {r.facts.get('sysctl.' + k) or '?'}" for k in tb.sysctl]
            click.echo(f"    tuning: {'; '.join(tuning)}")
    for w in warnings:
        click.echo(f"warning: {w}")
    if failures:
        raise EsbperfError(f"testbed check found {len(failures)} problem(s): " + "; ".join(failures))
    click.echo(f"testbed check: every service of {len(reports)} host(s) answers"
               + (f"; {len(warnings)} warning(s)" if warnings else ""))


def host_commands(tb: Testbed, file_arg: str, esb: str | None = None) -> dict[str, list[list[str]]]:
    """What to start on each host, in order, for this testbed (wrapped for the namespaces and
    CPUs when the testbed is emulated): back ends first, then the ESB, then console and agents."""
    f = ["--testbed", file_arg]
    esbs = [esb] if esb else list(tb.hosts["esb"].esb_ports)[:1]
    plan: dict[str, list[list[str]]] = {}
    for ws in ("ws1", "ws2", "ws3"):
        host = tb.hosts[ws]
        plan[ws] = [["esbperf", "echo", "--id", ws, "--listen", f"{host.address}:{host.echo_port}"]]
    plan["esb"] = [["esbperf", "esb", name, *f] for name in esbs]
    plan["client"] = [["esbperf", "console", *f], ["esbperf", "agent", *f, "--count", "1"]]
    for role in plan:
        if tb.hosts[role].monitor_port:
            plan[role].append(["esbperf", "monitor", "--role", role, *f])
    return {role: [tb.command(role, argv) for argv in argvs] for role, argvs in plan.items()}


@testbed.command("commands")
@_option("local")
@click.option("--esb", help="The ESB to start on the esb host (default: the first in hosts.esb.esb_ports).")
def commands_command(testbed_name: str, esb: str | None) -> None:
    """Print the commands to start on each host (each in its own terminal or service unit)."""
    tb = topology.load(testbed_name)
    if esb and esb not in tb.hosts["esb"].esb_ports:
        raise EsbperfError(f"{tb.path}: hosts.esb.esb_ports has no port for '{esb}' "
                           f"(known: {', '.join(tb.hosts['esb'].esb_ports) or 'none'})")
    for role, argvs in host_commands(tb, testbed_name, esb).items():
        host = tb.hosts[role]
        click.echo(f"# {role} ({host.address}{', namespace ' + tb.netns(role) if tb.emulated else ''})")
        for argv in argvs:
            click.echo(shlex.join(argv))
    click.echo("# then, on the client: the preflight, and the run")
    click.echo(shlex.join(["esbperf", "testbed", "check", "--testbed", testbed_name]))


@testbed.command("fault")
@_option(EMULATED)
@click.option("--host", "role", help="The host whose link gets the fault (e.g. ws1).")
@click.option("--loss", type=click.FloatRange(0, 100), help="Drop this percentage of packets, both directions.")
@click.option("--delay-ms", type=click.FloatRange(min=0), help="Delay every packet (netem kernels only).")
@click.option("--jitter-ms", type=click.FloatRange(min=0), help="Vary the delay by this much (netem kernels only).")
@click.option("--partition", "partition_s", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Cut the link for SECONDS, then heal it (Ctrl-C heals it at once).")
@click.option("--clear", is_flag=True, help="Remove the fault of --host, or of every host.")
def fault_command(testbed_name: str, role: str | None, loss: float | None, delay_ms: float | None,
                  jitter_ms: float | None, partition_s: float | None, clear: bool) -> None:
    """Emulate a network fault on an emulated host's link (loss, delay/jitter, a partition), remove it,
    or (with no option) show the faults in place."""
    tb = topology.load(testbed_name)
    changes = [loss, delay_ms, jitter_ms, partition_s]
    if clear:
        if any(c is not None for c in changes):
            raise EsbperfError("--clear takes no fault options")
        for line in testbed_fault.clear(tb, role) or ["no fault to remove"]:
            click.echo(f"testbed: {line}")
    elif all(c is None for c in changes):
        faults = testbed_fault.active(tb) if tb.emulated else {}
        for r, f in faults.items():
            click.echo(f"{r}: {f['description']}")
        if not faults:
            click.echo("no network fault on any link")
    else:
        if not role:
            raise EsbperfError("give --host, the host whose link gets the fault")
        if partition_s is not None:
            if any(c is not None for c in (loss, delay_ms, jitter_ms)):
                raise EsbperfError("--partition cuts the link; it takes no --loss/--delay-ms/--jitter-ms")
            click.echo(f"testbed: {role}: partitioned for {partition_s:g} s …")
            click.echo(f"testbed: {testbed_fault.partition(tb, role, partition_s)}")
        else:
            click.echo("testbed: " + testbed_fault.apply(tb, role, testbed_fault.Fault(loss or 0.0, delay_ms or 0.0,
                                                                                     jitter_ms or 0.0)))
