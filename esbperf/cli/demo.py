"""`esbperf demo`: the whole method on this machine in a few minutes.

Builds what is missing, brings up the emulated five-host testbed (network namespaces; the
loopback `local` testbed when not root), starts the three echo services, the ESB, the console,
an agent and the monitors on their hosts, runs short versions of both thesis sweeps (payload
and concurrency) and of the open-model sweep (arrival rates) through the ESB's direct proxy and
against the direct baseline, writes the
report, and stops and removes everything it started.

With --ssh the same happens on the emulated testbed's ssh mode (console-config/testbeds/
emulated-ssh.yaml): every host but the client is reached over ssh, esbperf is installed in each
host's own folder (`testbed install`), the services start in the background on their hosts
(`testbed start`), and agents on two load hosts (client and load2) share every step's users."""
from __future__ import annotations

import os
import time
from pathlib import Path

import click
from rich.console import Console

from esbperf.cli.launch import launched
from esbperf.core import plan as plans, topology
from esbperf.run import runner
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, MONITOR, ensure_built
from esbperf.services.esb import ENGINES, ESBS, REFERENCES, settings_for

DEMO_PLANS = ("demo-payload", "demo-concurrency", "demo-open")


def default_testbed() -> str:
    return "emulated" if os.geteuid() == 0 else "local"


SSH_TESTBED = "emulated-ssh"


def run_demo(testbed_name: str | Path, esb: str, out: Path, console: Console,
             plan_names: tuple[str | Path, ...] = DEMO_PLANS, ssh: bool = False,
             esb_settings: tuple[str, ...] = ()) -> Path:
    """Run the demo; returns the report folder. ssh: reach the hosts with `ssh:` over ssh.
    esb_settings: NAME=VALUE settings of the engine (engine.yaml `settings`)."""
    # The demo measures an ESB (the floors serve only some of its scenarios), or a reference engine
    # (a measuring standard: what the demo shows of an engine whose work is known).
    if esb not in ESBS + REFERENCES:
        raise EsbperfError(f"unknown ESB '{esb}' (known: {', '.join(ESBS)}; the reference engine: "
                           f"{', '.join(REFERENCES) or 'none'})")
    settings = settings_for([esb], esb_settings)
    ensure_built(GRINDER_HOME, CONTROL_API, HTTP_CLIENT, JAXWS_ECHO, MONITOR, *filter(None, [ENGINES[esb].module]))
    testbed = topology.load(testbed_name)
    if esb not in testbed.targets:
        raise EsbperfError(f"{testbed.path} has no target '{esb}' (known: {', '.join(testbed.targets)})")
    if ssh and not any(h.ssh for h in testbed.hosts.values()):
        raise EsbperfError(f"--ssh: no host of {testbed.path} has ssh: (the ssh mode's testbed is {SSH_TESTBED})")
    the_plans = [plans.load(name) for name in plan_names]
    demo_dir = out.resolve() / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    demo_dir.mkdir(parents=True, exist_ok=False)
    with launched(testbed, esb, state_dir() / demo_dir.name, console, ssh=ssh, settings=settings) as launcher:
        runs: list[Path] = []
        for the_plan in the_plans:
            # The ESB and its baseline step by step in one run, so drift hits both alike; the client's
            # calibration and the targets' warm-up are done once, by the first run (`after`).
            console.rule(f"{the_plan.name} → {esb} and direct")
            runs.append(runner.start(the_plan, [esb, "direct"], testbed, demo_dir, console=console,
                                     after=runs[-1] if runs else None, **launcher))
        from esbperf.analysis.headline import of_analysis, terminal_lines
        from esbperf.analysis.report import build_report   # matplotlib only once there is data
        report, analysis = build_report(runs, demo_dir / "report")
    for line in terminal_lines(of_analysis(analysis)):      # what the demo found, before its report's path
        console.print(line, markup=False, highlight=False)
    return report


@click.command()
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", default=None,
              help="Testbed (default: emulated when root, else local).")
@click.option("--esb", default="camel", show_default=True,
              help=f"ESB under test: {', '.join(ESBS)}; or the reference engine ({', '.join(REFERENCES)}).")
@click.option("--esb-setting", "esb_settings", multiple=True, metavar="NAME=VALUE",
              help="A setting of the engine (engine.yaml `settings`, e.g. work=1100 for the reference engine); "
                   "repeatable.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the demo's runs and report.")
@click.option("--ssh", is_flag=True, help=f"Reach the hosts over ssh: the emulated testbed's ssh mode ({SSH_TESTBED}), "
                                           "install, start in the background, agents on two load hosts (root).")
def demo(testbed_name: str | None, esb: str, out: Path, ssh: bool, esb_settings: tuple[str, ...]) -> None:
    """Build what is missing and run the short demo on this machine."""
    console = Console()
    name = testbed_name or (SSH_TESTBED if ssh else default_testbed())
    if testbed_name is None and name == "local":
        console.print("not root: using the loopback testbed `local` instead of the emulated five-host one")
    started = time.monotonic()
    report = run_demo(name, esb, out, console, ssh=ssh, esb_settings=esb_settings)
    console.print(f"demo finished in {time.monotonic() - started:.0f} s; report: {report / 'report.html'}")
