"""The esbperf command line: one command per concern. A service's command lives beside the
service (esbperf/services/), the testbed's in esbperf/testbed/cli.py, the analysis's in
analysis/cli.py; the commands that put the layers together (`run`, which reports after the run,
`demo` and `round`) live here, so that no layer below imports the ones above it.

Commands are imported only when run, so `esbperf --help` stays fast and a command's heavy
imports (polars, matplotlib) cost nothing to the others.
"""
from __future__ import annotations

import importlib
import sys

import click

from esbperf.core.errors import EsbperfError

# name -> (module:attribute, one-line help). Keep sorted by the order a user meets them.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("esbperf.cli.demo:demo", "Build what is missing and run the short demo on this machine."),
    "build": ("esbperf.core.project:build", "Build the Java modules (Grinder home, control API, echo, ESBs, monitor)."),
    "console": ("esbperf.services.console:console", "Start the headless Grinder console with the control API."),
    "agent": ("esbperf.services.agent:agent", "Start Grinder agents that connect to the console."),
    "echo": ("esbperf.services.echo:echo", "Start an echo back end (ws1, ws2, ws3): JAX-WS RI, CXF or lean."),
    "esb": ("esbperf.services.esb:esb", "Start an ESB under test or a floor (an engine folder of esb-projects/)."),
    "verify": ("esbperf.run.verify:verify", "Send one request per scenario to a target and check the answers."),
    "monitor": ("esbperf.services.monitor:monitor", "Start the sigar CPU/network monitor for a host role."),
    "run": ("esbperf.cli.run:run", "Run a sweep plan against a target through the console."),
    "capacity": ("esbperf.cli.capacity:capacity", "Find the highest rate a target holds within a p99 latency goal."),
    "round": ("esbperf.cli.round:round_command", "Rerun a public round (Round 1) with one command, page and comparison."),
    "selftest": ("esbperf.cli.selftest:selftest", "Hold esbperf's judgments against known answers: their error rates."),
    "report": ("esbperf.analysis.cli:report", "Summarise runs: summary.csv, graphs, report.html."),
    "compare": ("esbperf.analysis.cli:compare", "Overlay runs and tabulate their ratios."),
    "testbed": ("esbperf.testbed.cli:testbed", "Bring the emulated five-host testbed up or down, or check a LAN one."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        module = importlib.import_module(module_name)
        return getattr(module, attr)

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_) for name, (_, help_) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="esbperf")
def cli():
    """esbperf: fair, reproducible ESB performance tests (Grinder 3.11, JAX-WS echo, real ESBs)."""


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="esbperf", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except EsbperfError as e:
        click.echo(f"esbperf: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("esbperf: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("esbperf: interrupted", err=True)
        sys.exit(130)
