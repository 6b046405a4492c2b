"""Thesis-style graphs, one set per scenario, drawn with matplotlib (Agg) as PNG and SVG.

A graph is first built as data (Graph -> Panel -> Series) and only then drawn, so tests and the
report work with the numbers behind a graph, not its pixels. In the SVG each series' line is the
group `series-<label>`, its error bars `errorbars-<label>`, and its marks `bound-<kind>-<label>`
(a step bounded by the testbed: `link`, `backends`, `client`; analysis/bottleneck.py),
`errors-<label>` (failed transactions), `behind-<label>` (an open-model pool that could not keep
its schedule) and `invalid-<label>` (hollow: a step a validity warning names, summary.csv's
`valid`).

Bars: on figures of the pooled data of all iterations (response times, percentiles, latency) the
range of the per-iteration values; on figures averaged over iterations (TPS, CPU, network) the
95 % confidence interval from 3 iterations on, and with 2 the range of the iterations (min–max):
a 95 % t interval of 2 values is ± 6.4 times their difference, more quantile than data. Each
graph says which under its x axis. The y axis is scaled to the plotted values and the
per-iteration ones, never stretched by a bar: a taller bar is clipped at the axis, and the graph
says so.

The thesis's own graphs (throughput and response time against the sweep, latency against the
offered rate: `Graph.thesis`) come first in the report. Where two of their series differ by more
than LOG_AXIS_RATIO at one step (an ESB beside a baseline many times faster), the y axis is
logarithmic, with a gridline at every 1–9 × 10^n, so that both can be read off it.

A step of several Grinder tests (a user's script) draws a series per test, labelled with the
test; the hosts' graphs (one figure per step) draw the step once. Hosts that read one CPU figure
(pinned to the same cores of one machine: `cpu_groups`) share one panel of the CPU graph, named
after them all.

Which steps form a sweep is read from the data, not the plan: the payload sweep is the users count
with the most payload sizes (1 user in the thesis), the concurrency sweep the payload size with
the most user counts (100 KB in the thesis; ties go to the size nearest 100 KB)."""
from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

import polars as pl  # noqa: E402

from esbperf.analysis.bottleneck import NAMES as BOUND_NAMES, TESTBED, THRESHOLD_PERCENT  # noqa: E402
from esbperf.analysis.runs import BASELINE_TARGET  # noqa: E402
from esbperf.analysis.stats import KEYS, MIN_ITERATIONS_FOR_CI, POOLED, ROLES, StepHistograms  # noqa: E402
from esbperf.core.steady import percentile_measured  # noqa: E402

THESIS_CONCURRENCY_PAYLOAD = 100 * 1024
# Percentiles of the percentile plot, drawn on a "number of nines" axis.
PERCENTILE_POINTS = (50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
BASELINE_COLOR = "#222222"
ERRORS_COLOR = "#ff7f0e"
BEHIND_COLOR = "#7b2cbf"
BOUND_COLOR = "#555555"
# What the bars are, per kind of point (Series.bar_kinds), as each graph says under its x axis.
CI_BARS = "bars: 95 % confidence interval over iterations"
ITERATION_RANGE_BARS = (f"bars: range of the iterations (min–max): fewer than {MIN_ITERATIONS_FOR_CI}, "
                        "no confidence interval")
MIXED_BARS = (f"bars: 95 % confidence interval ({MIN_ITERATIONS_FOR_CI}+ iterations), range of the "
              "iterations (min–max) where fewer")
RANGE_BARS = "bars: range of the per-iteration values (figure: iterations pooled)"
CLIPPED_BARS = "bars clipped at the axis, which spans the data"
# Characters of a caption line per inch of figure width (matplotlib's default 10 pt font).
CAPTION_CHARS_PER_INCH = 12
# ... and of a title line (its larger font).
TITLE_CHARS_PER_INCH = 10
# The y axis spans the data and this share of the axis beyond each end the graph does not fix.
Y_MARGIN = 0.05
# Panels per row, and a panel's size (inches at 100 dpi): three panels (1080 px) fit the report's
# 1250 px page unscaled; more hosts wrap into further rows.
PANELS_PER_ROW = 3
PANEL_WIDTH, PANEL_HEIGHT = 3.6, 3.6
# A limit line (link capacity) far above the data would flatten the curves; it is drawn once the
# data reaches this share of it (the panel's title names the capacity anyway).
LIMIT_SHOWN_FROM = 0.25
# Series of a thesis graph further apart than this factor at one step get a logarithmic y axis: on a
# linear one the lower would lie within the bottom fifth (Camel at 3,500 TPS beside direct at 50,000
# is a flat line on the axis).
LOG_AXIS_RATIO = 5.0

# How each kind of step is marked on every graph (on top of its point). A step bounded by the
# testbed is a true measurement of a testbed limit, not a wrong one: a grey outline, one shape per
# limit (analysis/bottleneck.py), never red.
BOUND_MARKS = {kind: dict(s=150, marker=marker, facecolors="none", edgecolors=BOUND_COLOR, linewidths=1.3,
                          label=f"bounded by {BOUND_NAMES[kind]}")
               for kind, marker in zip(TESTBED, ("^", "D", "h"))}
MARKS = {
    "errors": dict(s=70, marker="x", color=ERRORS_COLOR, linewidths=1.8,
                   label="failed transactions (not in TPS nor response times)"),
    "behind": dict(s=90, marker="v", facecolors="none", edgecolors=BEHIND_COLOR, linewidths=1.6,
                   label="open model: pool behind its schedule"),
}

# A step named by a validity warning (summary.csv's `valid` not `yes`): its marker is hollow.
INVALID_LABEL = "hollow: not valid (warnings)"
# Steps whose window drifted get a graph of their intervals (series_graphs); at most this many.
SERIES_GRAPHS = 12

matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "esbperf"})


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float | None]
    err: list[tuple[float, float] | None]   # (down, up) bar lengths; None where one iteration
    bound: list[str | None]             # per point: the step's bound (analysis/bottleneck.py BOUNDS)
    errors: list[bool] = field(default_factory=list)    # steps with failed transactions
    behind: list[bool] = field(default_factory=list)    # open model: the pool fell behind its schedule
    baseline: bool = False             # the no-ESB `direct` target
    color_key: str = ""                # series of one run share a colour
    linestyle: str = "-"
    bar_kinds: list[str | None] = field(default_factory=list)   # per point: "ci", "range" (iterations), "pooled"
    spread: list[tuple[float, float] | None] = field(default_factory=list)   # per point: the iterations' min, max
    invalid: list[bool] = field(default_factory=list)   # per point: a step a validity warning names (hollow)


@dataclass
class Panel:
    title: str
    series: list[Series]
    limit: float | None = None         # a horizontal line, e.g. the link capacity
    limit_label: str = ""


@dataclass
class Graph:
    name: str                          # file stem: <scenario>-<what>
    title: str
    xlabel: str
    ylabel: str
    panels: list[Panel]
    xscale: str = "linear"
    xticks: list[tuple[float, str]] = field(default_factory=list)
    ymax: float | None = None          # fixed top of the y axis (percent scales)
    ymin: float | None = 0.0           # bottom of the y axis; None: from the data
    bars: str = ""                     # what the error bars are (bars_caption), filled by scenario_graphs
    yscale: str = "linear"             # "log" where the series lie far apart (log_axis)
    thesis: bool = False               # one of the thesis's own graphs: the report shows it first
    hosts: bool = False                # of the hosts (CPU, processes, network, GC): the report folds them
    sharey: bool | None = None         # panels share one y axis; default: only on a fixed percent scale
    scenario: str = ""
    plan: str = ""
    files: dict[str, Path] = field(default_factory=dict)   # filled by draw()
    ylims: list[tuple[float, float]] = field(default_factory=list)   # each panel's y range, filled by draw()


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


# --- choosing the steps ------------------------------------------------------------------------

def payload_sweep_users(rows: pl.DataFrame) -> int | None:
    counts = (rows.group_by("users").agg(n=pl.col("payload_bytes").n_unique())
              .filter(pl.col("n") >= 2).sort(["n", "users"], descending=[True, False]))
    return counts["users"][0] if counts.height else None


def concurrency_sweep_payload(rows: pl.DataFrame) -> int | None:
    counts = (rows.group_by("payload_bytes").agg(n=pl.col("users").n_unique())
              .filter(pl.col("n") >= 2)
              .with_columns(distance=(pl.col("payload_bytes") - THESIS_CONCURRENCY_PAYLOAD).abs())
              .sort(["n", "distance"], descending=[True, False]))
    return counts["payload_bytes"][0] if counts.height else None


# --- building the data -------------------------------------------------------------------------

def _bars(g: pl.DataFrame, y: str) -> tuple[list[tuple[float, float] | None], list[str | None]]:
    """Error bars of figure `y` per row, and their kind: the per-iteration range for pooled
    figures ("pooled"); else the CI from MIN_ITERATIONS_FOR_CI iterations on ("ci"), the range
    of the iterations below ("range")."""
    bars, kinds = [], []
    for r in g.iter_rows(named=True):
        low, high = r.get(f"{y}_iter_min"), r.get(f"{y}_iter_max")
        if r[y] is None or r["iterations"] < 2:
            bar, kind = None, None
        elif y not in POOLED and r["iterations"] >= MIN_ITERATIONS_FOR_CI:
            e = r[f"{y}_ci95"]
            bar, kind = (None, None) if e is None else ((e, e), "ci")
        elif low is None:
            bar, kind = None, None
        else:
            bar, kind = (max(0.0, r[y] - low), max(0.0, high - r[y])), "pooled" if y in POOLED else "range"
        bars.append(bar)
        kinds.append(kind)
    return bars, kinds


def _spread(g: pl.DataFrame, y: str) -> list[tuple[float, float] | None]:
    """The per-iteration values' min and max of figure `y` per row (what the y axis spans)."""
    low = g[f"{y}_iter_min"].to_list() if f"{y}_iter_min" in g.columns else [None] * g.height
    high = g[f"{y}_iter_max"].to_list() if f"{y}_iter_max" in g.columns else [None] * g.height
    return [None if a is None or b is None else (a, b) for a, b in zip(low, high)]


def _invalid(g: pl.DataFrame) -> list[bool]:
    """Per row: whether a validity warning names the step (aggregate.csv's `valid` is not `yes`)."""
    return [v != "yes" for v in g["valid"]] if "valid" in g.columns else [False] * g.height


def several_tests(rows: pl.DataFrame) -> bool:
    """Whether the rows hold more than one Grinder test (a user's script): a series per test."""
    return rows["test"].n_unique() > 1


def test_label(r: dict) -> str:
    """How a series names its Grinder test: 'test 101 (GET index)'; a step whose logs hold no row
    has none."""
    if r["test"] is None:
        return "no test (no row)"
    return f"test {r['test']}" + (f" ({r['test_name']})" if r.get("test_name") else "")


def one_per_step(rows: pl.DataFrame) -> pl.DataFrame:
    """One row of each step, of no test: for the step's own figures (hosts, GC), the same in
    each of its tests' rows."""
    return (rows.unique(subset=[k for k in KEYS if k != "test"], keep="first", maintain_order=True)
            .with_columns(test=pl.lit(None, dtype=rows.schema["test"])))


def _series(rows: pl.DataFrame, x: str, y: str, labels: dict[tuple[str, str], str],
            x_divisor: float = 1.0, suffix: str = "", linestyle: str = "-", by_users: bool = False) -> list[Series]:
    """A series per (run, target) (per thread pool with `by_users`, per test when the rows hold
    several) of figure `y` against `x`."""
    out = []
    keys = ["run", "target", "users"] if by_users else ["run", "target"]
    per_test = several_tests(rows)
    for key, g in rows.group_by(keys + (["test"] if per_test else []), maintain_order=True):
        g = g.sort(x)
        if g[y].null_count() == g.height:
            continue
        label = labels[(key[0], key[1])]
        pool = f" ({key[2]} threads)" if by_users else ""
        test = f", {test_label(g.row(0, named=True))}" if per_test else ""
        err, kinds = _bars(g, y)
        out.append(Series(label=label + pool + test + suffix, x=[v / x_divisor for v in g[x].to_list()],
                          y=g[y].to_list(), err=err, bound=g["bound"].to_list(),
                          errors=g["has_errors"].to_list(), behind=g["behind_schedule"].to_list(),
                          baseline=key[1] == BASELINE_TARGET, color_key=label + pool + test, linestyle=linestyle,
                          bar_kinds=kinds, spread=_spread(g, y), invalid=_invalid(g)))
    return out


def _payload_ticks(rows: pl.DataFrame) -> list[tuple[float, str]]:
    sizes = rows.select("payload_bytes", "payload_label").unique().sort("payload_bytes")
    return [(b / 1024, lbl) for b, lbl in sizes.iter_rows()]


def rate_sweep_payload(rows: pl.DataFrame) -> int | None:
    """The payload of the open-model steps with the most offered rates (at least two)."""
    counts = (rows.filter(pl.col("model") == "open").group_by("payload_bytes").agg(n=pl.col("rate").n_unique())
              .filter(pl.col("n") >= 2)
              .with_columns(distance=(pl.col("payload_bytes") - THESIS_CONCURRENCY_PAYLOAD).abs())
              .sort(["n", "distance"], descending=[True, False]))
    return counts["payload_bytes"][0] if counts.height else None


def sweeps(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame, dict]]:
    """The closed-model sweeps found in a scenario's rows: (name, rows, how to draw their x axis)."""
    found = []
    rows = rows.filter(pl.col("model") == "closed")
    users = payload_sweep_users(rows)
    if users is not None:
        sweep = rows.filter(pl.col("users") == users)
        found.append(("payload", sweep, dict(
            x="payload_bytes", x_divisor=1024.0, xlabel=f"payload size (KB), {users} user(s)",
            xscale="log", xticks=_payload_ticks(sweep))))
    payload = concurrency_sweep_payload(rows)
    if payload is not None:
        sweep = rows.filter(pl.col("payload_bytes") == payload)
        label = sweep["payload_label"][0]
        found.append(("users", sweep, dict(x="users", x_divisor=1.0, xlabel=f"users (concurrent), {label} payload",
                                            xscale="linear", xticks=[])))
    return found


def scenario_graphs(agg: pl.DataFrame, scenario: str, labels: dict[tuple[str, str], str],
                    links: dict[str, float], histograms: dict[tuple, StepHistograms],
                    prefix: str = "", roles: list[str] | tuple[str, ...] = ROLES,
                    cpu_groups: list[tuple[str, ...]] | None = None) -> list[Graph]:
    """Every graph of one scenario from aggregate.csv's rows (iterations pooled) of runs drawn
    together; file names are <prefix><scenario>-<what>. `cpu_groups`: hosts that read one CPU
    figure (cpu_groups()), drawn in one panel of the CPU graph."""
    rows = agg.filter(pl.col("scenario") == scenario)
    stem = slug(prefix + scenario)
    graphs = []
    for sweep_name, sweep, axis in sweeps(rows):
        x, div = axis["x"], axis["x_divisor"]
        common = dict(xlabel=axis["xlabel"], xscale=axis["xscale"], xticks=axis["xticks"])
        vs = f"vs {'payload size' if sweep_name == 'payload' else 'users'}"
        graphs.append(thesis_graph(Graph(f"{stem}-tps-vs-{sweep_name}", f"{scenario}: throughput {vs}",
                                         ylabel="transactions per second (successful)",
                                         panels=[Panel("", _series(sweep, x, "tps", labels, div))], **common)))
        graphs.append(thesis_graph(Graph(f"{stem}-response-time-vs-{sweep_name}",
                                         f"{scenario}: mean response time {vs}",
                                         ylabel="mean response time (ms), successful transactions",
                                         panels=[Panel("", _series(sweep, x, "rt_mean_ms", labels, div))], **common)))
        graphs += host_graphs(sweep, stem, scenario, sweep_name, vs, x, div, common, labels, links, roles,
                              cpu_groups)
    graphs += rate_graphs(rows, stem, scenario, labels, links, roles, cpu_groups)
    pct = percentile_graph(rows, scenario, labels, histograms, stem)
    if pct:
        graphs.append(pct)
    for g in graphs:
        g.scenario = scenario
        g.bars = bars_caption(g)
    return [g for g in graphs if any(p.series for p in g.panels)]


def log_axis(panels: list[Panel]) -> bool:
    """Whether two series of a panel differ by more than LOG_AXIS_RATIO at a step they share (every
    value positive, as a logarithmic axis needs)."""
    for panel in panels:
        at: dict[float, list[float]] = {}
        for s in panel.series:
            for x, y in zip(s.x, s.y):
                if y is not None:
                    at.setdefault(x, []).append(y)
        values = [y for ys in at.values() for y in ys]
        if not values or min(values) <= 0:
            return False
        if any(len(ys) > 1 and max(ys) / min(ys) > LOG_AXIS_RATIO for ys in at.values()):
            return True
    return False


def thesis_graph(graph: Graph) -> Graph:
    """`graph` marked as one of the thesis's own, on a logarithmic y axis where its series lie far
    apart (log_axis)."""
    graph.thesis = True
    if log_axis(graph.panels):
        graph.yscale, graph.ymin = "log", None
        graph.title += " (log scale)"
    return graph


def limit_shown(graph: Graph, panel: Panel) -> bool:
    """A limit line far above the data would flatten it: drawn on a fixed scale, or once the data
    reaches LIMIT_SHOWN_FROM of it."""
    highest = max((y for s in panel.series for y in s.y if y is not None), default=0)
    return bool(panel.limit) and bool(graph.ymax or highest >= LIMIT_SHOWN_FROM * panel.limit)


def y_range(graph: Graph, panel: Panel) -> tuple[float, float] | None:
    """The panel's y axis: the graph's fixed ends, else the plotted values and the per-iteration
    values (and a limit line drawn), with Y_MARGIN; never the bars. None without any value."""
    values = [y for s in panel.series for y in s.y if y is not None]
    values += [v for s in panel.series for pair in s.spread if pair is not None for v in pair]
    if limit_shown(graph, panel):
        values.append(panel.limit)
    if not values:
        return None
    low, high = min(values), max(values)
    if graph.yscale == "log":             # the margin is a share of the decades spanned
        positive = [v for v in values if v > 0]
        low, high = min(positive), max(positive)
        factor = (high / low) ** Y_MARGIN if high > low else 1.5
        return low / factor, high * factor
    fixed_bottom = graph.ymin if graph.ymin is not None and graph.ymin <= low else None
    fixed_top = graph.ymax if graph.ymax is not None and graph.ymax >= high else None
    span = (fixed_top if fixed_top is not None else high) - (fixed_bottom if fixed_bottom is not None else low)
    margin = Y_MARGIN * (span or abs(high) or 1.0)
    return (low - margin if fixed_bottom is None else fixed_bottom,
            high + margin if fixed_top is None else fixed_top)


def clipped(graph: Graph, panel: Panel) -> bool:
    """Whether a bar of the panel reaches beyond its y axis (y_range)."""
    span = y_range(graph, panel)
    if span is None:
        return False
    bottom, top = span
    return any(y is not None and e is not None and (y - e[0] < bottom or y + e[1] > top)
               for s in panel.series for y, e in zip(s.y, s.err))


def bars_caption(graph: Graph) -> str:
    """What the graph's bars are (per kind of point), and whether any is clipped; empty without bars."""
    kinds = {k for p in graph.panels for s in p.series for k in s.bar_kinds if k}
    parts = [RANGE_BARS] if "pooled" in kinds else []
    if {"ci", "range"} <= kinds:
        parts.append(MIXED_BARS)
    elif "ci" in kinds:
        parts.append(CI_BARS)
    elif "range" in kinds:
        parts.append(ITERATION_RANGE_BARS)
    if any(clipped(graph, p) for p in graph.panels):
        parts.append(CLIPPED_BARS)
    return "; ".join(parts)


def cpu_groups(runs: list, roles: list[str] | tuple[str, ...]) -> list[tuple[str, ...]]:
    """The roles in groups that read one and the same CPU figure in every run: hosts of one machine
    (Run.share_cores) pinned to the same cores, or all unpinned (a monitor reads its host's `cpus`,
    the whole machine without them). A role alone is a group of one; in `roles`' order."""
    def cpus(run, role: str) -> set:
        return set(run.hosts().get(role, {}).get("cpus") or [])

    groups: list[list[str]] = []
    for role in roles:
        for group in groups:
            if runs and all(run.share_cores(group[0], role) and cpus(run, group[0]) == cpus(run, role)
                            for run in runs):
                group.append(role)
                break
        else:
            groups.append([role])
    return [tuple(g) for g in groups]


def cpu_panel_title(group: tuple[str, ...]) -> str:
    """`esb`, or for hosts that share cores `client, ws1, ws2, ws3` over `(one CPU figure: shared cores)`."""
    return group[0] if len(group) == 1 else f"{', '.join(group)}\n(shared cores: one figure)"


def host_graphs(sweep: pl.DataFrame, stem: str, scenario: str, sweep_name: str, vs: str, x: str, div: float,
                common: dict, labels: dict[tuple[str, str], str], links: dict[str, float],
                roles: list[str] | tuple[str, ...], groups: list[tuple[str, ...]] | None = None) -> list[Graph]:
    """CPU, the watched processes' CPU and network per host, one panel per host; hosts that read one
    CPU figure (`groups`, cpu_groups) in one CPU panel, from the first of them that has data."""
    sweep = one_per_step(sweep)
    graphs = []
    groups = [g for g in (groups or [(role,) for role in roles]) if any(r in roles for r in g)]
    groups += [(role,) for role in roles if not any(role in g for g in groups)]
    cpu_panels = []
    for group in groups:
        found = [s for s in (_series(sweep, x, f"{role}_cpu_mean", labels, div) for role in group if role in roles)
                 if s]
        cpu_panels.append(Panel(cpu_panel_title(group), found[0] if found else [], limit=THRESHOLD_PERCENT,
                                limit_label="saturated above"))
    graphs.append(Graph(f"{stem}-cpu-vs-{sweep_name}", f"{scenario}: CPU per host {vs} (mean over the window)",
                        ylabel="CPU (% of all cores)", panels=[p for p in cpu_panels if p.series], ymax=100,
                        **common))
    # The ESB and echo JVMs themselves: on one machine every host's CPU above is the machine's.
    # Each panel has its own scale: an echo's 60-100 % must not be cut off at the ESB's.
    proc_panels = [Panel(role, _series(sweep, x, f"{role}_proc_cpu_mean", labels, div)) for role in roles]
    if any(p.series for p in proc_panels):
        graphs.append(Graph(f"{stem}-process-cpu-vs-{sweep_name}",
                            f"{scenario}: CPU of the ESB and echo processes {vs} (mean over the window)",
                            ylabel="CPU (% of one core)", panels=[p for p in proc_panels if p.series],
                            **common))
    # The ESB JVM's collector (analysis/gc.py). It sits near 100 %: the axis starts from the data.
    graphs.append(Graph(f"{stem}-esb-gc-vs-{sweep_name}", f"{scenario}: ESB GC throughput {vs}",
                        ylabel="GC throughput (% of the window not paused)",
                        panels=[Panel("", _series(sweep, x, "esb_gc_throughput_percent", labels, div))],
                        ymax=100, ymin=None, **common))
    net_panels = [Panel(f"{role} (link {links[role]:g} Mbit/s)" if role in links else role,
                        _series(sweep, x, f"{role}_rx_mbit", labels, div, " rx")
                        + _series(sweep, x, f"{role}_tx_mbit", labels, div, " tx", "--"),
                        limit=links.get(role), limit_label="link capacity") for role in roles]
    graphs.append(Graph(f"{stem}-network-vs-{sweep_name}", f"{scenario}: network per host {vs}",
                        ylabel="Mbit/s (the host's test-network interface)", panels=[p for p in net_panels if p.series],
                        **common))
    for g in graphs:
        g.hosts = True
    return graphs


def rate_graphs(rows: pl.DataFrame, stem: str, scenario: str, labels: dict[tuple[str, str], str],
                links: dict[str, float], roles: list[str] | tuple[str, ...],
                cpu_groups: list[tuple[str, ...]] | None = None) -> list[Graph]:
    """Open-model steps: latency vs offered load (corrected latency percentiles, the service
    time beside them), throughput vs offered load, and the hosts, at the payload with most rates."""
    payload = rate_sweep_payload(rows)
    if payload is None:
        return []
    sweep = rows.filter((pl.col("model") == "open") & (pl.col("payload_bytes") == payload))
    by_users = sweep.group_by("run", "target", "rate").agg(n=pl.col("users").n_unique())["n"].max() > 1
    label = sweep["payload_label"][0]
    common = dict(xlabel=f"offered load (arrivals/s), {label} payload", xscale="linear", xticks=[])
    panels = []
    for name, p in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p99_9")):
        series = (_series(sweep, "rate", f"lat_{p}_ms", labels, by_users=by_users)
                  + _series(sweep, "rate", f"rt_{p}_ms", labels, suffix=" service time", linestyle="--",
                            by_users=by_users))
        if series:            # a p99.9 from too few transactions is not measured: no panel
            panels.append(Panel(name, series))
    graphs = [thesis_graph(Graph(f"{stem}-latency-vs-rate", f"{scenario}: latency vs offered load (open model)",
                                 ylabel="ms: latency from the due start (solid), service time (dashed)",
                                 panels=panels, **common)),
              Graph(f"{stem}-tps-vs-rate", f"{scenario}: throughput vs offered load (open model)",
                    ylabel="per second: successful transactions (solid), starts (dashed)",
                    panels=[Panel("", _series(sweep, "rate", "tps", labels, by_users=by_users)
                                  + _series(sweep, "rate", "start_rate", labels, suffix=" starts", linestyle="--",
                                            by_users=by_users))], **common)]
    vs = "vs offered load"
    return graphs + host_graphs(sweep, stem, scenario, "rate", vs, "rate", 1.0, common, labels, links, roles,
                                cpu_groups)


def nines(p: float) -> float:
    """Position of percentile p on the percentile plot's axis: 90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1 - p / 100)


def percentile_graph(rows: pl.DataFrame, scenario: str, labels: dict[tuple[str, str], str],
                     histograms: dict[tuple, StepHistograms], stem: str) -> Graph | None:
    """Response-time percentiles at the heaviest closed-model step every series has (most users,
    then largest payload), iterations pooled from their data."""
    closed = rows.filter(pl.col("model") == "closed")
    steps = closed.group_by("payload_bytes", "users").agg(n=pl.len())
    steps = steps.sort(["n", "users", "payload_bytes"], descending=True)
    if not steps.height:
        return None
    payload, users = steps["payload_bytes"][0], steps["users"][0]
    chosen = closed.filter((pl.col("payload_bytes") == payload) & (pl.col("users") == users))
    series = []
    per_test = several_tests(chosen)
    for r in chosen.iter_rows(named=True):
        hist = histograms.get(tuple(r[k] for k in KEYS))
        if hist is None or not hist.response.n:
            continue
        label = labels[(r["run"], r["target"])] + (f", {test_label(r)}" if per_test else "")
        n = len(PERCENTILE_POINTS)
        series.append(Series(label, [nines(p) for p in PERCENTILE_POINTS],
                             [hist.response.percentile(p) / 1000 if percentile_measured(p, hist.response.n) else None
                              for p in PERCENTILE_POINTS], [None] * n,
                             [r["bound"]] * n, [r["has_errors"]] * n, [False] * n,
                             r["target"] == BASELINE_TARGET, label, invalid=[r.get("valid", "yes") != "yes"] * n))
    if not series:
        return None
    at = f"{users} user{'s' * (users != 1)}, {chosen['payload_label'][0]}"
    return Graph(f"{stem}-percentiles", f"{scenario}: response-time percentiles, {at}",
                 xlabel="percentile (iterations pooled from their data)", ylabel="response time (ms)",
                 panels=[Panel("", series)], xticks=[(nines(p), f"{p:g}%") for p in (50, 90, 99, 99.9, 99.99)])


def series_graphs(summary: pl.DataFrame, step_histograms: dict[tuple, StepHistograms],
                  labels: dict[tuple[str, str], str]) -> list[Graph]:
    """For each step iteration whose window drifted (summary.csv's `drift`) or whose automatic
    warm-up found no steady state (`warmup_steady` false), at most SERIES_GRAPHS: its throughput and
    mean response time interval by interval, the warm-up (at negative seconds, dashed) and the
    measurement window (solid), so the move can be seen."""
    graphs = []
    moved = pl.col("drift").fill_null(False) | (pl.col("warmup_steady") == False)  # noqa: E712 (null: a fixed warm-up)
    drifted = summary.filter(moved.fill_null(False)) if "drift" in summary.columns else summary.clear()
    for r in drifted.head(SERIES_GRAPHS).iter_rows(named=True):
        h = step_histograms.get((r["run"], r["step_dir"], r["test"]))
        if h is None or not h.series or not h.series[0]:
            continue
        seconds, tps, mean = h.series
        label = labels.get((r["run"], r["target"]), r["target"])
        panels = []
        for title, values in (("throughput (TPS)", tps), ("mean response time (ms)", mean)):
            parts = []
            for part, keep, style in (("warm-up", lambda t: t < 0, "--"), ("measured", lambda t: t >= 0, "-")):
                at = [i for i, t in enumerate(seconds) if keep(t)]
                if at:
                    parts.append(Series(f"{label} {part}", [seconds[i] for i in at], [values[i] for i in at],
                                        [None] * len(at), [None] * len(at), color_key=label, linestyle=style))
            panels.append(Panel(title, parts))
        test = f" test {r['test']}" if r["step_tests"] > 1 else ""
        # Two panels are 7.2 inches wide: the title wraps at what fits them.
        what = "; ".join(m for m in (r["drift_moves"] if r["drift"] else "",
                                      f"no steady state ({r['warmup_unsteady']})" if r["warmup_steady"] is False else "")
                         if m)
        title = textwrap.fill(f"{r['run']} {r['step_dir']}{test}: {what}",
                              int(2 * PANEL_WIDTH * TITLE_CHARS_PER_INCH))
        graphs.append(Graph(slug(f"drift-{r['run']}-{r['step_dir']}{test}"), title,
                            xlabel="s from the window's start (negative: the warm-up)", ylabel="per interval",
                            panels=panels, ymin=None, sharey=False))
    return graphs


def warmup_graphs(runs: list, labels: dict[tuple[str, str], str]) -> list[Graph]:
    """Each run's target warm-ups (run.json `target_warmup`: the load each target was judged at, the
    last of its loads): the throughput per second and, for a JVM, its compiler's share of one core in
    the same seconds (`compiler.series`, the esb host's monitor's proc.jit) — a warm JVM's compiler
    falls quiet while its throughput levels off. One graph per run, one series per target and fork."""
    graphs = []
    for run in runs:
        tps_series, jit_series = [], []
        for entry in (t for block in run.info.get("target_warmup") or [] for t in block.get("targets") or []):
            tps = entry.get("tps")
            if not isinstance(tps, list) or not tps:
                continue
            bucket = float(entry.get("bucket_s") or 1.0)
            label = labels.get((run.name, entry["target"]), entry["target"])
            name = label + (f" fork {entry['fork']}" if entry.get("fork") is not None else "")
            x = [round((i + 1) * bucket, 3) for i in range(len(tps))]
            tps_series.append(Series(name, x, tps, [None] * len(x), [None] * len(x), color_key=name))
            jit = (entry.get("compiler") or {}).get("series") if isinstance(entry.get("compiler"), dict) else None
            if isinstance(jit, list) and len(jit) == len(x):
                jit_series.append(Series(name, x, jit, [None] * len(x), [None] * len(x), color_key=name))
        if not tps_series:
            continue
        panels = [Panel("throughput (TPS)", tps_series)]
        if jit_series:
            panels.append(Panel("JIT compiler (% of one core)", jit_series))
        graphs.append(Graph(slug(f"warmup-{run.name}"), f"{run.name}: each target's warm-up at the load it is "
                            "judged at", xlabel="s under that load", ylabel="per second", panels=panels,
                            sharey=False))
    return graphs


# --- drawing -----------------------------------------------------------------------------------

def _colors(graphs: list[Graph]) -> dict[str, str]:
    keys = []
    for g in graphs:
        for p in g.panels:
            for s in p.series:
                if not s.baseline and s.color_key not in keys:
                    keys.append(s.color_key)
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def grid(panels: int) -> tuple[int, int]:
    """(rows, columns) of a graph's panels: at most PANELS_PER_ROW a row, so that a figure of
    many hosts (load hosts besides the five) keeps readable panels instead of one long row."""
    rows = math.ceil(panels / PANELS_PER_ROW)
    return rows, math.ceil(panels / rows)          # balanced: four panels are 2 × 2, not 3 + 1


def figure(graph: Graph, colors: dict[str, str]) -> Figure:
    """`graph` drawn and laid out (panels in rows, see grid), ready to save."""
    n = len(graph.panels)
    rows, columns = grid(n)
    fig = Figure(figsize=(max(6.4, PANEL_WIDTH * columns), 4.4 + PANEL_HEIGHT * (rows - 1)), layout="constrained")
    sharey = graph.ymax is not None if graph.sharey is None else graph.sharey
    axes = list(fig.subplots(rows, columns, squeeze=False, sharey=sharey).flat)
    for unused in axes[n:]:          # the last row's empty places
        fig.delaxes(unused)
    axes = axes[:n]
    fig.suptitle(graph.title)
    for ax, panel in zip(axes, graph.panels):
        marked: set[str] = set()
        for s in panel.series:
            color = BASELINE_COLOR if s.baseline else colors.get(s.color_key, PALETTE[0])
            ys = [math.nan if v is None else v for v in s.y]
            (line,) = ax.plot(s.x, ys, color=color, linestyle=":" if s.baseline and s.linestyle == "-" else s.linestyle,
                              marker="s" if s.baseline else "o", markersize=4,
                              label=s.label + (" (no-ESB baseline)" if s.baseline else ""))
            line.set_gid(f"series-{slug(s.label)}")
            if any(e is not None for e in s.err):
                down = [0 if e is None else e[0] for e in s.err]
                up = [0 if e is None else e[1] for e in s.err]
                bars = ax.errorbar(s.x, ys, yerr=[down, up], fmt="none", ecolor=color, capsize=3, linewidth=1)
                for collection in bars.lines[2]:        # the vertical bars
                    collection.set_gid(f"errorbars-{slug(s.label)}")
            for bound, style in BOUND_MARKS.items():
                at = [(x, y) for x, y, b in zip(s.x, ys, s.bound) if b == bound and not math.isnan(y)]
                if at:
                    mark = ax.scatter(*zip(*at), zorder=5, label=None if bound in marked else style["label"],
                                      **{k: v for k, v in style.items() if k != "label"})
                    mark.set_gid(f"bound-{bound}-{slug(s.label)}")
                    marked.add(bound)
            for kind, flags, style in (("errors", s.errors, MARKS["errors"]), ("behind", s.behind, MARKS["behind"])):
                flagged = [(x, y) for x, y, b in zip(s.x, ys, flags) if b and not math.isnan(y)]
                if flagged:
                    mark = ax.scatter(*zip(*flagged), zorder=5, label=None if kind in marked else style["label"],
                                      **{k: v for k, v in style.items() if k != "label"})
                    mark.set_gid(f"{kind}-{slug(s.label)}")
                    marked.add(kind)
            hollow = [(x, y) for x, y, bad in zip(s.x, ys, s.invalid) if bad and not math.isnan(y)]
            if hollow:           # over the line's own marker: the same shape, white inside
                mark = ax.scatter(*zip(*hollow), zorder=4, marker="s" if s.baseline else "o", s=22,
                                  facecolors="white", edgecolors=color, linewidths=1.2,
                                  label=None if "invalid" in marked else INVALID_LABEL)
                mark.set_gid(f"invalid-{slug(s.label)}")
                marked.add("invalid")
        if limit_shown(graph, panel):
            ax.axhline(panel.limit, color="grey", linestyle="-.", linewidth=1, label=panel.limit_label)
        ax.set_title(panel.title)
        ax.set_xscale(graph.xscale)
        if graph.xticks:
            ax.set_xticks([t for t, _ in graph.xticks], [lbl for _, lbl in graph.xticks],
                          rotation=45 if n > 1 else 0)   # narrow panels: 50KB and 100KB would overlap
            ax.minorticks_off()
        if graph.yscale == "log":          # after the x ticks: minorticks_off is of both axes
            log_ticks(ax)
        ax.grid(True, alpha=0.3)
        if graph.yscale == "log":
            ax.grid(True, which="minor", axis="y", alpha=0.25)
        span = y_range(graph, panel)      # the data's, not the bars'
        if span is None:
            ax.set_ylim(bottom=graph.ymin, top=graph.ymax)
        else:
            ax.set_ylim(*span)
    graph.ylims = [tuple(ax.get_ylim()) for ax in axes]
    bars = any(e is not None for panel in graph.panels for s in panel.series for e in s.err)
    # Several panels share one x label under them all (one each ran into its neighbours'), and
    # panels in several rows one y label.
    caption = textwrap.fill(graph.bars, int(fig.get_figwidth() * CAPTION_CHARS_PER_INCH))   # bars_caption may be long
    (axes[0].set_xlabel if n == 1 else fig.supxlabel)(graph.xlabel + (f"\n{caption}" if bars and graph.bars else ""))
    (axes[0].set_ylabel if rows == 1 else fig.supylabel)(graph.ylabel)
    axes[-1].legend(fontsize="small")
    # Lay the figure out once, not once per format: the layout is a third of the drawing time.
    fig.get_layout_engine().execute(fig)
    fig.set_layout_engine("none")
    return fig


def tick_text(value: float) -> str:
    """A log axis' tick as a plain number: 50,000, 2,000, 5, 0.2, 0.05."""
    return f"{value:,.0f}" if value >= 1 else f"{value:.10f}".rstrip("0")


def log_ticks(ax) -> None:
    """A logarithmic y axis read as plain numbers: a gridline at every 1–9 × 10^n, labelled at 1, 2
    and 5 × 10^n (at every one where the axis spans less than two decades)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: tick_text(v)))

    def minor(value: float, _) -> str:
        low, high = ax.get_ylim()
        lead = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        return tick_text(value) if high / low < 100 or lead in (2, 5) else ""
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def draw(graph: Graph, out_dir: Path, colors: dict[str, str] | None = None) -> dict[str, Path]:
    """Draw `graph` to <out_dir>/<name>.png and .svg; returns {format: path}."""
    fig = figure(graph, colors or _colors([graph]))
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for fmt in ("png", "svg"):
        files[fmt] = out_dir / f"{graph.name}.{fmt}"
        fig.savefig(files[fmt], format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else None)
    graph.files = files
    return files


def draw_all(graphs: list[Graph], out_dir: Path) -> None:
    colors = _colors(graphs)
    for g in graphs:
        draw(g, out_dir, colors)
