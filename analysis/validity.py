"""Validity warnings: what makes figures of a report doubtful, each said once in plain words.

Each warning is a row of RULES (as a benchmark states its SLAs): its kind, what it spoils (the steps
it names are not valid, or it is a note, or it names no step), the condition on a step's summary row
(or a run) and its sentence; `validity_warnings` reads them in one loop. docs/report.md's table of
warnings has a line for each (tests/test_validity_rules.py holds them together)."""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable

import polars as pl

from esbperf.core import busy, steady
from esbperf.core.roles import BACKENDS, CLIENT, ESB, is_load
from esbperf.results.datalog import LATE_START_US, REPORT_MARGIN_MS
from esbperf.analysis import bottleneck
from esbperf.analysis.runs import BASELINE_TARGET, Run
from esbperf.analysis.stats import (CLOCK_SKEW_CHANGE_MS, CONSOLE_TOLERANCE, LAG_GROWTH_SHARE, LITTLE_TOLERANCE,
                                    NEIGHBOURS_BUSY_PERCENT, ROLES, SCHEDULE_SHORTFALL, XCHECK_MEAN_FLOOR_MS,
                                    XCHECK_MEAN_SHARE, XCHECK_MIN_TPS_RATIO, little, little_disagrees,
                                    target_cpu_percent)

LISTED = 8   # steps named per warning; the rest are counted
# A new worker JVM (every step's with `workers: fresh`; a run's first steps with warm workers) compiles
# Jython, Grinder and the client for its first seconds under load, and runs them slowly meanwhile. On
# 2 cores that took about 10 s after the workers' first report (docs/grinder.md, "Warm workers"); a
# step measured sooner reads low at 1 user and at saturation -- when that compiling takes the
# target's cores. On cores of its own the client's compiling left the figures at 0.95-1.01 of wrk's.
WORKER_JIT_S = busy.WORKER_JIT_S


def _step_name(row: dict) -> str:
    load = f"{row['users']}u" if row["model"] == "closed" else f"{row['rate']:g}/s ({row['users']} threads)"
    # A user's script of several tests: name the test, unless the step as a whole is meant.
    test = f" test {row['test']}" if row["step_tests"] > 1 and row["test"] is not None else ""
    return f"{row['run']} {row['target']} {row['scenario']} {row['payload_label']} {load} it{row['iteration']}{test}"


def _named(items: list[str] | tuple[str, ...]) -> str:
    more = f"; and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return "; ".join(items[:LISTED]) + more


def _items(rows: list[dict], detail) -> tuple[str, ...]:
    return tuple(f"{_step_name(r)} ({detail(r)})" for r in rows)


class ValidityWarning(str):
    """A validity warning. As a str it is its whole text, what the CLI prints (the first LISTED
    steps named, the rest counted); the report groups warnings by `kind` and shows each kind's
    one-line `what`, how many steps (or runs: `unit`) it names, and all of them (`items`), folded."""

    kind: str
    what: str
    items: tuple[str, ...]
    unit: str
    steps: tuple[tuple[str, str], ...]     # (run, step folder) of each step it names; () for runs

    def __new__(cls, text: str, kind: str, what: str, items=(), unit: str = "step", steps=()) -> "ValidityWarning":
        warning = super().__new__(cls, text)
        warning.kind, warning.what, warning.items, warning.unit = kind, what, tuple(items), unit
        warning.steps = tuple(steps)
        return warning


def _steps(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r["run"], r["step_dir"]) for r in rows]


def faults(valid: str | None) -> list[str]:
    """The warnings a `valid` cell names (`;`-separated) that spoil the step's figures: NOTE_KINDS
    left out; [] for `yes` or none."""
    return [k for k in str(valid or "yes").split(";") if k and k != "yes" and k not in NOTE_KINDS]


def step_verdicts(warnings: list[ValidityWarning]) -> dict[tuple[str, str], list[str]]:
    """The kinds of the warnings that name each step, by (run, step folder), in the warnings'
    order, NOTE_KINDS left out: what summary.csv's `valid` says of a step (stats.with_verdicts)."""
    named: dict[tuple[str, str], list[str]] = {}
    for w in warnings:
        if w.kind in NOTE_KINDS:
            continue
        for step in getattr(w, "steps", ()):
            if w.kind not in named.setdefault(step, []):
                named[step].append(w.kind)
    return named


def client_side_bound(row: dict) -> bool:
    """Whether a step was bound on the client's side: its client (workers), or its cores shared with
    the back ends full (one machine): what a saturated client leaves undone in time is its bound's."""
    return bool(row.get("client_bound")) or row.get("bound") in ("client", "backends")


def sharing_cpus(run: Run, roles: list[str] | tuple[str, ...] = ROLES) -> list[str]:
    """The roles of a run whose hosts share CPU cores with another role's (Run.share_cores)."""
    hosts = [role for role in run.hosts() if role in roles]
    return [role for role in roles if role in hosts and any(run.share_cores(role, other) for other in hosts if other != role)]


def _sharing_groups(run: Run, roles) -> str:
    """`esb, ws1, ws2, ws3 on cores 1` (or `on any core` when unpinned), one group per `; `."""
    hosts = run.hosts()
    groups: dict[tuple, list[str]] = {}
    for role in sharing_cpus(run, roles):
        groups.setdefault(tuple(sorted(hosts[role].get("cpus") or [])), []).append(role)
    return "; ".join(f"{', '.join(members)} on {'cores ' + ','.join(map(str, cpus)) if cpus else 'any core'}"
                     for cpus, members in groups.items())


def client_shares_target(run: Run, target: str) -> bool:
    """Whether a load host of the run (client, load2, ...) shares cores with a host the step's target
    runs on: the esb host and the back ends for an ESB, the back ends for the baseline."""
    served = [*([ESB] if target != BASELINE_TARGET else []), *BACKENDS]
    loading = [r for r in run.hosts() if r == CLIENT or is_load(r)]
    return any(run.share_cores(a, b) for a in loading for b in served)


def expected_iterations(plan: dict, info: dict) -> int | None:
    """The iterations each step of a run should have: its plan's `iterations` in each of its `forks`
    (run.json `forks`, else the plan's; 1 when absent); None when the plan does not say, or is a
    capacity search (its probes' rates differ from one search to the next)."""
    iterations = plan.get("iterations")
    if not isinstance(iterations, int) or plan.get("capacity"):
        return None
    forks = info.get("forks") or plan.get("forks") or 1
    return iterations * forks if isinstance(forks, int) else None


def missing_iterations(runs: list[Run], steps: list[dict]) -> list[dict]:
    """The steps (one row each) of a target, scenario, payload and load that has fewer iterations
    than expected_iterations: each with `_measured` and `_expected`."""
    expected = {run.name: expected_iterations(run.plan, run.info) for run in runs}
    groups: dict[tuple, list[dict]] = {}
    for r in steps:
        groups.setdefault((r["run"], r["target"], r["scenario"], r["payload_bytes"], r["users"], r["model"], r["rate"]),
                          []).append(r)
    return [{**r, "_measured": len(group), "_expected": expected[key[0]]} for key, group in groups.items()
            if expected.get(key[0]) and len(group) < expected[key[0]] for r in group]


# --- what the rules read ------------------------------------------------------------------------

@dataclass
class Facts:
    """What the rules read, gathered once: the runs by plan and in order, the host roles, the summary's
    rows (a row per step and test) and its steps (a row per step: what belongs to a step is judged once,
    of no test), and what each step.json says of the step's warm-ups."""

    plans: dict[str, list[Run]]
    roles: list[str] | tuple[str, ...]
    runs: list[Run]
    rows: list[dict]
    steps: list[dict]
    under_load: dict[tuple[str, str], float]     # (run, step folder): s its worker JVMs ran before its window
    warmth: dict[tuple[str, str], dict]          # (run, step folder): step.json `target_warm`
    missing: list[dict]                          # missing_iterations: the steps short of their iterations
    by_name: dict[str, Run]

    @classmethod
    def of(cls, plans: dict[str, list[Run]], summary: pl.DataFrame, roles) -> "Facts":
        runs = [r for members in plans.values() for r in members]
        rows = summary.to_dicts()
        steps = list({(r["run"], r["step_dir"]): {**r, "test": None} for r in rows}.values())
        # How long the step's worker JVMs had run when its window opened: warm workers (step.json
        # `workers_ready_ms`) compiled in the steps before it, a fresh one only in its own warm-up.
        under_load = {(run.name, str(s.dir.relative_to(run.dir))):
                      (s.meta["warmup_end_ms"] - s.meta.get("workers_ready_ms", s.meta["first_report_ms"])) / 1000
                      for run in runs for s in run.steps
                      if isinstance(s.meta.get("first_report_ms"), int)
                      and isinstance(s.meta.get("warmup_end_ms"), int)}
        # Whether each step's target was judged warm before its first step (step.json `target_warm`, from
        # the run's target warm-up: esbperf/core/steady.py `settling`); older runs do not say.
        warmth = {(run.name, str(s.dir.relative_to(run.dir))): s.meta["target_warm"]
                  for run in runs for s in run.steps if isinstance(s.meta.get("target_warm"), dict)}
        return cls(plans, roles, runs, rows, steps, under_load, warmth, missing_iterations(runs, steps),
                   {run.name: run for run in runs})

    def run(self, row: dict) -> Run:
        return self.by_name[row["run"]]

    def warm(self, row: dict) -> dict:
        """The step's target warm-up as step.json says it ({} when it does not)."""
        return self.warmth.get((row["run"], row["step_dir"]), {})


# What a rule looks at: a row per step and test, a row per step, or the runs.
ROWS, STEPS, RUNS = attrgetter("rows"), attrgetter("steps"), attrgetter("runs")


# --- the rules ---------------------------------------------------------------------------------------

# What a warning spoils, as docs/report.md's table says it of the steps it names: not valid (summary.csv
# `valid` names it: a fault); valid (a note); none (it names no step: it is about the runs or their plans).
FAULT, NOTE, ABOUT_RUNS = "not valid", "valid", "none"


@dataclass(frozen=True)
class StepRule:
    """A warning about steps, one naming them all: the rows of `over` (Facts.rows, a row per step and
    test, or Facts.steps, a row per step) where `when` holds, each listed with its `detail`, after what
    `says` of them: `<head>: step (detail); …`, and the report's line, `what`."""

    kind: str
    spoils: str                                        # FAULT or NOTE
    over: Callable[[Facts], list[dict]]
    when: Callable[[dict, Facts], bool]
    says: Callable[[list[dict]], tuple[str, str]]      # (head, what) of the rows named
    detail: Callable[[dict, Facts], str]
    each = False            # one warning names them all

    def warning(self, named: list[dict], facts: Facts) -> ValidityWarning:
        items = _items(named, lambda r: self.detail(r, facts))
        head, what = self.says(named)
        return ValidityWarning(f"{head}: {_named(items)}", self.kind, what, items, steps=_steps(named))


@dataclass(frozen=True)
class RunRule:
    """A warning about the runs, or their plans: it names no step. Of those of `over` where `when`
    holds, `says` gives the text, the report's line (`what`) and the items it lists; `each`: a warning
    for each (a run's own stand together, run by run, after every other warning)."""

    kind: str
    over: Callable[[Facts], list]
    when: Callable[[Any, Facts], bool]
    says: Callable[[list, Facts], tuple[str, str, list[str]]]
    each: bool = False
    unit: str = "run"
    spoils: str = ABOUT_RUNS

    def warning(self, named: list, facts: Facts) -> ValidityWarning:
        text, what, items = self.says(named, facts)
        return ValidityWarning(text, self.kind, what, items, self.unit)


def about(noun: str, predicate: str) -> Callable[[list[dict]], tuple[str, str]]:
    """What most step warnings say: `<n> <noun>(s) <predicate>`; the report's line `<Noun>s <predicate>`."""
    return lambda named: (f"{len(named)} {noun}(s) {predicate}", f"{noun[0].upper()}{noun[1:]}s {predicate}")


def _key(row: dict) -> tuple[str, str]:
    return row["run"], row["step_dir"]


def _no_baseline(names: list[str], facts: Facts) -> tuple[str, str, list[str]]:
    which = f" of plan {names[0]!r}" if len(facts.plans) > 1 else ""
    advice = (f"no step has target '{BASELINE_TARGET}', so the ESB curves stand alone. Run the same plan "
              "against the direct target (or interleave it: --target ESB --target direct) and report both together.")
    return f"No no-ESB baseline{which}: {advice}", f"No no-ESB baseline: {advice}", list(names) if which else []


def _testbeds(runs: list[Run], facts: Facts) -> tuple[str, str, list[str]]:
    where = [f"{r.name}: {r.testbed or '?'}" for r in runs]
    return (f"The runs were made on different testbeds ({', '.join(where)}).", "The runs were made on different "
            "testbeds", where)


SHARED_WHY = ("Each one's CPU figure is that of the cores it shares, so cores saturated on one of them are saturated "
              "on all; the watched processes' CPU (ESB and echo JVMs, % of one core: `<role>_proc_cpu_mean`) tells "
              "them apart, and each step's bound (`bound`) is decided from it.")


def _shared_cpus(runs: list[Run], facts: Facts) -> tuple[str, str, list[str]]:
    shared = {r.name: _sharing_groups(r, facts.roles) for r in runs}
    alike = len(shared) == len(facts.runs) > 1 and len(set(shared.values())) == 1
    where = (f"every run: {next(iter(shared.values()))}" if alike else
             "; ".join(f"{name}: {groups}" for name, groups in shared.items()))
    return (f"Hosts share CPU cores (one machine) in {where}. {SHARED_WHY}", f"Hosts share CPU cores (one machine). "
            f"{SHARED_WHY}", [f"{name}: {groups}" for name, groups in shared.items()])


def _without_warm_up(run: Run, facts: Facts) -> bool:
    return not (run.plan.get("warmup_s") or 0) or any(not (s.meta.get("warmup_s", run.plan.get("warmup_s")) or 0)
                                                      for s in run.steps)


NO_WARM_UP_WHY = ("the plan has no warm-up (warmup_s 0 or missing), so each step is measured from the workers' first "
                  "report: JIT compilation, connection pools and caches filling up count in its figures. Give the "
                  "plan a warmup_s.")


def _never_monitored(run: Run, facts: Facts) -> list[str]:
    """The roles no step of the run has a monitor file of (the esb host is not watched while the
    direct target runs)."""
    mine = [r for r in facts.rows if r["run"] == run.name]

    def watched_then(role: str, r: dict) -> bool:
        return not (role == "esb" and r["target"] == BASELINE_TARGET)
    return [role for role in run.roles
            if all(role in r["monitor_missing"].split(";") for r in mine if watched_then(role, r))
            and any(watched_then(role, r) for r in mine)]


def _under_load(r: dict, facts: Facts) -> float:
    return facts.under_load.get(_key(r), WORKER_JIT_S)


def _unresolved(r: dict, facts: Facts) -> bool:
    return facts.warm(r).get("settled") is None and facts.warm(r).get("outcome") == steady.UNRESOLVED


def _idle(r: dict, facts: Facts) -> bool:
    return bool(r["log_files"]) and r["threads_seen"] < r["users"]


def _esb_cores_carry(r: dict, facts: Facts) -> bool:
    """Whether the esb host's cores carry the step: an ESB's, or direct's when the echoes share them."""
    return r["target"] != BASELINE_TARGET or any(facts.run(r).share_cores(ESB, ws) for ws in BACKENDS)


def _lines_skipped(named: list[dict]) -> int:
    return sum(r["malformed_lines"] for r in named)


# Every warning, in the order they are given: a row each. A new one is a row here (and a line in
# docs/report.md's table); the summary columns it reads come from analysis/stats.py.
RULES: tuple[StepRule | RunRule, ...] = (
    RunRule("no-baseline", lambda f: list(f.plans),
            lambda plan, f: not any(r.has_baseline for r in f.plans[plan]), _no_baseline, each=True, unit="plan"),
    RunRule("testbeds", RUNS, lambda run, f: len({r.testbed for r in f.runs}) > 1, _testbeds),
    RunRule("shared-cpus", RUNS, lambda run, f: bool(sharing_cpus(run, f.roles)), _shared_cpus),
    RunRule("no-warm-up", RUNS, _without_warm_up,
            lambda runs, f: (f"{', '.join(r.name for r in runs)}: {NO_WARM_UP_WHY}", f"Runs where {NO_WARM_UP_WHY}",
                             [r.name for r in runs])),
    StepRule("worker-jit", FAULT, STEPS,
             lambda r, f: _under_load(r, f) < WORKER_JIT_S and client_shares_target(f.run(r), r["target"]),
             about("step", f"were measured less than {WORKER_JIT_S} s after the workers' first report on a client "
                   "whose cores the target's hosts share, while the new worker JVM was still compiling its code "
                   "there: their TPS reads low and their mean high (on 2 cores by up to a quarter); give the client "
                   f"cores of its own (`cpus: auto` on one machine) or a warmup_s of {2 * WORKER_JIT_S} or more"),
             lambda r, f: f"{f.under_load[_key(r)]:.1f} s under load before the window"),
    # Still moving (settled: false), or never warmed, spoils the step; not resolved is a note.
    StepRule("target-not-warm", FAULT, STEPS,
             lambda r, f: f.warm(r).get("settled", True) is not True and not _unresolved(r, f),
             about("step", "measured on a target that was not judged warm before its first step (no target warm-up "
                   "in the plan, or one that ended with its throughput surely still moving: its trend's interval "
                   "beyond the margin, docs/methodology.md): a JVM still compiling its path reads low whatever the "
                   "step's own window showed; give the plan a target warm-up (target_warmup_s, target_warmup_max_s) "
                   "long enough to settle"),
             lambda r, f: f.warm(r).get("reason") or "not warmed"),
    StepRule("target-warm-unresolved", NOTE, STEPS, _unresolved,
             about("step", "measured on a target whose warm-up ended not resolved: its throughput's trend was "
                   "neither surely within the margin nor surely beyond it at the noise seen (a note, not a fault: "
                   "the step stays valid; its reason says how long a warm-up would resolve it: target_warmup_max_s, "
                   "target_warmup_horizon_s)"),
             lambda r, f: f.warm(r).get("reason") or "not resolved"),
    StepRule("missing-iterations", FAULT, lambda f: f.missing, lambda r, f: True,
             about("step", "with fewer iterations than their plan asks for (the run stopped, or a step was set "
                   "aside, before the others): their figures, spread and interval come from fewer measurements "
                   "than the plan's"),
             lambda r, f: f"{r['_measured']} of {r['_expected']} iterations"),
    StepRule("console-not-checked", FAULT, ROWS, lambda r, f: r["console_check"] == "not checked",
             about("step", "too short for the console-count check: fewer of their transactions ended surely inside "
                   "the window than within a worker's report interval "
                   f"(+ {REPORT_MARGIN_MS} ms) of its edges, where a missing data log would hide; their data logs "
                   "were not checked against the console's count"),
             lambda r, f: f"{r['window_s']:g} s, report interval {r['report_interval_ms']} ms"),
    StepRule("clock-skew", FAULT, STEPS,
             lambda r, f: abs(r["clock_skew_change_ms"] or 0) > CLOCK_SKEW_CHANGE_MS,
             about("step", f"during which a host's clock was more than {CLOCK_SKEW_CHANGE_MS} ms off what the run "
                   "measured before its first step (the step's monitor pull against run.json `clock_skew`): its "
                   "samples, or its agents' rows, were cut by a clock that had moved, across the window's edges"),
             lambda r, f: f"{r['clock_skew_change_role']} {r['clock_skew_change_ms']:+.0f} ms"),
    StepRule("network-faults", FAULT, STEPS, lambda r, f: bool(r["network_faults"]),
             about("step", "ran while a network fault was emulated on a link (`esbperf testbed fault`: loss, "
                   "delay), so they measure the fault, not the ESB"),
             lambda r, f: r["network_faults"]),
    StepRule("busy-neighbours", FAULT, STEPS,
             lambda r, f: (r.get("esb_neighbours_cpu_mean") or 0) > NEIGHBOURS_BUSY_PERCENT and _esb_cores_carry(r, f),
             about("step", "measured while engines on the esb host that were not their target used more than "
                   f"{NEIGHBOURS_BUSY_PERCENT:g} % of a core (still compiling after their warm-up, or loaded by "
                   "something else): they took CPU from the target"),
             lambda r, f: f"neighbours {r['esb_neighbours_cpu_mean']:.0f} % of a core on average"),
    StepRule("compiler-busy", FAULT, STEPS,
             lambda r, f: (r.get("esb_jit_mean") or 0) > busy.COMPILER_BUSY_PERCENT,
             about("step", "measured while their target's JIT compiler used more than "
                   f"{busy.COMPILER_BUSY_PERCENT:g} % of a core (a JVM still compiling the path it was "
                   "measured on: it reads slower than it will, and its compiler took CPU from the window); give "
                   "the plan an automatic warm-up (`warmup_s: auto`, which waits for the compiler) or a longer "
                   "target warm-up"),
             lambda r, f: f"compiler {r['esb_jit_mean']:.1f} % of a core on average"),
    StepRule("client-bound", NOTE, STEPS, lambda r, f: bool(r.get("client_bound")),
             about("step", "whose client was at its limit: its worker JVMs (or, on cores of its own, the load host) "
                   f"were more than {bottleneck.CLIENT_BOUND_PERCENT:.0f} % busy in the window (held for 3 samples "
                   "or on average), so the client set their figures: the target answers at least their TPS, within "
                   "at most their response times. A bound, not a fault: they stay valid (`bound`: client), and a "
                   "comparison with them says \"at least\" or is not judged; for the target's own figures give the "
                   "client more cores or more load hosts"),
             lambda r, f: r["client_bound_by"]),
    StepRule("errors", FAULT, ROWS, lambda r, f: bool(r["errors"]),
             about("step", "had failed transactions (counted as errors, not in TPS; response times and percentiles "
                   "are those of the successful ones, so they can look better exactly when requests fail; an "
                   "open-model step's latency counts them too; marked with an orange x on the graphs)"),
             lambda r, f: f"{r['errors']} errors, {r['error_percent']:.2f} %, failed mean "
                          f"{_ms(r['failed_rt_mean_ms'])} p99 {_ms(r['failed_rt_p99_ms'])}, "
                          f"status:count {r['error_statuses']}"),
    StepRule("no-transactions", FAULT, ROWS, lambda r, f: not r["transactions"],
             about("step", "with no successful transaction in their measurement window"),
             lambda r, f: f"{r['log_files']} data log(s)"),
    # The client's own bound starved its threads: a note, as the bound is.
    StepRule("client-starved-threads", NOTE, STEPS, lambda r, f: _idle(r, f) and client_side_bound(r),
             about("step", "whose client, at its bound, starved some of its threads for the whole window (they "
                   "took part in the step, but started no transaction in the window): the target had less load "
                   "than the step claims, and its figure is the client's bound, `at least` (a note, as the bound "
                   "is)"),
             lambda r, f: f"{r['threads_seen']} of {r['users']} threads in the window"),
    StepRule("idle-threads", FAULT, STEPS, lambda r, f: _idle(r, f) and not client_side_bound(r),
             about("step", "where fewer threads than users started a transaction in the window, so the target had "
                   "less load than the step claims"),
             lambda r, f: f"{r['threads_seen']} of {r['users']} threads; {r['threads_by_file']}"),
    # On a step whose client side was its bound (its cores full), Little's law and the console's count
    # miss what the saturated client did not do in time: the bound says so (a note), not a fault.
    StepRule("littles-law", FAULT, ROWS, lambda r, f: little_disagrees(r) and not client_side_bound(r),
             about("closed-model step", f"where Little's law does not hold within {LITTLE_TOLERANCE:.0%}: users ≠ "
                   "(starts / window) × (mean time per transaction + time outside the clock + think time), so some "
                   "threads were not loading the target all the time (idle, starting late, blocked in the client)"),
             lambda r, f: f"{r['users']} users, Little's law gives {little(r)[0] * r['users']:.1f}"),
    StepRule("behind-schedule", FAULT, ROWS, lambda r, f: bool(r["behind_schedule"]),
             about("open-model step", "whose thread pool could not keep the schedule (the requests started by the "
                   f"window's end short of those due in it by more than {SCHEDULE_SHORTFALL:.0%}, or a start lag "
                   f"growing by more than {LAG_GROWTH_SHARE:.0%} of the window): the load was not the one offered; "
                   "the latency counts from each request's due start, those never started included, so it shows "
                   "the wait (marked ▽ on the graphs). Give the step more threads, or take it as the rate that "
                   "cannot be served"),
             lambda r, f: f"offered {r['rate']:g}/s, due {_number(r['due_requests'])}, started "
                          f"{r['starts'] - (r['started_after_end'] or 0)} by the window's end "
                          f"({_number(r['never_started'])} never), "
                          f"{_number(r['late_starts'])} starts late by > {LATE_START_US} µs, "
                          f"max lag {_ms(r['max_lag_ms'])}, lag growth {_ms(r['lag_growth_ms'])}"),
    StepRule("no-latency-columns", FAULT, ROWS,
             lambda r, f: r["model"] == "open" and bool(r["transactions"]) and r["lat_p50_ms"] is None,
             about("open-model step", "whose data logs lack `Latency us` or `Start lag us`: no corrected latency, "
                   "and the schedule cannot be checked"),
             lambda r, f: r["step_dir"]),
    StepRule("malformed-data-lines", FAULT, STEPS, lambda r, f: bool(r["malformed_lines"]),
             lambda named: (f"{_lines_skipped(named)} malformed or cut-short data log line(s) skipped in "
                            f"{len(named)} step(s)",
                            f"Malformed or cut-short data log lines skipped ({_lines_skipped(named)} lines)"),
             lambda r, f: f"{r['step_dir']}/logs: " + ", ".join(r["malformed_by_file"].split(";"))),
    StepRule("console-count", FAULT, ROWS,
             lambda r, f: r["console_check"] == "disagrees" and not client_side_bound(r),
             about("step", "whose data logs and the console's statistics disagree by more than "
                   f"{CONSOLE_TOLERANCE:.0%}: the console counted what the workers reported between its zeroing "
                   "and its reading, which the logs' rows ending in the window (and within a report interval of "
                   "its edges) do not account for (a worker's data log may be missing, e.g. of an agent on another "
                   "machine)"),
             lambda r, f: f"logs allow {r['console_min']}–{r['console_max']}, console "
                          f"{r['console_tests'] + (r['console_errors'] or 0)}"),
    StepRule("wrk-cross-check", FAULT, ROWS, lambda r, f: bool(r["xcheck_failed"]),
             about("closed-model step", "whose figures disagree with wrk's, run just before and just after the step "
                   "against the same target with as many connections (TPS below "
                   f"{XCHECK_MIN_TPS_RATIO:.0%} of wrk's, or a mean response time off by more than "
                   f"{XCHECK_MEAN_SHARE:.0%} of wrk's mean, at least {XCHECK_MEAN_FLOOR_MS:g} ms; wider where the "
                   "machine's wander, measured before the run, allows more): the client, not the target, may have "
                   "set these figures; do not trust them"),
             lambda r, f: f"TPS {r['tps']:.1f} vs wrk {_number(r['xcheck_tps'])}, ratio "
                          f"{_fixed(r['xcheck_tps_ratio'], 2)}; mean {_ms(r['rt_mean_ms'])} "
                          f"vs wrk {_ms(r['xcheck_mean_ms'])}, difference "
                          f"{_ms(r['xcheck_mean_diff_ms'], '+.3f')}"),
    StepRule("target-drift", FAULT, ROWS, lambda r, f: bool(r.get("target_drift")),
             about("closed-model step", "whose target moved across the step: wrk, run just before and just after "
                   "it, read throughputs further apart than chance allows (the step's own noise and the machine's "
                   "wander, measured before the run), so the target was still warming up (or slowing down) while "
                   "measured; the step's figure is of a moving target, not of its client (give the target a longer "
                   "warm-up)"),
             lambda r, f: f"wrk {_number(r['xcheck_tps'] / (1 + r['xcheck_drift'] / 2))} before, "
                          f"{_number(r['xcheck_tps'] * (1 + r['xcheck_drift'] / 2))} after "
                          f"({r['xcheck_drift']:+.1%}, chance ±{r['xcheck_noise']:.1%}); esbperf "
                          f"{r['tps']:.1f}"),
    StepRule("wrk-void", FAULT, STEPS, lambda r, f: bool(r["xcheck_errors"]),
             about("closed-model step", "whose wrk cross-check is void: wrk had errors (non-2xx answers, which it "
                   "counts as requests, or socket errors), so its figures are not the target's; the step was not "
                   "judged against them"),
             lambda r, f: f"{r['xcheck_errors']} wrk error(s)"),
    StepRule("delayed-ack-stall", FAULT, ROWS, lambda r, f: bool(r["delayed_ack_stall"]),
             about("step", "whose response times pile up at a TCP delayed-ACK timer (about 40 ms on Linux, 200 ms on "
                   "Windows, or twice that) while the target's CPU is low: the signature of a peer writing a message "
                   "in pieces without TCP_NODELAY (Nagle meets the delayed ACK, as The Grinder's stock HTTP plugin "
                   "does on a reused connection); these figures measure the stall, not the target (docs/thesis.md)"),
             lambda r, f: f"{r['stall_share']:.0%} of the transactions at the timer, target CPU "
                          f"{_target_cpu(r, f.roles)}"),
    StepRule("no-steady-state", FAULT, STEPS, lambda r, f: r.get("warmup_steady") is False,
             about("step", "with no steady state: their automatic warm-up (`warmup_s: auto`) saw throughput or mean "
                   "response time still moving at warmup_max_s, when they were measured all the same "
                   "(docs/methodology.md); their figures depend on when they were read, and the report draws their "
                   "intervals"),
             lambda r, f: f"{r['warmup_used_s']:g} s of warm-up; {r['warmup_unsteady']}"),
    StepRule("drift", FAULT, ROWS, lambda r, f: bool(r.get("drift")),
             about("step", "whose throughput or mean response time moved beyond the noise while measured: a change "
                   f"point or a trend of at least {steady.MIN_MOVE_SHARE:.0%} of the level, against the window's "
                   "own interval-to-interval noise (docs/methodology.md); their figures depend on when in the window "
                   "they were read (a longer or automatic warmup_s may help; a slowdown may be the finding)"),
             lambda r, f: r["drift_moves"]),
    StepRule("not-poisson", FAULT, STEPS, lambda r, f: r.get("poisson_arrivals") is False,
             about("open-model step", "with `arrivals: poisson` whose realised start times were not a Poisson "
                   "process (their gaps, per worker process, against the exponential: Kolmogorov-Smirnov at 1 %, "
                   "allowing for whole-ms start times): the target did not get the load asked for (a pool behind "
                   "its schedule bunches starts)"),
             lambda r, f: r["arrivals_test"]),
    StepRule("malformed-monitor-lines", FAULT, STEPS, lambda r, f: bool(r["monitor_malformed_lines"]),
             lambda named: (f"Malformed monitor lines skipped in {len(named)} step(s)",
                            "Malformed monitor lines skipped"),
             lambda r, f: f"{r['monitor_malformed_lines']} lines"),
    StepRule("monitor-gaps", FAULT, STEPS, lambda r, f: any(r[f"{role}_gap_s"] for role in f.roles),
             lambda named: (f"A monitor was unreachable during the measurement of {len(named)} step(s), so CPU and "
                            "network there miss samples", "A monitor was unreachable during the measurement, so CPU "
                            "and network there miss samples"),
             lambda r, f: ", ".join(f"{role} {r[f'{role}_gap_s']:.1f} s" for role in f.roles if r[f"{role}_gap_s"])),
    RunRule("unfinished-run", RUNS, lambda run, f: not run.finished,
            lambda runs, f: (f"{runs[0].name}: the run has not finished (run.json has no end time): it is still going "
                             "or was stopped; only its finished steps are shown.", "Runs not finished (run.json has "
                             "no end time): still going or stopped; only their finished steps are shown",
                             [runs[0].name]), each=True),
    RunRule("skipped-steps", RUNS, lambda run, f: bool(run.unfinished_steps),
            lambda runs, f: (f"{runs[0].name}: {runs[0].unfinished_steps} unfinished, aborted or failed step "
                             "folder(s) (.tmp-*, .aborted-*, .failed-*) skipped.", "Unfinished, aborted or failed step "
                             "folders (.tmp-*, .aborted-*, .failed-*) skipped",
                             [f"{runs[0].name}: {runs[0].unfinished_steps} folder(s)"]), each=True),
    RunRule("no-monitor", RUNS, lambda run, f: bool(_never_monitored(run, f)),
            lambda runs, f: (f"{runs[0].name}: no monitor file for {', '.join(_never_monitored(runs[0], f))}; their "
                             "CPU and network are unknown, so a step's bound cannot be seen there.", "Hosts with no "
                             "monitor file in a whole run: their CPU and network are unknown, so a step's bound "
                             "cannot be seen there", [f"{runs[0].name}: {', '.join(_never_monitored(runs[0], f))}"]),
            each=True),
)


# Warnings that say what bounded a step: a fact about it, not a fault of its figures (the target
# answers at least its TPS), so no step's `valid` names them; the report still lists them, and the
# step's `bound` says it. `bottlenecks`: what an analysis from before bounds called a saturated host
# (Round 1's published files have it in their `valid`).
BOUND_KINDS = ("client-bound", "bottlenecks")
# Warnings that are notes, not faults: the bounds (and the client's threads its bound starved), and a
# target warm-up that ended not resolved (its trend neither inside nor surely outside the margin:
# steady.settling) — only one still moving, or a target never warmed, spoils a step. The rules say which.
NOTE_KINDS = (*BOUND_KINDS, *(r.kind for r in RULES if r.spoils == NOTE and r.kind not in BOUND_KINDS))


def validity_warnings(plans: dict[str, list[Run]], summary: pl.DataFrame,
                      roles: list[str] | tuple[str, ...] = ROLES) -> list[ValidityWarning]:
    """Every warning RULES give the runs and their summary, in RULES' order; a run's own (a warning
    each) stand together after the others, run by run."""
    facts = Facts.of(plans, summary, roles)
    out: list[ValidityWarning] = []
    runs_own: dict[str, list[ValidityWarning]] = {run.name: [] for run in facts.runs}
    for rule in RULES:
        named = [x for x in rule.over(facts) if rule.when(x, facts)]
        if not named:
            continue
        if not rule.each:
            out.append(rule.warning(named, facts))
        elif rule.unit == "run":
            for run in named:
                runs_own[run.name].append(rule.warning([run], facts))
        else:
            out += [rule.warning([x], facts) for x in named]
    return out + [w for own in runs_own.values() for w in own]


def _target_cpu(row: dict, roles) -> str:
    cpu = target_cpu_percent(row, roles)
    return "unknown (no monitor)" if cpu is None else f"{cpu:.0f} % of a core"


def _ms(value, spec: str = ".3f") -> str:
    return "–" if value is None else f"{value:{spec}} ms"


def _fixed(value, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _number(value) -> str:
    return "–" if value is None else str(value)
