"""A round page's tables, in Markdown: the headline figures with their spread (`headline_tables`),
the latency each target adds to direct's (`added_table`), the throughput per core (`per_core_table`)
and the capacities (`capacity_table`); and the cells they are made of (`cell`, `interval_cell`)."""
from __future__ import annotations

import polars as pl

from esbperf.analysis.bottleneck import testbed_bound
from esbperf.analysis.round.folder import RoundData, in_order, payload_bytes, ranks
from esbperf.analysis.round.headline_figures import (ABSOLUTE, ADDED, ADDED_MS, CAPACITY_RATE, CAPACITY_VS_FLOOR,
                                                     HEADLINE, PER_CORE, VALID_SEPARATOR, VS_DIRECT, VS_FLOOR,
                                                     VS_REFERENCE, Figure, as_number)


def _fmt(value: float | None, what: str) -> str:
    """A figure as the page writes it: TPS and capacities in whole numbers with a thin space per
    thousand, ratios to two decimals, other figures to three significant digits; `–` when none."""
    if value is None:
        return "–"
    if what in ("tps", "capacity", "per core") and abs(value) >= 100:
        return f"{value:,.0f}".replace(",", " ")
    if what == "ratio":
        return f"{value:.2f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2g}"


def cell(f: Figure | None, style: str) -> str:
    """A figure and its spread: `1.23 (1.10–1.31)`; `–` when not measured. A TPS the testbed bounded
    (the client, a link, the back ends) is what the target answered at least: `≥ 14 298 (…)`."""
    if f is None or f.value is None:
        return "–"
    text = ("≥ " if f.kind == ABSOLUTE and f.what == "tps" and testbed_bound(f.bound) else "") + _fmt(f.value, style)
    if f.low is not None and f.high is not None:
        low, high = _fmt(f.low, style), _fmt(f.high, style)
        text += f" ({low})" if low == high else f" ({low}–{high})"
    return text


def markdown_table(headers: list[str], rows: list[list[str]], text_columns: int = 2) -> str:
    """A Markdown table: the first `text_columns` columns and `valid` left-aligned, figures right."""
    right = ["---" if i < text_columns or h in ("valid", "note", "bound") else "---:" for i, h in enumerate(headers)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(right) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _valid_cell(*found: Figure | None) -> str:
    """`yes`, or in bold every warning the row's figures carry, each once."""
    verdicts = [v for f in found if f is not None and f.valid != "yes" for v in f.valid.split(VALID_SEPARATOR)]
    return "yes" if not verdicts else "**" + VALID_SEPARATOR.join(dict.fromkeys(verdicts)) + "**"


def headline_tables(found: list[Figure], kinds: dict[str, str], scenarios: list[str]) -> str:
    """Per scenario and payload, a row per users and target: TPS, p50 and p99 measured and as ratios to
    direct, to the best floor (and TPS to the reference engine, where the round has one)."""
    index = {f.key: f for f in found}
    referenced = any(f.kind == VS_REFERENCE for f in found)   # a TPS ÷ reference column, where a round has one
    parts = []
    cells = sorted({(f.scenario, f.payload_bytes, f.payload) for f in found if f.kind == ABSOLUTE},
                   key=lambda k: (scenarios.index(k[0]), k[1]))
    for scenario, size, payload in cells:
        mine = [f for f in found if f.kind == ABSOLUTE and f.scenario == scenario and f.payload_bytes == size]
        rows = []
        for users in sorted({f.users for f in mine}):
            for target in in_order({f.target for f in mine if f.users == users}, kinds):
                row, shown = [str(users), target], []
                for what in HEADLINE:
                    style = "tps" if what == "tps" else "ms"
                    for kind, s in ((ABSOLUTE, style), (VS_DIRECT, "ratio"), (VS_FLOOR, "ratio"),
                                    *(((VS_REFERENCE, "ratio"),) if referenced and what == "tps" else ())):
                        f = index.get((kind, what, scenario, size, users, target))
                        shown.append(f)
                        row.append(cell(f, s))
                rows.append(row + [_valid_cell(*shown)])
        heads = ["users", "target"]
        for what in HEADLINE:
            name = "TPS" if what == "tps" else what
            heads += [name if what == "tps" else f"{name} ms", f"{name} ÷ direct", f"{name} ÷ best floor",
                      *([f"{name} ÷ reference"] if referenced and what == "tps" else [])]
        parts.append(f"### {scenario}, {payload}\n\n" + markdown_table(heads + ["valid"], rows))
    return "\n\n".join(parts)


def added_table(found: list[Figure], kinds: dict[str, str], scenarios: list[str]) -> str:
    """A row per step and target: the latency it adds to direct's at each of ADDED."""
    index = {f.key: f for f in found}
    rows = []
    keys = sorted({(f.scenario, f.payload_bytes, f.payload, f.users) for f in found if f.kind == ADDED_MS},
                  key=lambda k: (scenarios.index(k[0]), *k[1:]))
    for scenario, size, payload, users in keys:
        targets = in_order({f.target for f in found if f.kind == ADDED_MS and (f.scenario, f.payload_bytes, f.users)
                          == (scenario, size, users)}, kinds)
        for target in targets:
            shown = [index.get((ADDED_MS, what, scenario, size, users, target)) for what in ADDED]
            rows.append([scenario, payload, str(users), target, *(cell(f, "ms") for f in shown), _valid_cell(*shown)])
    return markdown_table(["scenario", "payload", "users", "target", *(f"{p} ms" for p in ADDED), "valid"], rows, 4)


def per_core_table(found: list[Figure], data: RoundData, kinds: dict[str, str]) -> str:
    """A row per step and target: its TPS, its engine's CPU and the TPS per core of it."""
    index = {f.key: f for f in found}
    cpu = {(r["scenario"], r["payload_bytes"], r["users"], r["target"]): r for r in data.aggregate.iter_rows(named=True)}
    rows = []
    order = ranks(kinds)
    scenarios = data.scenarios()
    for f in sorted((f for f in found if f.kind == PER_CORE),
                    key=lambda f: (scenarios.index(f.scenario), f.payload_bytes, f.users, order.get(f.target, 99))):
        r = cpu.get((f.scenario, f.payload_bytes, f.users, f.target), {})
        tps = index.get((ABSOLUTE, "tps", f.scenario, f.payload_bytes, f.users, f.target))
        load = Figure(ABSOLUTE, "cpu", f.scenario, f.payload, f.payload_bytes, f.users, f.target,
                      as_number(r.get("esb_proc_cpu_mean")), as_number(r.get("esb_proc_cpu_mean_iter_min")),
                      as_number(r.get("esb_proc_cpu_mean_iter_max")), f.iterations, f.valid)
        if load.low == load.high:
            load = Figure(*[getattr(load, k) for k in ("kind", "what", "scenario", "payload", "payload_bytes", "users",
                                                        "target", "value")], None, None, f.iterations, f.valid)
        rows.append([f.scenario, f.payload, str(f.users), f.target, cell(tps, "tps"), cell(load, "ms"),
                     cell(f, "per core"), _valid_cell(f)])
    return markdown_table(["scenario", "payload", "users", "target", "TPS", "engine CPU, % of a core", "TPS per core",
                   "valid"], rows, 4)


def interval_cell(f: Figure | None, style: str) -> str:
    """A figure and its 95 % interval: `0.45 (0.40–0.51)`; without one, why (`one search each: no
    interval`): a ratio of single searches ranks nothing."""
    if f is None or f.value is None:
        return "–"
    text = _fmt(f.value, style)
    i = f.interval
    if i is not None and i.has_interval:
        return f"{text} ({_fmt(i.low, style)}–{_fmt(i.high, style)})"
    return f"{text} (one search each: no interval)" if f.kind == CAPACITY_VS_FLOOR and f.iterations == 1 else \
        f"{text} ({(i.why_none if i is not None else '') or 'no interval'})"


def capacity_table(data: RoundData, found: list[Figure], kinds: dict[str, str]) -> str:
    """A row per scenario, payload and target searched: its capacity, the rates over it, and its ratio to
    the best floor's with its interval."""
    if data.capacity is None or data.capacity.is_empty():
        return "No capacity search in this round."
    index = {f.key: f for f in found}
    rows = []
    frame = data.capacity.with_columns(size=pl.col("payload").map_elements(payload_bytes, return_dtype=pl.Int64))
    scenarios = data.scenarios()
    for (scenario, size, payload), group in sorted(frame.group_by(["scenario", "size", "payload"]),
                                                   key=lambda g: (scenarios.index(g[0][0]), g[0][1])):
        by_target = {t: g for (t,), g in group.group_by(["target"])}
        for target in in_order(by_target, kinds):
            g = by_target[target].sort("iteration")
            overs = [as_number(v) for v in g["over_rate"]]
            brackets = [as_number(v) for v in g["bracket_percent"]]
            rate = index.get((CAPACITY_RATE, "capacity", scenario, size, None, target))
            rows.append([scenario, payload, f"{_fmt(as_number(g['p99_goal_ms'][0]), 'ms')} ms", target,
                         cell(rate, "capacity"),
                         ", ".join(_fmt(v, "capacity") for v in overs),
                         ", ".join("–" if b is None else f"{b:.1f}" for b in brackets),
                         interval_cell(index.get((CAPACITY_VS_FLOOR, "capacity", scenario, size, None, target)),
                                       "ratio"),
                         ", ".join(str(p) for p in g["probes"]),
                         "; ".join(str(r) for r in g["result"] if r and ("unfinished" in r or "below" in r)),
                         _valid_cell(rate)])
    return markdown_table(["scenario", "payload", "p99 goal", "target", "capacity /s", "over /s", "bracket %",
                   "÷ best floor (95 % interval)", "probes", "note", "valid"], rows, 4)


