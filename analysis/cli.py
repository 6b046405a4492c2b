"""`esbperf report` and `esbperf compare` (registered in esbperf/cli.py)."""
from __future__ import annotations

from pathlib import Path

import click

RUN_ARG = click.Path(file_okay=False, path_type=Path)
OUT_OPTION = click.option("--out", type=click.Path(path_type=Path),
                          help="Folder to write into; must be new or empty (default: a new folder).")


def _done(out: Path, analysis) -> None:
    click.echo(f"esbperf: {len(analysis.summary)} step iteration(s) of {len(analysis.runs)} run(s); "
               f"{len(analysis.graphs)} graph(s)")
    for w in analysis.warnings:
        click.echo(f"  warning: {w}")
    click.echo(f"esbperf: report in {out / 'report.html'}")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=RUN_ARG)
@OUT_OPTION
def report(runs: tuple[Path, ...], out: Path | None) -> None:
    """Summarise RUNS (results folders): summary.csv, graphs and a self-contained report.html.

    Several runs of one plan are drawn in the same graphs (an ESB beside the `direct` baseline).
    Default folder: RUN/report (report-2, … if taken) for one run, ./report-<UTC time> for several."""
    from esbperf.analysis.report import build_report

    _done(*build_report(list(runs), out))


@click.command()
@click.argument("runs", nargs=-1, required=True, type=RUN_ARG)
@OUT_OPTION
def compare(runs: tuple[Path, ...], out: Path | None) -> None:
    """Overlay RUNS of one plan in the same graphs, with a table of ratios to the first run.

    For ESB vs baseline give the `direct` run first; for before vs after, the run before.
    Runs of different plans are refused. Default folder: ./compare-<UTC time>."""
    from esbperf.analysis.report import build_report

    _done(*build_report(list(runs), out, compare=True))
