"""Thesis-style graphs, one set per scenario, drawn with matplotlib (Agg) as PNG and SVG.

A graph is first built as data (Graph -> Panel -> Series) and only then drawn, so tests and the
report work with the numbers behind a graph, not its pixels. In the SVG each series' line is the
group `series-<label>`, its error bars `errorbars-<label>`, and its marks `bottleneck-<label>`
(a host saturated), `errors-<label>` (failed transactions) and `behind-<label>` (an open-model
pool that could not keep its schedule).

Bars: on figures of the pooled data of all iterations (response times, percentiles, latency) the
range of the per-iteration values; on figures averaged over iterations (TPS, CPU, network) the
95 % confidence interval. Each graph says which under its x axis.

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

from esbperf.analysis.bottleneck import THRESHOLD_PERCENT  # noqa: E402
from esbperf.analysis.runs import BASELINE_TARGET  # noqa: E402
from esbperf.analysis.stats import KEYS, POOLED, ROLES, StepHistograms  # noqa: E402

THESIS_CONCURRENCY_PAYLOAD = 100 * 1024
# Percentiles of the percentile plot, drawn on a "number of nines" axis.
PERCENTILE_POINTS = (50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
BASELINE_COLOR = "#222222"
ERRORS_COLOR = "#ff7f0e"
BEHIND_COLOR = "#7b2cbf"
CI_BARS = "bars: 95 % confidence interval over iterations"
RANGE_BARS = "bars: range of the per-iteration values (figure: iterations pooled)"
# A limit line (link capacity) far above the data would flatten the curves; it is drawn once the
# data reaches this share of it (the panel's title names the capacity anyway).
LIMIT_SHOWN_FROM = 0.25

# How each kind of step is marked on every graph (on top of its point).
MARKS = {
    "bottleneck": dict(s=170, facecolors="none", edgecolors="red", linewidths=1.6,
                       label="bottleneck: not an ESB measurement"),
    "errors": dict(s=70, marker="x", color=ERRORS_COLOR, linewidths=1.8,
                   label="failed transactions (not in TPS nor response times)"),
    "behind": dict(s=90, marker="v", facecolors="none", edgecolors=BEHIND_COLOR, linewidths=1.6,
                   label="open model: pool behind its schedule"),
}

matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "esbperf"})


@dataclass
class Series:
    label: str
    x: list[float]
    y: list[float | None]
    err: list[tuple[float, float] | None]   # (down, up) bar lengths; None where one iteration
    bottleneck: list[bool]
    errors: list[bool] = field(default_factory=list)    # steps with failed transactions
    behind: list[bool] = field(default_factory=list)    # open model: the pool fell behind its schedule
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
    bars: str = ""                     # what the error bars are (CI_BARS, RANGE_BARS)
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

def _bars(g: pl.DataFrame, y: str) -> list[tuple[float, float] | None]:
    """Error bars of figure `y` per row: the per-iteration range for pooled figures, else the CI."""
    out = []
    for r in g.iter_rows(named=True):
        if r[y] is None or r["iterations"] < 2:
            out.append(None)
        elif y in POOLED:
            low, high = r[f"{y}_iter_min"], r[f"{y}_iter_max"]
            out.append(None if low is None else (max(0.0, r[y] - low), max(0.0, high - r[y])))
        else:
            e = r[f"{y}_ci95"]
            out.append(None if e is None else (e, e))
    return out


def _series(rows: pl.DataFrame, x: str, y: str, labels: dict[tuple[str, str], str],
            x_divisor: float = 1.0, suffix: str = "", linestyle: str = "-", by_users: bool = False) -> list[Series]:
    """A series per (run, target) (and per thread pool with `by_users`) of figure `y` against `x`."""
    out = []
    keys = ["run", "target", "users"] if by_users else ["run", "target"]
    for key, g in rows.group_by(keys, maintain_order=True):
        g = g.sort(x)
        if g[y].null_count() == g.height:
            continue
        label = labels[(key[0], key[1])]
        pool = f" ({key[2]} threads)" if by_users else ""
        out.append(Series(label=label + pool + suffix, x=[v / x_divisor for v in g[x].to_list()],
                          y=g[y].to_list(), err=_bars(g, y), bottleneck=g["bottleneck"].to_list(),
                          errors=g["has_errors"].to_list(), behind=g["behind_schedule"].to_list(),
                          baseline=key[1] == BASELINE_TARGET, color_key=label + pool, linestyle=linestyle))
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
                    prefix: str = "", roles: list[str] | tuple[str, ...] = ROLES) -> list[Graph]:
    """Every graph of one scenario from aggregate.csv's rows (iterations pooled) of runs drawn
    together; file names are <prefix><scenario>-<what>."""
    rows = agg.filter(pl.col("scenario") == scenario)
    stem = slug(prefix + scenario)
    graphs = []
    for sweep_name, sweep, axis in sweeps(rows):
        x, div = axis["x"], axis["x_divisor"]
        common = dict(xlabel=axis["xlabel"], xscale=axis["xscale"], xticks=axis["xticks"])
        vs = f"vs {'payload size' if sweep_name == 'payload' else 'users'}"
        graphs.append(Graph(f"{stem}-tps-vs-{sweep_name}", f"{scenario}: throughput {vs}",
                            ylabel="transactions per second (successful)", bars=CI_BARS,
                            panels=[Panel("", _series(sweep, x, "tps", labels, div))], **common))
        graphs.append(Graph(f"{stem}-response-time-vs-{sweep_name}", f"{scenario}: mean response time {vs}",
                            ylabel="mean response time (ms), successful transactions", bars=RANGE_BARS,
                            panels=[Panel("", _series(sweep, x, "rt_mean_ms", labels, div))], **common))
        graphs += host_graphs(sweep, stem, scenario, sweep_name, vs, x, div, common, labels, links, roles)
    graphs += rate_graphs(rows, stem, scenario, labels, links, roles)
    pct = percentile_graph(rows, scenario, labels, histograms, stem)
    if pct:
        graphs.append(pct)
    for g in graphs:
        g.scenario = scenario
    return [g for g in graphs if any(p.series for p in g.panels)]


def host_graphs(sweep: pl.DataFrame, stem: str, scenario: str, sweep_name: str, vs: str, x: str, div: float,
                common: dict, labels: dict[tuple[str, str], str], links: dict[str, float],
                roles: list[str] | tuple[str, ...]) -> list[Graph]:
    """CPU, the watched processes' CPU and network per host, one panel per host."""
    graphs = []
    cpu_panels = [Panel(role, _series(sweep, x, f"{role}_cpu_mean", labels, div), limit=THRESHOLD_PERCENT,
                        limit_label="bottleneck threshold") for role in roles]
    graphs.append(Graph(f"{stem}-cpu-vs-{sweep_name}", f"{scenario}: CPU per host {vs} (mean over the window)",
                        ylabel="CPU (% of all cores)", panels=[p for p in cpu_panels if p.series], ymax=100,
                        bars=CI_BARS, **common))
    # The ESB and echo JVMs themselves: on one machine every host's CPU above is the machine's.
    # Each panel has its own scale: an echo's 60-100 % must not be cut off at the ESB's.
    proc_panels = [Panel(role, _series(sweep, x, f"{role}_proc_cpu_mean", labels, div)) for role in roles]
    if any(p.series for p in proc_panels):
        graphs.append(Graph(f"{stem}-process-cpu-vs-{sweep_name}",
                            f"{scenario}: CPU of the ESB and echo processes {vs} (mean over the window)",
                            ylabel="CPU (% of one core)", panels=[p for p in proc_panels if p.series],
                            bars=CI_BARS, **common))
    # The ESB JVM's collector (analysis/gc.py). It sits near 100 %: the axis starts from the data.
    graphs.append(Graph(f"{stem}-esb-gc-vs-{sweep_name}", f"{scenario}: ESB GC throughput {vs}",
                        ylabel="GC throughput (% of the window not paused)",
                        panels=[Panel("", _series(sweep, x, "esb_gc_throughput_percent", labels, div))],
                        ymax=100, ymin=None, bars=CI_BARS, **common))
    net_panels = [Panel(f"{role} (link {links[role]:g} Mbit/s)" if role in links else role,
                        _series(sweep, x, f"{role}_rx_mbit", labels, div, " rx")
                        + _series(sweep, x, f"{role}_tx_mbit", labels, div, " tx", "--"),
                        limit=links.get(role), limit_label="link capacity") for role in roles]
    graphs.append(Graph(f"{stem}-network-vs-{sweep_name}", f"{scenario}: network per host {vs}",
                        ylabel="Mbit/s (the host's test-network interface)", panels=[p for p in net_panels if p.series],
                        bars=CI_BARS, **common))
    return graphs


def rate_graphs(rows: pl.DataFrame, stem: str, scenario: str, labels: dict[tuple[str, str], str],
                links: dict[str, float], roles: list[str] | tuple[str, ...]) -> list[Graph]:
    """Open-model steps: latency vs offered load (corrected latency percentiles, the service
    time beside them), throughput vs offered load, and the hosts, at the payload with most rates."""
    payload = rate_sweep_payload(rows)
    if payload is None:
        return []
    sweep = rows.filter((pl.col("model") == "open") & (pl.col("payload_bytes") == payload))
    by_users = sweep.group_by("run", "target", "rate").agg(n=pl.len())["n"].max() > 1
    label = sweep["payload_label"][0]
    common = dict(xlabel=f"offered load (arrivals/s), {label} payload", xscale="linear", xticks=[])
    panels = []
    for name, p in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p99_9")):
        series = (_series(sweep, "rate", f"lat_{p}_ms", labels, by_users=by_users)
                  + _series(sweep, "rate", f"rt_{p}_ms", labels, suffix=" service time", linestyle="--",
                            by_users=by_users))
        panels.append(Panel(name, series))
    graphs = [Graph(f"{stem}-latency-vs-rate", f"{scenario}: latency vs offered load (open model)",
                    ylabel="ms: latency from the due start (solid), service time (dashed)", panels=panels,
                    bars=RANGE_BARS, **common),
              Graph(f"{stem}-tps-vs-rate", f"{scenario}: throughput vs offered load (open model)",
                    ylabel="per second: successful transactions (solid), starts (dashed)",
                    panels=[Panel("", _series(sweep, "rate", "tps", labels, by_users=by_users)
                                  + _series(sweep, "rate", "start_rate", labels, suffix=" starts", linestyle="--",
                                            by_users=by_users))], bars=CI_BARS, **common)]
    vs = "vs offered load"
    return graphs + host_graphs(sweep, stem, scenario, "rate", vs, "rate", 1.0, common, labels, links, roles)


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
    for r in chosen.iter_rows(named=True):
        hist = histograms.get(tuple(r[k] for k in KEYS))
        if hist is None or not hist.response.n:
            continue
        label = labels[(r["run"], r["target"])]
        n = len(PERCENTILE_POINTS)
        series.append(Series(label, [nines(p) for p in PERCENTILE_POINTS],
                             [hist.response.percentile(p) / 1000 for p in PERCENTILE_POINTS], [None] * n,
                             [r["bottleneck"]] * n, [r["has_errors"]] * n, [False] * n,
                             r["target"] == BASELINE_TARGET, label))
    if not series:
        return None
    at = f"{users} user{'s' * (users != 1)}, {chosen['payload_label'][0]}"
    return Graph(f"{stem}-percentiles", f"{scenario}: response-time percentiles, {at}",
                 xlabel="percentile (iterations pooled from their data)", ylabel="response time (ms)",
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
    sharey = graph.ymax is not None if graph.sharey is None else graph.sharey
    axes = fig.subplots(1, n, squeeze=False, sharey=sharey)[0]
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
            for kind, flags, style in (("bottleneck", s.bottleneck, MARKS["bottleneck"]),
                                       ("errors", s.errors, MARKS["errors"]), ("behind", s.behind, MARKS["behind"])):
                flagged = [(x, y) for x, y, b in zip(s.x, ys, flags) if b and not math.isnan(y)]
                if flagged:
                    mark = ax.scatter(*zip(*flagged), zorder=5, label=None if kind in marked else style["label"],
                                      **{k: v for k, v in style.items() if k != "label"})
                    mark.set_gid(f"{kind}-{slug(s.label)}")
                    marked.add(kind)
        highest = max((y for s in panel.series for y in s.y if y is not None), default=0)
        if panel.limit and (graph.ymax or highest >= LIMIT_SHOWN_FROM * panel.limit):
            ax.axhline(panel.limit, color="grey", linestyle="-.", linewidth=1, label=panel.limit_label)
        ax.set_title(panel.title)
        ax.set_xscale(graph.xscale)
        if graph.xticks:
            ax.set_xticks([t for t, _ in graph.xticks], [lbl for _, lbl in graph.xticks],
                          rotation=45 if n > 1 else 0)   # narrow panels: 50KB and 100KB would overlap
            ax.minorticks_off()
        bars = any(e is not None for s in panel.series for e in s.err)
        ax.set_xlabel(graph.xlabel + (f"\n{graph.bars}" if bars and graph.bars else ""))
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=graph.ymin, top=graph.ymax)
    graph.ylims = [tuple(ax.get_ylim()) for ax in axes]
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
