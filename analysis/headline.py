"""The report's first words: what the runs found, in a sentence per engine and sweep, made from their
own figures (aggregate.csv: iterations pooled) and verdicts (verdicts.csv), and only from valid steps.

report.html opens with it, and the CLI prints it when a report is written (`esbperf report`,
`compare`, `run`, `demo`); tests read it back against summary.csv. Each sentence keeps the figures it
states (`Figure`: which row and column of aggregate.csv), so what it says can be checked.

What a sentence states, per sweep (graphs.sweeps picks the steps, as the graphs do):
- payload sweep: the smallest payload's mean response time, and what it adds to the baseline's at the
  same step (with the verdict's interval of the medians' ratio); the largest payload's TPS against the
  baseline's (with the verdict's interval of the TPS ratio);
- concurrency sweep: the highest TPS the engine holds, with how many users and what bounded it, and
  the baseline's at that step;
- open model: the highest offered rate the engine kept to schedule, with its p99 latency there;
- closed-model steps that form no sweep: the highest TPS, as of a concurrency sweep.
A step bounded by the testbed (the client, a link, the back ends) measured the testbed's limit: its
TPS is "X or more", its response time "X or less" (analysis/bottleneck.py). A step a validity warning
names (aggregate.csv `valid` not `yes`) is never used; when no step is valid the headline says so
and states no figure."""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import polars as pl

from esbperf.analysis.bottleneck import TESTBED
from esbperf.analysis.graphs import rate_sweep_payload, sweeps
from esbperf.analysis.runs import BASELINE_TARGET
from esbperf.analysis.stats import MIN_ITERATIONS_FOR_CI

# What bounded a step, in a sentence about it (analysis/bottleneck.py BOUNDS).
BOUND_WORDS = {"engine": "bound by its own CPU", "none": "with nothing saturated", "client": "bound by the client",
               "link": "bound by a link", "backends": "bound by the back ends"}
# A verdict's figure (verdicts.csv `figure`) beside the aggregate.csv column it judges.
VERDICT_FIGURES = {"tps": "tps", "p50": "rt_p50_ms", "p99": "rt_p99_ms"}


@dataclass(frozen=True)
class Figure:
    """One figure a sentence states: aggregate.csv's row (run, target, step, test) and column, its value,
    and its 95 % interval where it has one; `at_least`/`at_most` when a testbed bound makes it a limit."""

    run: str
    target: str
    scenario: str
    payload_bytes: int
    users: int
    rate: float | None
    test: int | None
    column: str
    value: float
    low: float | None = None
    high: float | None = None
    at_least: bool = False
    at_most: bool = False


@dataclass(frozen=True)
class Ratio:
    """A verdict of verdicts.csv turned to read `series ÷ reference` (its row's index in the file)."""

    figure: str
    value: float
    low: float | None
    high: float | None
    row: int
    confidence: float = 0.95   # its interval's level: a family's verdicts are printed at their adjusted one


@dataclass
class Sentence:
    topic: str                 # what it is about: `Payload sweep, 1 user`; "" for a note on the whole
    text: str
    figures: list[Figure] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)


@dataclass
class Headline:
    sentences: list[Sentence]
    steps: int                 # aggregate.csv rows (steps, iterations pooled)
    valid: int                 # of them valid (`valid` yes)

    @property
    def none_valid(self) -> bool:
        return self.steps > 0 and self.valid == 0

    def lines(self) -> list[str]:
        return [f"{s.topic}: {s.text}" if s.topic else s.text for s in self.sentences]


# --- words for figures -------------------------------------------------------------------------------

def tps_text(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def ms_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def share_text(ratio: float) -> str:
    """A ratio as a share or a multiple: `7.1 %`, `64 %`, `2.3×`, `14×`."""
    if ratio >= 2:
        return f"{ratio:.2g}×" if ratio < 10 else f"{ratio:.0f}×"
    percent = 100 * ratio
    return f"{percent:.2g} %" if percent < 10 else f"{percent:.0f} %"


def _interval(low: float | None, high: float | None, text=ms_text) -> str:
    return "" if low is None or high is None else f" (95 %: {text(low)}–{text(high)})"


# An interval of a ratio wider than this factor, end to end, is printed as saying nothing.
WIDEST_SHOWN = 100.0


def _ratio_interval(r: Ratio | None) -> str:
    """`95 %: 20–24 %`, `99.2 %: 12–18×`: a verdict's interval at its level, as share_text words its ends."""
    if r is None or r.low is None or r.high is None:
        return ""
    if not (r.low > 0 and math.isfinite(r.high)) or r.high / r.low > WIDEST_SHOWN:
        # A unit or two at a family's level: bounds past any sense say only that nothing is known.
        return f"{r.confidence * 100:.3g} %: too few units for an interval that says anything"
    low, high = share_text(r.low), share_text(r.high)
    level = f"{r.confidence * 100:.3g} %"
    for unit in (" %", "×"):
        if low.endswith(unit) and high.endswith(unit):
            return f"{level}: {low.removesuffix(unit)}–{high}"
    return f"{level}: {low} to {high}"


def _kinds(rows: Iterable[dict]) -> str:
    """`target-not-warm 28, client-bound 10`: the warnings naming the rows (steps), most frequent first;
    of one step, their names alone."""
    rows = list(rows)
    counts: dict[str, int] = {}
    for r in rows:
        for kind in (r.get("valid") or "yes").split(";"):
            if kind and kind != "yes":
                counts[kind] = counts.get(kind, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(kind if len(rows) == 1 else f"{kind} {n}" for kind, n in ordered)


def valid(row: dict | None) -> bool:
    return row is not None and (row.get("valid") or "yes") == "yes"


def testbed_bound(row: dict) -> bool:
    return row.get("bound") in TESTBED


# --- reading the frames ------------------------------------------------------------------------------

def default_labels(aggregate: pl.DataFrame, plans: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    """Each series' label as the report gives it (runs.label_runs): the target, plus the run's name when
    two runs of a plan measured that target."""
    labels = {}
    for names in plans.values():
        series = list(dict.fromkeys(zip(*aggregate.filter(pl.col("run").is_in(names)).select("run", "target")
                                        .to_dict(as_series=False).values())))
        for run, target in series:
            twice = sum(t == target for _, t in series) > 1
            labels[(run, target)] = f"{target} ({run})" if twice else target
    return labels


class _Verdicts:
    """verdicts.csv by step and pair, each turned to read `series ÷ reference`; tolerant of columns
    it does not know (a `bounded` or `q` added later)."""

    STEP = ("scenario", "payload_bytes", "users", "model", "rate", "test")

    def __init__(self, verdicts: pl.DataFrame | None):
        self.rows: dict[tuple, tuple[int, dict]] = {}
        if verdicts is None or not verdicts.height:
            return
        for n, r in enumerate(verdicts.iter_rows(named=True)):
            key = tuple(r.get(k) for k in self.STEP)
            self.rows[(*key, r["figure"], r["a_run"], r["a_target"], r["b_run"], r["b_target"])] = (n, r)

    def ratio(self, row: dict, series: tuple[str, str], reference: tuple[str, str], figure: str) -> Ratio | None:
        key = tuple(row.get(k) for k in self.STEP)
        for a, b, flip in ((series, reference, False), (reference, series, True)):
            found = self.rows.get((*key, figure, *a, *b))
            if found is None:
                continue
            n, r = found
            value, low, high = r.get("ratio"), r.get("ratio_low"), r.get("ratio_high")
            if value is None:
                return None
            if flip:
                value = 1 / value
                low, high = (None, None) if low is None or high is None or not low or not high else (1 / high, 1 / low)
            return Ratio(figure, value, low, high, n, r.get("confidence") or 0.95)
        return None


def _figure(row: dict, column: str, low: float | None = None, high: float | None = None) -> Figure:
    bounded = testbed_bound(row)
    return Figure(row["run"], row["target"], row["scenario"], row["payload_bytes"], row["users"], row.get("rate"),
                  row.get("test"), column, row[column], low, high,
                  at_least=bounded and column == "tps", at_most=bounded and column != "tps")


def _tps(row: dict) -> Figure:
    """A step's TPS, with its 95 % interval from MIN_ITERATIONS_FOR_CI iterations on (as the report's
    tables: below, a t interval of two values is more quantile than data)."""
    ci = row.get("tps_ci95")
    if ci is None or (row.get("iterations") or 1) < MIN_ITERATIONS_FOR_CI:
        return _figure(row, "tps")
    return _figure(row, "tps", row["tps"] - ci, row["tps"] + ci)


def _said(f: Figure, text=ms_text, unit: str = " ms") -> str:
    """The figure with its unit, then its limit and interval ("0.0167 ms or less", not "0.0167 or less ms")."""
    limit = " or more" if f.at_least else " or less" if f.at_most else ""
    return text(f.value) + unit + limit + _interval(f.low, f.high, text)


# --- the sentences -----------------------------------------------------------------------------------

def _payload(label: str, mine: pl.DataFrame, base: pl.DataFrame | None, base_label: str, series, reference,
             verdicts: _Verdicts, users: int) -> Sentence:
    rows = [r for r in mine.sort("payload_bytes").iter_rows(named=True)]
    good = [r for r in rows if valid(r) and r["rt_mean_ms"] is not None]
    topic = f"Payload sweep, {users} user{'s' * (users != 1)}"
    if not good:
        return Sentence(topic, f"{label} has no valid step ({_kinds(rows)})")
    at = {r["payload_bytes"]: r for r in (base.iter_rows(named=True) if base is not None else [])}
    first = good[0]
    rt = _figure(first, "rt_mean_ms")
    s = Sentence(topic, f"{label} answers {first['payload_label']} in {_said(rt)}", [rt])
    other = at.get(first["payload_bytes"])
    if valid(other) and other["rt_mean_ms"] is not None:
        base_rt = _figure(other, "rt_mean_ms")
        added = rt.value - base_rt.value
        s.figures.append(base_rt)
        r = verdicts.ratio(first, series, reference, "p50")
        median = "" if r is None else f" (median {share_text(r.value)} {base_label}'s" + (
            f"; {_ratio_interval(r)}" if r.low is not None else "") + ")"
        if r:
            s.ratios.append(r)
        s.text += (f", {ms_text(abs(added))} ms {'more' if added >= 0 else 'less'} than {base_label}'s "
                   f"{_said(base_rt)}{median}")
    elif other is not None:
        s.text += f" ({base_label}'s step there is not valid: {_kinds([other])})"
    last = good[-1]
    if last is not first:
        tps = _tps(last)
        s.figures.append(tps)
        s.text += f"; at {last['payload_label']} it holds {_said(tps, tps_text, '')} TPS"
        other = at.get(last["payload_bytes"])
        if valid(other):
            base_tps, r, share = _against_base(s, last, tps, other, series, reference, verdicts)
            limit = "at most " if base_tps.at_least and not tps.at_least else ""
            s.text += (f", {limit}{share} of {base_label}'s {_said(base_tps, tps_text, '')}"
                       + (f" ({_ratio_interval(r)})" if r and r.low is not None and not limit else ""))
        elif other is not None:
            s.text += f" ({base_label}'s step there is not valid: {_kinds([other])})"
    return s


def _against_base(s: Sentence, row: dict, tps: Figure, other: dict, series, reference, verdicts: "_Verdicts"):
    """The baseline's TPS at the engine's step `row` (its figure kept in the sentence), the verdict's
    ratio of the two where one was judged (kept too), and the engine's share of the baseline's TPS."""
    base_tps = _tps(other)
    s.figures.append(base_tps)
    r = verdicts.ratio(row, series, reference, "tps")
    if r:
        s.ratios.append(r)
    return base_tps, r, share_text(r.value if r else tps.value / base_tps.value)


def _concurrency(label: str, mine: pl.DataFrame, base: pl.DataFrame | None, base_label: str, series, reference,
                 verdicts: _Verdicts, sweep: bool = True) -> Sentence:
    """The highest TPS among the engine's valid steps, and the baseline's at that step: of a
    concurrency sweep, or (`sweep` False) of closed-model steps that form no sweep."""
    rows = list(mine.sort("payload_bytes", "users").iter_rows(named=True))
    payload = rows[0]["payload_label"]
    good = [r for r in rows if valid(r) and r["tps"] is not None]
    topic = f"Concurrency sweep, {payload}" if sweep else "Closed model"
    if not good:
        return Sentence(topic, f"{label} has no valid step ({_kinds(rows)})")
    best = max(good, key=lambda r: (r["tps"], -r["users"]))
    tps = _tps(best)
    users = f"{best['users']} user{'s' * (best['users'] != 1)}"
    s = Sentence(topic, f"{label} holds {_said(tps, tps_text, '')} TPS with {users}"
                 + ("" if sweep else f" at {best['payload_label']}")
                 + (f", {BOUND_WORDS[best['bound']]}" if best.get("bound") in BOUND_WORDS else ""), [tps])
    other = next((r for r in (base.iter_rows(named=True) if base is not None else [])
                  if (r["users"], r["payload_bytes"]) == (best["users"], best["payload_bytes"])), None)
    if valid(other) and other["tps"] is not None:
        base_tps, r, share = _against_base(s, best, tps, other, series, reference, verdicts)
        if testbed_bound(other):
            s.text += (f"; {base_label} is {BOUND_WORDS[other['bound']]} there, at {_said(base_tps, tps_text, '')} "
                       f"({label} at most {share} of it)")
        else:
            interval = f"; {_ratio_interval(r)}" if r and r.low is not None else ""
            s.text += (f"; {base_label} holds {_said(base_tps, tps_text, '')} there"
                       + (f" ({label} at {share} of it{interval})" if not tps.at_least else ""))
    elif other is not None:
        s.text += f" ({base_label}'s step there is not valid: {_kinds([other])})"
    return s


def _open(label: str, mine: pl.DataFrame, base: pl.DataFrame | None, base_label: str) -> Sentence:
    rows = list(mine.sort("rate").iter_rows(named=True))
    payload = rows[0]["payload_label"]
    good = [r for r in rows if valid(r) and not r["behind_schedule"] and r.get("lat_p99_ms") is not None]
    topic = f"Open model, {payload}"
    if not good:
        return Sentence(topic, f"{label} has no valid step that kept its schedule ({_kinds(rows) or 'all behind'})")
    top = good[-1]
    latency = _figure(top, "lat_p99_ms")
    s = Sentence(topic, f"offered {top['rate']:g} requests a second, {label} keeps the schedule with a p99 latency "
                 f"of {_said(latency)}", [latency])
    other = next((r for r in (base.iter_rows(named=True) if base is not None else []) if r["rate"] == top["rate"]),
                 None)
    if valid(other) and not other["behind_schedule"] and other.get("lat_p99_ms") is not None:
        base_latency = _figure(other, "lat_p99_ms")
        s.figures.append(base_latency)
        s.text += f" ({base_label}: {_said(base_latency)})"
    later = [r for r in rows if r["rate"] > top["rate"] and r["behind_schedule"]]
    if later:
        s.text += f"; it falls behind at {later[0]['rate']:g}/s"
    return s


def headline(aggregate: pl.DataFrame, verdicts: pl.DataFrame | None, plans: dict[str, list[str]],
             labels: dict[tuple[str, str], str] | None = None) -> Headline:
    """The headline of the steps of `aggregate` (aggregate.csv's frame), by plan (`plans`: its run
    names), each engine beside the baseline of its plan (the same run's when it interleaved them)."""
    labels = labels or default_labels(aggregate, plans)
    judged = _Verdicts(verdicts)
    all_rows = aggregate.to_dicts()
    steps, good = len(all_rows), sum(valid(r) for r in all_rows)
    if steps and not good:
        return Headline([Sentence("", f"No step is a valid measurement: a validity warning names every one of the "
                                      f"{steps} steps ({_kinds(all_rows)}), so these runs state no finding. The graphs "
                                      "and tables below show what was measured, hollow where not valid.")], steps, good)
    sentences: list[Sentence] = []
    for names in plans.values():
        rows = aggregate.filter(pl.col("run").is_in(names))
        if not rows.height:
            continue
        several = rows["test"].n_unique() > 1
        found = list(sweeps(rows))
        closed = rows.filter(pl.col("model") == "closed")
        if not found and closed.height:         # steps that form no sweep: the best of them
            found.append(("steps", closed, {}))
        payload = rate_sweep_payload(rows)
        if payload is not None:
            found.append(("open", rows.filter((pl.col("model") == "open") & (pl.col("payload_bytes") == payload)), {}))
        for name, sweep, _ in found:
            keys = list(dict.fromkeys(zip(sweep["run"], sweep["target"], sweep["test"])))
            engines = [k for k in keys if k[1] != BASELINE_TARGET] or keys
            for run, target, test in engines:
                mine = sweep.filter((pl.col("run") == run) & (pl.col("target") == target)
                                    & (pl.col("test") == test if test is not None else pl.col("test").is_null()))
                bases = [k for k in keys if k[1] == BASELINE_TARGET and k[2] == test and (run, target) != k[:2]]
                reference = next((k for k in bases if k[0] == run), bases[0] if bases else None)
                base = None if reference is None else sweep.filter(
                    (pl.col("run") == reference[0]) & (pl.col("target") == reference[1])
                    & (pl.col("test") == test if test is not None else pl.col("test").is_null()))
                label = labels.get((run, target), target) + (f" (test {test})" if several else "")
                base_label = "" if reference is None else labels.get(reference[:2], reference[1])
                series, ref = (run, target), (None if reference is None else reference[:2])
                if name == "payload":
                    s = _payload(label, mine, base, base_label, series, ref, judged, mine["users"][0])
                elif name in ("users", "steps"):
                    s = _concurrency(label, mine, base, base_label, series, ref, judged, sweep=name == "users")
                else:
                    s = _open(label, mine, base, base_label)
                s.text = s.text.rstrip(".") + "."
                sentences.append(s)
    if good < steps:
        sentences.append(Sentence("", f"{good} of {steps} steps are valid measurements; these figures come from them "
                                  f"only (the others: {_kinds(all_rows)})."))
    return Headline(sentences, steps, good)


def terminal_lines(found: Headline) -> list[str]:
    """The headline as the CLI prints it at the end of a report (`report`, `compare`, `run`, `demo`):
    a line that says what follows, then a sentence a line."""
    if not found.sentences:
        return []
    if found.none_valid:
        return [f"esbperf: {found.sentences[0].text}"]
    return ["esbperf: what the runs found (valid steps only; report.html opens on it):",
            *(f"  {line}" for line in found.lines())]


def of_analysis(analysis) -> Headline:
    """The headline of a report's analysis (analysis/report.py's Analysis)."""
    return headline(analysis.aggregate, analysis.verdicts,
                    {plan: [r.name for r in runs] for plan, runs in analysis.plans.items()}, analysis.labels)


def of_report_folder(folder: Path) -> Headline:
    """The headline of a report folder, read back from the CSV files it holds (aggregate.csv,
    summary.csv for the plans, verdicts.csv when written)."""
    folder = Path(folder)
    aggregate = pl.read_csv(folder / "aggregate.csv", infer_schema_length=None)
    summary = pl.read_csv(folder / "summary.csv", infer_schema_length=None, columns=["plan", "run"])
    plans: dict[str, list[str]] = {}
    for plan, run in summary.select("plan", "run").unique(maintain_order=True).iter_rows():
        plans.setdefault(plan, []).append(run)
    verdicts = (pl.read_csv(folder / "verdicts.csv", infer_schema_length=None)
                if (folder / "verdicts.csv").exists() else None)
    return headline(aggregate, verdicts, plans)
