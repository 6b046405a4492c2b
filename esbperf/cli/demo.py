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
from esbperf.run import pool, runner
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API, GRINDER_HOME, HTTP_CLIENT, JAXWS_ECHO, MONITOR, ensure_built
from esbperf.results import layout
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
    targets = [esb, "direct"]
    with launched(testbed, esb, state_dir() / demo_dir.name, console, ssh=ssh, settings=settings) as launcher, \
            pool.Carry() as carry:   # the warm workers of one run carry the next's steps too
        runs: list[Path] = []
        for n, the_plan in enumerate(the_plans):
            if the_plan.model == "open" and runs:
                the_plan = with_rates_of(the_plan, runs, esb, console)
            # The ESB and its baseline step by step in one run, so drift hits both alike; the client's
            # calibration and the targets' warm-up are done once, by the first run (`after`), under
            # every closed load of the demo's plans (the open plan's rates are known only later; its
            # payload is the concurrency sweep's).
            console.rule(f"{the_plan.name} → {esb} and direct")
            later = [s for p in the_plans[n + 1:] if p.model == "closed" for s in p.steps(targets)] if not runs else []
            runs.append(runner.start(the_plan, targets, testbed, demo_dir, console=console,
                                     after=runs[-1] if runs else None, also_warm=later, carry=carry, **launcher))
        from esbperf.analysis.headline import of_analysis, terminal_lines
        from esbperf.analysis.report import build_report   # matplotlib only once there is data
        report, analysis = build_report(runs, demo_dir / "report")
    for line in terminal_lines(of_analysis(analysis)):      # what the demo found, before its report's path
        console.print(line, markup=False, highlight=False)
    return report


# The open sweep's rates: these shares of the most the ESB held at the open plan's payload in the
# demo's closed sweeps, so that its latency is seen rising towards the engine's knee (the plan file's
# own rates stand when no closed step measured that payload).
OPEN_SHARES = (0.3, 0.6, 0.85)


def held(runs: list[Path], target: str, payload_bytes: int) -> float | None:
    """The highest TPS `target` held at `payload_bytes` in the closed steps of `runs` (the mean of
    a load's iterations, from their step.json summaries); None when none measured it."""
    by_load: dict[tuple, list[float]] = {}
    for run in runs:
        for path in (run / target).rglob("step.json"):
            step = layout.read_json(path)
            tps = (step.get("summary") or {}).get("tps")
            if step.get("payload_bytes") == payload_bytes and step.get("rate") is None and tps:
                by_load.setdefault((run.name, step.get("scenario"), step.get("users")), []).append(tps)
    return max((sum(v) / len(v) for v in by_load.values()), default=None)


def with_rates_of(plan: plans.Plan, runs: list[Path], esb: str, console: Console) -> plans.Plan:
    """The open plan with its rates at OPEN_SHARES of what `esb` held at its payload so far."""
    most = held(runs, esb, plan.sizes()[0])
    if not most:
        return plan
    rates = sorted({max(1, round(most * share, -1 if most * share >= 100 else 0)) for share in OPEN_SHARES})
    console.print(f"{plan.name}: rates {', '.join(map(str, rates))} per second: {', '.join(f'{s:.0%}' for s in OPEN_SHARES)} "
                  f"of the {most:.0f} TPS {esb} held at {plans.size_label(plan.sizes()[0])} in the closed sweeps")
    return plans.Plan.from_dict({**plan.to_dict(), "rates": rates}, f"{plan.name} (rates from the closed sweeps)")


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
