"""Warm workers: one set of worker JVMs carries a run's steps.

Grinder 3.11 starts new worker JVMs at every start signal, and a new JVM runs Jython, Grinder and
the HTTP client interpreted for seconds: measured right away, the client's own slowness lowers the
target's figures (docs/grinder.md, "Warm workers"). So a run starts its workers once, as many
processes and threads per agent as its largest step needs, and hands each step to them through
the console's step board (console-config/control-api, StepBoard; grinder-scripts/scenario.py and
esbperf.client.Steps on the workers' side):

    order "step" N   the step's settings (esbperf.* properties, its layout of users, its log
                     folder); each worker process answers "adopted:N" once its logs of the step
                     are open, and its threads the step counts begin; with each poll it says how
                     many of them have begun their part so far ("begun" of "takes"), and the
                     step's clock starts once every one has
    order "idle" N   no thread takes part; "adopted:N" says every older step's logs are whole on
                     disk (each thread left after its last transaction, whose row was written)
    order "end"      the run is over: the workers end, as they would at a stop signal

A step thus costs its warm-up and window and little else: no JVM starts, no JVM ends. What a
step spoils, its workers keep no longer: a step set aside discards the pool (its workers are
stopped), and the next step starts new ones. The board holds each order on a lease the runner
renews while it runs (LEASE_S); a runner that dies leaves workers that end by themselves.

The workers report to the console at the run's interval (workers.run_report_interval_ms), whatever
step started them: Grinder reads it once, at a worker's start."""
from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any, Callable

from esbperf.core import plan as plans
from esbperf.results import layout
from esbperf.run import collect
from esbperf.run.collect import Worker
from esbperf.run.problems import Incomplete, WorkersHang
from esbperf.run.workers import REPORT_KEY, Began, ConsoleWatch, Layout, Workers, now_ms
from esbperf.services.console import ControlClient

LEASE_S = 60            # the workers end this long after the runner stopped renewing its order
RENEW_S = 5             # how often the runner renews it
READY_S = 60            # how long new workers may take to poll the board once they run
ADOPT_S = 30            # how long workers may take to adopt a step (their previous one is closed)
# How long a step's threads may take to take their part once the step is adopted: those of new
# worker JVMs build Jython's TestRunners interpreted, on a client that may be saturated (2560 users
# took 27 s to start on a 2-core client).
JOIN_S = 60
POLL_S = 0.02           # how often the runner looks at the board while it waits (a hand-over: tens of ms)
CLOSE_MARGIN_S = 30     # a step's threads may take a request's timeout and this to leave it
ANSWER_MARGIN_S = 10    # ... and a worker this long to tell the board it has (a poll, a busy client)


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


def _count(entry: dict, name: str) -> int | None:
    try:
        return int(entry[name])
    except (KeyError, TypeError, ValueError):
        return None


class WarmPool(Workers):
    """The run's warm workers, and the board orders that move them from step to step."""

    mode = "warm"
    outlive_steps = True

    def __init__(self, processes: int, threads: int, agents: int, board_url: str, open_model: bool,
                 timeout_s: float, report_ms: int, connect: Callable[[], ControlClient], run_dir: Path,
                 fetchers: list[collect.Fetcher]):
        self.processes = processes
        self.threads = threads
        self.agents = agents
        self.board_url = board_url
        self.open_model = open_model
        self.close_s = timeout_s + CLOSE_MARGIN_S   # how long a step's threads may take to leave it
        self.report_ms = report_ms
        self.connect = connect
        self.run_dir = run_dir
        self.fetchers = fetchers
        self.watch: ConsoleWatch | None = None
        self.log_folder = ""                 # the pool's own logs (its start and end), on the agents
        self.step_folder = ""                # the step begun last, and its workers
        self.step_workers: dict[str, Worker] = {}
        self.key = secrets.token_urlsafe(24)
        self.seq = 0
        self.workers: dict[str, Worker] = {}
        self.first_report_ms = 0
        self.starts: list[dict] = []        # each time workers were started (run.json `workers`)
        self.lease_problem: str | None = None   # why the lease's last renewal failed, while it does
        self._renewing: threading.Event | None = None

    @property
    def running(self) -> bool:
        return bool(self.workers)

    # --- Workers ------------------------------------------------------------------------------

    def begin(self, watch: ConsoleWatch, properties: dict[str, Any], layout: Layout) -> Began:
        self.watch, self.step_folder, self.step_workers = watch, layout.log_folder, {}
        watch.track()
        self.fit(layout.processes, layout.threads)
        reused = self.running
        self.ensure(properties)
        start = now_ms()
        self.step_workers = dict(self.workers)
        watch.call(lambda: watch.client.recording("zero"))
        first = self.hand_over(order_properties(properties, layout.processes, layout.threads, layout.log_folder,
                                                layout.open_model))
        # The workers' age: a worker-jit warning looks at how long they have run, not this step.
        return Began(start, first, dict(self.workers),
                     {"workers_mode": self.mode, "workers_ready_ms": self.first_report_ms, "workers_reused": reused,
                      "report_interval_ms": self.report_ms})

    def end_step(self) -> None:
        """No thread takes part; return once every worker's logs of the step are whole."""
        self._post("idle", {})
        self._await(lambda entry: entry.get("state") == f"adopted:{self.seq}", self.close_s + ANSWER_MARGIN_S,
                    "left the step with their logs closed", hang=True)

    def discard(self) -> None:
        """Stop the pool's workers (the next step starts new ones)."""
        if self._renewing is not None:
            self._renewing.set()
            self._renewing = None
        if not self.workers:
            return
        workers, self.workers = self.workers, {}
        try:
            client = self.watch.client if self.watch else self.connect()
            self.seq += 1
            client.board_order({"key": self.key, "seq": self.seq, "kind": "end", "properties": {}, "lease_s": 1})
            client.stop_workers()
            client.wait_workers_finished(set(workers), CLOSE_MARGIN_S)
        except Exception:   # noqa: BLE001 - the console is gone, or answers garbage: the lease ends them
            pass
        # What the workers logged outside the steps (their start and final statistics), for the record.
        home = self.run_dir / collect.POOL_FOLDER / self.log_folder.rsplit("/", 1)[-1] / layout.LOGS
        try:
            collect.bring_home(workers.values(), self.log_folder, home, self.fetchers)
        except Exception:   # noqa: BLE001 - for the record only: nothing of a step is lost with them
            pass

    def bring_home(self, log_folder: str, into: Path) -> list[str]:
        if log_folder != self.step_folder or not self.step_workers:
            return []
        return collect.bring_home(self.step_workers.values(), log_folder, into, self.fetchers,
                                  workers_stay=self.running)

    def record(self) -> dict:
        return {"mode": self.mode, "processes": self.processes, "threads": self.threads,
                "report_interval_ms": self.report_ms, "starts": self.starts}

    def close(self) -> None:
        self.discard()

    # --- the pool -----------------------------------------------------------------------------

    def fit(self, processes: int, threads: int) -> None:
        """Make room for a step laid out as `processes` x `threads` per agent: workers too few or
        too small for it (a capacity search's pool grows with its rate) are replaced by bigger ones."""
        if processes <= self.processes and threads <= self.threads:
            return
        self.discard()
        self.processes, self.threads = max(processes, self.processes), max(threads, self.threads)

    def start_properties(self, base: dict[str, Any], log_folder: str) -> dict[str, Any]:
        """The start message of the pool's workers: the step's grinder.* settings, sized for the
        run, reporting at the run's interval, and where to find the board."""
        # Every Grinder setting of the step's (a user's script may shape its load with some), sized anew.
        properties = {k: v for k, v in base.items() if k.startswith("grinder.")}
        properties.update({
            "grinder.processes": self.processes, "grinder.threads": self.threads, "grinder.runs": 0,
            "grinder.duration": 0,   # no end of their own: the board's lease ends them (LEASE_S)
            "grinder.logDirectory": log_folder,
            # Read once, at the worker's start: whatever step starts the pool (the client's
            # calibration sets none), every step after it is reported at the run's interval.
            REPORT_KEY: self.report_ms,
            "esbperf.board.url": self.board_url, "esbperf.board.key": self.key,
            "esbperf.pool.model": "open" if self.open_model else "closed",
            "esbperf.board.close.ms": int(self.close_s * 1000),
            "esbperf.board.lost.ms": LEASE_S * 1000,
            "esbperf.pool.logs": log_folder,   # the agent gives its workers grinder.logDirectory resolved
        })
        if "esbperf.user.script" in base:   # a user's script that takes steps: the wrapper loads it at start
            properties["esbperf.user.script"] = base["esbperf.user.script"]
        return properties

    def ensure(self, base: dict[str, Any]) -> None:
        """Start the workers unless they run; return once every one polls the board."""
        if self.workers:
            return
        watch = self.watch
        self.key = secrets.token_urlsafe(24)   # a new pool: workers of a discarded one are told to end
        self.seq = 1
        watch.call(lambda: watch.client.board_order(
            {"key": self.key, "seq": self.seq, "kind": "idle", "properties": {}, "lease_s": LEASE_S}))
        started = now_ms()
        self.log_folder = collect.pool_log_folder(self.run_dir.name, str(started))
        self.workers = watch.start(self.start_properties(base, self.log_folder), self.processes * self.agents)
        self._renew()
        try:
            polled = (lambda entry: str(entry.get("state", "")).startswith("adopted:") or entry.get("state") == "ready")
            self._await(polled, READY_S, "started and polled the step board")
        except BaseException:
            self.discard()
            raise
        self.first_report_ms = now_ms()
        self.starts.append({"started_ms": started, "ready_ms": self.first_report_ms,
                            "processes": self.processes, "threads": self.threads,
                            "workers": sorted(w.name for w in self.workers.values())})

    def hand_over(self, order: dict[str, str]) -> int:
        """Order a step; when every worker has adopted it and every thread it counts has begun its
        part (ms since the epoch). A step's clock starts then: a thread still building its first
        request (new workers' threads, Jython interpreted, on a busy client) would otherwise miss
        the start of its window, or all of it."""
        self._post("step", order)
        adopted = f"adopted:{self.seq}"
        self._await(lambda entry: entry.get("state") == adopted, ADOPT_S, f"adopted step {self.seq}")

        def all_begun(entry: dict) -> bool:   # a worker that does not count its threads is taken at its word
            begun, takes = _count(entry, "begun"), _count(entry, "takes")
            return entry.get("state") == adopted and (begun is None or takes is None or begun >= takes)
        self._await(all_begun, JOIN_S, f"had every thread of step {self.seq} begin its part")
        return now_ms()

    # --- helpers --------------------------------------------------------------------------

    def _post(self, kind: str, properties: dict[str, str]) -> None:
        watch = self.watch
        self.seq += 1
        watch.call(lambda: watch.client.board_order(
            {"key": self.key, "seq": self.seq, "kind": kind, "properties": properties, "lease_s": LEASE_S}))

    def _await(self, done: Callable[[dict], bool], wait_s: float, what: str, hang: bool = False) -> None:
        """Wait until every worker's board entry passes `done`; watch the workers meanwhile."""
        watch = self.watch
        deadline = time.monotonic() + wait_s
        names = {w.name for w in self.workers.values()}
        last_watch = 0.0
        while True:
            entries = {name: dict(entry) for name, entry in
                       (watch.call(watch.client.board_status).get("workers") or {}).items()}
            states = {name: str(entry.get("state", "")) for name, entry in entries.items()}
            if all(done(entries.get(name, {})) for name in names):
                return
            failed = [f"{name}: {states[name]}" for name in sorted(names) if states.get(name, "").startswith("failed:")]
            if failed:
                raise Incomplete(f"worker {failed[0]}")
            if time.monotonic() - last_watch > 0.25:   # a worker that died never answers: the console says so
                watch.watch(self.workers)
                last_watch = time.monotonic()
                dead = [self.workers[i].name for i in watch.gone(self.workers)]
                if dead:
                    lease = f"; the board's lease was not renewed ({self.lease_problem})" if self.lease_problem else ""
                    raise Incomplete(f"worker {dead[0]} did not end normally: it ended during the step (killed, or "
                                     f"its agent died) while the others {what}{lease}")
            if time.monotonic() >= deadline:
                late = sorted(n for n in names if not done(entries.get(n, {})))
                entry = entries.get(late[0], {})
                said = states.get(late[0]) or "nothing"
                if _count(entry, "takes"):
                    said += f", {entry.get('begun')} of its {entry.get('takes')} threads begun"
                message = f"worker {late[0]} has not {what} within {wait_s:g} s (it says {said})"
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
                    self.lease_problem = None
                except Exception as e:   # noqa: BLE001 - whatever a call may raise, the next one tries again
                    # (a console that came back has a new token: connect again). A renewer that
                    # died would let the lease run out and end the workers mid-run.
                    self.lease_problem = f"{type(e).__name__}: {e}"
                    client = None

        threading.Thread(target=renew, name="esbperf-board-lease", daemon=True).start()


class Carry:
    """A warm pool kept between the runs of one session (`esbperf demo` runs three, one after the
    other, with the same client): a run takes the pool the run before it left, if it loads the same
    model (closed or open), and leaves its own for the next; the session closes what is left. Its
    workers are warm (they carried that run's steps), so the next run neither starts nor warms them."""

    def __init__(self) -> None:
        self.pool: WarmPool | None = None
        self.run = ""            # the run that started it

    def take(self, open_model: bool, processes: int, threads: int) -> tuple[WarmPool, str] | None:
        """The pool and the run that started it, if it loads `open_model` and its workers are at
        least `processes` x `threads` (what the taking run's steps need: else WarmPool.fit would
        start bigger ones mid-run); None (and the pool closed) otherwise."""
        pool, self.pool = self.pool, None
        if pool is None:
            return None
        if not pool.running or pool.open_model != open_model or pool.processes < processes or pool.threads < threads:
            pool.close()
            return None
        return pool, self.run

    def keep(self, pool: Workers, started_by: str) -> bool:
        """Keep `pool` (started by the run `started_by`) for the next run, if it is a warm pool whose
        workers still run; False: the caller closes it."""
        if not isinstance(pool, WarmPool) or not pool.running:
            return False
        self.close()
        self.pool, self.run = pool, started_by
        return True

    def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> "Carry":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

