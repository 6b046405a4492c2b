"""The engines on the esb host that a step does not measure (its neighbours) must be idle while it is
measured (steady.NEIGHBOURS_BUSY_PERCENT, the analysis's `busy-neighbours`). An engine just loaded
works on after its load stops (a JVM compiles what the load queued: Synapse held half a core for
2-5 s after its step here), so the runner reads the esb host's monitor and waits for quiet: after
the targets' warm-up (every engine, a few readings in a row), and at the end of each step's
automatic warm-up (its neighbours, the newest reading), the step's load running on meanwhile. A
quiet host costs nothing but one request to its monitor. A fixed warm-up is the plan's set time and
is not held (the demo's and the interleaved check's 1 s: the newest reading, 2 s long, still covers
the step before, and a wait for a clean one would cost each step seconds); the analysis judges its
window's neighbours all the same."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from esbperf.core import roles, steady
from esbperf.run.workers import now_ms
from esbperf.services import monitor

READING_MS = 2000       # the monitor reads processes every 2 s: the newest reading is at most this old
NO_READINGS_S = 2 * READING_MS / 1000 + 1   # a monitor silent on processes this long reads none

if TYPE_CHECKING:
    from esbperf.run.step import RunContext

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
            if found == readings and busiest <= steady.NEIGHBOURS_BUSY_PERCENT:
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
        quiet = found == 1 and busiest <= steady.NEIGHBOURS_BUSY_PERCENT
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


def of_host(address: str, port: int, matches: Iterable[str], own: str | None = None) -> Neighbours:
    """The neighbours as the esb host's monitor at address:port reads them."""
    def pull(from_ms: int, to_ms: int) -> tuple[list[monitor.Sample], str | None]:
        samples, error, _, _ = monitor.pull(address, port, from_ms, to_ms)
        return samples, error
    return Neighbours(pull, frozenset(matches), own)


def on_esb_host(ctx: "RunContext", own_target: str | None = None) -> Neighbours | None:
    """The neighbours of `own_target`'s engine (None: of no engine) as the run's esb-host monitor
    reads them; None when there is none to ask, or the run has one target (nothing beside it)."""
    host = ctx.testbed.hosts.get(roles.ESB)
    matches = ctx.record.get("engine_matches") or {}
    if (len(ctx.targets) < 2 or host is None or roles.ESB not in ctx.monitored_roles or not host.monitor_port
            or not matches):
        return None
    engine = ctx.targets[own_target].esb if own_target in ctx.targets else None
    return of_host(host.address, host.monitor_port, matches.values(), matches.get(engine) if engine else None)
