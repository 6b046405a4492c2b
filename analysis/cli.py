"""`esbperf report` and `esbperf compare` (registered in esbperf/cli/__init__.py)."""
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
@click.option("--max-tps-drop", metavar="PERCENT", help="Fail when a step's TPS fell by more than this (e.g. 5%).")
@click.option("--max-p99-rise", metavar="PERCENT", help="Fail when a step's p99 rose by more than this (e.g. 10%).")
@click.option("--max-mean-rise", metavar="PERCENT", help="Fail when a step's mean response time rose by more.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the gate's verdicts as JUnit XML to this file.")
def compare(runs: tuple[Path, ...], out: Path | None, max_tps_drop: str | None, max_p99_rise: str | None,
            max_mean_rise: str | None, junit: Path | None) -> None:
    """Overlay RUNS of one plan in the same graphs, with a table of ratios to the first run.

    For ESB vs baseline give the `direct` run first; for before vs after, the run before.
    Runs of different plans are refused. Default folder: ./compare-<UTC time>.

    With a --max-* limit, compare is a regression gate: every later run is judged against the
    first, step by step; a move beyond the limit fails (exit 1) unless both runs have iterations
    and the move is inside their noise (95 % confidence interval of the difference)."""
    from esbperf.analysis import gate
    from esbperf.analysis.report import build_report

    checks = gate.limits(*(None if v is None else gate.parse_percent(v, o) for v, o in (
        (max_tps_drop, "--max-tps-drop"), (max_p99_rise, "--max-p99-rise"), (max_mean_rise, "--max-mean-rise"))))
    if junit and not checks:
        raise click.UsageError("--junit needs a limit (--max-tps-drop, --max-p99-rise or --max-mean-rise)")
    out, analysis = build_report(list(runs), out, compare=True)
    _done(out, analysis)
    if not checks:
        return
    base, *later = [r.name for r in analysis.runs]
    verdicts = [v for new in later for v in gate.gate(analysis.summary, base, new, checks)]
    if junit:
        gate.write_junit(verdicts, junit, suite=f"esbperf gate {base}")
    failed = [v for v in verdicts if v.failed]
    for v in failed:
        click.echo(f"  FAIL {v.message}")
    click.echo(f"esbperf: gate {'failed' if failed else 'passed'}: {len(failed)} of {len(verdicts)} check(s) "
               f"broke a limit" + (f"; JUnit XML in {junit}" if junit else ""))
    if failed:
        raise SystemExit(1)
