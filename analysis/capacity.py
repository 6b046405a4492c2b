"""Capacity: the highest open-model rate a target holds within a goal (esbperf/core/capacity.py's
Goal), found by a search of real steps, one per probe (docs/capacity.md).

The rule a probe is judged by (`judge`) takes the analysis's own figures of the step — the p99 of
the latency from each request's due time, the error share, the start rate and the open model's
schedule verdict, all from analysis/stats.py and analysis/checks.py — so a probe says what summary.csv says of the same
step. The search (`search`) grows the rate geometrically from the goal's start rate until a probe
is over (or shrinks it, when the first one already is), then bisects between the highest rate
within and the lowest over until they are within the goal's precision. `Searches` runs one search
per iteration, target, scenario and payload of a plan, choosing each probe's step after reading the
one before from its folder: the runner's Schedule, and (without running anything) the replay that
tabulates and draws a run's searches."""
from __future__ import annotations

import csv
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generator, Iterable, Iterator

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from esbperf.analysis.graphs import MARKS, PALETTE, slug  # noqa: E402
from esbperf.analysis.runs import load_run  # noqa: E402
from esbperf.analysis.checks import behind_schedule  # noqa: E402
from esbperf.analysis.stats import analyse_step  # noqa: E402
from esbperf.core import plan as plans  # noqa: E402
from esbperf.core.capacity import GROWTH, MIN_RATE, RATE_TOLERANCE, Goal, round_rate  # noqa: E402
from esbperf.core.errors import EsbperfError  # noqa: E402
from esbperf.core.steady import min_transactions  # noqa: E402
from esbperf.results.histogram import Histogram  # noqa: E402
from esbperf.results import layout  # noqa: E402

# With Poisson arrivals the number of requests due in a window is itself random (a Poisson count,
# standard deviation √(rate × window)): the achieved rate may differ from the offered one by this
# many of its standard deviations beyond RATE_TOLERANCE (two-sided 95 %).
POISSON_Z = 1.96
FOLDER = "capacity"      # RUN/capacity/ (capacity-2/, … when taken): the searches' tables and graphs
GROW, SHRINK, BISECT = "grow", "shrink", "bisect"


# --- the rule ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    within: bool
    reasons: tuple[str, ...] = ()     # why a probe is over the goal (empty when within)


def rate_allowance(rate: float, window_s: float, poisson: bool) -> float:
    """How far (requests/s) a probe's achieved rate may be from its offered `rate`: RATE_TOLERANCE
    of it, and with Poisson arrivals POISSON_Z standard deviations of the rate of requests due in a
    window of `window_s` (√(rate × window) ÷ window)."""
    draw = POISSON_Z * math.sqrt(rate * window_s) / window_s if poisson and window_s > 0 else 0.0
    return RATE_TOLERANCE * rate + draw


def judge(row: dict, goal: Goal, poisson: bool, latency: Histogram | None = None) -> Verdict:
    """A probe (a summary.csv row of an open-model step, analysis/stats.py) against the goal: within
    when its p99 latency from the due time is at most the goal, its errors at most the goal's share,
    its achieved (start) rate within rate_allowance of the offered rate, and it kept its schedule
    (checks.behind_schedule). Anything else — no request started, none answered, errors, a client
    that fell behind — is over.

    A probe of fewer requests than a p99 is measured from (summary.csv leaves `lat_p99_ms` empty:
    a short probe at a low rate) is judged by the p99 its requests do have: the nearest-rank p99 of
    `latency` (its latency histogram, µs), or without one its slowest request (`lat_max_ms`), which
    no percentile exceeds."""
    if not row["starts"]:
        return Verdict(False, ("no request started in the window",))
    reasons = []
    p99 = row["lat_p99_ms"]
    answered = row.get("transactions", row["starts"] if (row["error_percent"] or 0) < 100 else 0)
    if not answered:
        reasons.append("no request answered")
    elif p99 is not None:
        if p99 > goal.p99_ms:
            reasons.append(f"p99 {p99:.1f} ms > {goal.p99_ms:g} ms")
    else:
        n = latency.n if latency is not None and latency.n else row.get("due_requests") or row["starts"]
        few = f"from {n} requests, fewer than the {min_transactions(99.0)} a p99 is measured from"
        if latency is not None and latency.n:
            value = latency.percentile(99.0) / 1000
            if value > goal.p99_ms:
                reasons.append(f"p99 {value:.1f} ms > {goal.p99_ms:g} ms ({few})")
        elif row.get("lat_max_ms") is None or row["lat_max_ms"] > goal.p99_ms:
            slowest = "unknown" if row.get("lat_max_ms") is None else f"{row['lat_max_ms']:.1f} ms"
            reasons.append(f"p99 not measured ({few}), and the slowest request's latency, {slowest}, is not within "
                           f"{goal.p99_ms:g} ms")
    if row["error_percent"] > goal.max_error_percent:
        reasons.append(f"errors {row['error_percent']:.2f} % > {goal.max_error_percent:g} %")
    allowed = rate_allowance(row["rate"], row["window_s"], poisson)
    if abs(row["start_rate"] - row["rate"]) > allowed:
        reasons.append(f"achieved {row['start_rate']:.1f}/s, offered {row['rate']:g}/s (± {allowed:.1f} allowed)")
    if behind_schedule(row):
        reasons.append("behind its schedule")
    return Verdict(not reasons, tuple(reasons))


# --- the search ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bracket:
    """Where a search ended: the highest rate judged within (None: none was) and the lowest judged
    over (None: none was — the search reached the goal's max_rate)."""

    within: float | None
    over: float | None

    @property
    def width(self) -> float | None:
        """over ÷ within − 1: how far above the capacity found the true one may lie."""
        return None if self.within is None or self.over is None else self.over / self.within - 1


def search(goal: Goal) -> Generator[tuple[str, float], bool, Bracket]:
    """The rates to probe, each yielded with its phase; send whether the probe was within the goal.

    Grow: from start_rate, × GROWTH while within, up to max_rate (all within: the capacity is at
    least max_rate). Shrink, when start_rate is already over: ÷ GROWTH until within, down to
    MIN_RATE. Bisect: the geometric mean of the highest rate within and the lowest over (rounded,
    core/capacity.py round_rate), until over ≤ within × (1 + precision). It assumes a rate judged
    within says the same of every lower one, as a target whose queues grow with load behaves."""
    within, over = None, None
    rate = goal.start_rate
    while over is None:                      # grow
        if (yield GROW, rate):
            within = rate
            if rate >= goal.max_rate:
                return Bracket(within, None)
            rate = min(round_rate(rate * GROWTH), goal.max_rate)
        else:
            over = rate
    while within is None:                    # shrink
        rate = round_rate(over / GROWTH)
        if rate < MIN_RATE:
            return Bracket(None, over)
        if (yield SHRINK, rate):
            within = rate
        else:
            over = rate
    while over > within * (1 + goal.precision):   # bisect
        rate = round_rate(math.sqrt(within * over))
        if not within < rate < over:         # rounding leaves nothing between them
            break
        if (yield BISECT, rate):
            within = rate
        else:
            over = rate
    return Bracket(within, over)


# --- a plan's searches over a run ----------------------------------------------------------------

@dataclass
class Probe:
    number: int                      # 1, 2, … in the search's order
    phase: str
    step: plans.Step
    step_dir: Path
    rows: list[dict] = field(default_factory=list)            # summary.csv's rows of the step (one per test)
    verdicts: list[Verdict] = field(default_factory=list)     # each row's
    verdict: Verdict | None = None   # the probe's: within when every test is; None: not measured (kept
                                     # aside, or the run stopped before it)

    @property
    def row(self) -> dict:
        """The row the probe is tabulated by: a test that failed the goal, or the first; {} unmeasured."""
        failed = [row for row, v in zip(self.rows, self.verdicts) if not v.within]
        return (failed or self.rows or [{}])[0]


@dataclass
class Result:
    """One search: a target, scenario, payload and iteration, its probes and where it ended."""

    target: str
    scenario: str
    payload_label: str
    payload_bytes: int
    iteration: int
    goal: Goal
    probes: list[Probe] = field(default_factory=list)
    bracket: Bracket | None = None   # None: unfinished (a probe was kept aside or not run yet)

    @property
    def capacity(self) -> float | None:
        return self.bracket.within if self.bracket else None

    @property
    def fork(self) -> int:
        """The engine process the search measured (its probes' step.json `fork`; 1 when absent)."""
        return next((p.rows[0].get("fork") or 1 for p in self.probes if p.rows), 1)

    def deciding(self) -> list[Probe]:
        """The probes the result rests on: the highest rate judged within and the lowest judged over."""
        b = self.bracket
        rates = set() if b is None else {b.within, b.over} - {None}
        return [p for p in self.probes if p.verdict is not None and p.step.rate in rates]

    def describe(self) -> str:
        """The result in words, with its precision."""
        b, g = self.bracket, self.goal
        rule = f"p99 ≤ {g.p99_ms:g} ms, errors ≤ {g.max_error_percent:g} %"
        if b is None:
            return f"unfinished after {len(self.probes)} probe(s)"
        if b.within is None:
            return f"below {b.over:g}/s: no rate probed held {rule}"
        if b.over is None:
            return f"at least {b.within:g}/s (max_rate) held {rule}; nothing above it was probed"
        return (f"{b.within:g}/s held {rule}; {b.over:g}/s did not: the capacity by this rule lies in "
                f"[{b.within:g}, {b.over:g})/s, within {100 * b.width:.1f} % above the rate found")


class Searches:
    """A capacity plan's searches over a run folder: for each iteration, scenario, payload and target
    (the targets' order rotated per iteration, as the runner's plans do), one search. `steps()`
    yields each probe's step, then reads it from its folder and judges it before choosing the next:
    the runner runs each step it yields (runner.Schedule); iterated alone, it replays what the run
    holds. `results` holds every search begun. A probe's pool is the plan's (Plan.pool), at most
    `max_pool` threads (what the run's agents start: a rate that needs more is over for its client)."""

    def __init__(self, run_dir: Path, plan: plans.Plan, targets: list[str], max_pool: int | None = None):
        if plan.capacity is None:
            raise EsbperfError(f"plan {plan.name} has no capacity goal")
        self.dir, self.plan, self.targets, self.max_pool = Path(run_dir), plan, list(targets), max_pool
        self.goal: Goal = plan.capacity
        self.results: list[Result] = []

    def steps(self) -> Iterator[plans.Step]:
        """Forks outermost (a plan of several: the runner starts the engines afresh before each),
        then iterations, scenario, payload and target, as the runner's plans order their steps."""
        self.results = []
        for f in range(1, self.plan.forks + 1):
            fork = f if self.plan.forks > 1 else None
            for i in range(1, self.plan.iterations + 1):
                shift = (i - 1 + f - 1) % len(self.targets)
                order = self.targets[shift:] + self.targets[:shift]
                for scenario in self.plan.scenarios:
                    for payload in self.plan.payloads:
                        size, file = (payload, None) if isinstance(payload, int) else (payload.size, payload)
                        for target in order:
                            result = Result(target, scenario, file.label if file else plans.size_label(size), size,
                                            i, self.goal)
                            self.results.append(result)
                            yield from self._search(result, plans.Step(scenario, size, 0, i, target, None, file, fork))

    def _search(self, result: Result, template: plans.Step) -> Iterator[plans.Step]:
        rates = search(self.goal)
        try:
            phase, rate = next(rates)
            while True:
                pool = min(self.plan.pool(rate), self.max_pool or math.inf)
                step = plans.Step(template.scenario, template.payload_bytes, pool, template.iteration,
                                  template.target, rate, template.payload_file, template.fork)
                yield step
                probe = self._probe(len(result.probes) + 1, phase, step)
                result.probes.append(probe)
                if probe.verdict is None:
                    return                   # unfinished: a resume runs this probe again
                phase, rate = rates.send(probe.verdict.within)
        except StopIteration as end:
            result.bracket = end.value

    def _probe(self, number: int, phase: str, step: plans.Step) -> Probe:
        probe = Probe(number, phase, step, layout.step_dir(self.dir, step))
        if not layout.is_finished(self.dir, step):
            return probe
        run = load_run(self.dir)
        [measured] = [s for s in run.steps if s.dir == probe.step_dir]
        poisson = self.plan.arrivals == "poisson"
        for row, histograms in analyse_step(run, measured):
            probe.rows.append(row)
            probe.verdicts.append(judge(row, self.goal, poisson, histograms.latency))
        several = len(probe.rows) > 1
        reasons = tuple(reason + (f" (test {row['test']})" if several else "")
                        for row, v in zip(probe.rows, probe.verdicts) for reason in v.reasons)
        probe.verdict = Verdict(not reasons, reasons)
        return probe

    @property
    def finished(self) -> bool:
        """Whether every search the plan asks for ended (replay the run first: list(steps()))."""
        searches = self.plan.iterations * len(self.plan.scenarios) * len(self.plan.payloads) * len(self.targets)
        return len(self.results) == searches and all(r.bracket for r in self.results)


def replay(run_dir: Path, plan: plans.Plan, targets: list[str], max_pool: int | None = None) -> Searches:
    """The searches of a run as its folders hold them, nothing run."""
    searches = Searches(run_dir, plan, targets, max_pool)
    for _ in searches.steps():
        pass
    return searches


# --- tables and graphs ---------------------------------------------------------------------------

PROBE_COLUMNS = ("target", "scenario", "payload", "iteration", "fork", "probe", "phase", "rate", "users", "window_s",
                 "starts", "start_rate", "allowed_deviation", "tps", "error_percent", "lat_p50_ms", "lat_p90_ms",
                 "lat_p99_ms", "max_lag_ms", "behind_schedule", "bound", "bottlenecks", "verdict", "reasons", "valid",
                 "step_dir")
RESULT_COLUMNS = ("target", "scenario", "payload", "iteration", "fork", "p99_goal_ms", "max_error_percent",
                  "rate_tolerance_percent", "precision_percent", "arrivals", "capacity_rate", "over_rate",
                  "bracket_percent", "probes", "result", "valid")
# Validity warnings that say nothing of whether a probe measured the target: the rule itself (a probe
# over for its errors or its schedule is judged so), and idle threads (a probe's pool holds twice the
# requests in flight the goal allows, for the bursts of Poisson arrivals: its idle threads are that room).
RULE_KINDS = {"errors", "behind-schedule", "no-transactions", "idle-threads"}


def probe_validity(searches: Searches) -> dict[str, list[str]]:
    """Each measured probe's validity warnings (analysis/validity.py, as the report judges a step),
    by its step folder, without RULE_KINDS: a drifting window, arrivals that were not Poisson, a busy
    neighbour (a client at its limit is a bound, probes.csv `bound`, which no `valid` names)."""
    from esbperf.analysis.stats import summary_frame
    from esbperf.analysis.validity import step_verdicts, validity_warnings
    rows = [row for r in searches.results for p in r.probes for row in p.rows]
    if not rows:
        return {}
    run = load_run(searches.dir)
    named = step_verdicts(validity_warnings({run.plan_name: [run]}, summary_frame(rows), run.roles))
    return {folder: [k for k in kinds if k not in RULE_KINDS] for (_, folder), kinds in named.items()}


def _verdicts(kinds: Iterable[str]) -> str:
    return ";".join(dict.fromkeys(kinds)) or "yes"


def probe_rows(searches: Searches, validity: dict[str, list[str]] | None = None) -> list[dict]:
    """probes.csv: every probe of every search, in order, with the figures it was judged by, how far
    its achieved rate could be from the offered one (`allowed_deviation`, /s: rate_allowance) and
    what the validity warnings say of it (`valid`)."""
    validity = probe_validity(searches) if validity is None else validity
    poisson = searches.plan.arrivals == "poisson"
    out = []
    for r in searches.results:
        for p in r.probes:
            row = p.row
            folder = str(p.step_dir.relative_to(searches.dir))
            out.append({
                "target": r.target, "scenario": r.scenario, "payload": r.payload_label, "iteration": r.iteration,
                "fork": r.fork, "probe": p.number, "phase": p.phase, "rate": p.step.rate, "users": p.step.users,
                "allowed_deviation": None if row.get("window_s") is None else
                rate_allowance(p.step.rate, row["window_s"], poisson),
                "valid": "" if p.verdict is None else _verdicts(validity.get(folder, ())),
                **{k: row.get(k) for k in ("window_s", "starts", "start_rate", "tps", "error_percent", "lat_p50_ms",
                                           "lat_p90_ms", "lat_p99_ms", "max_lag_ms", "behind_schedule", "bound",
                                           "bottlenecks")},
                "verdict": "not measured" if p.verdict is None else "within" if p.verdict.within else "over",
                "reasons": "; ".join(p.verdict.reasons) if p.verdict else "",
                "step_dir": str(p.step_dir.relative_to(searches.dir)),
            })
    return out


def result_rows(searches: Searches, validity: dict[str, list[str]] | None = None) -> list[dict]:
    """capacity.csv: one row per search; its `valid` says what the validity warnings say of the
    probes its result rests on (Result.deciding), `yes` when nothing."""
    validity = probe_validity(searches) if validity is None else validity
    out = []
    for r in searches.results:
        b, g = r.bracket, r.goal
        kinds = [k for p in r.deciding() for k in validity.get(str(p.step_dir.relative_to(searches.dir)), ())]
        out.append({
            "target": r.target, "scenario": r.scenario, "payload": r.payload_label, "iteration": r.iteration,
            "fork": r.fork, "valid": _verdicts(kinds) if b else "",
            "p99_goal_ms": g.p99_ms, "max_error_percent": g.max_error_percent,
            "rate_tolerance_percent": 100 * RATE_TOLERANCE, "precision_percent": 100 * g.precision,
            "arrivals": searches.plan.arrivals,
            "capacity_rate": b.within if b else None, "over_rate": b.over if b else None,
            "bracket_percent": None if not b or b.width is None else round(100 * b.width, 2),
            "probes": len(r.probes), "result": r.describe(),
        })
    return out


def graph(searches: Searches, scenario: str, payload: str) -> Figure | None:
    """Latency (p99 from the due time, log scale) against the offered rate, one series per target and
    iteration: probes within the goal filled, those over it hollow, the goal a line, each capacity
    found a dotted vertical line. None when no probe of that scenario and payload was measured."""
    results = [r for r in searches.results if r.scenario == scenario and r.payload_label == payload]
    fig = Figure(figsize=(7.2, 4.8), layout="constrained")
    ax = fig.subplots()
    colors = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(dict.fromkeys(r.target for r in results))}
    several = len({r.iteration for r in results}) > 1
    drawn, marked = False, set()
    for r in results:
        points = sorted((p.step.rate, p.row["lat_p99_ms"], p.verdict.within) for p in r.probes
                        if p.verdict is not None and p.row.get("lat_p99_ms"))
        if not points:
            continue
        drawn = True
        color, label = colors[r.target], r.target + (f" (iteration {r.iteration})" if several else "")
        (line,) = ax.plot([x for x, _, _ in points], [y for _, y, _ in points], color=color, linewidth=1, alpha=0.6,
                          label=label)
        line.set_gid(f"series-{slug(label)}")
        for within in (True, False):
            xs = [(x, y) for x, y, w in points if w == within]
            if xs:
                ax.scatter(*zip(*xs), s=36, zorder=5, color=color if within else "none", edgecolors=color,
                           linewidths=1.5)
        for kind, flagged in (("errors", lambda row: row.get("error_percent")),
                              ("behind", lambda row: row.get("behind_schedule"))):
            xy = [(p.step.rate, p.row["lat_p99_ms"]) for p in r.probes if p.row.get("lat_p99_ms") and flagged(p.row)]
            if xy:
                style = MARKS[kind]
                ax.scatter(*zip(*xy), zorder=6, label=None if kind in marked else style["label"],
                           **{k: v for k, v in style.items() if k != "label"})
                marked.add(kind)
        if r.capacity:
            ax.axvline(r.capacity, color=color, linestyle=":", linewidth=1.2)
    if not drawn:
        return None
    ax.axhline(searches.goal.p99_ms, color="grey", linestyle="-.", linewidth=1.2,
               label=f"goal: p99 ≤ {searches.goal.p99_ms:g} ms")
    ax.scatter([], [], s=36, color="grey", label="probe within the goal")
    ax.scatter([], [], s=36, color="none", edgecolors="grey", linewidths=1.5, label="probe over it")
    ax.plot([], [], color="grey", linestyle=":", label="capacity found")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")   # 200, not 2 × 10²
    low, high = ax.get_ylim()
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain if high / low < 10 else NullFormatter())   # within a decade: label 200, 300
    ax.set_xlabel("offered rate (requests/s, Poisson arrivals)" if searches.plan.arrivals == "poisson"
                  else "offered rate (requests/s)")
    ax.set_ylabel("p99 latency from the due time (ms)")
    ax.set_title(f"{scenario} {payload}: latency against rate")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def write(searches: Searches, out: Path | None = None) -> Path:
    """RUN/capacity/ (or `out`; a new folder, never over an earlier one): probes.csv, capacity.csv
    and a latency-against-rate graph per scenario and payload (PNG and SVG)."""
    out = out or _free(searches.dir / FOLDER)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise EsbperfError(f"{out}: already exists and is not empty; choose another folder")
    partial = out.parent / f".partial-{out.name}-{os.getpid()}"
    partial.mkdir(parents=True)
    try:
        validity = probe_validity(searches)
        _write_csv(partial / "probes.csv", PROBE_COLUMNS, probe_rows(searches, validity))
        _write_csv(partial / "capacity.csv", RESULT_COLUMNS, result_rows(searches, validity))
        for scenario, payload in dict.fromkeys((r.scenario, r.payload_label) for r in searches.results):
            fig = graph(searches, scenario, payload)
            if fig is not None:
                for fmt in ("png", "svg"):
                    fig.savefig(partial / f"{scenario}-{payload}-latency-vs-rate.{fmt}", format=fmt, dpi=100,
                                metadata={"Date": None} if fmt == "svg" else None)
        if out.exists():
            out.rmdir()
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out


def _free(base: Path) -> Path:
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k)) for k in columns})


def _cell(value):
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return "" if value is None else value
