"""Warm workers: one set of worker JVMs carries a run's steps.

Grinder 3.11 starts new worker JVMs at every start signal, and a new JVM runs Jython, Grinder and
the HTTP client interpreted for seconds: measured right away, the client's own slowness lowers the
target's figures (docs/grinder.md, "Warm workers"). So a run starts its workers once, as many
processes and threads per agent as its largest step needs, and hands each step to them through
the console's step board (console-config/control-api, StepBoard; grinder-scripts/scenario.py and
esbperf.client.Steps on the workers' side):

    order "step" N   the step's settings (esbperf.* properties, its layout of users, its log
                     folder); each worker process answers "adopted:N" once its logs of the step
                     are open, and its threads the step counts begin
    order "idle" N   no thread takes part; "adopted:N" says every older step's logs are whole on
                     disk (each thread left after its last transaction, whose row was written)
    order "end"      the run is over: the workers end, as they would at a stop signal

A step thus costs its warm-up and window and little else: no JVM starts, no JVM ends. What a
step spoils, its workers keep no longer: a step set aside discards the pool (its workers are
stopped), and the next step starts new ones. The board holds each order on a lease the runner
renews while it runs (LEASE_S); a runner that dies leaves workers that end by themselves."""
from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any, Callable

from esbperf.core import plan as plans
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.run import collect
from esbperf.run.collect import Worker
from esbperf.run.problems import Incomplete, WorkersHang
from esbperf.run.workers import ConsoleWatch, now_ms
from esbperf.services.console import ControlClient

LEASE_S = 60            # the workers end this long after the runner stopped renewing its order
RENEW_S = 5             # how often the runner renews it
READY_S = 60            # how long new workers may take to poll the board once they run
ADOPT_S = 30            # how long workers may take to adopt a step (their previous one is closed)
POLL_S = 0.02           # how often the runner looks at the board while it waits (a hand-over: tens of ms)
CLOSE_MARGIN_S = 30     # a step's threads may take a request's timeout and this to leave it


def size(plan: plans.Plan, agents: int, loads: list[tuple[int, float | None]] | None = None) -> tuple[int, int]:
    """Worker processes and threads per agent that every load level of the plan fits in (each
    level laid out as a fresh start would: Plan.processes_threads)."""
    layouts = [plan.processes_threads(users, agents) for users, _ in (loads or plan.loads())] + [(1, 1)]
    return max(p for p, _ in layouts), max(t for _, t in layouts)


def order_properties(properties: dict[str, Any], processes: int, threads: int, log_folder: str,
                     open_model: bool) -> dict[str, str]:
    """A step's order: its esbperf.* settings (what scenario.py reads per step), its layout of
    users, and where its logs go. In the open model every thread of the layout serves the rate."""
    order = {k: str(v) for k, v in properties.items() if k.startswith("esbperf.")}
    order.update({"esbperf.step.processes": str(processes), "esbperf.step.threads": str(threads),
                  "esbperf.step.logs": log_folder})
    if open_model:
        order["esbperf.users"] = "0"
    return order


class WarmPool:
    """The run's warm workers, and the board orders that move them from step to step."""

    def __init__(self, processes: int, threads: int, agents: int, board_url: str, open_model: bool,
                 timeout_s: float, connect: Callable[[], ControlClient], run_dir: Path,
                 fetchers: list[collect.Fetcher]):
        self.processes = processes
        self.threads = threads
        self.agents = agents
        self.board_url = board_url
        self.open_model = open_model
        self.timeout_s = timeout_s
        self.connect = connect
        self.run_dir = run_dir
        self.fetchers = fetchers
        self.log_folder = ""
        self.key = secrets.token_urlsafe(24)
        self.seq = 0
        self.workers: dict[str, Worker] = {}
        self.first_report_ms = 0
        self.starts: list[dict] = []        # each time workers were started (run.json `workers`)
        self._renewing: threading.Event | None = None

    @property
    def running(self) -> bool:
        return bool(self.workers)

    def fit(self, watch: ConsoleWatch, processes: int, threads: int) -> None:
        """Make room for a step laid out as `processes` x `threads` per agent: workers too few or
        too small for it (a capacity search's pool grows with its rate) are replaced by bigger ones."""
        if processes <= self.processes and threads <= self.threads:
            return
        self.discard(watch)
        self.processes, self.threads = max(processes, self.processes), max(threads, self.threads)

    def start_properties(self, base: dict[str, Any], log_folder: str) -> dict[str, Any]:
        """The start message of the pool's workers: the step's grinder.* settings, sized for the
        run, and where to find the board."""
        # Every Grinder setting of the step's (a user's script may shape its load with some), sized anew.
        properties = {k: v for k, v in base.items() if k.startswith("grinder.")}
        properties.update({
            "grinder.processes": self.processes, "grinder.threads": self.threads, "grinder.runs": 0,
            "grinder.duration": 0,   # no end of their own: the board's lease ends them (LEASE_S)
            "grinder.logDirectory": log_folder,
            "esbperf.board.url": self.board_url, "esbperf.board.key": self.key,
            "esbperf.pool.model": "open" if self.open_model else "closed",
            "esbperf.board.close.ms": int((self.timeout_s + CLOSE_MARGIN_S) * 1000),
            "esbperf.board.lost.ms": LEASE_S * 1000,
            "esbperf.pool.logs": log_folder,   # the agent gives its workers grinder.logDirectory resolved
        })
        if "esbperf.user.script" in base:   # a user's script that takes steps: the wrapper loads it at start
            properties["esbperf.user.script"] = base["esbperf.user.script"]
        return properties

    def ensure(self, watch: ConsoleWatch, base: dict[str, Any], log_folder: str) -> None:
        """Start the workers unless they run; return once every one polls the board."""
        if self.workers:
            return
        self.key = secrets.token_urlsafe(24)   # a new pool: workers of a discarded one are told to end
        self.seq = 1
        watch.call(lambda: watch.client.board_order(
            {"key": self.key, "seq": self.seq, "kind": "idle", "properties": {}, "lease_s": LEASE_S}))
        started = now_ms()
        self.log_folder = log_folder
        self.workers = watch.start(self.start_properties(base, log_folder), self.processes * self.agents)
        self._renew()
        try:
            self._await(watch, lambda state: state.startswith("adopted:") or state == "ready", READY_S,
                        "started and polled the step board")
        except BaseException:
            self.discard(watch)
            raise
        self.first_report_ms = now_ms()
        self.starts.append({"started_ms": started, "ready_ms": self.first_report_ms,
                            "processes": self.processes, "threads": self.threads,
                            "workers": sorted(w.name for w in self.workers.values())})

    def hand_over(self, watch: ConsoleWatch, order: dict[str, str]) -> int:
        """Order a step; when every worker has adopted it (ms since the epoch)."""
        self._post(watch, "step", order)
        self._await(watch, lambda state: state == f"adopted:{self.seq}", ADOPT_S, f"adopted step {self.seq}")
        return now_ms()

    def idle(self, watch: ConsoleWatch, wait_s: float) -> None:
        """End the step: no thread takes part; return once every worker's logs of it are whole."""
        self._post(watch, "idle", {})
        self._await(watch, lambda state: state == f"adopted:{self.seq}", wait_s,
                    "left the step with their logs closed", hang=True)

    def discard(self, watch: ConsoleWatch | None) -> None:
        """Stop the pool's workers (the next step starts new ones)."""
        if self._renewing is not None:
            self._renewing.set()
            self._renewing = None
        if not self.workers:
            return
        workers, self.workers = self.workers, {}
        try:
            client = watch.client if watch else self.connect()
            self.seq += 1
            client.board_order({"key": self.key, "seq": self.seq, "kind": "end", "properties": {}, "lease_s": 1})
            client.stop_workers()
            client.wait_workers_finished(set(workers), CLOSE_MARGIN_S)
        except EsbperfError:
            pass   # the console is gone: the lease ends them
        # What the workers logged outside the steps (their start and final statistics), for the record.
        home = self.run_dir / collect.POOL_FOLDER / self.log_folder.rsplit("/", 1)[-1] / layout.LOGS
        try:
            collect.bring_home(workers.values(), self.log_folder, home, self.fetchers)
        except (EsbperfError, OSError):
            pass

    close = discard

    # --- helpers --------------------------------------------------------------------------

    def _post(self, watch: ConsoleWatch, kind: str, properties: dict[str, str]) -> None:
        self.seq += 1
        watch.call(lambda: watch.client.board_order(
            {"key": self.key, "seq": self.seq, "kind": kind, "properties": properties, "lease_s": LEASE_S}))

    def _await(self, watch: ConsoleWatch, done: Callable[[str], bool], wait_s: float, what: str,
               hang: bool = False) -> None:
        """Wait until every worker's board state passes `done`; watch the workers meanwhile."""
        deadline = time.monotonic() + wait_s
        names = {w.name for w in self.workers.values()}
        last_watch = 0.0
        while True:
            states = {name: str(s.get("state", "")) for name, s in
                      (watch.call(watch.client.board_status).get("workers") or {}).items()}
            if all(done(states.get(name, "")) for name in names):
                return
            failed = [f"{name}: {states[name]}" for name in sorted(names) if states.get(name, "").startswith("failed:")]
            if failed:
                raise Incomplete(f"worker {failed[0]}")
            if time.monotonic() - last_watch > 0.25:   # a worker that died never answers: the console says so
                watch.watch(self.workers)
                last_watch = time.monotonic()
                dead = [w.name for i, w in self.workers.items() if i in watch.ended_early]
                if dead:
                    raise Incomplete(f"worker {dead[0]} did not end normally: it ended during the step (killed, or "
                                     f"its agent died) while the others {what}")
            if time.monotonic() >= deadline:
                late = sorted(n for n in names if not done(states.get(n, "")))
                message = (f"worker {late[0]} has not {what} within {wait_s:g} s (it says "
                           f"{states.get(late[0]) or 'nothing'})")
                raise WorkersHang(message) if hang else Incomplete(message)
            watch.on_tick(f"workers: {what}", deadline - time.monotonic(), {})
            time.sleep(POLL_S)

    def _renew(self) -> None:
        """Renew the board's lease from a thread of its own while the pool lives."""
        stop = threading.Event()
        self._renewing = stop
        key = self.key

        def renew() -> None:
            client = None
            while not stop.wait(RENEW_S):
                try:
                    client = client or self.connect()
                    client.board_lease(key, LEASE_S)
                except EsbperfError:
                    client = None   # a console that came back has a new token: connect again

        threading.Thread(target=renew, name="esbperf-board-lease", daemon=True).start()

    def record(self) -> dict:
        """run.json `workers`."""
        return {"mode": "warm", "processes": self.processes, "threads": self.threads, "starts": self.starts}
