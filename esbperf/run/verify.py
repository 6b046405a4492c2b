"""`esbperf verify`: one request per scenario (and per back end where the scenario routes) to a
target, each answer checked by the same contract code the Grinder workers use."""
from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from pathlib import Path

from esbperf.core import payloads, scenarios, topology
from esbperf.core.errors import EsbperfError
from esbperf.services import esb


def to_check(target: topology.Target, only: list[str] | None = None) -> list[str]:
    """The scenarios to send the target: those in `only`, which must be known and served by it
    (else a one-line error), or every scenario it serves (a floor serves only some)."""
    known = scenarios.names()
    for name in only or []:
        if name not in known:
            raise EsbperfError(f"unknown scenario '{name}' (known: {', '.join(known)})")
    if target.kind != "esb":
        return list(only or known)
    if only:
        esb.refuse_unserved(target.name, target.esb, only)
        return list(only)
    left_out = esb.unserved(target.esb, known)
    return [n for n in known if n not in left_out]


def verify_target(testbed: topology.Testbed, target_name: str, only: list[str] | None = None,
                  size: int = 1024, timeout: float = 10.0, files: list[payloads.PayloadFile] = (),
                  check: str = "") -> list[scenarios.Outcome]:
    """Every scenario the target serves (or those in `only`, which it must serve) once with a
    generated payload of `size` bytes, and each payload file once in every one of those scenarios
    that sends files."""
    target = testbed.target(target_name)
    chosen = to_check(target, only)
    outcomes = []
    for name in chosen:
        outcomes.extend(scenarios.exercise(target, name, size, timeout))
    able = scenarios.contract().FILE_SCENARIOS
    for f in files:
        data = f.read()
        for name in [n for n in chosen if n in able]:
            outcomes.extend(scenarios.exercise(target, name, timeout=timeout, payload=data, check=check))
    return outcomes


def print_outcomes(target_name: str, outcomes: list[scenarios.Outcome]) -> None:
    table = Table(title=f"verify {target_name}")
    for column in ("scenario", "back end", "url", "result", "ms"):
        table.add_column(column)
    for o in outcomes:
        table.add_row(o.scenario, o.backend, o.url,
                      "[green]pass[/green]" if o.ok else f"[red]FAIL[/red] {o.detail}", f"{o.ms:.1f}")
    Console().print(table)


@click.command()
@click.option("--target", "target_name", required=True,
              help="Target name from the testbed (e.g. camel, synapse, spring-integration, nginx, direct).")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", help="Testbed description (default: local).")
@click.option("--scenario", "only", multiple=True, help="Check only this scenario (repeatable).")
@click.option("--size", default=1024, show_default=True, help="Payload size in bytes.")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for each answer.")
@click.option("--payload-file", "files", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
              help="Also send this payload file in each raw scenario (repeatable).")
@click.option("--payload-check", type=click.Choice(["bytes", "envelope", "xml"]), default="envelope",
              show_default=True, help="How a payload file's echo is compared (docs/running.md).")
def verify(target_name: str, testbed_name: str | None, only: tuple[str, ...], size: int, timeout: float,
           files: tuple[Path, ...], payload_check: str) -> None:
    """Send one request per scenario to a target and check the answers and the back end (a floor:
    the scenarios it serves)."""
    testbed = topology.load(testbed_name)
    target = testbed.target(target_name)
    scenario_names = to_check(target, list(only))
    able = [n for n in scenario_names if n in scenarios.contract().FILE_SCENARIOS]
    loaded = [payloads.load(f, f"--payload-file {f}", able) for f in files]
    outcomes = verify_target(testbed, target_name, list(only), size, timeout, loaded, payload_check)
    print_outcomes(target_name, outcomes)
    skipped = [n for n in scenarios.names() if n not in scenario_names]
    if not only and skipped:
        click.echo(f"verify {target_name}: skipped {', '.join(skipped)} ({esb.engine(target.esb).what} "
                   f"serves only {', '.join(scenario_names)})")
    failed = [o for o in outcomes if not o.ok]
    if failed:
        first = failed[0]
        raise EsbperfError(f"verify {target_name}: {len(failed)} of {len(outcomes)} checks failed "
                           f"(first: {first.scenario} {first.backend}: {' '.join(first.detail.split())})")
    click.echo(f"verify {target_name}: all {len(outcomes)} checks passed ({len(scenario_names)} scenarios)")
