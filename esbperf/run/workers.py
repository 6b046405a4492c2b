"""The workers of one start signal, as the console shows them: start them on every agent, wait
for every one to report its threads running, watch them while they load the target, stop them.

Whatever the console says that spoils the step is raised as its type (esbperf/run/problems.py):
a console that stops answering (ConsoleLost), an agent that joins or leaves (AgentsChanged),
workers that all end early (WorkersEnded) or never report (NoReport)."""
from __future__ import annotations

import time
from typing import Any, Callable

from esbperf.core import steady
from esbperf.core.errors import EsbperfError
from esbperf.run.collect import Worker
from esbperf.run.problems import AgentsChanged, ConsoleLost, NoReport, WorkersEnded
from esbperf.services.console import ConsoleUnreachable, ControlClient, statistics

AGENT_PURGE_S = 5            # the console drops a dead agent ~3 s after its workers end
STEADY_POLL_S = 0.1         # how often an automatic warm-up looks for the console's next sample
# The console's per-sample mean response time in µs, as scenario.py registers it; a user's script
# without it is watched by Grinder's whole-ms mean.
MEAN_US, MEAN_MS = "Response us mean", "Mean Test Time (ms)"

# on_tick(phase, seconds left, latest statistics): the live progress
Tick = Callable[[str, float, dict], None]


def now_ms() -> int:
    return int(time.time() * 1000)


class ConsoleWatch:
    """The console as a step sees it, for the run's agents `expected`."""

    def __init__(self, client: ControlClient, expected: set[str], on_tick: Tick):
        self.client = client
        self.expected = expected
        self.on_tick = on_tick
        # Workers seen ended before the runner stopped them: idle ones (all their threads beyond
        # the step's users) end at once without a transaction; one with transactions died.
        self.ended_early: dict[str, int] = {}

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
        running = {i for i in workers if states.get(i) in ("STARTED", "RUNNING")}
        for i in set(workers) - running:
            self.ended_early.setdefault(i, now_ms())
        if not running:
            when = "before reporting any test" if before_report else "before the step did"
            raise WorkersEnded(f"the workers ended {when} (see the worker logs in the step folder)")
        return states

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
                     judge: Callable[[list, list], steady.Steadiness] | None = None) -> dict:
        """Watch the console's samples until the throughput and mean response time are steady
        (esbperf/core/steady.py, judged over `horizon_s`; or as `judge(tps, mean_us)` says), no
        sooner than `earliest_ms` and no later than `latest_ms`; whether they were, why not, and the
        series judged."""
        judge = judge or (lambda tps, mean: steady.steady(tps, mean, interval_s, horizon_s=horizon_s))
        tps: list[float | None] = []
        mean_us: list[float | None] = []
        # The console's samples: the one it last finished when the workers were seen running ended
        # before the load began, and the next began before it: only those after are whole.
        first_whole, seen, totals = None, None, {}
        verdict = steady.Steadiness(False, "no whole console sample yet")
        while now_ms() < latest_ms:
            data = self.call(lambda: self.client.data(latest=True))
            count = (data.get("status") or {}).get("sample-count")
            if count is not None and first_whole is None:
                first_whole = count + 2
            if count is not None and count != seen and count >= first_whole:
                seen = count
                totals = statistics(data)
                tps.append(totals.get("TPS"))
                mean_us.append(totals.get(MEAN_US) if MEAN_US in totals else
                               None if totals.get(MEAN_MS) is None else totals[MEAN_MS] * 1000)
                verdict = judge(tps, mean_us)
                if verdict.steady:
                    break
            self.on_tick(f"{phase} (auto: {verdict.reason})", (latest_ms - now_ms()) / 1000, totals)
            self.watch(workers)
            time.sleep(STEADY_POLL_S)
        if verdict.steady and now_ms() < earliest_ms:
            self.wait_until(earliest_ms, phase, workers)
        return {"steady": verdict.steady, "reason": verdict.reason, "interval_s": interval_s,
                "tps": tps, "mean_us": mean_us}

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
