"""One step of a run against the console: start the workers with the step's properties, warm up,
zero the console's statistics, measure, stop, bring every agent's logs home, check them, and
write the step folder.

A step that did not measure what it should is never counted: it is kept aside whole, with the
reason in its step.json, as `.failed-iter-<n>-<time>` (results.set_aside), and `--resume`
repeats it. Whether the run can go on after it depends on the cause (`StepAside.stop_run`): a
worker that died, or fewer threads than users, spoil one step only; an agent that left or
joined, a console that does not come back, or a target that no longer answers spoil what
follows too, so the run stops there, resumably."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esbperf import collect, environment, payloads, plan as plans, procs, results, user_script
from esbperf.console import ConsoleUnreachable, ControlClient, statistics
from esbperf.errors import EsbperfError
from esbperf.topology import Target, Testbed
from esbperf.verify import verify_target

STOP_WAIT_S = 30             # the workers' end after the stop signal
CALIBRATION_WARMUP_S, CALIBRATION_S = 2, 3   # a calibration's warm-up and measurement
CONSOLE_RETURN_S = 120       # how long a run waits for a console that stopped answering mid-step
# Workers stop by themselves this long after a step's planned end, should the runner not stop them
# (it died, or the console did: agents then come back only once their workers end). 2560 users
# took 27 s to start on a 2-core client, and the warm-up waits for them.
SAFETY_NET_S = 30
AGENT_PURGE_S = 5            # the console drops a dead agent ~3 s after its workers end
TARGET_CHECK_TIMEOUT_S = 5
RESTART_READY_S = 120       # an ESB's start on a busy 2-core machine can take a while


def now_ms() -> int:
    return int(time.time() * 1000)


class StepAside(EsbperfError):
    """The step was kept aside (its folder and why are in `aside`); `stop_run`: the steps after
    it cannot be measured either until someone acts."""

    def __init__(self, message: str, aside: Path | None, stop_run: bool):
        super().__init__(message)
        self.aside = aside
        self.stop_run = stop_run


class ConsoleLost(EsbperfError):
    """The console's control API stopped answering in the middle of a step."""


@dataclass
class Agent:
    name: str
    host: str            # the testbed role whose machine it runs on


@dataclass
class RunContext:
    """What every step of a run shares."""

    dir: Path
    plan: plans.Plan
    testbed: Testbed
    targets: dict[str, Target]
    agents: list[Agent]                  # the run's agents: any other that joins is refused
    fetchers: list[collect.Fetcher]      # how each agent's logs come home
    connect: Callable[[], ControlClient]   # a fresh client (a restarted console has a new token)
    record: dict[str, Any] = field(default_factory=dict)   # run.json
    verify: bool = True
    monitored_roles: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)   # when the command started (for the overhead)
    state_dirs: list[Path] = field(default_factory=list)   # this machine's state folders (GC logs are there)
    # A plan with `restart: per-step`: restarts the named ESB through its launcher, returns its new pid.
    restart_esb: Callable[[str], int] | None = None


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
    }
    if step.payload_file is not None:   # staged by the runner (esbperf/payloads.py)
        properties["esbperf.payload.file"] = f"{payloads.STAGING}/{ctx.dir.name}/{step.payload_file.staged_name()}"
        properties["esbperf.payload.check"] = plan.payload_check
    if step.rate is not None:
        # Arrivals per second of each worker process: the step's rate over all of them.
        properties["esbperf.rate"] = step.rate / (processes * len(ctx.agents))
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


class StepRunner:
    """Runs one step; reports progress through `on_tick(phase, seconds left, latest statistics)`."""

    def __init__(self, ctx: RunContext, client: ControlClient, on_tick: Callable[[str, float, dict], None]):
        self.ctx = ctx
        self.client = client
        self.on_tick = on_tick
        self.expected = {a.name for a in ctx.agents}
        # Workers seen ended before the runner stopped them: idle ones (all their threads beyond
        # the step's users) end at once without a transaction; one with transactions died.
        self.ended_early: dict[str, int] = {}

    # --- watching the console ---------------------------------------------------------------

    def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except ConsoleUnreachable as e:
            raise ConsoleLost(str(e)) from None

    def _agent_change(self, agents: list[dict]) -> str | None:
        names = [a["name"] for a in agents]
        joined = sorted(set(names) - self.expected)
        if joined:
            return (f"agent {joined[0]} joined the console during the run (the run's agents: "
                    f"{', '.join(sorted(self.expected))}); stop it, or start a new run that includes it")
        left = sorted(self.expected - set(names))
        if left:
            return f"agent {left[0]} left the console during the step (killed, or its host went away)"
        return None

    def _watch(self, workers: dict[str, collect.Worker]) -> str | None:
        """Why the step can no longer be measured, or None while all is well."""
        agents = self._call(self.client.agents)
        change = self._agent_change(agents)
        if change:
            return change
        states = {w["id"]: w["state"] for a in agents for w in a.get("workers", [])}
        running = {i for i in workers if states.get(i) in ("STARTED", "RUNNING")}
        for i in set(workers) - running:
            self.ended_early.setdefault(i, now_ms())
        if not running:
            return "the workers ended before the step did (see the worker logs in the step folder)"
        return None

    def _agent_left(self) -> str | None:
        """A worker died mid-step: was it its agent? The console drops a killed agent a few seconds
        after its workers show as ended, so give it that long."""
        deadline = time.monotonic() + AGENT_PURGE_S
        while True:
            change = self._agent_change(self._call(self.client.agents))
            if change or time.monotonic() >= deadline:
                return change
            time.sleep(0.25)

    def _wait_until(self, deadline_ms: int, phase: str, workers: dict[str, collect.Worker]) -> None:
        while True:
            left = deadline_ms - now_ms()
            if left <= 0:
                return
            latest = statistics(self._call(lambda: self.client.data(latest=True)))
            self.on_tick(phase, left / 1000, latest)
            problem = self._watch(workers)
            if problem:
                raise _Spoilt(problem, stop_run=not problem.startswith("the workers ended"))
            time.sleep(min(1.0, left / 1000))

    def _first_report(self, deadline_ms: int, workers: dict[str, collect.Worker]) -> int:
        while now_ms() < deadline_ms:
            if self._call(lambda: self.client.data(latest=True))["status"].get("state") == "Recording":
                return now_ms()
            problem = self._watch(workers)
            if problem:
                raise _Spoilt(problem.replace("before the step did", "before reporting any test"),
                              stop_run=not problem.startswith("the workers ended"))
            self.on_tick("starting workers", 0, {})
            time.sleep(0.1)
        raise _Spoilt("the workers reported nothing before the step's end", stop_run=False)

    # --- the step ---------------------------------------------------------------------------

    def execute(self, step: plans.Step) -> Path:
        ctx, plan = self.ctx, self.ctx.plan
        began = time.monotonic()
        tmp = results.begin_step(ctx.dir, step)
        log_folder = collect.step_log_folder(ctx.dir.name, step.relative_dir(), str(now_ms()))
        record: dict[str, Any] = {"scenario": step.scenario, "target": step.target,
                                  "payload_bytes": step.payload_bytes, "payload_label": step.payload_label,
                                  "users": step.users, "model": step.model, "rate": step.rate,
                                  "iteration": step.iteration, "plan": plan.name, "log_folder": log_folder}
        workers: dict[str, collect.Worker] = {}
        start_ms = warmup_end_ms = end_ms = first_report_ms = 0
        console_data: dict = {}
        try:
            change = self._agent_change(self._call(self.client.agents))
            if change:
                raise _Spoilt(change, stop_run=True)
            if plan.restart == "per-step" and ctx.targets[step.target].kind == "esb":
                record["esb_restart"] = self._restart_esb(step)
            processes, threads = plan.processes_threads(step.users, len(ctx.agents))
            record.update(processes=processes, threads=threads)
            for action in ("stop", "reset", "start"):
                self._call(lambda: self.client.recording(action))
            start_ms = now_ms()
            properties = step_properties(ctx, step, processes, threads, log_folder)
            ids = self._call(lambda: self.client.start_workers_and_wait(properties, processes * len(ctx.agents)))
            workers = {w["id"]: collect.Worker(w["id"], w["name"], a["name"])
                       for a in self._call(self.client.agents) for w in a.get("workers", []) if w["id"] in ids}
            stopped = False
            try:
                # Warm-up: from the start signal (worker start-up included), but at least half of it
                # under load, after the workers' first report.
                first_report_ms = self._first_report(start_ms + int((plan.step_seconds() + 30) * 1000), workers)
                warmup_end_ms = max(start_ms + int(plan.warmup_s * 1000), first_report_ms + int(plan.warmup_s * 500))
                self._wait_until(warmup_end_ms, "warm-up", workers)
                self._call(lambda: self.client.recording("zero"))
                warmup_end_ms = now_ms()
                self._wait_until(warmup_end_ms + int(plan.duration_s * 1000), "measuring", workers)
                console_data = self._call(self.client.data)
                end_ms = now_ms()
                self._call(self.client.stop_workers)
                stopped = True
                self._call(lambda: self.client.recording("stop"))
                if not self._call(lambda: self.client.wait_workers_finished(set(workers), STOP_WAIT_S)):
                    raise _Spoilt(f"the workers did not stop within {STOP_WAIT_S} s of the stop signal", stop_run=True)
                change = self._agent_change(self._call(self.client.agents))
                if change:
                    raise _Spoilt(change, stop_run=True)
            finally:
                if not stopped:
                    try:
                        self.client.stop_workers()
                    except EsbperfError:
                        pass
        except _Spoilt as e:
            self._bring_home(workers, log_folder, tmp)
            raise self._set_aside(tmp, record, e.reason, e.stop_run) from None
        except ConsoleLost as e:
            self._bring_home(workers, log_folder, tmp)
            back = self._await_console()
            reason = f"the console stopped answering during the step ({e})"
            raise self._set_aside(tmp, record, reason, stop_run=not back,
                                  hint="" if back else f"; it did not come back within {CONSOLE_RETURN_S} s") from None

        faults = self._network_faults(start_ms, end_ms)
        if faults:
            record["network_faults"] = faults
        problems = self._bring_home(workers, log_folder, tmp)
        died = [w for i, w in workers.items() if i in self.ended_early and collect.has_rows(tmp / "logs", w)]
        if died:
            change = self._agent_left()
            if change:
                raise self._set_aside(tmp, record, change, stop_run=True)
            problems += [f"worker {w.name} (agent {w.agent}) ended during the step while the others ran" for w in died]
        results.write_json(tmp / "console.json", console_data)
        record.update(self._record(step, start_ms, first_report_ms, warmup_end_ms, end_ms, console_data, workers, tmp))
        if problems:
            raise self._set_aside(tmp, record, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                                              else ""), stop_run=False)
        threads_seen = record["threads_seen"]
        if step.model == "closed" and threads_seen < step.users:
            raise self._set_aside(tmp, record, f"only {threads_seen} of {step.users} users' threads produced "
                                  "transactions in the measured window (a worker died, started late, or an agent "
                                  "dropped threads)", stop_run=False)
        errors = statistics(console_data).get("Errors") or 0
        problem = self._target_problem(step) if errors and ctx.verify else None
        if problem:
            raise self._set_aside(tmp, record, f"{errors} errors, and {problem}", stop_run=True)
        record["wall_s"] = round(time.monotonic() - began, 3)
        return results.finish_step(tmp, record)

    def calibrate(self, payload_bytes: int) -> dict:
        """What the client adds per transaction at this payload: one worker thread per agent against
        an instant server inside its own process (scenario `calibrate`, esbperf/calibration.py).
        Its logs are kept in RUN/calibration/<payload>/."""
        from esbperf import calibration

        ctx, plan = self.ctx, self.ctx.plan
        label = plans.size_label(payload_bytes)
        folder = ctx.dir / "calibration" / label
        log_folder = collect.step_log_folder(ctx.dir.name, Path("calibration") / label, str(now_ms()))
        properties = {"grinder.processes": 1, "grinder.threads": 1, "grinder.runs": 0,
                      "grinder.duration": int((CALIBRATION_WARMUP_S + CALIBRATION_S + SAFETY_NET_S) * 1000),
                      "grinder.logDirectory": log_folder, "esbperf.scenario": "calibrate", "esbperf.users": 0,
                      "esbperf.payload.bytes": payload_bytes, "esbperf.keepalive": str(plan.keepalive).lower(),
                      "esbperf.timeout.ms": int(plan.timeout_s * 1000)}
        for action in ("stop", "reset", "start"):
            self._call(lambda: self.client.recording(action))
        start_ms = now_ms()
        ids = self._call(lambda: self.client.start_workers_and_wait(properties, len(ctx.agents)))
        workers = {w["id"]: collect.Worker(w["id"], w["name"], a["name"])
                   for a in self._call(self.client.agents) for w in a.get("workers", []) if w["id"] in ids}
        try:
            first = self._first_report(start_ms + int((CALIBRATION_WARMUP_S + 30) * 1000), workers)
            self._wait_until(first + CALIBRATION_WARMUP_S * 1000, "calibrating the client", workers)
            window_start = now_ms()
            self._wait_until(window_start + CALIBRATION_S * 1000, "calibrating the client", workers)
            window_end = now_ms()
        except _Spoilt as e:
            raise EsbperfError(f"the client's calibration failed: {e.reason}") from None
        finally:
            self._call(self.client.stop_workers)
        self._call(lambda: self.client.wait_workers_finished(set(workers), STOP_WAIT_S))
        problems = collect.bring_home(workers.values(), log_folder, folder / "logs", ctx.fetchers)
        if problems:
            raise EsbperfError(f"the client's calibration failed: {problems[0]}")
        summary = calibration.summarise(sorted((folder / "logs").glob("*-data.log")), window_start, window_end)
        results.write_json(folder / "calibration.json", summary)
        return summary

    def _record(self, step: plans.Step, start_ms: int, first_report_ms: int, warmup_end_ms: int, end_ms: int,
                console_data: dict, workers: dict[str, collect.Worker], tmp: Path) -> dict:
        ctx, plan = self.ctx, self.ctx.plan
        target = ctx.targets[step.target]
        monitoring = self._collect_monitors(tmp, start_ms, warmup_end_ms, end_ms)
        return {
            "agents": [{"name": a.name, "host": a.host} for a in ctx.agents],
            "workers": sorted(w.name for w in workers.values()),
            "threads_seen": collect.threads_seen(tmp / "logs", warmup_end_ms, end_ms),
            "duration_s": plan.duration_s, "warmup_s": plan.warmup_s, "keepalive": plan.keepalive,
            "timeout_s": plan.timeout_s,
            "start_ms": start_ms, "first_report_ms": first_report_ms, "warmup_end_ms": warmup_end_ms, "end_ms": end_ms,
            "versions": {**ctx.record.get("versions", {}), "esb": target.esb,
                         **environment.worker_versions(tmp / "logs")},
            "hosts": ctx.record.get("hosts", {}),
            "target_urls": {"esb": target.url, **target.backends},
            "gc_logs": self._collect_gc(step, tmp, start_ms, end_ms),
            "bottlenecks": monitoring.get("bottlenecks", []),
            "monitors": monitoring.get("monitors", {}),
            "console": console_data,
        }

    def _bring_home(self, workers: dict[str, collect.Worker], log_folder: str, tmp: Path) -> list[str]:
        if not workers:
            return []
        return collect.bring_home(workers.values(), log_folder, tmp / "logs", self.ctx.fetchers)

    def _set_aside(self, tmp: Path, record: dict, reason: str, stop_run: bool, hint: str = "") -> StepAside:
        aside = results.set_aside(tmp, {**record, "failed": reason})
        return StepAside(f"{reason}{hint}; the step is kept aside in {aside.relative_to(self.ctx.dir)}",
                         aside, stop_run)

    def _await_console(self) -> bool:
        """Wait for a console that stopped answering to answer again with the run's agents."""
        deadline = time.monotonic() + CONSOLE_RETURN_S
        while time.monotonic() < deadline:
            self.on_tick("waiting for the console", deadline - time.monotonic(), {})
            try:
                self.client = self.ctx.connect()
                if {a["name"] for a in self.client.agents()} >= self.expected:
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
        self.on_tick("restarting the ESB", 0, {})
        try:
            pid = self.ctx.restart_esb(target.esb)
        except EsbperfError as e:
            raise _Spoilt(f"the ESB {target.esb} did not restart: {e}", stop_run=True) from None
        problem = "not checked"
        while time.monotonic() - began < RESTART_READY_S:
            if self.ctx.plan.script:   # the contract's checks are scenario.py's: a port that answers
                problem = None if procs.port_open(*target.address) else "not answering"
            else:
                problem = self._target_problem(step)
            if problem is None:
                return {"pid": pid, "ready_s": round(time.monotonic() - began, 2)}
            time.sleep(0.5)
        raise _Spoilt(f"the ESB {target.esb} restarted (pid {pid}) but did not pass verify within "
                      f"{RESTART_READY_S} s: {problem}", stop_run=True)

    def _target_problem(self, step: plans.Step) -> str | None:
        """After a step with errors: does the target still answer the step's scenario? Errors from
        an overloaded but working target are results; from a dead back end or ESB they are not."""
        outcomes = verify_target(self.ctx.testbed, step.target, [step.scenario], size=1024,
                                 timeout=min(self.ctx.plan.timeout_s, TARGET_CHECK_TIMEOUT_S))
        failed = [o for o in outcomes if not o.ok]
        if not failed:
            return None
        return f"target {step.target} no longer answers: {failed[0].url}: {failed[0].detail}"

    def _collect_gc(self, step: plans.Step, step_dir: Path, start_ms: int, end_ms: int) -> dict[str, str]:
        """Keep the step's window of the ESB's and echoes' GC logs (gc-<role>.log) for those that run
        on this machine: a service started in state folder S on port P logs to
        S/esb/<esb>-<P>/gc.log or S/echo/<wsN>-<P>/gc.log (esbperf/gc.py). Returns role -> log used."""
        from esbperf import gc

        testbed, target = self.ctx.testbed, self.ctx.targets[step.target]
        services = {ws: Path("echo") / f"{ws}-{testbed.hosts[ws].echo_port}" for ws in ("ws1", "ws2", "ws3")}
        if target.kind == "esb":
            services["esb"] = Path("esb") / f"{target.esb}-{testbed.hosts['esb'].esb_ports[target.esb]}"
        found = {}
        for role, folder in services.items():
            for state in self.ctx.state_dirs:
                log = gc.log_path(state / folder)
                if gc.save_window(log, start_ms, end_ms, gc.step_file(step_dir, role)):
                    found[role] = str(log)
                    break
        return found

    def _network_faults(self, start_ms: int, end_ms: int) -> list[dict]:
        """The faults emulated on the testbed's links (`esbperf testbed fault`) during the step."""
        if not self.ctx.testbed.emulated:
            return []
        from esbperf.testbed import fault
        return fault.during(self.ctx.testbed, start_ms, end_ms)

    def _collect_monitors(self, step_dir: Path, start_ms: int, warmup_end_ms: int, end_ms: int) -> dict:
        if not self.ctx.monitored_roles:
            return {}
        from esbperf import monitor   # only when monitors run: it needs the monitor module built
        return monitor.collect_step(self.ctx.testbed, step_dir, start_ms, warmup_end_ms, end_ms,
                                    roles=self.ctx.monitored_roles)


class _Spoilt(Exception):
    def __init__(self, reason: str, stop_run: bool):
        super().__init__(reason)
        self.reason = reason
        self.stop_run = stop_run
