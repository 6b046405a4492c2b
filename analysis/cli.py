"""`esbperf report` and `esbperf compare` (registered in esbperf/cli/__init__.py), with the gate's
limits (analysis/gate.py, docs/regression-gate.md): exit 0 when every check passed, 1 when one
broke a limit, 3 when none broke one but a check could not be judged, 2 for bad input
(esbperf/cli's EsbperfError)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click
import polars as pl

from esbperf.analysis.gate import ABSOLUTE_OPTIONS, RELATIVE_OPTIONS, LimitOption

RUN_ARG = click.Path(file_okay=False, path_type=Path)
OUT_OPTION = click.option("--out", type=click.Path(path_type=Path),
                          help="Folder to write into; must be new or empty (default: a new folder).")
GATE_FILES = (
    click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
                 help="Also write the limits' verdicts as JUnit XML to this file (one test case per step and limit)."),
    click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
                 help="Also write a short Markdown summary of the verdicts (a pull-request comment) to this file."),
)


def _options(*options: Any) -> Callable:
    """Apply click options in the order given (each a click.option, or a gate LimitOption)."""
    def decorate(command: Callable) -> Callable:
        for o in reversed(options):
            if isinstance(o, LimitOption):
                o = click.option(o.flag, o.param, metavar="MS" if o.unit == "ms" else "PERCENT" if o.unit else "TPS",
                                 help=o.help)
            command = o(command)
        return command
    return decorate


def _done(out: Path, analysis) -> None:
    click.echo(f"esbperf: {len(analysis.summary)} step iteration(s) of {len(analysis.runs)} run(s); "
               f"{len(analysis.graphs)} graph(s)")
    for w in analysis.warnings:
        click.echo(f"  warning: {w}")
    ratios = analysis.ratios
    if ratios is not None and ratios.height:
        from esbperf.analysis.compare import ratio_lines

        # A ratio at a testbed bound is a figure of the testbed, and says so (analysis/bottleneck.py).
        for line in ratio_lines(ratios, analysis.labels):
            click.echo(f"  {line}")
    verdicts = getattr(analysis, "verdicts", None)
    if ratios is not None and verdicts is not None and verdicts.height:
        from esbperf.analysis.compare import reference_series
        from esbperf.analysis.verdicts import lines

        # compare: each series against the reference, judged on the interval of their ratio (verdicts.csv).
        reference = reference_series(analysis.runs)
        mine = verdicts.filter(((pl.col("a_run") == reference[0]) & (pl.col("a_target") == reference[1]))
                               | ((pl.col("b_run") == reference[0]) & (pl.col("b_target") == reference[1])))
        for line in lines(mine, limit=60):
            click.echo(f"  verdict: {line}")
    if verdicts is not None and verdicts.height:
        from esbperf.analysis.verdicts import family_line

        # The verdicts are one family: the control they were judged under, and what chance alone would show.
        click.echo(f"esbperf: verdicts (verdicts.csv): {family_line(verdicts)}")
    if ratios is not None and "valid" in ratios.columns:
        invalid = ratios.filter((pl.col("valid") != "yes") | (pl.col("valid_reference") != "yes")).height
        if invalid:
            click.echo(f"esbperf: {invalid} of {ratios.height} compared step(s) hold a step that is not a valid "
                       "measurement (ratios.csv `valid`, `valid_reference`; the report's ratio table)")
    from esbperf.analysis.headline import of_analysis, terminal_lines

    for line in terminal_lines(of_analysis(analysis)):        # the answer last, just above the report's path
        click.echo(line)
    click.echo(f"esbperf: report in {out / 'report.html'}")


def _report_and_gate(runs: tuple[Path, ...], out: Path | None, compare: bool, junit: Path | None,
                     markdown: Path | None, limit_values: dict[str, Any]) -> None:
    """Write the report; with limits, judge it (bad input refused before anything is written),
    print the failures and the checks not judged and the headline, write --junit and --markdown,
    exit 1 on a failure, 3 when a check was not judged and none failed."""
    from esbperf.analysis import gate
    from esbperf.analysis.report import build_report, default_out_dir

    limits = gate.parse_limits(limit_values)
    if out is None and (junit or markdown):     # chosen now, so that the files are kept out of it
        out = default_out_dir(list(runs), "compare" if compare else "report")
    gate.check_output_files({"--junit": junit, "--markdown": markdown}, out, limits)
    verdicts: list = []

    def judge(analysis) -> None:
        verdicts.extend(gate.judge(analysis, [r.name for r in analysis.runs], limits))

    out, analysis = build_report(list(runs), out, compare=compare, check=judge if limits else None)
    _done(out, analysis)
    if not limits:
        return
    names = [r.name for r in analysis.runs]
    what = (f"every later run against {names[0]}" if any(not lim.absolute for lim in limits) else
            f"{', '.join(names)}") + f"; {', '.join(f'{lim.label} {lim.bound}' for lim in limits)}"
    if junit:
        gate.write_junit(verdicts, junit, suite=f"esbperf gate {names[0]}")
    if markdown:
        gate.write_markdown(verdicts, markdown, what)
    for v in verdicts:
        if v.outcome != gate.PASSED:
            click.echo(f"  {'FAIL' if v.failed else 'NOT JUDGED'} {v.message}")
    invalid = sum(bool(v.invalid) for v in verdicts)
    if invalid:
        click.echo(f"esbperf: {invalid} check(s) judged a step that is not a valid measurement (a validity warning "
                   "names it; their messages say which)")
    written = [str(p) for p in (junit, markdown) if p]
    click.echo(f"esbperf: {gate.headline(verdicts)}" + (f"; written to {', '.join(written)}" if written else ""))
    code = gate.exit_code(verdicts)
    if code:
        raise SystemExit(code)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=RUN_ARG)
@_options(OUT_OPTION, *ABSOLUTE_OPTIONS, *GATE_FILES)
def report(runs: tuple[Path, ...], out: Path | None, junit: Path | None, markdown: Path | None,
           **limits: str | None) -> None:
    """Summarise RUNS (results folders): summary.csv, graphs and a self-contained report.html.

    Several runs of one plan are drawn in the same graphs (an ESB beside the `direct` baseline).
    Default folder: RUN/report (report-2, … if taken) for one run, ./report-<UTC time> for several.

    With a --max-*/--min-* limit, every step of every run is held to it (iterations pooled, as
    the report shows them): exit 1 when one breaks a limit."""
    _report_and_gate(runs, out, False, junit, markdown, limits)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=RUN_ARG)
@_options(OUT_OPTION, *RELATIVE_OPTIONS, *ABSOLUTE_OPTIONS, *GATE_FILES)
def compare(runs: tuple[Path, ...], out: Path | None, junit: Path | None, markdown: Path | None,
            **limits: str | None) -> None:
    """Overlay RUNS of one plan in the same graphs, with a table of ratios to the first run.

    Each series is judged against the reference on the 95 % interval of their ratio, the engine
    process as the unit (verdicts.csv; a line each: "... is faster than ... by 12 % (95 %: 6-18 %)").
    For ESB vs baseline give the `direct` run first; for before vs after, the run before.
    Runs of different plans are refused. Default folder: ./compare-<UTC time>.

    With a --max-*-rise/--max-tps-drop limit, compare is a regression gate: every later run is
    judged against the first, step by step; a move beyond the limit fails (exit 1) unless it is
    inside the noise (TPS and mean: Student's t over iterations; percentiles: order-statistic
    intervals of the pooled data). A check that cannot be made (BASE has no figure, or 0; too
    few transactions for a percentile's noise test) is not judged: exit 3 when nothing failed.
    Absolute limits hold every step of every run to a line."""
    _report_and_gate(runs, out, True, junit, markdown, limits)
