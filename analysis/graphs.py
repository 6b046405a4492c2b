"""Thesis-style graphs, one set per scenario, drawn with matplotlib (Agg) as PNG and SVG.

A graph is first built as data (Graph -> Panel -> Series) and only then drawn, so tests and the
report work with the numbers behind a graph, not its pixels. In the SVG each series' line is the
group `series-<label>` and its bottleneck marks `bottleneck-<label>`.

Which steps form a sweep is read from the data, not the plan: the payload sweep is the users count
with the most payload sizes (1 user in the thesis), the concurrency sweep the payload size with
the most user counts (100 KB in the thesis; ties go to the size nearest 100 KB)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)

import polars as pl  # noqa: E402

from esbperf.analysis.results import BASELINE_TARGET  # noqa: E402
from esbperf.analysis.stats import ROLES, percentile  # noqa: E402
from esbperf.monitor import THRESHOLD_PERCENT  # noqa: E402

THESIS_CONCURRENCY_PAYLOAD = 100 * 1024
# Percentiles of the percentile plot, drawn on a "number of nines" axis.
PERCENTILE_POINTS = (50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
BASELINE_COLOR = "#222222"
# A limit line (link capacity) far above the data would flatten the curves; it is drawn once the
# data reaches this share of it (the panel's title names the capacity anyway).
LIMIT_SHOWN_FROM = 0.25

matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "esbperf"})


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float | None]
    err: list[float | None]            # 95 % CI half-widths; None where one iteration
    bottleneck: list[bool]
    baseline: bool = False             # the no-ESB `direct` target
    color_key: str = ""                # series of one run share a colour
    linestyle: str = "-"


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
    scenario: str = ""
    plan: str = ""
    files: dict[str, Path] = field(default_factory=dict)   # filled by draw()


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

def _series(rows: pl.DataFrame, x: str, y: str, labels: dict[tuple[str, str], str],
            x_divisor: float = 1.0, suffix: str = "", linestyle: str = "-") -> list[Series]:
    out = []
    for (run, target), g in rows.group_by(["run", "target"], maintain_order=True):
        g = g.sort(x)
        if g[y].null_count() == g.height:
            continue
        label = labels[(run, target)]
        out.append(Series(label=label + suffix, x=[v / x_divisor for v in g[x].to_list()],
                          y=g[y].to_list(), err=g[f"{y}_ci95"].to_list(),
                          bottleneck=g["bottleneck"].to_list(), baseline=target == BASELINE_TARGET,
                          color_key=label, linestyle=linestyle))
    return out


def _payload_ticks(rows: pl.DataFrame) -> list[tuple[float, str]]:
    sizes = rows.select("payload_bytes", "payload_label").unique().sort("payload_bytes")
    return [(b / 1024, lbl) for b, lbl in sizes.iter_rows()]


def sweeps(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame, dict]]:
    """The sweeps found in a scenario's rows: (name, rows, how to draw their x axis)."""
    found = []
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
                    links: dict[str, float], histograms: dict[tuple, list[tuple[int, int]]],
                    prefix: str = "") -> list[Graph]:
    """Every graph of one scenario from aggregate.csv's rows (iterations already pooled) of runs
    drawn together; file names are <prefix><scenario>-<what>."""
    rows = agg.filter(pl.col("scenario") == scenario)
    stem = slug(prefix + scenario)
    graphs = []
    for sweep_name, sweep, axis in sweeps(rows):
        x, div = axis["x"], axis["x_divisor"]
        common = dict(xlabel=axis["xlabel"], xscale=axis["xscale"], xticks=axis["xticks"])
        vs = f"vs {'payload size' if sweep_name == 'payload' else 'users'}"
        graphs.append(Graph(f"{stem}-tps-vs-{sweep_name}", f"{scenario}: throughput {vs}",
                            ylabel="transactions per second (successful)",
                            panels=[Panel("", _series(sweep, x, "tps", labels, div))], **common))
        graphs.append(Graph(f"{stem}-response-time-vs-{sweep_name}", f"{scenario}: mean response time {vs}",
                            ylabel="mean response time (ms)",
                            panels=[Panel("", _series(sweep, x, "rt_mean_ms", labels, div))], **common))
        cpu_panels = [Panel(role, _series(sweep, x, f"{role}_cpu_mean", labels, div), limit=THRESHOLD_PERCENT,
                            limit_label="bottleneck threshold") for role in ROLES]
        graphs.append(Graph(f"{stem}-cpu-vs-{sweep_name}", f"{scenario}: CPU per host {vs} (mean over the window)",
                            ylabel="CPU (% of all cores)", panels=[p for p in cpu_panels if p.series], ymax=100,
                            **common))
        # The ESB and echo JVMs themselves: on one machine every host's CPU above is the machine's.
        proc_panels = [Panel(role, _series(sweep, x, f"{role}_proc_cpu_mean", labels, div)) for role in ROLES]
        if any(p.series for p in proc_panels):
            graphs.append(Graph(f"{stem}-process-cpu-vs-{sweep_name}",
                                f"{scenario}: CPU of the ESB and echo processes {vs} (mean over the window)",
                                ylabel="CPU (% of one core)", panels=[p for p in proc_panels if p.series], **common))
        # The ESB JVM's collector (analysis/gc.py). It sits near 100 %: the axis starts from the data.
        graphs.append(Graph(f"{stem}-esb-gc-vs-{sweep_name}", f"{scenario}: ESB GC throughput {vs}",
                            ylabel="GC throughput (% of the window not paused)",
                            panels=[Panel("", _series(sweep, x, "esb_gc_throughput_percent", labels, div))],
                            ymax=100, ymin=None, **common))
        net_panels = [Panel(f"{role} (link {links[role]:g} Mbit/s)" if role in links else role,
                            _series(sweep, x, f"{role}_rx_mbit", labels, div, " rx")
                            + _series(sweep, x, f"{role}_tx_mbit", labels, div, " tx", "--"),
                            limit=links.get(role), limit_label="link capacity") for role in ROLES]
        graphs.append(Graph(f"{stem}-network-vs-{sweep_name}", f"{scenario}: network per host {vs}",
                            ylabel="Mbit/s", panels=[p for p in net_panels if p.series], **common))
    pct = percentile_graph(rows, scenario, labels, histograms, stem)
    if pct:
        graphs.append(pct)
    for g in graphs:
        g.scenario = scenario
    return [g for g in graphs if any(p.series for p in g.panels)]


def nines(p: float) -> float:
    """Position of percentile p on the percentile plot's axis: 90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1 - p / 100)


def percentile_graph(rows: pl.DataFrame, scenario: str, labels: dict[tuple[str, str], str],
                     histograms: dict[tuple, list[tuple[int, int]]], stem: str) -> Graph | None:
    """Response-time percentiles at the heaviest step every series has (most users, then largest
    payload), iterations pooled."""
    steps = rows.group_by("payload_bytes", "users").agg(n=pl.len())
    steps = steps.sort(["n", "users", "payload_bytes"], descending=True)
    if not steps.height:
        return None
    payload, users = steps["payload_bytes"][0], steps["users"][0]
    chosen = rows.filter((pl.col("payload_bytes") == payload) & (pl.col("users") == users))
    series = []
    for run, target, bottleneck in chosen.select("run", "target", "bottleneck").iter_rows():
        hist = histograms.get((run, scenario, target, payload, users)) or []
        if not hist:
            continue
        label = labels[(run, target)]
        series.append(Series(label, [nines(p) for p in PERCENTILE_POINTS],
                             [percentile(hist, p) for p in PERCENTILE_POINTS], [None] * len(PERCENTILE_POINTS),
                             [bottleneck] * len(PERCENTILE_POINTS), target == BASELINE_TARGET, label))
    if not series:
        return None
    at = f"{users} user{'s' * (users != 1)}, {chosen['payload_label'][0]}"
    return Graph(f"{stem}-percentiles", f"{scenario}: response-time percentiles, {at}",
                 xlabel="percentile (iterations pooled)", ylabel="response time (ms)",
                 panels=[Panel("", series)], xticks=[(nines(p), f"{p:g}%") for p in (50, 90, 99, 99.9, 99.99)])


# --- drawing -----------------------------------------------------------------------------------

def _colors(graphs: list[Graph]) -> dict[str, str]:
    keys = []
    for g in graphs:
        for p in g.panels:
            for s in p.series:
                if not s.baseline and s.color_key not in keys:
                    keys.append(s.color_key)
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def draw(graph: Graph, out_dir: Path, colors: dict[str, str] | None = None) -> dict[str, Path]:
    """Draw `graph` to <out_dir>/<name>.png and .svg; returns {format: path}."""
    colors = colors or _colors([graph])
    n = len(graph.panels)
    fig = Figure(figsize=(max(6.4, 3.3 * n), 4.4), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False, sharey=True)[0]
    fig.suptitle(graph.title)
    for ax, panel in zip(axes, graph.panels):
        marked = False
        for s in panel.series:
            color = BASELINE_COLOR if s.baseline else colors.get(s.color_key, PALETTE[0])
            ys = [math.nan if v is None else v for v in s.y]
            (line,) = ax.plot(s.x, ys, color=color, linestyle=":" if s.baseline and s.linestyle == "-" else s.linestyle,
                              marker="s" if s.baseline else "o", markersize=4,
                              label=s.label + (" (no-ESB baseline)" if s.baseline else ""))
            line.set_gid(f"series-{slug(s.label)}")
            if any(e is not None for e in s.err):
                bars = ax.errorbar(s.x, ys, yerr=[0 if e is None else e for e in s.err], fmt="none",
                                   ecolor=color, capsize=3, linewidth=1)
                for collection in bars.lines[2]:        # the vertical bars
                    collection.set_gid(f"errorbars-{slug(s.label)}")
            flagged = [(x, y) for x, y, b in zip(s.x, ys, s.bottleneck) if b]
            if flagged:
                mark = ax.scatter(*zip(*flagged), s=170, facecolors="none", edgecolors="red", linewidths=1.6,
                                  zorder=5, label=None if marked else "bottleneck: not an ESB measurement")
                mark.set_gid(f"bottleneck-{slug(s.label)}")
                marked = True
        highest = max((y for s in panel.series for y in s.y if y is not None), default=0)
        if panel.limit and (graph.ymax or highest >= LIMIT_SHOWN_FROM * panel.limit):
            ax.axhline(panel.limit, color="grey", linestyle="-.", linewidth=1, label=panel.limit_label)
        ax.set_title(panel.title)
        ax.set_xscale(graph.xscale)
        if graph.xticks:
            ax.set_xticks([t for t, _ in graph.xticks], [lbl for _, lbl in graph.xticks],
                          rotation=45 if n > 1 else 0)   # narrow panels: 50KB and 100KB would overlap
            ax.minorticks_off()
        ax.set_xlabel(graph.xlabel)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=graph.ymin, top=graph.ymax)
    axes[0].set_ylabel(graph.ylabel)
    axes[-1].legend(fontsize="small")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Lay the figure out once, not once per format: the layout is a third of the drawing time.
    fig.get_layout_engine().execute(fig)
    fig.set_layout_engine("none")
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
