"""A round's headline figures (`figures`, figures.csv), each with its noise: the spread of the
iterations' own values, and its 95 % interval with the engine process as the unit (analysis/forks.py).
Every engine's TPS and p50/p99 measured and as ratios to direct, to the best floor and to the reference
engine; the latency each target adds to direct's (at p50, p90, p99 of the pooled distributions: a
difference of percentiles, never of means); the throughput per core of the target engine's own
processes; and the capacity within each goal. Iterations a validity warning names are left out of a
figure's interval when the others leave two units (`kept`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import polars as pl

from esbperf.analysis import forks
from esbperf.analysis.round.folder import RoundData, payload_bytes
from esbperf.analysis.runs import BASELINE_TARGET
from esbperf.analysis.stats import figure_sample
from esbperf.analysis.validity import faults
from esbperf.analysis.verdicts import HIGHER_IS_BETTER
from esbperf.core.plan import size_label

MEASURED = {"tps": "tps", "p50": "rt_p50_ms", "p90": "rt_p90_ms", "p99": "rt_p99_ms"}
HEADLINE = ("tps", "p50", "p99")            # the headline tables' figures
ADDED = ("p50", "p90", "p99")               # the percentiles of the added latency
# Kinds of figure, as the tables and compare.csv name them.
ABSOLUTE, VS_DIRECT, VS_FLOOR, ADDED_MS, PER_CORE, CAPACITY_RATE, CAPACITY_VS_FLOOR = (
    "measured", "÷ direct", "÷ best floor", "added ms", "per core", "capacity", "capacity ÷ best floor")
VS_REFERENCE = "÷ reference"       # a target's TPS over the reference engine's at the same step
VS_ENGINE = "engine ÷ engine"      # compare.csv: the ratio of two targets' figures (a verdict's), a rerun against
# The kinds a rerun on another machine is compared by: ratios, which the machine's speed divides out of.
RATIO_KINDS = (VS_DIRECT, VS_FLOOR, VS_REFERENCE, CAPACITY_VS_FLOOR, VS_ENGINE)
KEY = ("kind", "what", "scenario", "payload_bytes", "users", "target")
VALID_SEPARATOR = "; "


@dataclass(frozen=True)
class Figure:
    """One figure of the page (a row of figures.csv)."""

    kind: str                 # ABSOLUTE, VS_DIRECT, …
    what: str                 # tps, p50, p90, p99, capacity
    scenario: str
    payload: str              # its label (1KB)
    payload_bytes: int
    users: int | None         # None: a capacity (its probes choose their pools)
    target: str
    value: float | None       # iterations pooled (percentiles) or averaged (TPS, CPU): with an interval, those
                              # it is over (kept), so that it lies inside it; None: not measured
    low: float | None         # the spread of the iterations' own values (None with fewer than two)
    high: float | None
    iterations: int
    valid: str                # "yes", or the validity warnings' names (and a reference's, named)
    interval: forks.Interval | None = None   # 95 %, over the forks, or one fork's iterations (forks.interval, …)
    left_out: str = ""        # the iterations a validity warning names, left out of `interval` (or why not)
    bound: str | None = None  # what bounded the target's step (aggregate.csv `bound`; analysis/bottleneck.py)

    @property
    def key(self) -> tuple:
        return tuple(getattr(self, k) for k in KEY)


# --- each figure's parts --------------------------------------------------------------------------

def as_number(value: Any) -> float | None:
    """A table's cell as a float; None for an empty or NaN one."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _spread(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """(min, max) of the values there are; (None, None) with fewer than two."""
    xs = [v for v in values if v is not None]
    return (min(xs), max(xs)) if len(xs) > 1 else (None, None)


def ratio_of(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def difference_of(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def per_core(tps: float | None, cpu_percent: float | None) -> float | None:
    """Transactions per second per core of the target engine's own processes (`esb_proc_cpu_mean`,
    % of one core)."""
    return tps / (cpu_percent / 100.0) if tps is not None and cpu_percent else None


def valid_text(*verdicts: tuple[str, str]) -> str:
    """"yes", or the warnings of the target's step (summary.csv's `valid`: names separated by `;`),
    and each reference that is not valid named once (its own row says why): `drift; direct not valid`."""
    named = [name for who, v in verdicts if who == "" for name in faults(v)]
    named += [f"{who} not valid" for who, v in verdicts if who and faults(v)]
    return VALID_SEPARATOR.join(dict.fromkeys(named)) or "yes"


class _Cells:
    """The closed steps by (scenario, payload bytes, users): per target its aggregate row and its
    iterations' summary rows, by (fork, iteration)."""

    def __init__(self, data: RoundData):
        self.agg: dict[tuple, dict[str, dict]] = {}
        self.iterations: dict[tuple, dict[str, dict[tuple[int, int], dict]]] = {}
        for r in data.aggregate.iter_rows(named=True):
            self.agg.setdefault((r["scenario"], r["payload_bytes"], r["users"]), {})[r["target"]] = r
        for r in data.summary.iter_rows(named=True):
            self.iterations.setdefault((r["scenario"], r["payload_bytes"], r["users"]), {}).setdefault(
                r["target"], {})[(r.get("fork") or 1, r["iteration"])] = r


def _best(rows: dict[str, dict], targets: list[str], column: str, higher: bool) -> tuple[str | None, float | None]:
    """The best of `targets` by `column` (their highest TPS, lowest latency): (target, value)."""
    found = [(rows[t][column], t) for t in targets if t in rows and as_number(rows[t].get(column)) is not None]
    if not found:
        return None, None
    value, target = (max if higher else min)(found)
    return target, value


# A warning about the step as a whole (not of one iteration), which leaving iterations out cannot help.
WHOLE_STEP_KINDS = {"missing-iterations"}


def _named(r: dict) -> list[str]:
    return [k for k in faults(r.get("valid")) if k not in WHOLE_STEP_KINDS]


def _iteration_name(r: dict) -> str:
    f = r.get("fork") or 1
    return f"it{r['iteration']}" if f == 1 else f"fork {f} it{r['iteration']}"


def kept(rows: list[dict]) -> tuple[list[dict], str]:
    """The iterations a figure's interval is computed from: those no validity warning names, when
    they leave two units (forks, or with one fork iterations); else all of them. And what was left
    out (`left out: it3 (drift)`), or that it could not be (`includes it3 (drift): …`)."""
    named = [r for r in rows if _named(r)]
    if not named:
        return rows, ""
    rest = [r for r in rows if not _named(r)]
    what = ", ".join(f"{_iteration_name(r)} ({', '.join(_named(r))})" for r in named)
    units = len({r.get("fork") or 1 for r in rest})
    if (units if units > 1 else len(rest)) >= 2:
        return rest, f"left out: {what}"
    return rows, f"includes {what}: too few other iterations to leave out"


def figures(data: RoundData) -> list[Figure]:
    """Every headline figure of the round, with the spread of its iterations and its 95 % interval
    (module doc)."""
    if data._figures is None:
        data._figures = _figures(data)
    return data._figures


def _figures(data: RoundData) -> list[Figure]:
    kinds = data.kinds()
    floors = [t for t, k in kinds.items() if k == "floor"]
    reference = data.reference()
    cells = _Cells(data)
    histograms = data.histograms()
    memo: dict = {}
    samples: dict = {}
    out: list[Figure] = []
    for key, rows in sorted(cells.agg.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        scenario, size, users = key
        iters = cells.iterations.get(key, {})

        def sample(target: str, column: str) -> tuple[forks.Sample, str]:
            """The target's figure in `column` from its iterations that no warning names (kept)."""
            if (key, target, column) not in samples:
                used, left_out = kept(list(iters.get(target, {}).values()))
                samples[(key, target, column)] = (figure_sample(used, histograms, column), left_out)
            return samples[(key, target, column)]

        def both(target: str, reference: str, column: str, how) -> tuple[forks.Interval, str]:
            (a, left_a), (b, left_b) = sample(target, column), sample(reference, column)
            said = "; ".join(f"{who}: {text}" for who, text in ((target, left_a), (reference, left_b)) if text)
            # Both from one run: its forks measured both targets, so they pair them (forks.ratio).
            runs = {r.get("run") for t in (target, reference) for r in iters.get(t, {}).values()}
            return how(a, b, memo=memo, paired=len(runs) == 1), said

        def fig(kind: str, what: str, target: str, value, values, valid: str, interval=None, left_out="") -> None:
            low, high = _spread(values)
            if interval is not None and interval.value is not None:
                value = interval.value    # of the iterations its interval is over: those `kept` leaves in
            # (without an interval, every iteration's figure: aggregate.csv's)
            out.append(Figure(kind, what, scenario, rows[target]["payload_label"] or size_label(size), size, users,
                              target, as_number(value), low, high, len(iters.get(target, {})), valid, interval,
                              left_out, rows[target].get("bound")))

        direct = rows.get(BASELINE_TARGET)
        here = [f for f in floors if f in rows]
        standard = reference if reference in rows else None
        valid = {t: step_valid(data, r, len(iters.get(t, {}))) for t, r in rows.items()}
        for target, row in rows.items():
            own = (("", valid[target]),)
            mine = iters.get(target, {})
            for what in HEADLINE:
                column = MEASURED[what]
                measured, left_out = sample(target, column)
                fig(ABSOLUTE, what, target, row.get(column), [as_number(r.get(column)) for r in mine.values()],
                    valid_text(*own), forks.interval(measured), left_out)
                if direct is not None and target != BASELINE_TARGET:
                    theirs = iters.get(BASELINE_TARGET, {})
                    fig(VS_DIRECT, what, target, ratio_of(as_number(row.get(column)), as_number(direct.get(column))),
                        [ratio_of(as_number(r.get(column)), as_number(theirs[i].get(column)))
                         for i, r in mine.items() if i in theirs],
                        valid_text(*own, (BASELINE_TARGET, valid[BASELINE_TARGET])),
                        *both(target, BASELINE_TARGET, column, forks.ratio))
                if here and target != BASELINE_TARGET:
                    best, value = _best(rows, here, column, HIGHER_IS_BETTER[what])
                    # Each iteration against the same floor as the value (the best on the whole), so that
                    # the value, a weighted mean of the iterations' ratios for TPS, lies within their spread.
                    floor = iters.get(best, {})
                    fig(VS_FLOOR, what, target, ratio_of(as_number(row.get(column)), as_number(value)),
                        [ratio_of(as_number(r.get(column)), as_number(floor[i].get(column)))
                         for i, r in mine.items() if i in floor],
                        valid_text(*own, *(((best, valid[best]),) if best else ())),
                        *(both(target, best, column, forks.ratio) if best else (None, "")))
                if what == "tps" and standard is not None and target != standard:
                    theirs = iters.get(standard, {})
                    fig(VS_REFERENCE, what, target, ratio_of(as_number(row.get(column)), as_number(rows[standard].get(column))),
                        [ratio_of(as_number(r.get(column)), as_number(theirs[i].get(column)))
                         for i, r in mine.items() if i in theirs],
                        valid_text(*own, (standard, valid[standard])), *both(target, standard, column, forks.ratio))
            if target == BASELINE_TARGET:
                continue
            if direct is not None:
                theirs = iters.get(BASELINE_TARGET, {})
                for what in ADDED:
                    column = MEASURED[what]
                    fig(ADDED_MS, what, target, difference_of(as_number(row.get(column)), as_number(direct.get(column))),
                        [difference_of(as_number(r.get(column)), as_number(theirs[i].get(column)))
                         for i, r in mine.items() if i in theirs],
                        valid_text(*own, (BASELINE_TARGET, valid[BASELINE_TARGET])),
                        *both(target, BASELINE_TARGET, column, forks.difference))
            used, left_out = kept(list(mine.values()))
            fig(PER_CORE, "tps", target, per_core(as_number(row.get("tps")), as_number(row.get("esb_proc_cpu_mean"))),
                [per_core(as_number(r.get("tps")), as_number(r.get("esb_proc_cpu_mean"))) for r in mine.values()],
                valid_text(*own), forks.interval(forks.Sample.of_values(
                    [per_core(as_number(r.get("tps")), as_number(r.get("esb_proc_cpu_mean"))) for r in used],
                    [r.get("fork") or 1 for r in used])), left_out)
    return out + capacity_figures(data, floors)


def step_valid(data: RoundData, row: dict, measured: int) -> str:
    """A step's `valid` (aggregate.csv), and `missing-iterations` when it has fewer than its run's plan
    asks for (validity.expected_iterations): said here too, for a round analysed before that warning."""
    from esbperf.analysis.validity import expected_iterations
    found = ";".join(faults(row.get("valid"))) or "yes"     # a bound is no fault (validity.BOUND_KINDS)
    record = data.runs.get(str(row["run"]).rsplit("/", 1)[-1], {})
    expected = expected_iterations(record.get("plan") if isinstance(record.get("plan"), dict) else {}, record)
    if expected and measured < expected and "missing-iterations" not in found.split(";"):
        return "missing-iterations" if found == "yes" else f"{found};missing-iterations"
    return found


NOT_CHECKED = "not checked"     # a capacity table written before searches said their validity


def capacity_samples(data: RoundData, only_valid: bool = False
                     ) -> dict[tuple[str, str], dict[str, tuple[forks.Sample, str]]]:
    """Each target's searches per (scenario, payload): their capacities as a forks.Sample (a search per
    fork, or per iteration of one process) and their validity (capacity.csv `valid`: the warnings of
    the probes each rests on; NOT_CHECKED for a table without it). `only_valid`: the searches no
    warning spoils (a target's sample says which it left out), as a strict round's verdicts take them."""
    out: dict[tuple[str, str], dict[str, tuple[forks.Sample, str]]] = {}
    if data.capacity is None or data.capacity.is_empty():
        return out
    frame = data.capacity
    for (scenario, payload, target), g in frame.group_by(["scenario", "payload", "target"], maintain_order=True):
        if only_valid and "valid" in g.columns:
            spoiled = g.filter(pl.col("valid").map_elements(lambda v: bool(faults(v)), return_dtype=pl.Boolean))
            if not spoiled.is_empty():
                g = g.filter(~pl.col("valid").map_elements(lambda v: bool(faults(v)), return_dtype=pl.Boolean))
                fork_of = g["fork"].to_list() if "fork" in g.columns else None
                said = ", ".join(f"fork {r.get('fork') or 1} search {r['iteration']} ({', '.join(faults(r['valid']))})"
                                 for r in spoiled.iter_rows(named=True))
                out.setdefault((scenario, payload), {})[target] = (
                    forks.Sample.of_values([as_number(v) for v in g["capacity_rate"]], fork_of, f"left out: {said}",
                                           unit="search"), "yes")
                continue
        fork_of = g["fork"].to_list() if "fork" in g.columns else None
        valid = (";".join(dict.fromkeys(k for v in g["valid"].fill_null("").to_list() for k in faults(v)))
                 or "yes") if "valid" in g.columns else NOT_CHECKED
        out.setdefault((scenario, payload), {})[target] = (
            forks.Sample.of_values([as_number(v) for v in g["capacity_rate"]], fork_of, unit="search"), valid)
    return out


def capacity_figures(data: RoundData, floors: list[str]) -> list[Figure]:
    """Each target's capacity per scenario and payload (the mean of its searches' — of its forks' —
    with their spread and interval), and as a ratio to the best floor's, with the interval of that
    ratio: a single search a side has none, and the ratio is then no ranking."""
    out = []
    found = capacity_samples(data)
    sizes = {payload: payload_bytes(payload) for _, payload in found}
    for (scenario, payload), by_target in sorted(found.items(), key=lambda kv: (kv[0][0], sizes[kv[0][1]])):
        values = {t: s.figure() for t, (s, _) in by_target.items()}
        best = max((f for f in floors if values.get(f) is not None), key=lambda f: values[f], default=None)
        for target, (sample, valid) in by_target.items():
            low, high = _spread(sample.values)
            out.append(Figure(CAPACITY_RATE, "capacity", scenario, payload, sizes[payload], None, target,
                              values[target], low, high, sample.iterations, valid, forks.interval(sample)))
            if best is not None:
                theirs, their_valid = by_target[best]
                ratios = _spread([ratio_of(a, b) for a, b in zip(sample.values, theirs.values)]) \
                    if sample.iterations == theirs.iterations else (None, None)
                out.append(Figure(CAPACITY_VS_FLOOR, "capacity", scenario, payload, sizes[payload], None, target,
                                  ratio_of(values[target], values[best]), *ratios, sample.iterations,
                                  valid_text(("", valid), (best, their_valid)), forks.ratio(sample, theirs)))
    return out



def figures_frame(found: list[Figure]) -> pl.DataFrame:
    """The figures as a table (figures.csv): what the page shows, one row per figure, with its 95 %
    interval (`ci_low`, `ci_high`, its degrees of freedom `df`, the `forks` and `units` it is over,
    `one_fork`: it leaves out the variance between processes) and what it left out."""
    rows = []
    for f in found:
        row = {k: v for k, v in f.__dict__.items() if k != "interval"}
        i = f.interval
        row.update(ci_low=None if i is None else i.low, ci_high=None if i is None else i.high,
                   df=None if i is None else i.df, forks=None if i is None else i.forks,
                   units=None if i is None else i.units, one_fork=None if i is None else i.one_fork)
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)

