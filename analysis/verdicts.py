"""Verdicts: every pair of series (targets of a run, or runs of one target) at every step they share,
judged per figure on the interval of their ratio with the process as the unit (analysis/forks.py):
"camel is faster than synapse by 12 % (95 %: 6–18 %)", or "no difference shown (95 %: −4 to +9 %)".
Nothing is ranked on its point estimates. What the report, `esbperf compare` (verdicts.csv and the
lines it prints), the gate and a round's page say of two targets comes from here, and every family of
them (a report's, a compare's, a round's) is judged as one: Benjamini–Hochberg on the p-values of
their own t statistics (forks.family), each interval at the family's level, so that a verdict shows a
difference exactly when its interval leaves out none, and the family says how many chance alone
would show (`family_line`). Every sentence about a verdict is written here: one verdict's (`verdict`:
"at least", or not judged, where the testbed bounded a side), a family's (`family_describe`), and the
lines a command prints.

And how many forks and iterations a difference needs (`advice`), from the pilot's own variance
components (Kalibera & Jones, ISMM 2013)."""
from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Iterable

import polars as pl

from esbperf.analysis import forks
from esbperf.analysis.bottleneck import testbed_bound
from esbperf.analysis.runs import BASELINE_TARGET
from esbperf.analysis.stats import StepHistograms, figure_sample

# The figures judged, and their summary.csv column.
FIGURES = {"tps": "tps", "p50": "rt_p50_ms", "p99": "rt_p99_ms"}
# What identifies a step across series (as compare.STEP_KEYS, with the model).
STEP = ("scenario", "payload_bytes", "payload_label", "users", "model", "rate", "test")
COLUMNS = {"plan": pl.String, "scenario": pl.String, "payload_bytes": pl.Int64, "payload_label": pl.String,
           "users": pl.Int64, "model": pl.String, "rate": pl.Float64, "test": pl.Int64, "figure": pl.String,
           "a": pl.String, "b": pl.String, "a_run": pl.String, "a_target": pl.String, "b_run": pl.String,
           "b_target": pl.String, "ratio": pl.Float64, "ratio_low": pl.Float64, "ratio_high": pl.Float64,
           "confidence": pl.Float64, "p": pl.Float64, "q": pl.Float64, "control": pl.String,
           "df": pl.Float64, "forks": pl.Int64, "units": pl.Int64, "one_fork": pl.Boolean, "paired": pl.Boolean,
           "shown": pl.Boolean,
           "better": pl.String, "at_least": pl.Boolean, "bound_a": pl.String, "bound_b": pl.String,
           "valid_a": pl.String, "valid_b": pl.String, "bound_note": pl.String,
           "sentence": pl.String, "short": pl.String}


def _bound_note(a: dict, b: dict, label_a: str, label_b: str) -> str:
    """What bounded the two steps when the testbed did (aggregate.csv `bound`, when the analysis has
    it: compare.bound_note); "" otherwise."""
    if "bound" not in a or "bound" not in b:
        return ""
    from esbperf.analysis.compare import bound_note
    return bound_note(a.get("bound"), b.get("bound"), label_a, label_b)


def _invalid(label: str, valid: str | None) -> str:
    from esbperf.analysis.validity import faults
    named = faults(valid)
    return f"{label}: {', '.join(named)}" if named else ""


@dataclass
class Pending:
    """A verdict to be given once its family is known: verdicts.csv's columns but the verdict's own,
    the interval (95 %), and what the sentence adds after it."""

    row: dict
    figure: str
    found: forks.Interval
    bound_note: str = ""
    bounds: tuple[str | None, str | None] = (None, None)
    after: str = ""          # `[not a valid measurement: …]`, said after the sentence
    after_short: str = ""

    def p_value(self) -> float | None:
        """Its test's p-value; 1 where a testbed bound leaves it not judged (it counts in the family,
        and never shows a difference)."""
        p = forks.p_value(self.found)
        return 1.0 if p is not None and hidden_by_bound(self.found, self.figure, self.bounds) else p


def pending_pairs(summary: pl.DataFrame, histograms: dict[tuple, StepHistograms], labels: dict[tuple[str, str], str],
                  aggregate: pl.DataFrame | None = None,
                  pairs: Iterable[tuple[tuple[str, str], tuple[str, str]]] | None = None) -> list[Pending]:
    """For each plan, step and pair of series (run, target) that both measured it, one per figure:
    the ratio a ÷ b and its interval, to be judged as a family (`judged`). `pairs` limits the pairs
    (default: every pair of series of a plan, in the order they are labelled). `histograms`: each
    summary row's distributions by (run, step_dir, test)."""
    agg = {} if aggregate is None else {
        (r["run"], r["target"], *(r[k] for k in STEP)): r for r in aggregate.iter_rows(named=True)}
    wanted = None if pairs is None else set(pairs)
    out: list[Pending] = []
    cache: dict = {}
    memo: dict = {}          # each sample's bootstrap, for every pair it is in
    for (plan,), of_plan in summary.group_by(["plan"], maintain_order=True):
        found = list(dict.fromkeys(zip(of_plan["run"], of_plan["target"])))
        series = sorted(found, key=lambda s: (s[1] != BASELINE_TARGET, found.index(s)))   # the baseline first
        steps: dict[tuple, dict[tuple[str, str], list[dict]]] = {}
        for r in of_plan.iter_rows(named=True):
            steps.setdefault(tuple(r[k] for k in STEP), {}).setdefault((r["run"], r["target"]), []).append(r)
        for step, by_series in steps.items():
            for a, b in itertools.combinations([s for s in series if s in by_series], 2):
                if wanted is not None and (a, b) not in wanted:
                    if (b, a) not in wanted:
                        continue
                    a, b = b, a
                la, lb = labels.get(a, a[1]), labels.get(b, b[1])
                ra, rb = agg.get((*a, *step), {}), agg.get((*b, *step), {})
                note = _bound_note(ra, rb, la, lb)
                invalid = "; ".join(filter(None, (_invalid(la, ra.get("valid")), _invalid(lb, rb.get("valid")))))
                for figure, column in FIGURES.items():
                    samples = [cache.setdefault((s, step, column), figure_sample(by_series[s], histograms, column))
                               for s in (a, b)]
                    out.append(Pending(
                        {"plan": plan, **dict(zip(STEP, step)), "figure": figure, "a": la, "b": lb, "a_run": a[0],
                         "a_target": a[1], "b_run": b[0], "b_target": b[1], "bound_a": ra.get("bound"),
                         "bound_b": rb.get("bound"), "valid_a": ra.get("valid"), "valid_b": rb.get("valid"),
                         "bound_note": note},
                        # Two targets of one run: each fork measured both (plan.steps), so the forks pair them.
                        figure, forks.ratio(*samples, memo=memo, paired=a[0] == b[0]), note,
                        (ra.get("bound"), rb.get("bound")),
                        f" [not a valid measurement: {invalid}]" if invalid else "", " (not valid)" if invalid else ""))
    return out


def judged(pending: list[Pending], looks: int = 1) -> pl.DataFrame:
    """verdicts.csv: every pending verdict judged as ONE family (forks.family: Benjamini–Hochberg on
    their p-values, each interval at the family's level; α spent over `looks`), one row each."""
    family = forks.family([v.p_value() for v in pending], looks)
    rows = []
    for v, q in zip(pending, family.q):
        p = forks.p_value(v.found)       # its own test's (a member a bound hides counts as 1 in the family)
        said = verdict(v.row["a"], v.row["b"], v.figure, v.found, v.bound_note, v.bounds, family, q)
        i = said.interval
        rows.append({**v.row, "ratio": i.value, "ratio_low": i.low, "ratio_high": i.high,
                     "confidence": family.confidence if i.has_interval else None, "p": p, "q": q,
                     "control": family_control(family) if q is not None else "", "df": i.df, "forks": i.forks,
                     "units": i.units, "one_fork": i.one_fork, "paired": i.paired, "shown": said.shown,
                     "better": said.better,
                     "at_least": said.at_least, "sentence": said.sentence + v.after,
                     "short": said.short + v.after_short})
    return pl.DataFrame(rows, schema=COLUMNS)


def judge_pairs(summary: pl.DataFrame, histograms: dict[tuple, StepHistograms], labels: dict[tuple[str, str], str],
                aggregate: pl.DataFrame | None = None,
                pairs: Iterable[tuple[tuple[str, str], tuple[str, str]]] | None = None) -> pl.DataFrame:
    """verdicts.csv of a report or a compare: `pending_pairs`, judged as one family."""
    return judged(pending_pairs(summary, histograms, labels, aggregate, pairs))


def family_line(verdicts: pl.DataFrame) -> str:
    """What a family of verdicts (verdicts.csv) says as a whole: how many show a difference under the
    control that applied, and how many chance alone would show; with one process per target, that its
    intervals leave out the variance between processes."""
    judged_rows = verdicts.filter(pl.col("q").is_not_null()) if "q" in verdicts.columns else verdicts.clear()
    shown = judged_rows.filter(pl.col("q") <= forks.FALSE_DISCOVERIES).height
    family = forks.Family((), (), judged_rows.height, shown,
                          judged_rows["confidence"].max() if judged_rows.height else forks.CONFIDENCE)
    line = family_describe(family)
    if judged_rows.height and judged_rows["one_fork"].all():
        line += ("; every one from a single process per target (its iterations the units): a difference shown "
                 "is one between those processes, not yet between the engines")
    return line


def step_name(row: dict) -> str:
    load = f"{row['rate']:g}/s" if row.get("model") == "open" and row.get("rate") else f"{row['users']} users"
    return f"{row['scenario']} {row['payload_label']} {load}"


def lines(verdicts: pl.DataFrame, limit: int | None = None) -> list[str]:
    """`proxy 1KB 20 users: camel is faster than synapse by 12 % (95 %: 6–18 %)`, one per verdict."""
    out = [f"{step_name(r)}: {r['sentence']}" for r in verdicts.iter_rows(named=True)]
    if limit is not None and len(out) > limit:
        out = out[:limit] + [f"… and {len(out) - limit} more (verdicts.csv)"]
    return out


# --- a verdict in words ----------------------------------------------------------------------------------

# How a verdict words each figure: higher is better (TPS, capacity) or lower (latency).
HIGHER_IS_BETTER = {"tps": True, "capacity": True, "p50": False, "p90": False, "p99": False, "mean": False}
FIGURE_NAMES = {"tps": "TPS", "capacity": "capacity", "p50": "p50", "p90": "p90", "p99": "p99", "mean": "mean"}


def _percent(x: float) -> str:
    if not math.isfinite(x):
        return "∞"
    x = 100 * x
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.1f}"


def signed_percent(x: float) -> str:
    """A relative change as a signed percentage: +9.0, −4.0, −12."""
    return ("+" if x >= 0 else "−") + _percent(abs(x))


def _range(low: float, high: float) -> str:
    return f"{_percent(low)}–{_percent(high)} %"


def percent_level(confidence: float) -> str:
    """A confidence as a sentence gives it: `95 %`, `99.2 %`."""
    text = f"{100 * confidence:.1f}".rstrip("0").rstrip(".")
    return f"{text} %"


def q_text(q: float) -> str:
    """`= 0.0016`, `< 0.001`: an adjusted p-value as a sentence gives it."""
    return f"= {q:.2g}" if q >= 0.001 else "< 0.001"


def family_control(family: forks.Family) -> str:
    """Which control applied to a family (forks.family), for a verdict's sentence and verdicts.csv
    `control`."""
    over = f", α spent over {family.looks} looks" if family.looks > 1 else ""
    if family.judged < 2:
        return f"one verdict: no family to control{over}"
    return (f"Benjamini–Hochberg over {family.judged} verdicts{over}: false discoveries at most "
            f"{percent_level(forks.FALSE_DISCOVERIES)} of those shown; intervals at {percent_level(family.confidence)}")


def family_describe(family: forks.Family, noun: str = "verdicts") -> str:
    """One line: how many of a family show a difference, under which control, and how many chance alone
    would."""
    if not family.judged:
        return f"no {noun} with an interval"
    return (f"{family.shown} of {family.judged} {noun} show a difference with their false discoveries held to "
            f"{percent_level(forks.FALSE_DISCOVERIES)} (Benjamini–Hochberg; intervals at "
            f"{percent_level(family.confidence)}); with no difference at all, {family.judged} intervals at 95 % "
            f"would show about {family.by_chance:.0f} by chance")


@dataclass(frozen=True)
class Verdict:
    """A verdict on two targets' figure: its interval at the family's level, and its sentence."""

    figure: str          # tps, p50, p99, capacity
    a: str
    b: str
    interval: forks.Interval   # of a ÷ b, at the family's confidence
    better: str          # the target shown better, "" when no difference is shown or not judged
    sentence: str
    short: str = ""      # for a table cell: `camel by 12 % (6.0–18 %)`, `none shown (−4.0 to +9.0 %)`, `not judged`
    at_least: bool = False   # the better side's steps were bounded by the testbed: the difference is at least this
    hidden: str = ""     # why a testbed bound leaves it not judged, though it has an interval

    @property
    def shown(self) -> bool | None:
        return None if not self.interval.has_interval or self.hidden else bool(self.better)


def hidden_by_bound(found: forks.Interval, figure: str, bounds: tuple[str | None, str | None]) -> bool:
    """Whether a testbed bound hides the comparison: a bounded side measured a floor of what its target
    does (TPS at least, response times at most), so only a difference in its favour stands; both sides
    bounded, or the bounded side not reading better, is not judged."""
    mine, theirs = (testbed_bound(b) for b in bounds)
    if not (mine or theirs) or not found.has_interval:
        return False
    if mine and theirs:
        return True
    higher = HIGHER_IS_BETTER.get(figure, True)
    a_better = (found.low > 1) if higher else (found.high < 1)
    b_better = (found.high < 1) if higher else (found.low > 1)
    return not (a_better if mine else b_better)


def verdict(a: str, b: str, figure: str, found: forks.Interval, bound_note: str = "",
            bounds: tuple[str | None, str | None] = (None, None), family_of: forks.Family | None = None,
            q: float | None = None) -> Verdict:
    """One sentence for A ÷ B of `figure`: which is better and by how much, with the interval
    ("camel is faster than synapse by 12 % (95 %: 6–18 %)"), or "no difference shown" with the
    interval of A against B, or why not judged. `found` is at 95 %; in a family (`family_of`, with
    this verdict's adjusted p-value `q`) it is given at the family's confidence, and the sentence says
    which control applied. A verdict from one process per target says "within one process".
    `bounds`: each side's bound (analysis/bottleneck.py); a side the testbed bounded measured a floor
    of its target, so a difference in its favour is "at least" that, and any other is not judged
    (hidden_by_bound). `bound_note`: what bounded the steps (compare.bound_note), said at the end."""
    name = FIGURE_NAMES.get(figure, figure)
    confidence = family_of.confidence if family_of is not None else forks.CONFIDENCE
    if family_of is not None:
        found = forks.at_confidence(found, confidence)
    level = percent_level(confidence)
    control = (f"; q {q_text(q)}, Benjamini–Hochberg over {family_of.judged} verdicts"
               if family_of is not None and family_of.judged > 1 and q is not None else "")
    tail = "".join(f"; {note}" for note in (found.note() if found.has_interval else "", bound_note) if note)
    if not found.has_interval:
        why = found.why_none or "no interval"
        return Verdict(figure, a, b, found, "", f"{a} vs {b}, {name}: not judged ({why})" + tail, "not judged")
    if hidden_by_bound(found, figure, bounds):
        sides = [who for who, bound in zip((a, b), bounds) if testbed_bound(bound)]
        why = (f"{' and '.join(sides)} bounded by the testbed: a bounded side answers at least the TPS it read, "
               "within at most its response times, " + ("on both sides" if len(sides) == 2 else
                                                        "and reads no better than the other"))
        return Verdict(figure, a, b, found, "", f"{a} vs {b}, {name}: not judged ({why})" + tail,
                       "not judged (bound)", hidden=why)
    low, high = found.low, found.high
    higher = HIGHER_IS_BETTER.get(figure, True)
    one = " within one process" if found.one_fork else ""
    if low > 1 or high < 1:
        first, second = (a, b) if (low > 1) == higher else (b, a)
        at_least = testbed_bound(bounds[0] if first == a else bounds[1])
        if low > 1:                      # a's figure is the larger
            up, up_low, up_high = found.value - 1, low - 1, high - 1                        # a over b
            down, down_low, down_high = 1 - 1 / found.value, 1 - 1 / low, 1 - 1 / high      # b under a
        else:
            up, up_low, up_high = 1 / found.value - 1, 1 / high - 1, 1 / low - 1            # b over a
            down, down_low, down_high = 1 - found.value, 1 - high, 1 - low                  # a under b
        size, size_low, size_high = (up, up_low, up_high) if higher else (down, down_low, down_high)
        if at_least:                     # the better side was held back by the testbed: a floor
            by = f"at least {_percent(size)} % ({level}: at least {_percent(size_low)} %{control})"
            cell = f"{first} by ≥ {_percent(size)} % (≥ {_percent(size_low)} %)"
        else:
            by = f"{_percent(size)} % ({level}: {_range(size_low, size_high)}{control})"
            cell = f"{first} by {_percent(size)} % ({_range(size_low, size_high)})"
        if higher:
            words = {"tps": "is faster than", "capacity": "holds more than"}.get(figure, f"has a higher {name} than")
            text = f"{first} {words} {second}{one} by {by}"
        else:
            text = f"{first}'s {name} is lower than {second}'s{one} by {by}"
        return Verdict(figure, a, b, found, first, text + tail, cell + (", one process" if one else ""),
                       at_least=at_least)
    shown = f"{signed_percent(low - 1)} to {signed_percent(high - 1)} %"
    text = f"{a} vs {b}, {name}: no difference shown{one} ({level}: {shown} for {a} against {b}{control})"
    return Verdict(figure, a, b, found, "", text + tail, f"none shown ({shown})")


# --- how many forks --------------------------------------------------------------------------------

# What starting an engine process costs beyond its warm-up (run.json records the warm-up, not the start),
# and a step beyond its warm-up and window (its worker JVMs' start and its tail; 2.9 s and 0.55 s
# measured by Round 1's quick variant here: tests/test_round.py MEASURED).
FORK_START_S = 10.0
STEP_OVERHEAD_S = 3.5
DIFFERENCES = (0.05, 0.10)


@dataclass(frozen=True)
class Advice:
    target: str
    forks: int                       # the pilot's
    iterations: float                # per fork, the pilot's
    between: float | None            # the median step's squared coefficients of variation (TPS)
    within: float | None
    fork_cost_s: float
    iteration_cost_s: float
    needed: tuple[forks.Repetitions, ...]

    def describe(self) -> str:
        pilot = f"{self.target}: pilot of {self.forks} fork(s) × {self.iterations:g} iteration(s)"
        if self.within is None:
            return f"{pilot}: one iteration per fork, no variance to plan from"
        if self.between is None:
            return (f"{pilot}: within a process TPS varies by {self.within ** 0.5:.1%} (iteration to iteration); "
                    "the variance between processes is unknown with one fork: run a pilot of 3 forks or more "
                    "(`forks: 3`) before choosing")
        said = "; ".join(
            f"{r.difference:.0%}: {r.forks} forks × {r.iterations} iteration(s) (about {r.seconds / 60:.0f} min a target)"
            if r.forks else f"{r.difference:.0%}: more than {forks.MAX_FORKS} forks" for r in self.needed)
        return (f"{pilot}: TPS varies by {self.between ** 0.5:.1%} between processes and {self.within ** 0.5:.1%} "
                f"within one; a fork costs {self.fork_cost_s:.0f} s, an iteration of its steps "
                f"{self.iteration_cost_s:.0f} s; to resolve a difference of {said}")


def advice(summary: pl.DataFrame, fork_cost_s: dict[str, float], iteration_cost_s: dict[str, float]) -> list[Advice]:
    """Per target, from its steps' TPS (the pilot): the median step's relative variance components,
    and the forks and iterations per fork that resolve DIFFERENCES at 95 % (forks.repetitions) at
    these costs (seconds per fork beyond its iterations, per iteration of all its steps)."""
    out = []
    for (target,), rows in summary.group_by(["target"], maintain_order=True):
        found = []
        for _, step in rows.group_by(["run", "scenario", "payload_bytes", "users", "rate", "test"],
                                     maintain_order=True):
            c = forks.components(forks.Sample.of_values(step["tps"].to_list(),
                                                        step["fork"].to_list() if "fork" in step.columns else None))
            if c is not None:
                found.append(c)
        if not found:
            continue
        relative = [c.relative() for c in found]
        between = [b for b, _ in relative if b is not None]
        within = [w for _, w in relative if w is not None]
        b = statistics.median(between) if between else None
        w = statistics.median(within) if within else None
        cf, ci = fork_cost_s.get(target, FORK_START_S), iteration_cost_s.get(target, 60.0)
        needed = tuple(forks.repetitions(b, w, cf, ci, d) for d in DIFFERENCES) if b is not None and w is not None \
            else ()
        out.append(Advice(target, max(c.forks for c in found), statistics.median(c.iterations for c in found), b, w,
                          cf, ci, needed))
    return out


def fork_costs(records: list[dict]) -> dict[str, float]:
    """A fork's cost per target beyond its iterations, s: its start (FORK_START_S) and ONE warm-up.
    run.json `target_warmup` holds an entry per warm-up (each fork's, and a resumed run's), with the
    seconds each target was loaded at each kind of step it was warmed for (those add up: they follow
    each other) and the fork it warmed; a fork costs the mean of the target's warm-ups (one per entry
    and fork) over `records`."""
    warm: dict[str, list[float]] = {}
    for info in records:
        for record in info.get("target_warmup") or []:
            mine: dict[tuple, float] = {}
            for t in (record.get("targets") or []) if isinstance(record, dict) else []:
                seconds = t.get("seconds") if isinstance(t, dict) else None
                if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                    key = (t["target"], t.get("fork"))
                    mine[key] = mine.get(key, 0.0) + float(seconds)
            for (target, _), seconds in mine.items():
                warm.setdefault(target, []).append(seconds)
    return {t: FORK_START_S + statistics.mean(seconds) for t, seconds in warm.items()}


def iteration_costs(steps: Iterable[tuple[str, tuple, float]]) -> dict[str, float]:
    """An iteration's cost per target, s: its steps of one iteration added up, the median iteration;
    `steps` holds (target, (run, fork, iteration), seconds) of each step."""
    per: dict[str, dict[tuple, float]] = {}
    for target, key, seconds in steps:
        mine = per.setdefault(target, {})
        mine[key] = mine.get(key, 0.0) + seconds
    return {t: statistics.median(v.values()) for t, v in per.items() if v}


def costs(runs) -> tuple[dict[str, float], dict[str, float]]:
    """(fork cost, iteration cost) per target of analysed runs: fork_costs of their run.json, and each
    step's seconds from step.json `start_ms` to `end_ms`."""
    return fork_costs([run.info for run in runs]), iteration_costs(
        (s.meta["target"], (run.name, s.fork, s.meta["iteration"]), (s.meta["end_ms"] - s.meta["start_ms"]) / 1000)
        for run in runs for s in run.steps if isinstance(s.meta.get("start_ms"), int))
