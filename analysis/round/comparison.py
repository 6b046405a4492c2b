"""A round against the published one, and several runs of a round against each other. `compare`
(compare.csv) sets a rerun's figures beside the published round's: how far each moved, and whether the
two agree (the interval of their ratio, or difference, holds no change; iterations a validity warning
names left out of it); on another machine only the ratios, which its speed divides out of.
`compare_verdicts` (compare-verdicts.csv) says how many of the published verdicts it reproduced, and
`rerun_agreement` (reruns.csv) how often each verdict came out the same over several runs."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

import polars as pl

from esbperf.analysis import forks
from esbperf.analysis.round.folder import VERDICTS_COMPARED, RoundData
from esbperf.analysis.round.headline_figures import (ADDED_MS, KEY, RATIO_KINDS, VS_ENGINE, Figure, difference_of,
                                                     figures, ratio_of, valid_text)
from esbperf.analysis.round.machine_speed import machine_differences
from esbperf.analysis.round.pair_verdicts import verdicts


def within_noise(published: Figure, new: Figure) -> tuple | bool | None:
    """Whether a rerun's figure agrees with the published one: the 95 % interval of their ratio (of
    their difference, for added latency) holds no change, from each side's own interval
    (forks.agreement; a side of one iteration varies as one of the other side's units). Never
    whether their ranges overlap: two sets of three draws of one distribution overlap 90 % of the
    time, so overlap is no test at 95 %. None when neither side has an interval."""
    return agreement(published, new)[0]


def agreement(published: Figure, new: Figure) -> tuple[bool | None, float | None, float | None]:
    """(agrees, low, high): within_noise, and the interval of new ÷ published (new − published)."""
    if published.interval is None or new.interval is None:
        return None, None, None
    return forks.agreement(published.interval, new.interval, log=published.kind != ADDED_MS)


COMPARISON_SCHEMA = {"kind": pl.String, "what": pl.String, "scenario": pl.String, "payload_bytes": pl.Int64,
                     "users": pl.Int64, "target": pl.String, "payload": pl.String,
                     **{name: pl.Float64 for name in ("published", "published_min", "published_max")},
                     "published_valid": pl.String, "published_left_out": pl.String,
                     **{name: pl.Float64 for name in ("new", "new_min", "new_max")},
                     "new_valid": pl.String, "new_left_out": pl.String, "moved": pl.Float64,
                     "difference_low": pl.Float64, "difference_high": pl.Float64, "agrees": pl.Boolean,
                     "one_process": pl.Boolean}


def compare(new: RoundData, published: RoundData, kinds: Iterable[str] | None = None) -> pl.DataFrame:
    """Every figure both rounds have, side by side: the published value and spread, the new one, the
    new ÷ the published (a difference for added latency) with its 95 % interval, and whether they
    agree (within_noise); iterations a validity warning names are left out of each side's interval
    (`*_left_out` says which, or why they could not be), and `one_process` says when an interval
    comes from one engine process (it leaves out the variance between processes). `kinds`: only
    figures of these kinds (RATIO_KINDS for a rerun on another machine); VS_ENGINE rows are the ratios
    of two targets' figures that both rounds' verdicts judged (engine ÷ engine)."""
    theirs = {f.key: f for f in figures(published)}
    wanted = None if kinds is None else set(kinds)
    rows = []
    for f in figures(new):
        p = theirs.get(f.key)
        if p is None or (wanted is not None and f.kind not in wanted):
            continue
        agrees, low, high = agreement(p, f)
        rows.append({**{k: getattr(f, k) for k in KEY}, "payload": f.payload,
                     "published": p.value, "published_min": p.low, "published_max": p.high,
                     "published_valid": p.valid, "published_left_out": p.left_out, "new": f.value, "new_min": f.low,
                     "new_max": f.high, "new_valid": f.valid, "new_left_out": f.left_out,
                     "moved": difference_of(f.value, p.value) if f.kind == ADDED_MS else ratio_of(f.value, p.value),
                     "difference_low": low, "difference_high": high, "agrees": agrees,
                     "one_process": any(i is not None and i.one_fork for i in (p.interval, f.interval))})
    if wanted is None or VS_ENGINE in wanted:
        rows += _engine_ratios(new, published)
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA)


def _verdict_interval(r: dict) -> forks.Interval | None:
    """A verdict's ratio as an Interval again (verdicts.csv: the ratio, its interval at `confidence`
    and its degrees of freedom give back its standard error, in the log)."""
    ratio, low, high, df, level = (r.get(k) for k in ("ratio", "ratio_low", "ratio_high", "df", "confidence"))
    if None in (ratio, low, high, df, level) or ratio <= 0 or high <= ratio or not math.isfinite(high):
        return None
    se = math.log(high / ratio) / forks.t_quantile((1 + level) / 2, df)
    return forks.Interval(ratio, low, high, r.get("forks") or 0, r.get("units") or 0, df, bool(r.get("one_fork")), se,
                          log=True)


def _verdict_key(r: dict) -> tuple:
    return (r["scenario"], r["payload_bytes"], r.get("users"), r["figure"], r["a_target"], r["b_target"])


def _engine_ratios(new: RoundData, published: RoundData) -> list[dict]:
    """compare.csv rows of kind VS_ENGINE: a ÷ b of every pair of targets both rounds judged (their
    verdicts' ratios), new ÷ published with its 95 % interval, and whether they agree."""
    theirs = {_verdict_key(r): r for r in verdicts(published).iter_rows(named=True)}
    rows = []
    for r in verdicts(new).iter_rows(named=True):
        p = theirs.get(_verdict_key(r))
        if p is None or r["ratio"] is None or p["ratio"] is None:
            continue
        a, b = _verdict_interval(p), _verdict_interval(r)
        agrees, low, high = forks.agreement(a, b, log=True) if a is not None and b is not None else (None, None, None)
        rows.append({"kind": VS_ENGINE, "what": r["figure"], "scenario": r["scenario"],
                     "payload_bytes": r["payload_bytes"], "users": r.get("users"),
                     "target": f"{r['a_target']} ÷ {r['b_target']}", "payload": r["payload_label"],
                     "published": p["ratio"], "published_min": None, "published_max": None,
                     "published_valid": valid_text(("", p.get("valid_a")), ("", p.get("valid_b"))),
                     "published_left_out": "", "new": r["ratio"], "new_min": None, "new_max": None,
                     "new_valid": valid_text(("", r.get("valid_a")), ("", r.get("valid_b"))), "new_left_out": "",
                     "moved": r["ratio"] / p["ratio"] if p["ratio"] else None, "difference_low": low,
                     "difference_high": high, "agrees": agrees,
                     "one_process": bool(p.get("one_fork")) or bool(r.get("one_fork"))})
    return rows


VERDICTS_COMPARED_SCHEMA = {"scenario": pl.String, "payload_bytes": pl.Int64, "payload": pl.String, "users": pl.Int64,
                            "figure": pl.String, "a": pl.String, "b": pl.String, "published": pl.String,
                            "new": pl.String, "published_outcome": pl.String, "new_outcome": pl.String,
                            "reproduced": pl.Boolean}


def outcome(r: dict) -> str | None:
    """A verdict's outcome: the target it shows better, "none" (no difference shown), or None (not judged)."""
    if r.get("shown") is None:
        return None
    return r["better"] if r["shown"] else "none"


def compare_verdicts(new: RoundData, published: RoundData) -> pl.DataFrame:
    """Every verdict both rounds have (a pair of targets at a step, a figure), each round's sentence in
    short and its outcome, and whether the rerun reproduced it: the same target shown better, or no
    difference shown by both (None where either round did not judge it)."""
    theirs = {_verdict_key(r): r for r in verdicts(published).iter_rows(named=True)}
    rows = []
    for r in verdicts(new).iter_rows(named=True):
        p = theirs.get(_verdict_key(r))
        if p is None:
            continue
        mine, before = outcome(r), outcome(p)
        rows.append({"scenario": r["scenario"], "payload_bytes": r["payload_bytes"], "payload": r["payload_label"],
                     "users": r.get("users"), "figure": r["figure"], "a": r["a_target"], "b": r["b_target"],
                     "published": p["short"], "new": r["short"], "published_outcome": before, "new_outcome": mine,
                     "reproduced": None if mine is None or before is None else mine == before})
    return pl.DataFrame(rows, schema=VERDICTS_COMPARED_SCHEMA)


def verdict_lines(table: pl.DataFrame) -> list[str]:
    """How many of the published verdicts a rerun reproduced: of those both judged, of the differences
    the published round shows, and of its "no difference shown"; the ones it did not, a few by name."""
    if table.is_empty():
        return ["  verdicts: none in common (the rounds judged different steps)"]
    judged = table.filter(pl.col("reproduced").is_not_null())
    same = judged.filter(pl.col("reproduced"))
    shown = judged.filter(pl.col("published_outcome") != "none")
    none = judged.filter(pl.col("published_outcome") == "none")
    line = (f"  verdicts: {same.height} of {judged.height} judged by both rounds reproduced (differences shown: "
            f"{shown.filter(pl.col('reproduced')).height} of {shown.height}; no difference shown: "
            f"{none.filter(pl.col('reproduced')).height} of {none.height})"
            + (f"; {table.height - judged.height} judged by one round only" if table.height > judged.height else ""))
    missed = judged.filter(~pl.col("reproduced"))
    # A reversal (each round shows the other engine ahead) is named before a difference one round missed.
    reversed_ = (pl.col("published_outcome") != "none") & (pl.col("new_outcome") != "none")
    missed = missed.with_columns(_reversed=reversed_).sort("_reversed", descending=True, maintain_order=True)
    lines = [line]
    for r in missed.head(5).iter_rows(named=True):
        load = f" {r['users']}u" if r["users"] is not None else ""
        lines.append(f"    not reproduced: {r['scenario']} {r['payload']}{load} {r['a']} vs {r['b']} {r['figure']}: "
                     f"published {r['published']}, now {r['new']}")
    if missed.height > 5:
        lines.append(f"    … and {missed.height - 5} more ({VERDICTS_COMPARED})")
    return lines


def comparison_lines(table: pl.DataFrame, published: RoundData, machine_note: str = "",
                     verdicts_said: Iterable[str] = ()) -> list[str]:
    """What `esbperf round` prints of a comparison: per kind of figure, how many agree with the
    published ones (the interval of their ratio holds 1) and the largest move; with `machine_note`
    (another machine: what differs, and that only ratios were compared) after the first line, and
    `verdicts_said` (verdict_lines) after the figures."""
    commit = ((next(iter(published.runs.values()), {}).get("environment") or {}).get("git") or {}).get("commit")
    head = (f"compared with the published round in {published.dir} ({published.info.get('started', '?')[:10]}, "
            f"commit {str(commit)[:12]}): {table.height} figures in common")
    if table.is_empty():
        return [head + " (none: the rounds measured different steps)", *([machine_note] if machine_note else []),
                *verdicts_said]
    lines = [head, *([machine_note] if machine_note else [])]
    for kind in dict.fromkeys(table["kind"]):
        rows = table.filter(pl.col("kind") == kind)
        judged = rows.filter(pl.col("agrees").is_not_null())
        inside = judged.filter(pl.col("agrees")).height
        left = rows.filter(pl.col("published_left_out").str.starts_with("left out")
                           | pl.col("new_left_out").str.starts_with("left out")).height

        def move(r: dict) -> float:
            m = r["moved"]
            return -1.0 if m is None else abs(m) if kind == ADDED_MS else abs(math.log(m)) if m > 0 else math.inf

        worst = max(rows.iter_rows(named=True), key=move)
        moved = ("–" if worst["moved"] is None else f"{worst['moved']:+.2f} ms" if kind == ADDED_MS
                 else f"× {worst['moved']:.2f}")
        spread = "" if worst["published_min"] is None else \
            f", published spread {_g(worst['published_min'])}–{_g(worst['published_max'])}"
        judgement = (f"{inside} of {judged.height} agree (the 95 % interval of new "
                     + ("− published holds 0" if kind == ADDED_MS else "÷ published holds 1") + ")"
                     + (f", {rows.height - judged.height} without an interval" if rows.height > judged.height else "")
                     + (f"; {left} with iterations a validity warning names left out" if left else "")
                     if judged.height else f"{rows.height}, none with an interval (one iteration a side)")
        lines.append(f"  {kind}: {judgement}"
                     + f"; largest move {moved}: {worst['what']} of {worst['target']} {worst['scenario']} "
                       f"{worst['payload']}" + (f" {worst['users']}u" if worst["users"] is not None else "")
                     + f" ({_g(worst['published'])} → {_g(worst['new'])}{spread})")
    lines += verdicts_said
    if table["one_process"].any():
        lines.append("  (intervals from one engine process per target leave out the variance between processes, "
                     "which each rerun's new process brings: an engine that disagrees may only have settled "
                     "elsewhere; measure with forks to tell)")
    return lines


def _g(value: float | None) -> str:
    """3 significant digits, never in exponent form (2830, not 2.83e+03)."""
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"




def write_comparison(new: RoundData, published: RoundData, out: Path) -> tuple[Path, list[str]]:
    """compare.csv (and beside it compare-verdicts.csv) and the lines `esbperf round` prints. On
    another machine (machine_differences) only ratios are compared, never absolute figures: the
    machine's speed divides out of a ratio, not out of a TPS."""
    differs = machine_differences(new, published)
    table = compare(new, published, RATIO_KINDS if differs else None)
    table.write_csv(out, float_precision=4)
    said = compare_verdicts(new, published)
    said.write_csv(Path(out).with_name(VERDICTS_COMPARED))
    note = ("  another machine (" + "; ".join(differs) + "): compared by its ratios (÷ direct, ÷ best floor, "
            "÷ reference, engine ÷ engine) and verdicts, not its absolute figures") if differs else ""
    return out, comparison_lines(table, published, note, verdict_lines(said))


RERUNS_SCHEMA = {"scenario": pl.String, "payload_bytes": pl.Int64, "payload": pl.String, "users": pl.Int64,
                 "figure": pl.String, "a": pl.String, "b": pl.String, "outcomes": pl.String, "reruns": pl.Int64,
                 "judged": pl.Int64, "most": pl.String, "same": pl.Int64}


def rerun_agreement(rounds_: list[RoundData]) -> pl.DataFrame:
    """How often each verdict came out the same over several runs of one round (reruns.csv): a row per
    pair of targets at a step and figure, each run's outcome in order (the target shown better, "none"
    for no difference shown, "not judged"), how many judged it, the outcome most of those gave, and how
    many gave it."""
    found: dict[tuple, dict] = {}
    for n, data in enumerate(rounds_):
        for r in verdicts(data).iter_rows(named=True):
            row = found.setdefault(_verdict_key(r), {
                "scenario": r["scenario"], "payload_bytes": r["payload_bytes"], "payload": r["payload_label"],
                "users": r.get("users"), "figure": r["figure"], "a": r["a_target"], "b": r["b_target"],
                "said": ["not run"] * len(rounds_)})
            row["said"][n] = outcome(r) or "not judged"
    rows = []
    for row in found.values():
        said = row.pop("said")
        judged = [o for o in said if o not in ("not judged", "not run")]
        most = max(dict.fromkeys(judged), key=judged.count) if judged else None
        rows.append({**row, "outcomes": "; ".join(said), "reruns": len(said), "judged": len(judged),
                     "most": most, "same": judged.count(most) if most else 0})
    return pl.DataFrame(rows, schema=RERUNS_SCHEMA)


def rerun_lines(table: pl.DataFrame) -> list[str]:
    """What `esbperf round --reruns` prints: how many verdicts every run judged and how many of those
    came out the same in each, then each judged verdict's outcomes."""
    if table.is_empty():
        return ["reruns: no verdict in common"]
    n = int(table["reruns"].max())
    every = table.filter(pl.col("judged") == n)
    lines = [f"reruns: {table.height} verdicts over {n} runs; judged by every run: {every.height}, the same in every "
             f"run: {every.filter(pl.col('same') == n).height}; judged by some runs only: "
             f"{table.filter((pl.col('judged') > 0) & (pl.col('judged') < n)).height}; by none: "
             f"{table.filter(pl.col('judged') == 0).height}"]
    for r in table.filter(pl.col("judged") > 0).sort("same", "judged").iter_rows(named=True):
        load = f" {r['users']}u" if r["users"] is not None else ""
        lines.append(f"  {r['scenario']} {r['payload']}{load} {r['a']} vs {r['b']} {r['figure']}: "
                     f"{r['most']} {r['same']} of {r['judged']} judged ({r['outcomes']})")
    return lines
