"""`esbperf demo`: the whole method on this machine in a few minutes.

Builds what is missing, brings up the emulated five-host testbed (network namespaces; the
loopback `local` testbed when not root), starts the three echo services, the ESB, the console,
an agent and the monitors on their hosts, runs short versions of both thesis sweeps (payload
and concurrency) and of the open-model sweep (arrival rates) through the ESB's direct proxy and
against the direct baseline, writes the
report, and stops and removes everything it started."""
from __future__ import annotations

import os
import time
from pathlib import Path

import click
from rich.console import Console

from esbperf import plan as plans, runner, stack, testbed as testbeds, topology
from esbperf.config import state_dir
from esbperf.errors import EsbperfError
from esbperf.project import (CAMEL, CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, MONITOR, SYNAPSE,
                             ensure_built)

ESB_MODULES = {"camel": CAMEL, "synapse": SYNAPSE}
DEMO_PLANS = ("demo-payload", "demo-concurrency", "demo-open")


def default_testbed() -> str:
    return "emulated" if os.geteuid() == 0 else "local"


def run_demo(testbed_name: str | Path, esb: str, out: Path, console: Console,
             plan_names: tuple[str | Path, ...] = DEMO_PLANS) -> Path:
    """Run the demo; returns the report folder."""
    if esb not in ESB_MODULES:
        raise EsbperfError(f"unknown ESB '{esb}' (known: {', '.join(ESB_MODULES)})")
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, MONITOR, ESB_MODULES[esb])
    testbed = topology.load(testbed_name)
    if esb not in testbed.targets:
        raise EsbperfError(f"{testbed.path} has no target '{esb}' (known: {', '.join(testbed.targets)})")
    the_plans = [plans.load(name) for name in plan_names]
    demo_dir = out.resolve() / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    demo_dir.mkdir(parents=True, exist_ok=False)
    workdir = state_dir() / demo_dir.name
    brought_up = []
    if testbed.emulated:
        if os.geteuid() != 0:
            raise EsbperfError("the emulated testbed needs root (network namespaces); run as root or use --testbed local")
        brought_up = testbeds.up(testbed)
        if brought_up:
            console.print(f"testbed {testbed.name}: up ({len(brought_up)} changes)")
        else:   # someone else's (or a killed run's): not ours to remove
            console.print(f"testbed {testbed.name}: was already up; it stays up (`esbperf testbed down` removes it)")
    group = None
    try:
        group = stack.start(testbed, esb, workdir, echo=console.print)
        runs = []
        for the_plan in the_plans:
            # The ESB and its baseline step by step in one run, so drift hits both alike.
            console.rule(f"{the_plan.name} → {esb} and direct")
            runs.append(runner.start(the_plan, [esb, "direct"], testbed, demo_dir, console=console,
                                     local_state_dirs=stack.state_dirs(workdir),
                                     token_file=stack.console_token_file(workdir),
                                     restart_esb=stack.esb_restarter(group, testbed)))
        from esbperf.analysis.report import write_report   # matplotlib only once there is data
        report = write_report(runs, demo_dir / "report")
    finally:
        if group:
            group.stop_all()
        if brought_up:
            testbeds.down(testbed)
            console.print(f"testbed {testbed.name}: down")
    return report


@click.command()
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", default=None,
              help="Testbed (default: emulated when root, else local).")
@click.option("--esb", default="camel", show_default=True, help="ESB under test: camel or synapse.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the demo's runs and report.")
def demo(testbed_name: str | None, esb: str, out: Path) -> None:
    """Build what is missing and run the short demo on this machine."""
    console = Console()
    name = testbed_name or default_testbed()
    if testbed_name is None and name == "local":
        console.print("not root: using the loopback testbed `local` instead of the emulated five-host one")
    started = time.monotonic()
    report = run_demo(name, esb, out, console)
    console.print(f"demo finished in {time.monotonic() - started:.0f} s; report: {report / 'report.html'}")
