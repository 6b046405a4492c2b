"""`esbperf testbed`: bring the emulated testbed up or down; install esbperf on the hosts reached
over ssh, start and stop every host's services and show what runs where; check any testbed
(emulated or a real LAN) before a run; print what to start on each host by hand; and put faults on
an emulated host's link."""
from __future__ import annotations

import json
import shlex
from typing import Any

import click

from esbperf.core import topology
from esbperf.core.errors import EsbperfError
from esbperf.testbed import EMULATED, check, down, fault, hosts, load, status, up
from esbperf.testbed.hosts import host_commands

def _esb_setting_option():
    return click.option("--esb-setting", "esb_settings", multiple=True, metavar="NAME=VALUE",
                        help="A setting of the engine started (engine.yaml `settings`, e.g. work=1100 for the "
                             "reference engine; repeatable); a restart keeps it.")


def _engine_settings(tb: topology.Testbed, esb: str | None, pairs: tuple[str, ...]) -> dict[str, dict]:
    """--esb-setting pairs checked against the engine `testbed start` starts (default: the first port's)."""
    from esbperf.services.esb import settings_for

    chosen = esb or next(iter(tb.hosts["esb"].esb_ports), None)
    return settings_for([chosen] if chosen else [], pairs) if pairs else {}


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
    tb = load(testbed_name)
    done = up(tb)
    for line in done:
        click.echo(f"testbed: {line}")
    if not done:
        click.echo("testbed: already up and matching the file; nothing changed")
    _print_status(status(tb))
    click.echo(f"testbed: {tb.cpu_split()}")


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
    """Show the emulated testbed's hosts, links and rates, and on every testbed what runs where
    (the services `esbperf testbed start` started)."""
    tb = load(testbed_name)
    report = status(tb) if tb.emulated else {}
    services = hosts.status(tb)
    if as_json:
        click.echo(json.dumps({**report, "services": services}, indent=2))
        return
    if report:
        _print_status(report)
    click.echo("services (`esbperf testbed start`):")
    for role, found in services.items():
        if isinstance(found, str):
            click.echo(f"  {role:8} cannot tell: {found}")
        elif not found:
            click.echo(f"  {role:8} none")
        for s in found if isinstance(found, list) else []:
            state = "running" if s["alive"] else f"ended: {s['last_line'] or 'no output'}"
            click.echo(f"  {role:8} {s['name']:10} {s.get('ready') or 'agent':22} pid {s['pid']:<7} {state}; log {s['log']}")


@testbed.command("install")
@_option("local")
def install_command(testbed_name: str) -> None:
    """Put this esbperf (built) on every host with `ssh:`, in its install folder; only what changed is sent."""
    from esbperf.testbed import install

    tb = topology.load(testbed_name)
    lines = install.install(tb, echo=click.echo)
    click.echo(f"testbed install: esbperf is on {len(lines)} host(s)")


@testbed.command("start")
@_option("local")
@click.option("--esb", help="The ESB to start on the esb host (default: the first in hosts.esb.esb_ports).")
@_esb_setting_option()
def start_command(testbed_name: str, esb: str | None, esb_settings: tuple[str, ...]) -> None:
    """Start every host's services in the background (over ssh where a host has `ssh:`), each
    checked ready; on any failure what was started is stopped again."""
    tb = topology.load(testbed_name)
    settings = _engine_settings(tb, esb, esb_settings)
    click.echo(f"testbed: {tb.cpu_split()}")
    started = hosts.start(tb, esb, echo=lambda line: click.echo(f"started {line}"), settings=settings)
    click.echo(f"testbed start: {len(started)} service(s) running; `esbperf testbed stop --testbed {testbed_name}` "
               "stops them")


@testbed.command("stop")
@_option("local")
def stop_command(testbed_name: str) -> None:
    """Stop the services `testbed start` started, on every host, by their pid files."""
    tb = topology.load(testbed_name)
    lines, problems = hosts.stop(tb)
    for line in lines:
        click.echo(f"stopped {line}")
    if problems:
        raise EsbperfError(f"testbed stop: {len(problems)} host(s) could not be asked: " + "; ".join(problems))
    click.echo(f"testbed stop: {sum(' not running' not in line for line in lines)} service(s) stopped")


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
                     topology.cpu_list(h["cpus"]) if h["cpus"] else "any", str(len(h["pids"]))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())


@testbed.command("check")
@_option("local")
@click.option("--target", "target_name", help="Probe only this target's ESB port (direct: no ESB). Default: every ESB port.")
@click.option("--role", "roles", multiple=True, metavar="ROLE", help="Check only these hosts (repeatable).")
@click.option("--timeout", default=3.0, show_default=True, type=click.FloatRange(0.1, 5.0),
              help="Seconds to wait for each TCP connect.")
@click.option("--max-skew-ms", default=100.0, show_default=True, type=click.FloatRange(min=0),
              help="Largest clock difference to this machine that passes.")
def check_command(testbed_name: str, target_name: str | None, roles: tuple[str, ...], timeout: float,
                  max_skew_ms: float) -> None:
    """Preflight: reachability of every service, clock skew, versions and OS tuning of every host."""
    tb = topology.load(testbed_name)
    unknown = [r for r in roles if r not in tb.hosts]
    if unknown:
        raise EsbperfError(f"--role {unknown[0]}: {tb.path} has no such host (hosts: {', '.join(tb.hosts)})")
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


@testbed.command("commands")
@_option("local")
@click.option("--esb", help="The ESB to start on the esb host (default: the first in hosts.esb.esb_ports).")
@_esb_setting_option()
def commands_command(testbed_name: str, esb: str | None, esb_settings: tuple[str, ...]) -> None:
    """Print the commands to start on each host (each in its own terminal or service unit)."""
    tb = topology.load(testbed_name)
    if esb and esb not in tb.hosts["esb"].esb_ports:
        raise EsbperfError(f"{tb.path}: hosts.esb.esb_ports has no port for '{esb}' "
                           f"(known: {', '.join(tb.hosts['esb'].esb_ports) or 'none'})")
    settings = _engine_settings(tb, esb, esb_settings)
    for role, argvs in host_commands(tb, testbed_name, esb, settings).items():
        host = tb.hosts[role]
        click.echo(f"# {role} ({host.address}{', namespace ' + tb.netns(role) if tb.emulated else ''})")
        for argv in argvs:
            click.echo(shlex.join(argv))
    # The preflight probes the ESB that was started, not every port of the file (one runs at a time).
    started = hosts.engines_on_esb_host(tb, esb, floors=False)
    target = ["--target", started[0]] if started and started[0] in tb.targets else []
    click.echo("# then, on the client: the preflight, and the run")
    click.echo(shlex.join(["esbperf", "testbed", "check", "--testbed", testbed_name, *target]))
    baseline = ["--target", "direct"] if "direct" in tb.targets else []
    click.echo(shlex.join(["esbperf", "run", "--plan", "PLAN", *target, *baseline, "--testbed", testbed_name]))


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
        for line in fault.clear(tb, role) or ["no fault to remove"]:
            click.echo(f"testbed: {line}")
    elif all(c is None for c in changes):
        faults = fault.active(tb) if tb.emulated else {}
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
            click.echo(f"testbed: {fault.partition(tb, role, partition_s)}")
        else:
            click.echo("testbed: " + fault.apply(tb, role, fault.Fault(loss or 0.0, delay_ms or 0.0,
                                                                                     jitter_ms or 0.0)))
