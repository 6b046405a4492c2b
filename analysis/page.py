"""report.html: one self-contained page (inline CSS, graphs as PNG data URIs, no script, nothing
fetched from the network), with links to the SVG graphs and CSV files beside it. A report made to be
published with its graphs (a round's) shows the SVG files beside it instead of carrying PNG copies.

The page opens on its answer: the headline (analysis/headline.py) and the thesis's own graphs fill
the first screen; then one line of validity warnings (folded), the verdicts as a matrix (their
sentences folded), and the detail: tables and the hosts' graphs per plan, the steps that moved, the
runs and their plans. Nothing is left out: what is folded is a click away, and every section has an
anchor."""
from __future__ import annotations

import base64
import json
import time
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from esbperf import __version__
from esbperf.analysis import compare as comparing
from esbperf.analysis import graphs
from esbperf.analysis import headline as headlines
from esbperf.analysis.verdicts import FIGURE_NAMES, family_line, percent_level, signed_percent
from esbperf.analysis.runs import Run
from esbperf.analysis.stats import KEYS, LATENCY_PERCENTILES, MIN_ITERATIONS_FOR_CI, PERCENTILES
from esbperf.core.steady import PERCENTILE_CONFIDENCE, min_transactions

if TYPE_CHECKING:
    from esbperf.analysis.report import Analysis

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1250px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .88em; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } td.text, th.text, td.value, th.value { text-align: left; }
td.value { overflow-wrap: anywhere; min-width: 12em; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: .5em 0 1em; } .table-wrap table { margin: 0; }
tr.flagged td { background: #fde8e8; }
tr.invalid td { font-style: italic; }
.headline { background: #eef4fb; border: 1px solid #9bb8d8; padding: .4em 1em; margin: .6em 0 1em; }
.headline ul { margin: .2em 0; padding-left: 1.2em; } .headline li { margin: .15em 0; }
.headline p { margin: .3em 0; } .headline.none-valid { background: #fdecea; border-color: #d99; }
h1 + .headline { margin-top: .3em; }
details > summary { cursor: pointer; }
.warnings { background: #fff6e0; border: 1px solid #e0c070; padding: .3em 1em; }
.warnings details, .warnings p { margin: .4em 0; } .warnings summary { cursor: pointer; }
.warnings > details > div { margin-left: 1em; }
figure.matrix .matrix-box { max-height: 420px; overflow: auto; border: 1px solid #eee; }
table.matrix { margin: 0; font-size: .85em; width: 100%; } table.matrix tr.group th { background: #e8eef5; }
table.matrix td.verdict { text-align: center; white-space: nowrap; }
table.matrix td.marked { font-style: italic; color: #666; }
figure.matrix figcaption { font-size: .8em; margin-top: .2em; }
nav.contents { font-size: .88em; margin: .6em 0; } nav.contents a { margin-right: .8em; }
.warnings ul { margin: .3em 0 .6em; padding-left: 1.5em; font-size: .9em; } .warnings .count { font-weight: bold; }
.ok { background: #e8f6e8; border: 1px solid #9c9; padding: .5em 1em; }
.graphs { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; flex: 0 1 calc(50% - .5em); } figure.wide { flex-basis: 100%; }
figure img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .85em; }
.muted { color: #777; font-size: .85em; }
"""


def fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return escape(str(value))


def with_ci(mean: Any, ci: Any, digits: int = 1) -> str:
    return fmt(mean, digits) if ci is None else f"{fmt(mean, digits)} ± {fmt(ci, digits)}"


def table(headers: list[str], rows: list[list[str]], text_columns: int = 1,
          row_classes: list[str] | None = None, text_last: bool = False, value_class: str = "") -> str:
    """A table in a box of its own that scrolls sideways when the table is wider than the page:
    cells break only between words, so no column is squeezed below its longest word. The first
    `text_columns` columns (and the last with `text_last`) are labels, left-aligned; the others
    get `value_class` ("value": free text that may break anywhere, e.g. long paths)."""
    def cell(tag: str, i: int, content: str) -> str:
        text = i < text_columns or (text_last and i == len(headers) - 1)
        cls = ' class="text"' if text else f' class="{value_class}"' if value_class else ""
        return f"<{tag}{cls}>{content}</{tag}>"

    head = "".join(cell("th", i, escape(h)) for i, h in enumerate(headers))
    body = []
    for n, row in enumerate(rows):
        cls = f' class="{row_classes[n]}"' if row_classes and row_classes[n] else ""
        body.append(f"<tr{cls}>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>")
    return (f"<div class=\"table-wrap\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            "</table></div>")


def _flatten(data: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, list):
            out[name] = json.dumps(value)
        else:
            out[name] = str(value)
    return out


def _runs_section(analysis: "Analysis") -> str:
    runs = analysis.runs
    envs = [_flatten({k: v for k, v in r.info.items() if k not in ("plan",)}) for r in runs]
    keys = list(dict.fromkeys(k for e in envs for k in e))
    rows = [["folder"] + [escape(str(r.dir)) for r in runs],
            ["label"] + [escape(r.label) for r in runs],
            ["plan"] + [escape(r.plan_name) for r in runs],
            ["finished steps"] + [str(len(r.steps)) for r in runs],
            ["unfinished steps skipped"] + [str(r.unfinished_steps) for r in runs]]
    rows += [[escape(k)] + [escape(e.get(k, "–")) for e in envs] for k in keys]
    return ("<h2 id=\"runs\">Runs and environment</h2><details><summary>Per run: its folder, plan, steps, testbed "
            "and hosts (their cores), versions, commit and engines' settings (run.json)</summary>"
            + table(["", *[r.name for r in runs]], rows, 1, value_class="value") + "</details>")


# run.json `calibration` per payload (esbperf/run/calibration.py's summary), in this order.
CALIBRATION_COLUMNS = (("floor_mean_us", "timed floor mean µs"), ("floor_p50_us", "floor p50 µs"),
                       ("floor_p99_us", "floor p99 µs"), ("outside_clock_us", "outside the clock µs/tx"),
                       ("tps", "TPS"), ("threads", "threads"), ("transactions", "transactions"), ("errors", "errors"))


def _calibration_section(analysis: "Analysis") -> str:
    """What the client itself adds per transaction (run.json `calibration`, measured before the
    first step): the floor under every response time, and the time outside the clock that
    Little's law adds."""
    rows = []
    for run in analysis.runs:
        calibration = run.info.get("calibration")
        for label, entry in (calibration.items() if isinstance(calibration, dict) else []):
            if isinstance(entry, dict):
                rows.append([escape(run.label), escape(str(label))]
                            + [fmt(entry.get(key), 1) if isinstance(entry.get(key), (int, float)) else "–"
                               for key, _ in CALIBRATION_COLUMNS])
    if not rows:
        return ("<h2 id=\"calibration\">Client calibration</h2><p class=\"muted\">No run holds a client "
                "calibration (run.json `calibration`).</p>")
    return ("<h2 id=\"calibration\">Client calibration</h2><p class=\"muted\">What the client adds to every "
            "transaction, measured before the first step against a canned answer: the timed floor is inside "
            "each response time; the time outside the clock is per transaction, between one timed request "
            "and the next.</p>" + table(["run", "payload", *(h for _, h in CALIBRATION_COLUMNS)], rows, 2))


def _plan_section(plan: str, run: Run) -> str:
    body = (yaml.safe_dump(run.plan, sort_keys=False, allow_unicode=True) if run.plan
            else "(run.json holds no plan settings)")
    return (f"<h2 id=\"plan-{escape(plan)}\">Plan: {escape(plan or '(unnamed)')}</h2>"
            f"<details><summary>The plan as it was run</summary><pre>{escape(body)}</pre></details>")


def _warnings_section(analysis: "Analysis") -> str:
    """One line: how many validity warnings, of which kinds, and how many steps are not valid; folded
    under it the warnings by kind (analysis/validity.py's ValidityWarning): one line each saying what
    and for how many steps (or runs), the steps folded under it."""
    if not analysis.warnings:
        return "<p id=\"validity\" class=\"ok\">No validity warning.</p>"
    kinds: dict[str, list] = {}
    for n, warning in enumerate(analysis.warnings):     # a plain str is a kind of its own
        kinds.setdefault(getattr(warning, "kind", None) or f"warning-{n}", []).append(warning)
    blocks = []
    for kind, members in kinds.items():
        items = [item for w in members for item in getattr(w, "items", ())]
        if not items:
            blocks.append(f"<p id=\"validity-{escape(kind)}\">{escape(members[0])}</p>")
            continue
        unit = f"{members[0].unit}{'' if len(items) == 1 else 's'}"
        listed = "".join(f"<li>{escape(item)}</li>" for item in items)
        blocks.append(f"<details id=\"validity-{escape(kind)}\"><summary><span class=\"count\">{len(items)} "
                      f"{unit}</span>: {escape(members[0].what)}</summary><ul>{listed}</ul></details>")
    n = len(analysis.warnings)
    names = ", ".join(dict.fromkeys(escape(k) if not k.startswith("warning-") else "other" for k in kinds))
    aggregate = getattr(analysis, "aggregate", None)
    invalid = ""
    if aggregate is not None and "valid" in aggregate.columns:
        bad = aggregate.filter(pl.col("valid") != "yes").height
        invalid = f"; {bad} of {aggregate.height} steps not valid" if bad else f"; all {aggregate.height} steps valid"
    return (f"<div id=\"validity\" class=\"warnings\"><details><summary><span class=\"count\">{n} validity "
            f"warning{'s' * (n != 1)}</span> ({names}){invalid} <span class=\"muted\">— details</span></summary>"
            f"<div>{''.join(blocks)}</div></details></div>")


def _spread(r: dict, name: str, digits: int = 1) -> str:
    """A pooled figure, and the range of its per-iteration values when there are several."""
    low, high = r.get(f"{name}_iter_min"), r.get(f"{name}_iter_max")
    if r["iterations"] < 2 or low is None:
        return fmt(r[name], digits)
    return f"{fmt(r[name], digits)} <span class=\"muted\">({fmt(low, digits)}–{fmt(high, digits)})</span>"


def _averaged(r: dict, name: str, digits: int = 1) -> str:
    """A figure averaged over iterations: ± its 95 % confidence interval from
    MIN_ITERATIONS_FOR_CI iterations on, below that the range of the iterations in brackets."""
    if r["iterations"] >= MIN_ITERATIONS_FOR_CI:
        return with_ci(r[name], r[f"{name}_ci95"], digits)
    return _spread(r, name, digits)


def _spread_note(agg: pl.DataFrame) -> str:
    """What a table's brackets and ± are, for the iterations its rows have."""
    counts = set(agg["iterations"].to_list())
    if max(counts) < 2:
        return "<p class=\"muted\">One iteration: no spread to show.</p>"
    notes = ["In brackets: the range of the per-iteration values (min–max)."]
    if max(counts) >= MIN_ITERATIONS_FOR_CI:
        notes.append("± is the 95 % confidence interval over iterations (Student t) of the figures averaged "
                     "over them (TPS, threads, CPU, GC).")
    if any(2 <= n < MIN_ITERATIONS_FOR_CI for n in counts):
        notes.append(f"With fewer than {MIN_ITERATIONS_FOR_CI} iterations those figures show the range of the "
                     "iterations too, not a confidence interval (one of 2 values is ± 6.4 times their difference).")
    return f"<p class=\"muted\">{' '.join(notes)}</p>"


def _test_cells(r: dict, per_test: bool) -> list[str]:
    """The test column of a table whose steps hold several Grinder tests (a user's script)."""
    return [escape(graphs.test_label(r))] if per_test else []


def _xcheck_cells(r: dict) -> list[str]:
    """wrk's figures beside the step's (step.json `xcheck`), or why wrk did not run, or that its
    run is void (wrk had errors: their figures are not wrk's measure of the target)."""
    void = f"void: wrk had {r['xcheck_errors']} error(s)" if r["xcheck_errors"] else ""
    if r["xcheck_tps"] is None:
        reason = void or (f"skipped: {r['xcheck_skipped']}" if r["xcheck_skipped"] else "–")
        return [escape(reason), "–", "–", "–"]
    wrk = " / ".join(fmt(r[f"xcheck_{k}_ms"], 3) for k in ("mean", "p50", "p99"))
    diff = r["xcheck_mean_diff_ms"]
    return [_averaged(r, "xcheck_tps") + (f" ({escape(void)} in other iterations)" if void else ""),
            fmt(r["xcheck_tps_ratio"], 2), wrk, "–" if diff is None else f"{diff:+.3f}"]


XCHECK_HEADERS = ["wrk TPS", "TPS ÷ wrk", "wrk mean / p50 / p99 ms", "mean − wrk ms"]


# A step's bound in a table cell (analysis/bottleneck.py BOUNDS).
BOUND_CELLS = {"client": "client", "link": "link", "backends": "back ends", "engine": "engine", "none": "none"}


def bound_cell(r: dict) -> str:
    """What bounded the step (`bound`), with how many of its iterations when not all, and the
    figures it was decided from as the cell's title; a dash when no monitor was read."""
    kind = r.get("bound")
    if not kind:
        return "–"
    some = r.get("bound_iterations")
    text = BOUND_CELLS[kind] + (f" ({some} of {r['iterations']})" if some and some < r["iterations"] else "")
    why = r.get("bound_by") or ""
    return f"<span title=\"{escape(why)}\">{escape(text)}</span>" if why else escape(text)


def _bound_note(agg: pl.DataFrame) -> str:
    """What the bound column says, when a step of the table has one."""
    if "bound" not in agg.columns or agg["bound"].is_null().all():
        return ""
    return ("<p class=\"muted\">Bound: what saturated during the step (its title: the figures it was decided "
            "from). <em>engine</em>: the target's own processes at their host's cores; <em>none</em>: nothing "
            "saturated. <em>link</em>, <em>back ends</em>, <em>client</em>: a limit of the testbed, so the step "
            "measures that limit, not the target, and its TPS is the target's at least; it is not invalid for "
            "that.</p>")


def _marks(r: dict) -> list[str]:
    return (["errors"] if r["has_errors"] else []) + (["behind schedule"] if r["behind_schedule"] else []) + \
        (["cross-check failed"] if r["xcheck_failed"] else []) + \
        ([f"not valid: {_kinds(r['valid'])}"] if r.get("valid", "yes") != "yes" else [])


def _kinds(valid: str) -> str:
    """`valid`'s warning names for a cell: comma-separated, their hyphens unbreakable (a cell is at
    least as wide as its longest word)."""
    return ", ".join(valid.split(";")).replace("-", "\u2011")


def _row_class(r: dict, flagged: bool) -> str:
    """A table row's classes: `flagged` (red) when `flagged`, `invalid` (italic) when a validity
    warning names the step."""
    return " ".join((["flagged"] if flagged else []) + (["invalid"] if r.get("valid", "yes") != "yes" else []))


def _percentile(analysis: "Analysis", r: dict, kind: str, name: str) -> str:
    """A pooled percentile (`rt` or `lat`, `p99`, …) with its iterations' range; a dash where it is
    not measured: too few transactions for it (esbperf/core/steady.py), said in the dash's title."""
    figure = f"{kind}_{name}_ms"
    if r[figure] is not None:
        return _spread(r, figure, 3)
    pooled = analysis.histograms.get(tuple(r[k] for k in KEYS))
    h = None if pooled is None else pooled.latency if kind == "lat" else pooled.response
    p = (LATENCY_PERCENTILES if kind == "lat" else PERCENTILES)[name]
    if h is None or not h.n:
        return "–"
    return (f"<span title=\"not measured: {h.n:,} transactions, a p{p:g} needs {min_transactions(p):,}\">–"
            "</span>")


def _not_measured_note() -> str:
    """What a dash in a percentile column means."""
    needs = ", ".join(f"p{p:g} {min_transactions(p):,}" for p in (90, 95, 99, 99.9))
    return (f"<p class=\"muted\">A percentile is shown only from enough transactions for its distribution-free "
            f"{PERCENTILE_CONFIDENCE:.0%} confidence interval to lie within the data ({needs}); a dash is one not "
            "measured (its title says how many there were). Italic rows are steps a validity warning names "
            "(hollow markers on the graphs).</p>")


def _scenario_table(analysis: "Analysis", runs: list[Run], scenario: str) -> str:
    names = [r.name for r in runs]
    agg = (analysis.aggregate.filter(pl.col("scenario") == scenario, pl.col("run").is_in(names),
                                     pl.col("model") == "closed")
           .sort("payload_bytes", "users", "run", "target", "test"))
    if not agg.height:
        return ""
    per_test = graphs.several_tests(agg)
    crosschecked = (agg["xcheck_tps"].is_not_null().any() or (agg["xcheck_skipped"] != "").any()
                    or agg["xcheck_errors"].is_not_null().any())
    headers = ["series", *(["test"] if per_test else []), "payload", "users", "iterations", "threads seen", "TPS",
               "mean RT ms", "p50", "p90", "p99", "p99.9", "errors %", "failed: mean ms", "failed: p99 ms",
               *(XCHECK_HEADERS if crosschecked else []), "ESB host CPU %", "ESB JVM CPU % of a core",
               "ESB GC throughput %", "ESB GC p99 pause ms", "bound", "marks"]
    rows, classes = [], []
    for r in agg.iter_rows(named=True):
        rows.append([escape(analysis.labels[(r["run"], r["target"])]), *_test_cells(r, per_test),
                     escape(r["payload_label"]), fmt(r["users"]),
                     fmt(r["iterations"]), _averaged(r, "threads_seen"),
                     _averaged(r, "tps"), _spread(r, "rt_mean_ms", 3),
                     *(_percentile(analysis, r, "rt", p) for p in ("p50", "p90", "p99", "p99_9")),
                     _spread(r, "error_percent", 2), fmt(r["failed_rt_mean_ms"], 3), fmt(r["failed_rt_p99_ms"], 3),
                     *(_xcheck_cells(r) if crosschecked else []),
                     _averaged(r, "esb_cpu_mean"), _averaged(r, "esb_proc_cpu_mean"),
                     _averaged(r, "esb_gc_throughput_percent", 2), _averaged(r, "esb_gc_pause_p99_ms", 2),
                     bound_cell(r), escape("; ".join(_marks(r))) or "no"])
        classes.append(_row_class(r, r["xcheck_failed"]))
    return (_spread_note(agg) + table(headers, rows, 4 if per_test else 3, classes, text_last=True)
            + _bound_note(agg) + _not_measured_note())


def _open_table(analysis: "Analysis", runs: list[Run], scenario: str) -> str:
    names = [r.name for r in runs]
    agg = (analysis.aggregate.filter(pl.col("scenario") == scenario, pl.col("run").is_in(names),
                                     pl.col("model") == "open")
           .sort("payload_bytes", "rate", "users", "run", "target", "test"))
    if not agg.height:
        return ""
    per_test = graphs.several_tests(agg)
    headers = ["series", *(["test"] if per_test else []), "payload", "offered /s", "threads", "iterations",
               "started /s", "TPS", "latency p50 ms",
               "latency p99 ms", "latency p99.9 ms", "service p50 ms", "service p99 ms", "late starts %",
               "never started", "max lag ms", "errors %", "bound", "marks"]
    rows, classes = [], []
    for r in agg.iter_rows(named=True):
        rows.append([escape(analysis.labels[(r["run"], r["target"])]), *_test_cells(r, per_test),
                     escape(r["payload_label"]), fmt(r["rate"], 1),
                     fmt(r["users"]), fmt(r["iterations"]), _averaged(r, "start_rate"), _averaged(r, "tps"),
                     *(_percentile(analysis, r, "lat", p) for p in ("p50", "p99", "p99_9")),
                     *(_percentile(analysis, r, "rt", p) for p in ("p50", "p99")),
                     _spread(r, "late_start_percent", 2), _averaged(r, "never_started"), _spread(r, "max_lag_ms", 1),
                     _spread(r, "error_percent", 2), bound_cell(r),
                     escape("; ".join(_marks(r))) or "no"])
        classes.append(_row_class(r, r["behind_schedule"]))
    return ("<p class=\"muted\">Open model: requests due at a fixed rate. Latency counts from each request's "
            "due start (corrected for coordinated omission), of every request due in the window: failed ones, and "
            "those never started (counted with the wait they had reached at the window's end); the service time "
            "from its actual start, of the successful ones. Late starts: the share of the requests due that "
            "started late or never.</p>"
            f"<p>{OPEN_NOT_CROSSCHECKED}</p>"
            + _spread_note(agg) + table(headers, rows, 3 if per_test else 2, classes, text_last=True)
            + _bound_note(agg) + _not_measured_note())


OPEN_NOT_CROSSCHECKED = ("Open-model steps are not cross-checked against wrk: wrk keeps a fixed number of "
                         "connections busy (a closed model), so its figures answer another question.")


def _figure(graph, folder: Path, embed: bool = True, plan: str = "") -> str:
    """A graph as a figure; `plan` names its plan in the caption (a report of several plans)."""
    svg = graph.files["svg"].relative_to(folder).as_posix()
    src = ("data:image/png;base64," + base64.b64encode(graph.files["png"].read_bytes()).decode("ascii")
           if embed else svg)
    wide = ' class="wide"' if len(graph.panels) > 1 else ""
    return (f"<figure id=\"{escape(graph.name)}\"{wide}><img src=\"{escape(src)}\" "
            f"alt=\"{escape(graph.title)}\"><figcaption>{escape(f'{plan}: ' if plan else '')}{escape(graph.title)} "
            f"(<a href=\"{escape(svg)}\">SVG</a>)</figcaption></figure>")


def _host_graph_name(graph) -> str:
    """What a hosts' graph shows, from its title: `CPU per host`, `network per host`, …"""
    what = graph.title.split(": ", 1)[-1]
    for cut in (" vs ", " (mean"):
        what = what.split(cut)[0]
    return what


def _headline_section(analysis: "Analysis") -> str:
    """The headline (analysis/headline.py): a sentence per engine and sweep, or that no step was valid."""
    found = headlines.of_analysis(analysis)
    if found.none_valid:
        return f"<div id=\"headline\" class=\"headline none-valid\"><p>{escape(found.sentences[0].text)}</p></div>"
    items = "".join(f"<li>{f'<b>{escape(s.topic)}:</b> ' if s.topic else ''}{escape(s.text)}</li>"
                    for s in found.sentences)
    return f"<div id=\"headline\" class=\"headline\"><ul>{items}</ul></div>" if items else ""


def _thesis_section(analysis: "Analysis", folder: Path, embed: bool) -> str:
    """The thesis's own graphs of every plan and scenario (graphs.Graph.thesis), right after the
    headline, the verdict matrix beside the first of them."""
    several = len(analysis.plans) > 1
    figures = [_figure(g, folder, embed, g.plan if several else "") for g in analysis.graphs if g.thesis]
    if not figures:
        return ""
    figures.insert(1, _matrix_figure(analysis))
    return f"<div id=\"graphs\" class=\"graphs\">{''.join(figures)}</div>"


def _contents(analysis: "Analysis") -> str:
    """One line of links to the page's sections."""
    verdicts = getattr(analysis, "verdicts", None)
    links = ([("graphs", "graphs")] if any(g.thesis for g in analysis.graphs) else []) + [("validity", "validity")]
    if (verdicts is not None and verdicts.height) or getattr(analysis, "advice", None):
        links.append(("verdicts", "verdicts"))
    if analysis.ratios is not None:
        links.append(("ratios", "ratios"))
    for plan, runs in analysis.plans.items():
        for scenario in sorted({s.meta["scenario"] for r in runs for s in r.steps}):
            name = f"{plan} {scenario}" if len(analysis.plans) > 1 else scenario
            links.append((graphs.slug(f"{plan}-{scenario}"), f"tables and hosts: {name}"))
    if analysis.series_graphs:
        links.append(("drift", "steps that moved"))
    if getattr(analysis, "warmup_graphs", None):
        links.append(("warm-up", "warm-ups"))
    links += [("calibration", "calibration"), ("runs", "runs and plans")]
    return ("<nav class=\"contents\">On this page: "
            + "".join(f"<a href=\"#{escape(anchor)}\">{escape(text)}</a>" for anchor, text in links) + "</nav>")


def _ratios_section(analysis: "Analysis") -> str:
    ratios = analysis.ratios
    if ratios is None:
        return ""
    reference = analysis.labels[comparing.reference_series(analysis.runs)]
    if ratios.is_empty():
        return (f"<h2 id=\"ratios\">Ratios to {escape(reference)}</h2>"
                "<p>No step (scenario, payload, users) is common to the runs.</p>")
    label = analysis.labels
    headers = ["scenario", "payload", "users", "rate", "series", "TPS", "TPS ratio", "mean RT ms", "RT ratio",
               "p99 ms", "p99 ratio", "ESB CPU %", "CPU ratio", "valid (series / reference)",
               "bound (series / reference)"]
    rows = [[escape(r["scenario"]), escape(r["payload_label"]), fmt(r["users"]), fmt(r["rate"]),
             escape(label[(r["run"], r["target"])]),
             fmt(r["tps"]), fmt(r["tps_ratio"], 3), fmt(r["rt_mean_ms"], 2), fmt(r["rt_mean_ms_ratio"], 3),
             fmt(r["rt_p99_ms"]), fmt(r["rt_p99_ms_ratio"], 3), fmt(r["esb_cpu_mean"]),
             fmt(r["esb_cpu_mean_ratio"], 3), _validity_pair(r), _bound_pair(r)]
            for r in ratios.iter_rows(named=True)]
    return (f"<h2 id=\"ratios\">Ratios to {escape(reference)}</h2>"
            "<p>Each series' figures (iterations pooled) divided by the reference's, step by step "
            "(ratios.csv). TPS ratio &gt; 1 and RT ratio &lt; 1 mean better than the reference. A ratio of "
            "steps bounded by the testbed (link, back ends, client) is a figure of the testbed, not of the "
            "targets: its bound column says which.</p>"
            + table(headers, rows, 5, text_last=True))


def _bound_pair(r: dict) -> str:
    """A ratio row's bounds: what bounded the series' step and the reference's, and the note when a
    testbed limit makes the ratio a figure of the testbed (compare.bound_note)."""
    if "bound" not in r:
        return "–"
    pair = f"{BOUND_CELLS.get(r['bound'], '–')} / {BOUND_CELLS.get(r['bound_reference'], '–')}"
    note = r.get("bound_note")
    return escape(f"{pair}: {note}" if note else pair)


def _validity_pair(r: dict) -> str:
    """A ratio row's verdicts: `yes`, or what names the series' step and the reference's."""
    mine, theirs = r.get("valid") or "yes", r.get("valid_reference") or "yes"
    if mine == theirs == "yes":
        return "yes"
    return escape(f"{_kinds(mine)} / {_kinds(theirs)}")


def _series_section(analysis: "Analysis", folder: Path, embed: bool) -> str:
    """The steps whose window drifted, interval by interval (graphs.series_graphs)."""
    if not analysis.series_graphs:
        return ""
    figures = "".join(_figure(g, folder, embed) for g in analysis.series_graphs)
    n = len(analysis.series_graphs)
    return ("<h2 id=\"drift\">Steps that moved while measured</h2><details><summary>"
            f"{n} step iteration{'s' * (n != 1)}, interval by interval</summary><p class=\"muted\">Throughput and "
            "mean response time of each interval of the steps named by the drift warning or whose warm-up found no "
            "steady state: the warm-up dashed (negative seconds), the measurement window solid.</p>"
            + f"<div class=\"graphs\">{figures}</div></details>")


def _warmup_section(analysis: "Analysis", folder: Path, embed: bool) -> str:
    """Each target's warm-up at the load it was judged at (graphs.warmup_graphs)."""
    found = getattr(analysis, "warmup_graphs", None)
    if not found:
        return ""
    figures = "".join(_figure(g, folder, embed) for g in found)
    return ("<h2 id=\"warm-up\">Warm-ups</h2><details><summary>Each target's warm-up before its first step"
            "</summary><p class=\"muted\">The throughput of each second at the load the target was judged at "
            "(the last of the loads it was warmed under), and a JVM's JIT compiler in the same seconds: a target "
            "is warm when its throughput has settled and its compiler has gone quiet (run.json "
            "<code>target_warmup</code>; docs/methodology.md).</p>"
            + f"<div class=\"graphs\">{figures}</div></details>")


# Marks of a verdict matrix's cell: a side a validity warning names, a side bounded by the testbed.
INVALID_MARK, BOUNDED_MARK = "*", "†"
# A cell's outcome where it shows no change: no difference shown; not judged (no interval, or a
# testbed bound that hides the comparison: verdicts.csv `shown` empty).
NO_DIFFERENCE, NOT_JUDGED = "≈", "–"


def _ratio_cell(ratio: float, low: float, high: float) -> str:
    """`B ÷ A` as a change with its interval: `−45 % (−58 to −29)`, or a multiple from 2 on: `×14 (12–18)`."""
    if ratio >= 2:
        return f"×{ratio:.1f} ({low:.1f}–{high:.1f})" if ratio < 10 else f"×{ratio:.0f} ({low:.0f}–{high:.0f})"

    def pct(x: float) -> str:
        return signed_percent(x - 1)
    return f"{pct(ratio)} % ({pct(low)} to {pct(high)})"


def verdict_cell(r: dict) -> tuple[str, list[str]]:
    """A verdict (a verdicts.csv row) as the matrix shows it, `b` against `a`: its change and interval
    where a difference is shown, NO_DIFFERENCE where none is, NOT_JUDGED where not judged (a verdict
    a testbed bound leaves not judged has an interval, but `shown` empty); and its marks
    (INVALID_MARK, BOUNDED_MARK). New columns are welcome: a `bounded` flag marks the cell too."""
    marks = []
    if any((r.get(k) or "yes") != "yes" for k in ("valid_a", "valid_b")):
        marks.append(INVALID_MARK)
    if r.get("bound_note") or r.get("bounded") in (True, "true", "yes"):
        marks.append(BOUNDED_MARK)
    ratio, low, high, shown = r.get("ratio"), r.get("ratio_low"), r.get("ratio_high"), r.get("shown")
    if shown is None or ratio is None or low is None or high is None or not (ratio and low and high):
        return NOT_JUDGED, marks
    if not shown:
        return NO_DIFFERENCE, marks
    return _ratio_cell(1 / ratio, 1 / high, 1 / low), marks


def _load(r: dict) -> str:
    if r.get("model") == "open" and r.get("rate"):
        return f"{r['rate']:g}/s"
    return f"{r['users']} user{'s' * (r['users'] != 1)}"


def verdict_matrix(verdicts: pl.DataFrame, plans: list[str] | None = None) -> str:
    """Every verdict of verdicts.csv in a compact matrix: a row per step, a column per figure, under a
    heading row per plan and pair ("demo-payload: camel against direct"); each cell `data-verdict` =
    its row in verdicts.csv, its sentence as its title. Groups follow `plans`' order (the report's),
    then the file's; rows the file's order within."""
    plans = list(plans or [])
    plans += [p for p in dict.fromkeys(verdicts["plan"]) if p not in plans]
    several_plans = len(set(verdicts["plan"])) > 1
    several_scenarios = verdicts["scenario"].n_unique() > 1
    several_tests = verdicts["test"].n_unique() > 1
    figures = list(dict.fromkeys(verdicts["figure"]))
    groups: dict[tuple, dict[tuple, dict[str, tuple[int, dict]]]] = {}
    for n, r in enumerate(verdicts.iter_rows(named=True)):
        step = tuple(r.get(k) for k in ("scenario", "payload_bytes", "payload_label", "users", "model", "rate", "test"))
        groups.setdefault((r["plan"], r["a"], r["b"]), {}).setdefault(step, {})[r["figure"]] = (n, r)
    body = []
    for (plan, a, b), steps in sorted(groups.items(), key=lambda kv: plans.index(kv[0][0])):
        body.append(f"<tr class=\"group\"><th class=\"text\" colspan=\"{1 + len(figures)}\">"
                    f"{escape(f'{plan}: ' if several_plans else '')}{escape(b)} against {escape(a)}</th></tr>")
        for step, cells in steps.items():
            first = next(iter(cells.values()))[1]
            label = " · ".join([*([first["scenario"]] if several_scenarios else []), first["payload_label"],
                                _load(first), *([f"test {first['test']}"] if several_tests else [])])
            tds = []
            for figure in figures:
                if figure not in cells:
                    tds.append("<td class=\"verdict\"></td>")
                    continue
                n, r = cells[figure]
                text, marks = verdict_cell(r)
                tds.append(f"<td class=\"verdict{' marked' if marks else ''}\" data-verdict=\"{n}\" "
                           f"title=\"{escape(r['sentence'] or '')}\">{escape(text)}{escape(''.join(marks))}</td>")
            body.append(f"<tr><td class=\"text\">{escape(label)}</td>{''.join(tds)}</tr>")
    head = "<th class=\"text\">step</th>" + "".join(f"<th>{escape(FIGURE_NAMES.get(f, f))}</th>" for f in figures)
    return (f"<table class=\"matrix\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def matrix_legend(verdicts: pl.DataFrame) -> str:
    """The matrix's legend: the level of its intervals (the family's, forks.Family: 95 % only when
    every verdict shows a difference), each outcome's sign and each mark."""
    levels = verdicts["confidence"].drop_nulls() if "confidence" in verdicts.columns else pl.Series([])
    level = f" at {percent_level(levels.max())} (the family's level)" if levels.len() else ""
    return (f"Verdicts, B against A: B ÷ A − 1 (× a multiple) with its interval{level}; {NO_DIFFERENCE} no "
            f"difference shown; {NOT_JUDGED} not judged; {INVALID_MARK} a side not valid; {BOUNDED_MARK} a side "
            "bounded by the testbed. A cell's title is its sentence (all of them: <a href=\"#verdicts\">Verdicts"
            "</a>, <a href=\"verdicts.csv\">verdicts.csv</a>).")


def _matrix_figure(analysis: "Analysis") -> str:
    """The verdict matrix as a figure of the first row, beside the first graph: at a glance, in a box
    that scrolls when it is taller than a graph."""
    verdicts = getattr(analysis, "verdicts", None)
    if verdicts is None or not verdicts.height:
        return ""
    return (f"<figure id=\"verdict-matrix\" class=\"matrix\"><div class=\"matrix-box\">"
            f"{verdict_matrix(verdicts, list(analysis.plans))}</div><figcaption class=\"muted\">{matrix_legend(verdicts)}"
            "</figcaption></figure>")


def _verdicts_section(analysis: "Analysis") -> str:
    """What the verdict matrix at the top says (verdicts.csv: every pair of series at every step they
    share, judged per figure), its sentences folded; and, folded, how many forks and iterations
    would resolve a difference of 5 % and 10 % (forks.repetitions). The matrix itself is here only
    when the page has no graph to put it beside."""
    verdicts = getattr(analysis, "verdicts", None)
    advice = getattr(analysis, "advice", None) or []
    if (verdicts is None or not verdicts.height) and not advice:
        return ""
    out = ["<h2 id=\"verdicts\">Verdicts</h2>"]
    if verdicts is not None and verdicts.height:
        one_fork = bool(verdicts["one_fork"].any())
        beside = any(g.thesis for g in analysis.graphs)
        out.append("<p class=\"muted\">" + escape(family_line(verdicts)) + ". "
                   "Each pair of series at each step, judged on the interval of the ratio "
                   "of their figures with the engine process as the unit (the forks; docs/analysis.md, \"Forks: "
                   "the process as the unit\"), the family's false discoveries held to 5 % (Benjamini–Hochberg; "
                   "the intervals printed at the level that matches): a difference is named only when its interval "
                   "leaves out a ratio of 1"
                   + ("; with one fork the interval is over the iterations of one process and leaves out the "
                      "variance between processes, which the sentence says" if one_fork else "")
                   + ". Nothing is ranked on point estimates. "
                   + ("The matrix is at the top (<a href=\"#verdict-matrix\">verdict matrix</a>). " if beside else "")
                   + "</p>")
        if not beside:
            out.append(f"<div class=\"table-wrap\">{verdict_matrix(verdicts, list(analysis.plans))}</div>"
                       f"<p class=\"muted\">{matrix_legend(verdicts)}</p>")
        rows = [[escape(r["scenario"]), escape(r["payload_label"]),
                 escape(f"{r['rate']:g}/s" if r["model"] == "open" and r["rate"] else str(r["users"])),
                 escape(r["figure"]), escape(r["sentence"])] for r in verdicts.iter_rows(named=True)]
        out.append(f"<details id=\"verdict-sentences\"><summary>The {verdicts.height} verdicts in words</summary>"
                   + table(["scenario", "payload", "load", "figure", "verdict"], rows, 5) + "</details>")
    if advice:
        out.append("<details id=\"advice\"><summary>How many forks (engine processes) and iterations each would "
                   "resolve a difference of 5 % and 10 % in TPS at 95 %</summary><p>From this run's own variance "
                   "at each level (Kalibera &amp; Jones' optimum; docs/analysis.md):</p><ul>"
                   + "".join(f"<li>{escape(a.describe())}</li>" for a in advice) + "</ul></details>")
    return "".join(out)


def _files(analysis: "Analysis", kind: str) -> str:
    return (f"<p class=\"muted\">Generated {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} by esbperf "
            f"{escape(__version__)} ({escape(kind)}). Files: <a href=\"summary.csv\">summary.csv</a> (one row per "
            f"step, iteration and test), <a href=\"aggregate.csv\">aggregate.csv</a> (iterations pooled: mean and "
            f"95 % confidence interval, Student t)"
            + (", <a href=\"verdicts.csv\">verdicts.csv</a>" if analysis.verdicts is not None
               and analysis.verdicts.height else "")
            + (", <a href=\"ratios.csv\">ratios.csv</a>" if analysis.ratios is not None else "")
            + ", <a href=\"histograms.csv\">histograms.csv</a> (every step's full µs histograms), "
            "<a href=\"hlog/\">hlog/</a> (each step's HdrHistogram interval logs, one histogram a second), "
            "<a href=\"graphs/\">graphs/</a> (every graph as SVG and PNG).</p>")


def render(analysis: "Analysis", kind: str, folder: Path, embed_graphs: bool = True) -> str:
    labels = ", ".join(dict.fromkeys(r.label for r in analysis.runs))
    parts = [
        f"<h1>esbperf {kind}: {escape(labels)}</h1>",
        _headline_section(analysis),
        _thesis_section(analysis, folder, embed_graphs),
        _contents(analysis),
        _files(analysis, kind),
        _warnings_section(analysis),
        _verdicts_section(analysis),
        _ratios_section(analysis),
    ]
    several = len(analysis.plans) > 1
    for plan, runs in analysis.plans.items():
        for scenario in sorted({s.meta["scenario"] for r in runs for s in r.steps}):
            title = f"Plan {plan}, scenario {scenario}" if several else f"Scenario: {scenario}"
            parts.append(f"<h2 id=\"{escape(graphs.slug(f'{plan}-{scenario}'))}\">{escape(title)}</h2>")
            shown = [g for g in analysis.graphs if g.plan == plan and g.scenario == scenario and g.thesis]
            parts.append("<p class=\"muted\">TPS counts successful transactions only; response times and "
                         "percentiles are those of successful transactions, pooled over iterations from their "
                         "data, with the range of the per-iteration values in brackets; the failed transactions' "
                         "own times are beside them. "
                         "A dotted black line is the no-ESB baseline."
                         + (" Its throughput and response-time graphs are at the top: "
                            + ", ".join(f"<a href=\"#{escape(g.name)}\">{escape(g.title)}</a>" for g in shown)
                            + "." if shown else "") + "</p>")
            parts.append(_scenario_table(analysis, runs, scenario))
            parts.append(_open_table(analysis, runs, scenario))
            mine = [g for g in analysis.graphs if g.plan == plan and g.scenario == scenario and not g.thesis]
            figures = "".join(_figure(g, folder, embed_graphs) for g in mine if not g.hosts)
            parts.append(f"<div class=\"graphs\">{figures}</div>")
            hosts = [g for g in mine if g.hosts]
            if hosts:
                shows = ", ".join(dict.fromkeys(_host_graph_name(g) for g in hosts))
                parts.append(f"<details class=\"hosts\" id=\"hosts-{escape(graphs.slug(f'{plan}-{scenario}'))}\">"
                             f"<summary>The hosts: {escape(shows)}"
                             f" ({len(hosts)} graph{'s' * (len(hosts) != 1)})</summary><div class=\"graphs\">"
                             + "".join(_figure(g, folder, embed_graphs) for g in hosts) + "</div></details>")
    parts.append(_series_section(analysis, folder, embed_graphs))
    parts.append(_warmup_section(analysis, folder, embed_graphs))
    parts.append(_calibration_section(analysis))
    parts.append(_runs_section(analysis))
    parts += [_plan_section(plan, runs[0]) for plan, runs in analysis.plans.items()]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>esbperf {kind}: {escape(labels)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(p for p in parts if p) + "\n</body></html>\n")
