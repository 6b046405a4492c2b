"""The workers of a run's steps, behind one face (Workers), and the console's view of them.

Workers has two implementations, chosen once where the run begins (esbperf/run/runner.py): the
run's warm worker JVMs, which carry every step (WarmPool, esbperf/run/pool.py), or new worker JVMs
started for each step and stopped after it (FreshWorkers, below). Whatever loads the target —
the client's calibration, a target's warm-up, a measured step — begins its workers, ends its step,
discards them when it went wrong and brings their logs home through that face alone.

ConsoleWatch is the console as a step sees it: start workers on every agent, wait for every one
to report its threads running, watch them while they load the target, stop them. Whatever the
console says that spoils the step is raised as its type (esbperf/run/problems.py): a console that
stops answering (ConsoleLost), an agent that joins or leaves (AgentsChanged), workers that all
ended early (WorkersEnded) or never report (NoReport)."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esbperf.core import steady
from esbperf.core.errors import EsbperfError
from esbperf.run import collect, user_script
from esbperf.run.collect import Worker
from esbperf.run.problems import AgentsChanged, ConsoleLost, NoReport, WorkersEnded, WorkersHang
from esbperf.services.console import ConsoleUnreachable, ControlClient, statistics

AGENT_PURGE_S = 5            # the console drops a dead agent ~3 s after its workers end
# A worker the console has not listed running for this long has ended (killed, or its JVM died).
# The console drops a process from its list after 2-4 s without a report (Grinder's FLUSH_PERIOD),
# and a worker on a saturated client can miss that many reports and come back: a moment's absence
# proves nothing (a 320-user step over 2 agents saw both workers vanish and return).
WORKER_GONE_S = 15
STOP_WAIT_S = 30             # fresh workers' end after the stop signal
READY_S = 60                 # fresh workers with no end of their own must report their threads running by then
REPORT_KEY = "grinder.reportToConsole.interval"
# Workers report to the console this many times per console sample, so that every sample holds
# about as many reports (its throughput jitters by one report in REPORTS_PER_SAMPLE, not by half),
# but not more often than every MIN_REPORT_MS. A worker reads it once, at its start.
REPORTS_PER_SAMPLE, MIN_REPORT_MS = 5, 50
REPORT_INTERVAL_MS = 500     # Grinder's default
STEADY_POLL_S = 0.1         # how often an automatic warm-up looks for the console's next sample
READY_EVERY_S = 1.0         # ... and asks its `ready` gate before the load is steady
# The console's per-sample mean response time in µs, as scenario.py registers it; a user's script
# without it is watched by Grinder's whole-ms mean.
MEAN_US, MEAN_MS = "Response us mean", "Mean Test Time (ms)"

# on_tick(phase, seconds left, latest statistics): the live progress
Tick = Callable[[str, float, dict], None]


def now_ms() -> int:
    return int(time.time() * 1000)


def _time_sum(totals: dict) -> float | None:
    """The summed response time (µs) of the transactions counted in the console's totals: their
    mean times their count, in µs when scenario.py registered its column, else Grinder's ms."""
    count = totals.get("Tests") or 0
    mean = totals.get(MEAN_US)
    if mean is None and totals.get(MEAN_MS) is not None:
        mean = totals[MEAN_MS] * 1000
    return 0.0 if not count else None if mean is None else mean * count


def run_report_interval_ms(sample_interval_ms: int) -> int:
    """How often a run's workers report to the console, for the console's sample interval."""
    return max(MIN_REPORT_MS, round(sample_interval_ms / REPORTS_PER_SAMPLE))


def report_interval_ms(properties: dict[str, Any], distribution: Path) -> int:
    """How often workers started with `properties` report to the console: their
    `grinder.reportToConsole.interval` (a user's script may set it), else the distribution's
    grinder.properties, else Grinder's default."""
    file = distribution / "grinder.properties"
    value = properties.get(REPORT_KEY) or (user_script.read_properties(file).get(REPORT_KEY) if file.is_file()
                                           else None)
    try:
        return int(value)
    except (TypeError, ValueError):
        return REPORT_INTERVAL_MS


class ConsoleWatch:
    """The console as a step sees it, for the run's agents `expected`."""

    def __init__(self, client: ControlClient, expected: set[str], on_tick: Tick):
        self.client = client
        self.expected = expected
        self.on_tick = on_tick
        # Of the step's workers (since track()): those seen not running before the runner stopped
        # them, and when first (idle ones, all their threads beyond the step's users, end at once
        # without a transaction; whether one with transactions died, its data log says: the step's
        # check); those not listed running now, and since when; those the console saw finish.
        self.ended_early: dict[str, int] = {}
        self.unseen: dict[str, int] = {}
        self.finished: set[str] = set()

    def track(self) -> None:
        """A new step's workers are watched from now on: what was seen of an earlier step's (the
        same warm workers' moment of absence, say) is forgotten."""
        self.ended_early, self.unseen, self.finished = {}, {}, set()

    def call(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ConsoleUnreachable as e:
            raise ConsoleLost(str(e)) from None

    def agent_change(self, agents: list[dict] | None = None) -> str | None:
        """Why the agents are not the run's, or None."""
        names = [a["name"] for a in (self.call(self.client.agents) if agents is None else agents)]
        joined = sorted(set(names) - self.expected)
        if joined:
            return (f"agent {joined[0]} joined the console during the run (the run's agents: "
                    f"{', '.join(sorted(self.expected))}); stop it, or start a new run that includes it")
        left = sorted(self.expected - set(names))
        if left:
            return f"agent {left[0]} left the console during the step (killed, or its host went away)"
        return None

    def require_agents(self) -> None:
        change = self.agent_change()
        if change:
            raise AgentsChanged(change)

    def start(self, properties: dict[str, Any], count: int) -> dict[str, Worker]:
        """Start `count` workers over all agents; the new workers by id."""
        for action in ("stop", "reset", "start"):
            self.call(lambda: self.client.recording(action))
        try:
            ids = self.call(lambda: self.client.start_workers_and_wait(properties, count))
        except ConsoleLost:
            raise
        except EsbperfError:
            self.require_agents()   # workers that do not start: most often an agent that went away
            raise
        return {w["id"]: Worker(w["id"], w["name"], a["name"])
                for a in self.call(self.client.agents) for w in a.get("workers", []) if w["id"] in ids}

    def watch(self, workers: dict[str, Worker], before_report: bool = False) -> dict[str, str]:
        """Raise what spoils the step, if anything does now; else the workers' states."""
        agents = self.call(self.client.agents)
        change = self.agent_change(agents)
        if change:
            raise AgentsChanged(change)
        states = {w["id"]: w["state"] for a in agents for w in a.get("workers", [])}
        now = now_ms()
        for i in workers:
            if states.get(i) in ("STARTED", "RUNNING"):
                self.unseen.pop(i, None)   # back in the list: it was only late to report
                continue
            self.ended_early.setdefault(i, now)
            self.unseen.setdefault(i, now)
            if states.get(i) == "FINISHED":
                self.finished.add(i)
        if workers and len(self.gone(workers)) == len(workers):
            when = "before reporting any test" if before_report else "before the step did"
            raise WorkersEnded(f"the workers ended {when} (see the worker logs in the step folder)")
        return states

    def gone(self, workers: dict[str, Worker]) -> list[str]:
        """The ids of `workers` that have ended, as far as the console can tell: seen finished, or
        not listed running for WORKER_GONE_S."""
        since = now_ms() - WORKER_GONE_S * 1000
        return [i for i in workers if i in self.finished or self.unseen.get(i, since + 1) <= since]

    def first_report(self, deadline_ms: int, workers: dict[str, Worker]) -> int:
        """When every worker had reported its threads running, by `deadline_ms`. Not the console's
        first statistics: those come from whichever worker is first, while on a busy client the
        other JVMs can still be starting (a 320-user step over 2 agents saw one agent's workers
        begin after the window had opened), and they wait for the console's next sample."""
        while now_ms() < deadline_ms:
            states = self.watch(workers, before_report=True)
            if not any(states.get(i) == "STARTED" for i in workers):
                return now_ms()
            self.on_tick("starting workers", 0, {})
            time.sleep(0.05)
        raise NoReport("the workers reported nothing before the step's end")

    def wait_until(self, deadline_ms: int, phase: str, workers: dict[str, Worker]) -> None:
        """Watch the workers until `deadline_ms`, reporting progress about once a second."""
        while True:
            left = deadline_ms - now_ms()
            if left <= 0:
                return
            latest = statistics(self.call(lambda: self.client.data(latest=True)))
            self.on_tick(phase, left / 1000, latest)
            self.watch(workers)
            time.sleep(min(1.0, left / 1000))

    def until_steady(self, workers: dict[str, Worker], earliest_ms: int, latest_ms: int, interval_s: float,
                     horizon_s: float, phase: str = "warm-up",
                     judge: Callable[[list, list, list | None], Any] | None = None, machine: Any = None,
                     ready: Callable[[], bool] | None = None) -> dict:
        """Watch the load until its throughput and mean response time are steady (esbperf/core/
        steady.py, judged over `horizon_s`; or as `judge(tps, mean_us, machine_speeds)` says: anything
        with `steady` and `reason`), no sooner than `earliest_ms` and no later than `latest_ms`; whether
        they were, why not, and the series judged. `machine`: the machine's speed beside the load
        (wander.Pace), its speeds in the same buckets given to the judge and kept with the series.
        `ready`: asked with each interval, and a steady load watched on, judged afresh with each
        interval, until it says yes too (the target's compiler quiet, the esb host's other engines
        quiet: esbperf/run/gauge.py). `start_ms` in what it returns: where the series' first bucket begins.

        The series are counted by time from the console's cumulative totals (steady.bucket_rates),
        in buckets of `interval_s`: not from its per-sample figures, which hold one worker report
        or none when the reports come less often than the samples, and of which a loop that
        overran sees only the newest."""
        judge = judge or (lambda tps, mean, _machine: steady.steady(tps, mean, interval_s, horizon_s=horizon_s))
        polls: list[tuple[float, float, float | None]] = []
        tps: list[float] = []
        mean_us: list[float | None] = []
        speeds: list[float | None] | None = None
        totals: dict = {}
        verdict: Any = steady.Steadiness(False, "no whole interval yet")
        waiting, asked_at = ready is not None, float("-inf")
        while now_ms() < latest_ms:
            totals = statistics(self.call(self.client.data))
            polls.append((now_ms(), totals.get("Tests") or 0, _time_sum(totals)))
            found, means = steady.bucket_rates(polls, polls[0][0], interval_s)
            if len(found) > len(tps):
                tps, mean_us = found, means
                speeds = None if machine is None else machine.speeds(polls[0][0], interval_s, len(tps))
                verdict = judge(tps, mean_us, speeds)
                # Asked as the intervals come, at most once a second (each answer costs the esb host's
                # monitor a request), so that what it saw is known however the watch ends.
                if ready is not None and (verdict.steady or time.monotonic() - asked_at >= READY_EVERY_S):
                    asked_at, waiting = time.monotonic(), not ready()
                if verdict.steady and not waiting:
                    break
            reason = "steady; waiting for the target's compiler or the esb host's other engines to be quiet" \
                if verdict.steady and waiting else verdict.reason
            self.on_tick(f"{phase} (auto: {reason})", (latest_ms - now_ms()) / 1000, totals)
            self.watch(workers)
            time.sleep(STEADY_POLL_S)
        if verdict.steady and now_ms() < earliest_ms:
            self.wait_until(earliest_ms, phase, workers)
        found = {"steady": verdict.steady, "reason": verdict.reason, "interval_s": interval_s,
                 "start_ms": round(polls[0][0]) if polls else None,
                 "tps": [round(v, 1) for v in tps], "mean_us": [None if v is None else round(v, 1) for v in mean_us]}
        if speeds is not None:
            found["machine"] = [None if v is None else round(v) for v in speeds]
        if hasattr(verdict, "record"):   # a target's warm-up: its outcome of three, its trend
            found.update(verdict.record())
        return found

    def stop(self, workers: dict[str, Worker], wait_s: float) -> bool:
        """Stop the workers and the recording; False when they still run after `wait_s`."""
        self.call(self.client.stop_workers)
        self.call(lambda: self.client.recording("stop"))
        return self.call(lambda: self.client.wait_workers_finished(set(workers), wait_s))

    def stop_quietly(self) -> None:
        """Stop every worker, whatever state the console is in (on the way out of a failed step)."""
        try:
            self.client.stop_workers()
        except EsbperfError:
            pass

    def agent_left(self) -> str | None:
        """A worker died mid-step: was it its agent? The console drops a killed agent a few seconds
        after its workers show as ended, so give it that long."""
        deadline = time.monotonic() + AGENT_PURGE_S
        while True:
            change = self.agent_change()
            if change or time.monotonic() >= deadline:
                return change
            time.sleep(0.25)


# --- the workers of a step: one face, two implementations ------------------------------------

@dataclass(frozen=True)
class Layout:
    """How a step lays its load out: `processes` worker processes of `threads` threads on every
    agent (Plan.processes_threads), its logs in `log_folder` (relative: each agent resolves it
    under its own working folder), and whether every thread serves an open-model schedule."""

    processes: int
    threads: int
    log_folder: str
    open_model: bool = False


@dataclass(frozen=True)
class Began:
    """A step whose workers run: when its start was given, when every thread of it ran (ms since
    the epoch), its workers by id, and what step.json says of them."""

    start_ms: int
    first_report_ms: int
    workers: dict[str, Worker]
    record: dict[str, Any] = field(default_factory=dict)


class Workers(ABC):
    """The workers that load the target, step after step. A step calls begin(), then end_step()
    once its load is over, or discard() when anything went wrong on the way (never both), then
    bring_home() for its logs; the run calls close() at its end and puts record() in run.json."""

    mode: str   # run.json and step.json `workers_mode`
    # Whether its JVMs carry one step to the next: then a run whose targets need no warm-up warms
    # them once before its first step (runner._execute), as a new worker JVM compiles for seconds.
    outlive_steps: bool = False

    @abstractmethod
    def begin(self, watch: ConsoleWatch, properties: dict[str, Any], layout: Layout) -> Began:
        """Give the step's start (`properties`: its grinder.* and esbperf.* settings) to workers
        laid out as `layout`; return once every thread of it runs. Raises a StepProblem."""

    @abstractmethod
    def end_step(self) -> None:
        """The step's load ends; return once its logs are whole on every agent (WorkersHang if not)."""

    @abstractmethod
    def discard(self) -> None:
        """No worker that ran a step gone wrong goes on (quietly: the console may be gone)."""

    @abstractmethod
    def bring_home(self, log_folder: str, into: Path) -> list[str]:
        """The logs of the step begun with `log_folder`, from every agent, into `into`; the
        problems found with them (esbperf/run/collect.py); nothing when no such step was begun."""

    @abstractmethod
    def record(self) -> dict[str, Any]:
        """run.json `workers`."""

    def close(self) -> None:
        """The run is over."""


class FreshWorkers(Workers):
    """New worker JVMs for every step, stopped at its end: Grinder's own way."""

    mode = "fresh"

    def __init__(self, agents: int, fetchers: list[collect.Fetcher], report_ms: int, distribution: Path, why: str):
        self.agents = agents
        self.fetchers = fetchers
        self.report_ms = report_ms          # the run's, unless the step's properties say otherwise
        self.distribution = distribution
        self.why = why
        self.watch: ConsoleWatch | None = None
        self.log_folder = ""
        self.workers: dict[str, Worker] = {}

    def begin(self, watch: ConsoleWatch, properties: dict[str, Any], layout: Layout) -> Began:
        self.watch, self.log_folder, self.workers = watch, layout.log_folder, {}
        watch.track()
        properties = {REPORT_KEY: self.report_ms, **properties, "grinder.processes": layout.processes,
                      "grinder.threads": layout.threads, "grinder.logDirectory": layout.log_folder}
        start = now_ms()
        self.workers = watch.start(properties, layout.processes * self.agents)
        # They end by themselves after grinder.duration: reporting nothing by then, they never will.
        ends_ms = int(properties.get("grinder.duration") or 0) or READY_S * 1000
        first = watch.first_report(start + ends_ms, self.workers)
        reports_ms = report_interval_ms(properties, self.distribution)
        return Began(start, first, dict(self.workers), {"workers_mode": self.mode, "report_interval_ms": reports_ms})

    def end_step(self) -> None:
        if not self.watch.stop(self.workers, STOP_WAIT_S):
            raise WorkersHang(f"the workers did not stop within {STOP_WAIT_S} s of the stop signal")

    def discard(self) -> None:
        if self.watch is not None:
            self.watch.stop_quietly()

    def bring_home(self, log_folder: str, into: Path) -> list[str]:
        if log_folder != self.log_folder or not self.workers:
            return []
        return collect.bring_home(self.workers.values(), log_folder, into, self.fetchers)

    def record(self) -> dict[str, Any]:
        return {"mode": self.mode, "why": self.why}
