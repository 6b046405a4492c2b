"""`esbperf report` and `esbperf compare`: runs -> summary.csv, aggregate.csv, graphs, report.html.

A report is written into a folder of its own and never over an earlier one: the default folder
is RUN/report (then report-2, report-3, … if taken) for one run, and ./report-<UTC time> or
./compare-<UTC time> for several; an --out folder must be new or empty. Everything is first
written to a hidden `.partial-*` folder beside it and renamed into place when complete, so an
interrupted report leaves no half-written report folder.

The runner calls `write_report([run_dir], None)` after each run."""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl

from esbperf.analysis import compare as comparing
from esbperf.analysis import graphs as graphing
from esbperf.analysis.hlog import FOLDER as HLOG_FOLDER, write_hlogs
from esbperf.analysis.page import render
from esbperf.analysis.runs import Run, label_runs, load_runs
from esbperf.analysis.stats import (StepHistograms, aggregate, aggregate_verdicts, analyse_steps, summary_frame,
                                    with_verdicts)
from esbperf.analysis.validity import step_verdicts, validity_warnings
from esbperf.analysis.verdicts import advice, costs, judge_pairs
from esbperf.core.errors import EsbperfError
from esbperf.core.roles import ordered as ordered_roles
from esbperf.results.histogram import export_frame

CSV_DECIMALS = 4


@dataclass
class Analysis:
    """Everything a report shows, computed once."""

    runs: list[Run]
    plans: dict[str, list[Run]]                      # plan name -> its runs, drawn together
    roles: list[str]                                 # host roles of the runs: the five and load hosts
    summary: pl.DataFrame
    aggregate: pl.DataFrame
    step_histograms: dict[tuple, StepHistograms]     # (run, step_dir, test) -> one iteration's distributions
    histograms: dict[tuple, StepHistograms]          # stats.KEYS values -> iterations pooled
    labels: dict[tuple[str, str], str]               # (run, target) -> series label
    ratios: pl.DataFrame | None
    graphs: list[graphing.Graph]
    warnings: list[str]
    series_graphs: list[graphing.Graph] = field(default_factory=list)   # steps that drifted: their intervals
    warmup_graphs: list[graphing.Graph] = field(default_factory=list)   # each target's warm-up: TPS and compiler
    verdicts: pl.DataFrame | None = None             # every pair of series per step and figure (verdicts.py)
    advice: list = field(default_factory=list)      # forks and iterations a difference needs (verdicts.advice)


def analyse(run_dirs: list[Path], with_ratios: bool = False) -> Analysis:
    if not run_dirs:
        raise EsbperfError("no run folder given")
    runs = load_runs(run_dirs)
    plans = comparing.plan_groups(runs)
    if with_ratios:
        comparing.require_one_plan(plans)
        comparing.require_series(runs)
    labels = {key: label for members in plans.values() for key, label in label_runs(members).items()}
    roles = ordered_roles({role for run in runs for role in run.roles})
    rows, step_histograms = [], {}
    for run in runs:
        for step in analyse_steps(run, roles):
            for row, histograms in step:
                rows.append(row)
                step_histograms[(run.name, row["step_dir"], row["test"])] = histograms
    summary = summary_frame(rows)
    warnings = validity_warnings(plans, summary, roles)
    summary = with_verdicts(summary, step_verdicts(warnings))
    agg, pooled = aggregate(summary, step_histograms, roles)
    agg = aggregate_verdicts(agg, summary)
    links: dict[str, float] = {}
    for run in runs:
        for step in run.steps:
            for role in roles:
                if step.link_mbit(role):
                    links[role] = max(links.get(role, 0.0), step.link_mbit(role))
    graphs = []
    for plan, members in plans.items():
        rows_of_plan = agg.filter(pl.col("run").is_in([r.name for r in members]))
        prefix = f"{plan}-" if len(plans) > 1 else ""   # graph file names stay unique
        shared = graphing.cpu_groups(members, roles)      # hosts that read one CPU figure: one panel
        for scenario in sorted(rows_of_plan["scenario"].unique()):
            for g in graphing.scenario_graphs(rows_of_plan, scenario, labels, links, pooled, prefix, roles, shared):
                g.plan = plan
                graphs.append(g)
    ratios = comparing.ratios(agg, runs) if with_ratios else None
    return Analysis(runs, plans, roles, summary, agg, step_histograms, pooled, labels, ratios, graphs, warnings,
                    graphing.series_graphs(summary, step_histograms, labels),
                    graphing.warmup_graphs(runs, labels),
                    judge_pairs(summary, step_histograms, labels, agg), advice(summary, *costs(runs)))


def histograms_frame(step_histograms: dict[tuple, StepHistograms]) -> pl.DataFrame:
    """histograms.csv: export_frame's rows with the Grinder test of each (tests are never pooled)."""
    tests = dict.fromkeys(test for _, _, test in step_histograms)
    frames = [export_frame({(run, step_dir): {"response": h.response, "failed": h.failed, "latency": h.latency}
                            for (run, step_dir, t), h in step_histograms.items() if t == test})
              .with_columns(test=pl.lit(test, dtype=pl.Int64)) for test in tests]
    frame = pl.concat(frames) if frames else export_frame({}).with_columns(test=pl.lit(None, dtype=pl.Int64))
    return frame.select("run", "step_dir", "test", "kind", "value_us", "count")


def default_out_dir(runs_dirs: list[Path], kind: str) -> Path:
    if len(runs_dirs) == 1 and kind == "report":
        base = Path(runs_dirs[0]) / "report"
    else:
        base = Path.cwd() / f"{kind}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _check_out_dir(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise EsbperfError(f"{out}: already exists and is not empty; reports never overwrite earlier ones "
                           "(choose another --out, or leave it out for a new folder)")


def write_report(run_dirs: list[Path], out: Path | None = None, compare: bool = False,
                 embed_graphs: bool = True) -> Path:
    """Analyse `run_dirs` and write the report folder; returns its path.

    compare=True adds the ratio table (ratios.csv) of every series (run and target) against the
    reference: the first run's `direct` target, else its first target. embed_graphs=False: report.html
    shows the SVG graphs beside it rather than carrying PNG copies (a report published with them)."""
    return build_report(run_dirs, out, compare, embed_graphs=embed_graphs)[0]


def build_report(run_dirs: list[Path], out: Path | None = None, compare: bool = False,
                 check: Callable[[Analysis], None] | None = None, embed_graphs: bool = True) -> tuple[Path, Analysis]:
    """write_report, also returning what was analysed (for the CLI's summary). `check` is called
    with the analysis before anything is written: an error it raises (the gate refusing its
    limits) leaves no report behind."""
    run_dirs = [Path(p) for p in run_dirs]
    kind = "compare" if compare else "report"
    if out is not None:
        _check_out_dir(Path(out))
    analysis = analyse(run_dirs, with_ratios=compare)
    if check is not None:
        check(analysis)
    out = Path(out) if out is not None else default_out_dir(run_dirs, kind)
    _check_out_dir(out)   # again: the folder may have appeared while we analysed
    partial = out.parent / f".partial-{out.name}-{os.getpid()}"
    try:
        partial.mkdir(parents=True)
    except OSError as e:
        raise EsbperfError(f"cannot write a report next to {out}: {e.strerror}; choose another --out") from None
    try:
        analysis.summary.write_csv(partial / "summary.csv", float_precision=CSV_DECIMALS)
        analysis.aggregate.write_csv(partial / "aggregate.csv", float_precision=CSV_DECIMALS)
        histograms_frame(analysis.step_histograms).write_csv(partial / "histograms.csv")
        write_hlogs(analysis, partial / HLOG_FOLDER)
        if analysis.ratios is not None:
            analysis.ratios.write_csv(partial / "ratios.csv", float_precision=CSV_DECIMALS)
        if analysis.verdicts is not None and analysis.verdicts.height:
            analysis.verdicts.write_csv(partial / "verdicts.csv", float_precision=CSV_DECIMALS)
        graphing.draw_all(analysis.graphs + analysis.series_graphs + analysis.warmup_graphs, partial / "graphs")
        (partial / "report.html").write_text(render(analysis, kind, partial, embed_graphs), encoding="utf-8")
        if out.exists():
            out.rmdir()          # an empty folder the user named; rename cannot replace it otherwise
        partial.rename(out)      # fails, rather than replaces, if a report appeared there meanwhile
    except OSError as e:
        shutil.rmtree(partial, ignore_errors=True)
        raise EsbperfError(f"could not write the report to {out}: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out, analysis
