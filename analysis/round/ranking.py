"""The ranking a round leads with: at each headline cell — each closed step at which every ranked engine
(round.json `ranked`: Round 3's three ESBs) was measured, and each capacity they were all searched for — those
engines in order of their figure, each pair's verdict with its interval (or "no difference shown" and its
interval), and each engine's TPS ÷ direct's (at most, where the testbed bounded direct).

A pair is resolved when its verdict shows a difference or its interval lies inside ±RESOLVED_WITHIN (no
difference that large); a pair neither shows nor rules out is `unresolved`, and `esbperf round` may add
forks to both its engines (round.json `added_forks`: paired, so measured in the same added forks) and
judge the family again, its false discoveries spent over both looks (round.json `looks`)."""
from __future__ import annotations

import polars as pl

from esbperf.analysis.bottleneck import testbed_bound
from esbperf.analysis.round.folder import RoundData
from esbperf.analysis.round.headline_figures import ABSOLUTE, CAPACITY_RATE, VS_DIRECT, Figure, figures
from esbperf.analysis.round.markdown_tables import markdown_table
from esbperf.analysis.round.pair_verdicts import verdicts
from esbperf.analysis.verdicts import percent_level

# A pair whose interval lies inside 1 ± this is resolved without a difference shown: none that large.
RESOLVED_WITHIN = 0.10
# The figure a closed cell is ranked by, and a capacity's.
CLOSED_FIGURE, CAPACITY_FIGURE = "tps", "capacity"


def ranked(data: RoundData) -> list[str]:
    """The engines a round ranks (round.json `ranked`; none in a round before Round 3), those it measured."""
    measured = set(data.summary["target"]) if data.summary.height else set()
    return [t for t in data.info.get("ranked") or [] if t in measured]


def pair_rows(data: RoundData) -> pl.DataFrame:
    """The verdicts the ranking rests on: each pair of ranked engines at each headline cell (TPS at a
    closed step, or capacity)."""
    engines = ranked(data)
    found = verdicts(data)
    return found.filter(pl.col("a_target").is_in(engines) & pl.col("b_target").is_in(engines)
                        & pl.col("figure").is_in([CLOSED_FIGURE, CAPACITY_FIGURE]))


def resolved(row: dict) -> bool:
    """Shown, or its interval inside ±RESOLVED_WITHIN."""
    if row.get("shown"):
        return True
    low, high = row.get("ratio_low"), row.get("ratio_high")
    return low is not None and high is not None and 1 - RESOLVED_WITHIN <= low and high <= 1 + RESOLVED_WITHIN


def unresolved(data: RoundData) -> list[dict]:
    """The closed cells' pairs more forks could resolve: neither shown nor inside ±RESOLVED_WITHIN, and
    not left unjudged by a testbed bound (more forks of an engine measure the same bound)."""
    rows = pair_rows(data).filter(pl.col("figure") == CLOSED_FIGURE)
    return [r for r in rows.iter_rows(named=True) if not resolved(r) and not r.get("bound_note")]


def engines_of(rows: list[dict]) -> list[str]:
    """Both engines of every pair, once each, in the order the rows name them."""
    return list(dict.fromkeys(t for r in rows for t in (r["a_target"], r["b_target"])))


def pair_label(row: dict) -> str:
    """`proxy 1KB 20u camel vs synapse`: a pair at its cell, as round.json's `added_forks` names it."""
    load = "capacity" if row["figure"] == CAPACITY_FIGURE else f"{row['users']}u"
    return f"{row['scenario']} {row['payload_label']} {load} {row['a_target']} vs {row['b_target']}"


def _cells(found: list[Figure], engines: list[str]) -> list[tuple[str, str, int | None, str]]:
    """(scenario, payload, users, figure's kind) of each cell every ranked engine has a figure at."""
    out: dict[tuple, set] = {}
    for f in found:
        if (f.kind, f.what) in ((ABSOLUTE, CLOSED_FIGURE), (CAPACITY_RATE, CAPACITY_FIGURE)) and f.target in engines \
                and f.value is not None:
            out.setdefault((f.scenario, f.payload, f.users, f.kind), set()).add(f.target)
    return [cell for cell, targets in out.items() if targets == set(engines)]


def ranking_text(data: RoundData) -> str:
    """The page's lead: each headline cell's ranked engines in order, each pair's verdict, each engine's
    TPS ÷ direct's; then how many forks each engine got, and why. Empty for a round with fewer than two
    ranked engines."""
    engines = ranked(data)
    if len(engines) < 2:
        return ""
    found = figures(data)
    index = {(f.kind, f.what, f.scenario, f.payload, f.users, f.target): f for f in found}
    pairs = pair_rows(data)
    level = pairs["confidence"].drop_nulls().max() if pairs.height else None
    blocks = []
    for scenario, payload, users, kind in _cells(found, engines):
        what = CLOSED_FIGURE if kind == ABSOLUTE else CAPACITY_FIGURE
        mine = sorted(engines, key=lambda t: -(index[(kind, what, scenario, payload, users, t)].value or 0))
        direct = index.get((ABSOLUTE, CLOSED_FIGURE, scenario, payload, users, "direct"))
        bounded = direct is not None and testbed_bound(direct.bound)
        rows = []
        for n, t in enumerate(mine, start=1):
            f = index[(kind, what, scenario, payload, users, t)]
            vs = index.get((VS_DIRECT, what, scenario, payload, users, t))
            cost = "" if vs is None or vs.value is None else (("at most " if bounded else "") + f"{vs.value:.2f}")
            if cost and vs.interval is not None and vs.interval.has_interval and not bounded:
                cost += f" ({vs.interval.low:.2f}–{vs.interval.high:.2f})"
            rows.append([str(n), t, f"{f.value:,.0f}", cost])
        cell = pairs.filter((pl.col("scenario") == scenario) & (pl.col("payload_label") == payload)
                            & (pl.col("figure") == what)
                            & ((pl.col("users") == users) if users is not None else pl.lit(True)))
        said = [f"- {r['sentence']}{'' if resolved(r) else ' — unresolved'}" for r in cell.iter_rows(named=True)]
        title = f"{scenario} {payload}, " + (f"{users} users: TPS" if users is not None else
                                             "capacity within the p99 goal")
        blocks.append("\n".join([f"#### {title}", "",
                                 markdown_table(["rank", "engine", what if kind == ABSOLUTE else "capacity (/s)",
                                                 "÷ direct"], rows), "", *said]))
    judged = pairs.filter(pl.col("ratio_low").is_not_null())
    done = sum(resolved(r) for r in pairs.iter_rows(named=True))
    head = (f"{done} of {pairs.height} pairs of {', '.join(engines)} resolved at the headline cells (a difference "
            f"shown, or its interval inside ±{100 * RESOLVED_WITHIN:g} %), {judged.height} with an interval"
            + (f" at {percent_level(level)}" if level is not None else "") + ". Ranked by the figure; a rank says "
            "nothing a pair's verdict does not; ÷ direct with its 95 % interval over the forks.")
    return "\n\n".join([head, *blocks, forks_text(data)])


def forks_text(data: RoundData) -> str:
    """How many forks each ranked engine got, and why (round.json `added_forks`)."""
    added = data.info.get("added_forks")
    engines = ranked(data)
    counts = {}
    for run in data.runs.values():
        plan = run.get("plan") or {}
        for t in run.get("targets") or []:
            if t["name"] in engines:
                extra = sum(t["name"] in a for a in plan.get("added_forks") or [])
                counts[t["name"]] = max(counts.get(t["name"], 0), (plan.get("forks") or 1) + extra)
    said = ", ".join(f"{t} {n}" for t, n in counts.items())
    if added is None:
        return f"Forks: {said}; this round adds none."
    why = added.get("why", "")
    return (f"Forks: {said}. After its own forks the round looked at its verdicts once: {why} Its false "
            f"discoveries are spent over {data.info.get('looks', 1)} looks (α ÷ {data.info.get('looks', 1)} each).")
