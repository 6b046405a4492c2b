"""One step of a run against the console, in named phases:

    prepare   no agent joined or left; a fresh ESB when the plan restarts it per step; the
              console's statistics zeroed
    start     the step's workers on every agent (the run's Workers: warm, or new ones), with the
              step's properties, until every thread of it runs
    warm-up   from the start signal, and at least half of it under load
    measure   the measurement window, then the workers stopped
    collect   every agent's logs home, checked whole; the console's totals, the monitors'
              samples, the GC windows and the network faults of the window
    check     enough threads loaded the target; a target that errs still answers
    xcheck    with `--cross-check wrk`: wrk measures the same target and requests (crosscheck.py), in
              the iterations the plan's `cross_check_iterations` names (default: every one)

Each phase's wall time is in step.json (`phases_s`). A step that did not measure what it should
is never counted: it is kept aside whole, with the reason in its step.json, as
`.failed-iter-<n>-<time>` (esbperf/results/layout.py), and `--resume` repeats it. What went wrong
is a type (a StepProblem), and the type says whether the run can go on: a worker that died, or
fewer threads than users, spoil this step only; an agent that left or joined, workers that do not
stop, a console that does not come back, a target that no longer answers, or any error of the
console or the network spoil what follows too, so the run stops there, resumably."""
from __future__ import annotations

import errno
import http.client
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from esbperf.core import payloads, plan as plans, procs, roles
from esbperf.core.errors import EsbperfError
from esbperf.results import gclog, layout
from esbperf.results.datalog import LogStats, RowStats, log_stats
from esbperf.run import collect, crosscheck, environment, gauge, monitors, user_script
from esbperf.run.context import RunContext
from esbperf.run.problems import (AgentsChanged, ConsoleLost, Incomplete, StepAside, StepProblem, TargetDown,
                                  Unexpected)
from esbperf.run.verify import verify_target
from esbperf.run.workers import REPORT_KEY, ConsoleWatch, Layout, Tick, Workers, now_ms
from esbperf.services import jvm
from esbperf.services.console import ControlClient, statistics

CONSOLE_RETURN_S = 120       # how long a run waits for a console that stopped answering mid-step
# Workers stop by themselves this long after a step's planned end, should the runner not stop them
# (it died, or the console did: agents then come back only once their workers end). 2560 users
# took 27 s to start on a 2-core client, and the warm-up waits for them.
SAFETY_NET_S = 30
RAN_TO_END_MS = 1000        # a worker whose last transaction ended this close to the window's end ran through it
TARGET_CHECK_TIMEOUT_S = 5
RESTART_READY_S = 120       # an ESB's start on a busy 2-core machine can take a while


def window_summary(stats: LogStats, window_s: float) -> dict[str, Any]:
    """A step's figures for its summary line as it ends (step.json `summary`): the data logs' own
    µs times, not the console's whole ms. Those of its first Grinder test (the step's one test,
    for every esbperf scenario), never a sum of tests: a user's page test wrapping request tests
    would count the same seconds twice; with several tests, `tests` holds each one's figures. The
    report computes its figures again from the logs."""
    ms = (lambda us: None if us is None else round(us / 1000, 3))

    def figures(test: int | None, part: RowStats) -> dict[str, Any]:
        found = {"test": test, "transactions": part.transactions, "errors": part.errors,
                 "tps": round(part.transactions / window_s, 1) if window_s > 0 else None,
                 "mean_ms": ms(part.response.mean), "p99_ms": ms(part.response.percentile(99))}
        if part.latency is not None:   # the open model: the latency from each request's due start
            found["latency_p99_ms"] = ms(part.latency.percentile(99))
        return found

    each = [figures(test, part) for test, part in sorted(stats.tests.items())] or [figures(None, stats)]
    return {**each[0], "tests": each} if len(each) > 1 else each[0]


def step_properties(ctx: RunContext, step: plans.Step, processes: int, threads: int, log_folder: str) -> dict:
    """The worker properties of a step (the control API accepts only these and esbperf.*)."""
    target, plan = ctx.targets[step.target], ctx.plan
    properties: dict[str, Any] = {
        "grinder.processes": processes,
        "grinder.threads": threads,
        "grinder.runs": 0,
        # A safety net only: the runner stops the workers at the end of the measurement.
        "grinder.duration": int((plan.step_seconds() + SAFETY_NET_S) * 1000),
        # Relative: each agent resolves it under its own working folder, on its own machine.
        "grinder.logDirectory": log_folder,
        "esbperf.users": step.users,
        "esbperf.scenario": step.scenario,
        "esbperf.target.kind": target.kind,
        "esbperf.payload.bytes": step.payload_bytes,
        "esbperf.keepalive": str(plan.keepalive).lower(),
        "esbperf.timeout.ms": int(plan.timeout_s * 1000),
        REPORT_KEY: ctx.report_interval_ms,
    }
    if step.payload_file is not None:   # staged by the runner (esbperf/core/payloads.py)
        properties["esbperf.payload.file"] = f"{payloads.STAGING}/{ctx.dir.name}/{step.payload_file.staged_name()}"
        properties["esbperf.payload.check"] = plan.payload_check
    if step.rate is not None:
        properties["esbperf.rate"] = plans.Plan.process_rate(step.rate, processes, len(ctx.agents))
        properties["esbperf.arrivals"] = plan.arrivals
        if plan.seed is not None:
            properties["esbperf.seed"] = plan.seed
    if target.kind == "esb":
        properties["esbperf.target.url"] = target.url
    for backend, url in target.backends.items():
        properties[f"esbperf.backend.{backend}"] = url
    script = ctx.record.get("script")
    if script:   # a user's own script, run by the wrapper with its own settings (never over the runner's)
        properties = {**script["properties"], **properties}
        properties["grinder.script"] = user_script.WRAPPER
        properties["esbperf.user.script"] = script["staged"]
    return properties


@dataclass
class Attempt:
    """One attempt at a step: its temporary folder and what is known of it so far."""

    step: plans.Step
    tmp: Path
    log_folder: str
    record: dict[str, Any]
    workers: dict[str, collect.Worker] = field(default_factory=dict)
    start_ms: int = 0
    first_report_ms: int = 0
    warmup_end_ms: int = 0
    end_ms: int = 0
    warmup: dict = field(default_factory=dict)   # how the warm-up ended (step.json `warmup`)
    console_data: dict = field(default_factory=dict)
    began_ms: int = 0


class StepRunner:
    """Runs one step; reports progress through `on_tick(phase, seconds left, latest statistics)`."""

    def __init__(self, ctx: RunContext, client: ControlClient, on_tick: Tick):
        self.ctx = ctx
        self.console = ConsoleWatch(client, {a.name for a in ctx.agents}, on_tick)
        self.phases: dict[str, float] = {}

    @property
    def workers(self) -> Workers:
        return self.ctx.workers

    @property
    def client(self) -> ControlClient:
        """The console's client (a new one when the console came back after a restart)."""
        return self.console.client

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - began, 3)

    # --- the step ---------------------------------------------------------------------------

    def execute(self, step: plans.Step) -> Path:
        """Run the step; its finished folder, or StepAside."""
        began = time.monotonic()
        self.phases = {}
        a = self._begin(step)
        a.began_ms = now_ms()
        # The independent client brackets the step, before and after it: a target still moving
        # reads differently in the two, which the step's own client is then not blamed for.
        bracket = bool(self.ctx.cross_check) and self.ctx.plan.cross_checks(step.iteration)   # the plan's iterations
        try:
            try:
                with self._phase("prepare"):
                    self._prepare(a)
                if bracket:
                    with self._phase("xcheck_before"):
                        before = self._cross_check(a, "before")
                with self._phase("start"):
                    self._start(a)
                with self._phase("warmup"):
                    self._warm_up(a)
                with self._phase("measure"):
                    self._measure(a)
                with self._phase("stop"):
                    self._stop(a)
            except BaseException:
                self.workers.discard()   # no worker of a step gone wrong goes on
                raise
            with self._phase("collect"):
                problems = self._collect(a)
            with self._phase("check"):
                self._check(a, problems)
            if bracket:
                with self._phase("xcheck"):
                    a.record["xcheck"] = crosscheck.bracket(before, self._cross_check(a, "after"))
        except ConsoleLost as problem:
            self.workers.discard()
            self._bring_home(a)
            back = self._await_console()
            raise self._set_aside(a, ConsoleLost(f"the console stopped answering during the step ({problem.reason})"
                                                 + ("" if back else f"; it did not come back within "
                                                                    f"{CONSOLE_RETURN_S} s")), stop_run=not back)
        except StepProblem as problem:
            self.workers.discard()   # (one its collect or check found) its workers carry no further step
            self._bring_home(a)
            raise self._set_aside(a, problem)
        except (EsbperfError, OSError, http.client.HTTPException) as e:
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                raise   # the run stops as a whole, with its own line (the disk is full)
            self.workers.discard()
            self._bring_home(a)
            raise self._set_aside(a, Unexpected(f"{type(e).__name__}: {e}" if not isinstance(e, EsbperfError)
                                                else str(e))) from None
        a.record["wall_s"] = round(time.monotonic() - began, 3)
        a.record["phases_s"] = dict(self.phases)
        a.record["began_ms"], a.record["finished_ms"] = a.began_ms, now_ms()   # the step's whole span
        return layout.finish_step(a.tmp, a.record)

    def _begin(self, step: plans.Step) -> Attempt:
        ctx, plan = self.ctx, self.ctx.plan
        log_folder = collect.step_log_folder(ctx.dir.name, step.relative_dir(), str(now_ms()))
        record: dict[str, Any] = {"scenario": step.scenario, "target": step.target,
                                  "payload_bytes": step.payload_bytes, "payload_label": step.payload_label,
                                  "users": step.users, "model": step.model, "rate": step.rate,
                                  "iteration": step.iteration, "plan": plan.name, "log_folder": log_folder}
        return Attempt(step, layout.begin_step(ctx.dir, step), log_folder, record)

    def _prepare(self, a: Attempt) -> None:
        self.console.require_agents()
        if self.ctx.plan.restart == "per-step" and self.ctx.targets[a.step.target].kind == "esb":
            a.record["esb_restart"] = self._restart_esb(a.step)

    def _start(self, a: Attempt) -> None:
        """The step's workers, every thread of the step running (Workers.begin)."""
        processes, threads = self.ctx.plan.processes_threads(a.step.users, len(self.ctx.agents))
        a.record.update(processes=processes, threads=threads)
        properties = step_properties(self.ctx, a.step, processes, threads, a.log_folder)
        began = self.workers.begin(self.console, properties,
                                   Layout(processes, threads, a.log_folder, a.step.rate is not None))
        a.start_ms, a.first_report_ms, a.workers = began.start_ms, began.first_report_ms, began.workers
        a.record.update(began.record)

    def _warm_up(self, a: Attempt) -> None:
        """A fixed warm-up: from the start signal (worker start-up included), but at least half of it
        under load, after the workers' first report. `warmup_s: auto`: until the step is steady
        (_until_steady), and on, the load running, until the engines beside the target on the esb
        host are quiet too, and the target's compiler (esbperf/run/gauge.py; step.json `neighbours`,
        `compiler`). Then the console's statistics start from zero."""
        plan = self.ctx.plan
        if plan.warmup_auto:
            found = gauge.on_esb_host(self.ctx, a.step.target)
            quiet = None if found is None else gauge.Gate(found, a.start_ms - gauge.READING_MS)
            compiler = gauge.compiler_of(self.ctx, a.step.target)
            # Its newest readings, those before the step's start too: a warm target's compiler, quiet
            # before its load and under it, holds no step; one the step's load set compiling does.
            compiled = None if compiler is None else gauge.CompilerGate(
                compiler, a.start_ms - gauge.COMPILER_WINDOW_S * 1000)
            self._until_steady(a, gauge.all_ready(quiet, compiled))
            if quiet is not None:
                a.record["neighbours"] = quiet.record()
            if compiled is not None:
                a.record["compiler"] = compiled.record()
        else:
            a.warmup_end_ms = max(a.start_ms + int(plan.warmup_s * 1000), a.first_report_ms + int(plan.warmup_s * 500))
            self.console.wait_until(a.warmup_end_ms, "warm-up", a.workers)
        self.console.call(lambda: self.client.recording("zero"))
        a.warmup_end_ms = now_ms()

    def _until_steady(self, a: Attempt, quiet: Callable[[], bool] | None = None) -> None:
        """End the warm-up once the throughput and mean response time are steady over the window to
        come (ConsoleWatch.until_steady), no sooner than the plan's warmup_min_s after the workers'
        first report and no later than its warmup_max_s; a.warmup says which, and why, with the
        series it judged."""
        plan = self.ctx.plan
        a.warmup = self.console.until_steady(
            a.workers, a.first_report_ms + int(plan.warmup_s * 1000), a.first_report_ms + int(plan.warmup_max_s * 1000),
            self.ctx.sample_interval_s, plan.duration_s, ready=quiet)

    def _measure(self, a: Attempt) -> None:
        self.console.wait_until(a.warmup_end_ms + int(self.ctx.plan.duration_s * 1000), "measuring", a.workers)
        a.console_data = self.console.call(self.client.data)
        a.end_ms = now_ms()

    def _stop(self, a: Attempt) -> None:
        self.workers.end_step()
        self.console.require_agents()

    def _collect(self, a: Attempt) -> list[str]:
        """Everything the step left, into its folder; the problems found with the workers' logs."""
        faults = self._network_faults(a.start_ms, a.end_ms)
        if faults:
            a.record["network_faults"] = faults
        problems = self._bring_home(a)
        layout.write_json(a.tmp / layout.CONSOLE_FILE, a.console_data)
        logs = a.tmp / layout.LOGS
        ctx, target = self.ctx, self.ctx.targets[a.step.target]
        monitoring = self._collect_monitors(a)
        rate = None if a.step.rate is None else plans.Plan.process_rate(a.step.rate, a.record["processes"],
                                                                          len(ctx.agents))
        try:   # the window's figures, read as the analysis reads them: threads seen, and the step's line
            stats = log_stats(layout.data_logs(a.tmp), a.warmup_end_ms, a.end_ms, rate)
        except EsbperfError as e:
            raise Incomplete(f"its data logs cannot be read: {e}") from None
        a.record.update({
            "agents": [{"name": agent.name, "host": agent.host} for agent in ctx.agents],
            "workers": sorted(w.name for w in a.workers.values()),
            "threads_seen": stats.threads,
            "summary": window_summary(stats, (a.end_ms - a.warmup_end_ms) / 1000),
            "duration_s": ctx.plan.duration_s, "warmup_s": "auto" if ctx.plan.warmup_auto else ctx.plan.warmup_s,
            "warmup_used_s": round((a.warmup_end_ms - a.first_report_ms) / 1000, 3),
            **({"warmup": a.warmup} if a.warmup else {}),
            "keepalive": ctx.plan.keepalive,
            "timeout_s": ctx.plan.timeout_s,
            # Whether the target was judged warm before its first step (esbperf/run/warmup.py).
            "target_warm": (ctx.record.get("target_warm") or {}).get(a.step.target)
                           or {"settled": None, "reason": "its target was not warmed up in this run"},
            **({"fork": a.step.fork} if a.step.fork is not None else {}),
            "start_ms": a.start_ms, "first_report_ms": a.first_report_ms, "warmup_end_ms": a.warmup_end_ms,
            "end_ms": a.end_ms,
            "versions": {**ctx.record.get("versions", {}), "esb": target.esb, **environment.worker_versions(logs)},
            "hosts": ctx.record.get("hosts", {}),
            "target_urls": {"esb": target.url, **target.backends},
            "gc_logs": self._collect_gc(a),
            "monitors": monitoring.get("monitors", {}),
            "console": a.console_data,
        })
        return problems

    def _check(self, a: Attempt, problems: list[str]) -> None:
        """Did the step measure what it should?"""
        logs = a.tmp / layout.LOGS
        # A worker the console stopped listing while the others ran, whose own log does not run to
        # the window's end. Its log is the proof: on a saturated client a live worker's report can
        # miss the console's list for a moment (a 320-user step over 2 agents saw it).
        died = [w for i, w in a.workers.items() if i in self.console.ended_early and collect.has_rows(logs, w)
                and (collect.last_row_ms(logs, w) or 0) < a.end_ms - RAN_TO_END_MS]
        if died:
            change = self.console.agent_left()
            if change:
                raise AgentsChanged(change)
            problems += [f"worker {w.name} (agent {w.agent}) ended during the step while the others ran" for w in died]
        if problems:
            raise Incomplete(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        threads_seen = a.record["threads_seen"]
        if a.step.model == "closed" and threads_seen < a.step.users:
            # Threads idle in the window but busy in the step ran: a saturated client starves some of
            # its threads for seconds (320 threads on one core), which the analysis names (a note of
            # its bound, `client-starved-threads`; `idle-threads` where no bound explains them). Threads that never took part are a worker's or an agent's fault.
            took_part = log_stats(layout.data_logs(a.tmp), a.start_ms, a.end_ms).threads
            a.record["threads_in_step"] = took_part
            if took_part < a.step.users:
                raise Incomplete(f"only {took_part} of {a.step.users} users' threads took part in the step "
                                 "(a worker died, started late, or an agent dropped threads)")
        errors = statistics(a.console_data).get("Errors") or 0
        problem = self._target_problem(a.step) if errors and self.ctx.verify else None
        if problem:
            raise TargetDown(f"{errors} errors, and {problem}")

    def _cross_check(self, a: Attempt, when: str) -> dict:
        """wrk on the same target and requests, just before or just after the step
        (esbperf/run/crosscheck.py); after it, only a step whose answers were all right."""
        self.console.on_tick(f"cross-checking with wrk ({when} the step)", self.ctx.plan.duration_s, {})
        step = a.step
        errors = statistics(a.console_data).get("Errors") or 0 if when == "after" else 0
        return crosscheck.cross_check(self.ctx.testbed, self.ctx.targets[step.target], step, self.ctx.plan,
                                      errors, bool(self.ctx.record.get("script")),
                                      step.payload_file.read() if step.payload_file else None)

    # --- helpers ----------------------------------------------------------------------------

    def _bring_home(self, a: Attempt) -> list[str]:
        return self.workers.bring_home(a.log_folder, a.tmp / layout.LOGS)

    def _set_aside(self, a: Attempt, problem: StepProblem, stop_run: bool | None = None) -> StepAside:
        a.record["phases_s"] = dict(self.phases)
        aside = layout.set_aside(a.tmp, {**a.record, "failed": problem.reason})
        return StepAside(f"{problem.reason}; the step is kept aside in {aside.relative_to(self.ctx.dir)}",
                         aside, problem.stops_run if stop_run is None else stop_run, problem)

    def _await_console(self) -> bool:
        """Wait for a console that stopped answering to answer again with the run's agents."""
        deadline = time.monotonic() + CONSOLE_RETURN_S
        while time.monotonic() < deadline:
            self.console.on_tick("waiting for the console", deadline - time.monotonic(), {})
            try:
                self.console.client = self.ctx.connect()
                if {a["name"] for a in self.client.agents()} >= self.console.expected:
                    return True
            except EsbperfError:
                pass
            time.sleep(1)
        return False

    def _restart_esb(self, step: plans.Step) -> dict:
        """A fresh ESB process before the step (`restart: per-step`), ready once it passes verify
        on the step's scenario (a port that answers is not yet an ESB that routes)."""
        target = self.ctx.targets[step.target]
        began = time.monotonic()
        self.console.on_tick("restarting the ESB", 0, {})
        try:
            pid = self.ctx.restart_esb(target.esb)
        except EsbperfError as e:
            raise TargetDown(f"the ESB {target.esb} did not restart: {e}") from None
        problem = "not checked"
        while time.monotonic() - began < RESTART_READY_S:
            if self.ctx.plan.script:   # the contract's checks are scenario.py's: a port that answers
                problem = None if procs.port_open(*target.address) else "not answering"
            else:
                problem = self._target_problem(step)
            if problem is None:
                return {"pid": pid, "ready_s": round(time.monotonic() - began, 2)}
            time.sleep(0.5)
        raise TargetDown(f"the ESB {target.esb} restarted (pid {pid}) but did not pass verify within "
                         f"{RESTART_READY_S} s: {problem}")

    def _target_problem(self, step: plans.Step) -> str | None:
        """After a step with errors: does the target still answer the step's scenario? Errors from
        an overloaded but working target are results; from a dead back end or ESB they are not."""
        try:
            outcomes = verify_target(self.ctx.testbed, step.target, [step.scenario], size=1024,
                                     timeout=min(self.ctx.plan.timeout_s, TARGET_CHECK_TIMEOUT_S))
        except (OSError, http.client.HTTPException) as e:   # an answer cut off: it does not answer right
            return f"target {step.target} no longer answers: {type(e).__name__}: {e}"
        failed = [o for o in outcomes if not o.ok]
        if not failed:
            return None
        return f"target {step.target} no longer answers: {failed[0].url}: {failed[0].detail}"

    def _collect_gc(self, a: Attempt) -> dict[str, str]:
        """Keep the step's window of the ESB's and echoes' GC logs (gc-<role>.log) for those that run
        on this machine: a service started in state folder S on port P logs to
        S/esb/<esb>-<P>/gc.log or S/echo/<wsN>-<P>/gc.log (esbperf/services/jvm.py). Returns role ->
        log used."""
        testbed, target = self.ctx.testbed, self.ctx.targets[a.step.target]
        services = {ws: Path("echo") / f"{ws}-{testbed.hosts[ws].echo_port}" for ws in roles.BACKENDS}
        if target.kind == "esb":
            services[roles.ESB] = Path("esb") / f"{target.esb}-{testbed.hosts[roles.ESB].esb_ports[target.esb]}"
        found = {}
        for role, folder in services.items():
            for state in self.ctx.state_dirs:
                log = jvm.log_path(state / folder)
                if gclog.save_window(log, a.start_ms, a.end_ms, layout.gc_file(a.tmp, role)):
                    found[role] = str(log)
                    break
        return found

    def _network_faults(self, start_ms: int, end_ms: int) -> list[dict]:
        """The faults emulated on the testbed's links (`esbperf testbed fault`) during the step."""
        if not self.ctx.testbed.emulated:
            return []
        from esbperf.testbed import fault
        return fault.during(self.ctx.testbed, start_ms, end_ms)

    def _collect_monitors(self, a: Attempt) -> dict:
        if not self.ctx.monitored_roles:
            return {}
        return monitors.collect_step(self.ctx.testbed, a.tmp, a.start_ms, a.warmup_end_ms, a.end_ms,
                                     roles=self.ctx.monitored_roles)
