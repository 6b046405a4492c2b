"""The esb host as a run reads it while it goes on (the run's gauge): its monitor's readings of the
engines' processes — each engine's CPU (`proc.cpu`, every 2 s) and a JVM's JIT compiler's
(`proc.jit`, every second: agents/monitor CompilerThreads) — asked by the rules that decide when a
target may be measured.

Neighbours. The engines on the esb host that a step does not measure must be idle while it is
measured (busy.NEIGHBOURS_BUSY_PERCENT, the analysis's `busy-neighbours`). An engine just loaded
works on after its load stops (a JVM compiles what the load queued: Synapse held half a core for
2-5 s after its step here), so the runner waits for quiet: after the targets' warm-up (every
engine, a few readings in a row), and at the end of each step's automatic warm-up (its neighbours,
the newest reading), the step's load running on meanwhile.

The target's compiler. A JVM is warm when its compiler is quiet as well as its throughput settled:
on one core its compiler threads are two threads among the engine's busy request threads, and a
compiler starved under load settles the throughput slowly and late (Spring Integration's C2 got
5.6 % of its core under a saturating load and compiled its backlog in 6 s once the load stopped,
docs/benchmarks/warm-up.md). The compiler is quiet when its threads used at most
COMPILER_QUIET_PERCENT of a core over the last COMPILER_WINDOW_S; an engine without compiler
threads (nginx, HAProxy) is judged on its throughput alone.

A quiet host costs nothing but one request to its monitor. A fixed warm-up is the plan's set time
and is not held (the demo's and the interleaved check's 1 s: the newest reading, 2 s long, still
covers the step before, and a wait for a clean one would cost each step seconds); the analysis
judges its window's neighbours and compiler all the same."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from esbperf.core import busy, roles, steady
from esbperf.run.context import RunContext
from esbperf.run.workers import now_ms
from esbperf.services import monitor

READING_MS = 2000       # the monitor reads processes every 2 s: the newest reading is at most this old
JIT_READING_MS = 1000   # ... and their compilers every second, each reading the second before it
NO_READINGS_S = 2 * READING_MS / 1000 + 1   # a monitor silent on processes this long reads none
# The compiler is quiet at or below this share of one core over the last COMPILER_WINDOW_S (steady.py
# says why this line).
COMPILER_QUIET_PERCENT = busy.COMPILER_BUSY_PERCENT
COMPILER_WINDOW_S = 10

Pull = Callable[[int, int], tuple[list[monitor.Sample], str | None]]   # (from_ms, to_ms) -> (samples, error)


@dataclass(frozen=True)
class Neighbours:
    """The esb host's monitor, and which of its watched processes are a step's neighbours: every
    engine's --match text (run.json `engine_matches`) but the step's own (`own`; None: all)."""

    pull: Pull
    matches: frozenset[str]
    own: str | None = None

    def busiest(self, since_ms: int, readings: int) -> tuple[int, float, str | None]:
        """(readings found, the neighbours' CPU together in the busiest of them, % of one core, or
        the monitor's error) over the newest `readings` process readings taken after `since_ms` (a
        reading of the engines' processes, the step's own among them: a neighbour not running
        reads 0)."""
        samples, error = self.pull(since_ms, now_ms() + 1)
        if error:
            return 0, 0.0, error
        together: dict[int, float] = {}
        for t, metric, subject, value in samples:
            if metric == "proc.cpu" and subject in self.matches and t > since_ms:
                together[t] = together.get(t, 0.0) + (float(value) if subject != self.own else 0.0)
        newest = sorted(together)[-readings:]
        return len(newest), max((together[t] for t in newest), default=0.0), None

    def wait(self, since_ms: int, readings: int, most_s: float, sleep_s: float = 0.5,
             clock: Callable[[], float] = time.monotonic) -> dict:
        """Wait until the newest `readings` readings after `since_ms` are quiet, at most `most_s`;
        what was seen: {"quiet": True/False/None (the monitor did not answer), "waited_s", and when
        not quiet "busiest_percent" or "error"}."""
        began = clock()
        while True:
            found, busiest, error = self.busiest(since_ms, readings)
            waited = round(clock() - began, 1)
            if error:
                return {"quiet": None, "waited_s": waited, "error": error}
            if found == readings and busiest <= busy.NEIGHBOURS_BUSY_PERCENT:
                return {"quiet": True, "waited_s": waited}
            if waited >= most_s:
                return {"quiet": False, "waited_s": waited, "busiest_percent": round(busiest, 1)}
            time.sleep(sleep_s)


class Gate:
    """A step's neighbours asked, again and again while its warm-up runs, whether they are quiet now
    (the newest reading after `since_ms`); what it saw, for step.json `neighbours`. A monitor that
    does not answer, or that has read no engine's processes for NO_READINGS_S, never holds a step up
    (the analysis then has no readings to judge either)."""

    def __init__(self, neighbours: Neighbours, since_ms: int, clock: Callable[[], float] = time.monotonic):
        self.neighbours, self.since_ms, self.clock = neighbours, since_ms, clock
        self.asked = self.first_busy = self.quiet_at = None
        self.busiest = 0.0
        self.error: str | None = None

    def __call__(self) -> bool:
        found, busiest, error = self.neighbours.busiest(self.since_ms, 1)
        now = self.clock()
        self.asked = now if self.asked is None else self.asked
        if not error and not found and now - self.asked > NO_READINGS_S:
            error = f"no reading of the engines' processes from the esb host's monitor in {NO_READINGS_S} s"
        if error:
            self.error = error
            return True
        quiet = found == 1 and busiest <= busy.NEIGHBOURS_BUSY_PERCENT
        if not quiet and self.first_busy is None:
            self.first_busy = now
        self.busiest = max(self.busiest, busiest)
        self.quiet_at = now if quiet else None
        return quiet

    def record(self) -> dict:
        """{"quiet": True/False/None (never asked, or no monitor answer), "waited_s": how long it held
        the step (0: quiet when first asked), "busiest_percent": the neighbours' most, together}."""
        if self.asked is None or self.error:
            return {"quiet": None, **({"error": self.error} if self.error else {})}
        end = self.quiet_at if self.quiet_at is not None else self.clock()
        return {"quiet": self.quiet_at is not None,
                "waited_s": round(end - self.first_busy, 1) if self.first_busy is not None else 0.0,
                "busiest_percent": round(self.busiest, 1)}


@dataclass(frozen=True)
class Compiler:
    """An engine's JIT compiler as the esb host's monitor reads it (`proc.jit` of its --match text)."""

    pull: Pull
    watch: str

    def busy(self, since_ms: int, window_s: float = COMPILER_WINDOW_S) -> tuple[float, float | None, bool, str | None]:
        """Over the newest `window_s` of readings after `since_ms`: (seconds they cover, the compiler's
        mean share of one core or None without readings, whether the engine's processes were read at
        all, the monitor's error)."""
        # The newest readings only (and a process reading or two before them): one pull a second.
        now = now_ms()
        samples, error = self.pull(max(since_ms, now - int((window_s + 2 * READING_MS / 1000) * 1000)), now + 1)
        if error:
            return 0.0, None, False, error
        jit = sorted((t, float(v)) for t, metric, subject, v in samples
                     if metric == "proc.jit" and subject == self.watch and t > since_ms)
        read = any(metric == "proc.cpu" and subject == self.watch for _, metric, subject, _ in samples)
        if not jit:
            return 0.0, None, read, None
        newest = [(t, v) for t, v in jit if t > jit[-1][0] - window_s * 1000]
        covered = (newest[-1][0] - newest[0][0]) / 1000 + 1   # each reading covers the second before it
        return covered, sum(v for _, v in newest) / len(newest), True, None

    def series(self, start_ms: int, bucket_s: float, buckets: int) -> list[float | None]:
        """The compiler's share of one core in each of `buckets` buckets of `bucket_s` from `start_ms`
        (the readings whose second lies in the bucket, averaged; None where none did, or the monitor
        did not answer): what the warm-up's figure draws beside the throughput."""
        samples, error = self.pull(start_ms, start_ms + int(buckets * bucket_s * 1000) + JIT_READING_MS + 1)
        found: list[list[float]] = [[] for _ in range(buckets)]
        for t, metric, subject, v in [] if error else samples:
            i = int((t - JIT_READING_MS - start_ms) // (bucket_s * 1000))   # the second it covers
            if metric == "proc.jit" and subject == self.watch and 0 <= i < buckets:
                found[i].append(float(v))
        return [round(sum(f) / len(f), 2) if f else None for f in found]


class CompilerGate:
    """The target's compiler asked, while its warm-up runs, whether it is quiet now (COMPILER_WINDOW_S
    of readings after `since_ms`, at most COMPILER_QUIET_PERCENT); what it saw, for step.json and
    run.json (`compiler`). An engine whose processes the monitor reads without compiler readings for
    NO_READINGS_S has no compiler (a native engine): it never holds the warm-up, nor does a monitor
    that does not answer or reads nothing."""

    def __init__(self, compiler: Compiler, since_ms: int, clock: Callable[[], float] = time.monotonic):
        self.compiler, self.since_ms, self.clock = compiler, since_ms, clock
        self.asked = self.quiet_at = None
        self.percent: float | None = None
        self.covered = 0.0
        self.native = False
        self.error: str | None = None

    def __call__(self) -> bool:
        covered, percent, read, error = self.compiler.busy(self.since_ms)
        now = self.clock()
        self.asked = now if self.asked is None else self.asked
        if error:
            self.error = error
            return True
        if percent is None:
            if now - self.asked > NO_READINGS_S:
                self.native = read
                self.error = None if read else (f"no reading of {self.compiler.watch}'s processes from the esb "
                                                f"host's monitor in {NO_READINGS_S} s")
                return True
            return False
        self.percent = round(percent, 2)
        self.covered = covered
        # When it went quiet (and has stayed so since): what it held the warm-up for. Only a busy
        # window undoes it: one short of readings (the esb host's monitor late on its saturated core)
        # says nothing either way.
        if covered >= COMPILER_WINDOW_S and percent <= COMPILER_QUIET_PERCENT:
            self.quiet_at = now if self.quiet_at is None else self.quiet_at
        elif percent > COMPILER_QUIET_PERCENT:
            self.quiet_at = None
        return self.quiet_at is not None

    def record(self) -> dict:
        """{"quiet": True/False/None, "percent": the last window's share of one core, "quiet_after_s":
        when it went quiet for good, counted from the first time it was asked (0: quiet from the
        start)}: quiet False only when the compiler read busy (above the line), None
        when never asked, when the monitor did not answer, or when its readings were quiet but fewer
        than COMPILER_WINDOW_S (`covered_s`: a warm-up shorter than that); {"native": True} for an
        engine without a compiler."""
        if self.native:
            return {"quiet": None, "native": True}
        if self.asked is None or self.error:
            return {"quiet": None, **({"error": self.error} if self.error else {})}
        quiet = True if self.quiet_at is not None else \
            False if self.percent is not None and self.percent > COMPILER_QUIET_PERCENT else None
        return {"quiet": quiet, "percent": self.percent,
                **({"quiet_after_s": round(self.quiet_at - self.asked, 1)} if quiet else {}),
                **({"covered_s": round(self.covered, 1)} if quiet is None else {})}


def all_ready(*gates: Callable[[], bool] | None) -> Callable[[], bool] | None:
    """One `ready` of several gates (None: none), each asked every time so that each keeps its record."""
    found = [g for g in gates if g is not None]
    if not found:
        return None
    return lambda: all([g() for g in found])


def monitor_pull(address: str, port: int) -> Pull:
    """Samples of a window from the monitor at address:port."""
    def pull(from_ms: int, to_ms: int) -> tuple[list[monitor.Sample], str | None]:
        samples, error, _, _ = monitor.pull(address, port, from_ms, to_ms)
        return samples, error
    return pull


def of_host(address: str, port: int, matches: Iterable[str], own: str | None = None) -> Neighbours:
    """The neighbours as the esb host's monitor at address:port reads them."""
    return Neighbours(monitor_pull(address, port), frozenset(matches), own)


def compiler_of(ctx: RunContext, target: str) -> Compiler | None:
    """The JIT compiler of `target`'s engine as the run's esb-host monitor reads it; None when there
    is no monitor to ask, or the target is no engine on the esb host (the direct baseline)."""
    host = ctx.testbed.hosts.get(roles.ESB)
    matches = ctx.record.get("engine_matches") or {}
    engine = ctx.targets[target].esb if target in ctx.targets else None
    if host is None or roles.ESB not in ctx.monitored_roles or not host.monitor_port or engine not in matches:
        return None
    return Compiler(monitor_pull(host.address, host.monitor_port), matches[engine])


def on_esb_host(ctx: RunContext, own_target: str | None = None) -> Neighbours | None:
    """The neighbours of `own_target`'s engine (None: of no engine) as the run's esb-host monitor
    reads them; None when there is none to ask, or the run has one target (nothing beside it)."""
    host = ctx.testbed.hosts.get(roles.ESB)
    matches = ctx.record.get("engine_matches") or {}
    if (len(ctx.targets) < 2 or host is None or roles.ESB not in ctx.monitored_roles or not host.monitor_port
            or not matches):
        return None
    engine = ctx.targets[own_target].esb if own_target in ctx.targets else None
    return of_host(host.address, host.monitor_port, matches.values(), matches.get(engine) if engine else None)
