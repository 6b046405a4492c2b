"""What the commands that run steps share (`esbperf run`, `capacity`, `round`, `demo`): their console,
and the report written after a run. A module below them, so that none imports another for it."""
from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

REPORT_FAILED = 3


def console() -> Console:
    """A console for the run's output: on a terminal as rich draws it; in a log or a pipe wide and
    never wrapped, so each status line stays one line."""
    c = Console()
    return c if c.is_terminal else Console(soft_wrap=True, width=200)


def report(folder: Path) -> int:
    """Write the run's report and print its headline (what the run found); the exit status
    (REPORT_FAILED when it fails: the data is safe)."""
    from esbperf.analysis.headline import of_analysis, terminal_lines
    from esbperf.analysis.report import build_report   # matplotlib only once there is data
    try:
        out, analysis = build_report([folder])
        for line in terminal_lines(of_analysis(analysis)):
            click.echo(line)
        click.echo(f"report: {out / 'report.html'}")
        return 0
    except Exception as e:   # noqa: BLE001 - whatever went wrong, the run itself is complete
        click.echo(f"esbperf: the run's data is safe, but its report failed: {e}; retry with "
                   f"`esbperf report {folder}`", err=True)
        return REPORT_FAILED
