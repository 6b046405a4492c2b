"""A whole plan through the real console and agents, one results folder per step: `start` a new
run, `resume` an interrupted one, or `dry_run` one to see its steps and wall time.

The runner talks to the console only through its control API. A run measures one target or
several: with several (`--target camel --target direct`), each step runs against every target back
to back, the order rotated per iteration, so drift over the run hits them alike. Each step is one
StepRunner (esbperf/run/step.py). What stops a run, and what only spoils a step, is decided by the
problem's type (esbperf/run/problems.py); every interrupted run — Ctrl-C, a full disk, a console
gone for good — keeps its finished steps, and `esbperf run --resume DIR` continues it."""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from rich.console import Console
from rich.table import Table

from esbperf.core import busy, engines, payloads, plan as plans, procs, roles, topology
from esbperf.core.config import AgentConfig, ConsoleConfig, state_dir
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.run import (calibration, collect, crosscheck, environment, estimate, locks, pool, preflight, user_script,
                         wander, warmup)
from esbperf.run.preflight import MAX_SKEW_MS
from esbperf.run.progress import RunProgress
from esbperf.run.context import Agent, RunContext
from esbperf.run.step import StepAside, StepRunner
from esbperf.run.verify import verify_target
from esbperf.run.workers import ConsoleWatch, FreshWorkers, Workers
from esbperf.services.console import (TOKEN_ENV, ConsoleUnreachable, ControlClient, control_client, read_token,
                                      token_file as default_token_file)
from esbperf.testbed import hosts, ssh

LAYOUT = 2   # step folders <target>/<scenario>/<payload>/<users>/[rate-<r>/]iter-<n>

# A run whose steps are chosen as it goes (a capacity search, esbperf/cli/capacity.py): given the
# run, the steps in order, each yielded once the one before it is finished or kept aside, so that
# the choice may read that step's folder. A step already finished (a resumed run) is yielded again
# and skipped.
Schedule = Callable[[RunContext], Iterable[plans.Step]]


def _record(plan: plans.Plan, targets: dict[str, topology.Target], testbed: topology.Testbed, agents: list[Agent],
            grinder_version: str, engine_settings: dict[str, dict] | None = None) -> dict:
    """run.json as a new run starts."""
    record = {
        "layout": LAYOUT,
        "plan": plan.to_dict(),
        "targets": [{"name": t.name, "kind": t.kind, "esb": t.esb, "url": t.url, "backends": t.backends}
                    for t in targets.values()],
        "testbed": {"name": testbed.name, "file": str(testbed.path), "emulated": testbed.emulated,
                    "cpus": testbed.cpu_mode, "cpu_split": testbed.cpu_split()},
        "hosts": {role: {"address": h.address, "link_mbit": h.link_mbit, "cpus": list(h.cpus or []),
                         "interface": h.interface}   # the bottleneck rule's interface (esbperf/analysis/bottleneck.py)
                  for role, h in testbed.hosts.items()},
        "agents": [{"name": a.name, "host": a.host} for a in agents],
        # How the esb host's monitor tells its engines' processes apart (their --match): the analysis
        # reads the target's CPU and its neighbours' from them.
        "engine_matches": {name: e.match for name, e in engines.load_all().items()
                           if name in testbed.hosts["esb"].esb_ports},
        "environment": environment.describe(),
        # What each engine under test is and how it is set (its version, heap and options, or program;
        # the settings it declares, and what its account says of itself).
        "engines": environment.engines([t.esb for t in targets.values() if t.kind == "esb"],
                                       {t.esb: t.address for t in targets.values() if t.kind == "esb"},
                                       engine_settings),
        "echoes": environment.echoes(testbed),   # the back ends' runtime: as set, and as each answers
        "versions": {"grinder": grinder_version},
        "jvm_args": {"console": ConsoleConfig.load().jvm_args, "agent": AgentConfig.load().agent_jvm_args,
                     "worker": AgentConfig.load().worker_jvm_args},
        "console_sample_interval_ms": ConsoleConfig.load().sample_interval_ms,
        "restart": plan.restart,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "finished": None,
    }
    if len(targets) == 1:   # what single-target readers look for
        record["target"] = record["targets"][0]
    return record


def _prepare(client: ControlClient) -> None:
    """Before the first step (and after a step that went wrong): no worker of anyone else's may
    run, and every agent has the scripts."""
    client.timeout = 30
    client.settle()
    client.distribute()


def _summary_lines(record: dict) -> list[str]:
    """A finished step (step.json `summary`: the measured window's data logs): one line, or with
    several Grinder tests one per test, each with its own figures (tests are never added up)."""
    tests = record["summary"].get("tests") or [record["summary"]]
    lines = []
    for s in tests:
        named = f"test {s.get('test')}: " if len(tests) > 1 else ""
        line = (f"{named}{s['transactions']} transactions, {s['errors']} errors, TPS {s['tps'] or 0:.1f}, "
                f"mean {_ms(s['mean_ms'])}, p99 {_ms(s['p99_ms'])}")
        if "latency_p99_ms" in s:   # the open model: what the requests waited from their due start
            line += f", latency p99 {_ms(s['latency_p99_ms'])} (from the due start)"
        lines.append(line)
    x = record.get("xcheck") or {}
    if "tps" in x:
        lines[0] += f"; wrk TPS {x['tps']:.1f}, mean {_ms(x['mean_ms'])}" + (
            f", {x['errors']} wrk error(s): void" if x.get("errors") else "")
    return lines


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def execute(ctx: RunContext, client: ControlClient, console: Console, schedule: Schedule | None = None) -> list[str]:
    """Run every unfinished step (the plan's, or those `schedule` chooses); returns the reasons of
    the steps kept aside (the run went on)."""
    steps = ctx.plan.steps(list(ctx.targets))
    todo = steps if schedule else [s for s in steps if not layout.is_finished(ctx.dir, s)]
    # A warm pool the session's run before left: taken by a run whose steps it fits (else ended).
    takes = ctx.carry is not None and not schedule and ctx.plan.workers != "fresh" and not ctx.plan.script
    carried = ctx.carry.take(ctx.plan.model == "open", *_pool_size(ctx, todo)) if takes else None
    if ctx.carry is not None and not takes:
        ctx.carry.close()
    if carried is None:
        _prepare(client)
    else:   # its workers are the only ones running (this session's, warm), and have the scripts
        client.timeout = 30
    before_steps = time.monotonic()
    watch = ConsoleWatch(client, {a.name for a in ctx.agents}, lambda *a: None)
    ctx.workers, started_by = carried or (_workers(ctx, client, todo), ctx.dir.name)
    ctx.carried = carried is not None   # its workers ran the run before's steps: warm already
    if carried:
        ctx.record["workers_warmup"] = {"carried_from": started_by}
    try:
        return _execute(ctx, client, console, schedule, steps, todo, watch, before_steps)
    finally:
        kept = ctx.carry is not None and ctx.carry.keep(ctx.workers, started_by)
        if not kept:
            ctx.workers.close()
        ctx.record["workers"] = {**ctx.workers.record(), **({"carried_from": started_by} if carried else {}),
                                 **({"kept_for_next_run": True} if kept else {})}
        layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)
        ctx.workers = None


def _workers(ctx: RunContext, client: ControlClient, steps: list[plans.Step]) -> Workers:
    """What loads the target in every step of the run, chosen once: the run's warm workers
    (esbperf/run/pool.py), or new ones per step, with why."""
    plan = ctx.plan
    why = ""
    if plan.workers == "fresh":
        why = "the plan asks for new worker JVMs per step (workers: fresh)"
    elif plan.script and not (ctx.record.get("script") or {}).get("takes_steps"):
        why = "a user's script that does not say it takes steps (docs/running.md, \"Warm workers\")"
    elif not client.board_status().get("listening"):
        why = "the console has no step board listening (an older console, or its port was taken)"
    if why:
        return FreshWorkers(len(ctx.agents), ctx.fetchers, ctx.report_interval_ms,
                            ConsoleConfig.load().distribution_directory, why)
    processes, threads = _pool_size(ctx, steps)
    return pool.WarmPool(processes, threads, len(ctx.agents), ctx.testbed.board_url, plan.model == "open",
                         plan.timeout_s, ctx.report_interval_ms, ctx.connect, ctx.dir, ctx.fetchers)


def _pool_size(ctx: RunContext, steps: list[plans.Step]) -> tuple[int, int]:
    """Worker processes and threads per agent for every load the run's pool carries: its steps' and
    those its targets are warmed under."""
    closed = ctx.plan.model == "closed"
    loads = sorted({(s.users, s.rate) for s in [*steps, *ctx.also_warm] if (s.rate is None) == closed})
    return pool.size(ctx.plan, len(ctx.agents), loads or ctx.plan.loads())


def _execute(ctx: RunContext, client: ControlClient, console: Console, schedule: Schedule | None,
             steps: list[plans.Step], todo: list[plans.Step], watch: ConsoleWatch, before_steps: float) -> list[str]:
    if "calibration" not in ctx.record and not ctx.plan.script:   # the client calibrated is scenario.py
        ctx.record["calibration"] = calibration.calibrate_run(
            ctx.dir, watch, ctx.plan, ctx.workers, console.print,
            took=lambda seconds: estimate.remember(calibration_s=seconds))
        layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)
    before_steps_wall = time.monotonic() - before_steps
    aside: list[str] = []
    steps_wall = 0.0
    with RunProgress(console, None if schedule else len(steps), 0 if schedule else len(steps) - len(todo)) as progress:
        fork, begun = None, False   # the fork of the steps so far: a new one starts the engines afresh
        for step in schedule(ctx) if schedule else todo:
            if schedule and layout.is_finished(ctx.dir, step):
                continue
            if not begun or step.fork != fork:
                if ctx.plan.forks > 1:   # every fork: the engines under test afresh, warmed until settled
                    _start_fork(ctx, step, progress.print)
                    _warm(ctx, watch, [s for s in todo if s.fork == step.fork], progress.print)
                elif not begun:
                    _warm(ctx, watch, [s for s in todo if s.target not in ctx.warm], progress.print)
                    if not ctx.record.get("target_warmup") and ctx.workers.outlive_steps and not ctx.carried:
                        _warm_workers(ctx, watch, step, progress.print)
                fork, begun = step.fork, True
            progress.step(step.describe())
            runner = StepRunner(ctx, client, progress.tick)
            try:
                folder = runner.execute(step)
            except StepAside as e:
                client = runner.client   # a console that came back has a new client
                watch.client = client
                if e.stop_run:
                    raise EsbperfError(f"step {step.describe()}: {e}; `esbperf run --resume {ctx.dir}` continues the "
                                       "run once that is fixed") from None
                progress.aside(str(e))
                aside.append(f"{step.describe()}: {e}")
                _prepare(client)
                continue
            record = layout.read_json(folder / layout.STEP_FILE)
            steps_wall += record["wall_s"]
            estimate.remember_step(record)
            first, *more = _summary_lines(record)
            progress.finished(first)
            for line in more:
                progress.print(f"  {line}")
    if not aside:
        ctx.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)
        if steps_wall:
            estimate.remember(run_overhead_s=time.monotonic() - ctx.began - steps_wall - before_steps_wall
                              - ctx.warming_s)
    return aside


def _warm(ctx: RunContext, watch: ConsoleWatch, steps: list[plans.Step], echo: Callable[[str], None]) -> None:
    """Each target of `steps` warmed before its first step (esbperf/run/warmup.py); what was done
    and each target's verdict (settled or not) into run.json, where its steps find it."""
    verdicts = ctx.record.setdefault("target_warm", {})
    began = time.monotonic()
    warmed = warmup.warm_targets(ctx, watch, steps, echo, verdicts)
    ctx.warming_s += time.monotonic() - began   # not the run's overhead (estimate.py)
    if warmed:   # each command warms its targets: a resume may find them restarted, cold
        entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": ctx.plan.target_warmup_s, "targets": warmed}
        if len(ctx.targets) > 1:   # no target measured while an engine just warmed beside it still compiles
            entry["esb_host_quiet"] = warmup.wait_quiet(ctx, echo)
        ctx.record.setdefault("target_warmup", []).append(entry)
    layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)


def _warm_workers(ctx: RunContext, watch: ConsoleWatch, first: plans.Step, echo: Callable[[str], None]) -> None:
    """New warm workers, when no target warm-up loaded them: the first step's load for
    busy.WORKER_JIT_S before the first step, so that no step measures a worker JVM still
    compiling (run.json `workers_warmup`)."""
    began = time.monotonic()
    warmup.warm_workers(ctx, watch, first, busy.WORKER_JIT_S)
    took = time.monotonic() - began
    ctx.warming_s += took
    ctx.record["workers_warmup"] = {"load": first.describe_load(), "target": first.target, "seconds": round(took, 1)}
    echo(f"warmed the workers up: {first.target} {first.describe_load()} for {took:.1f} s")
    layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)


# How long a restarted engine or back end may take to answer its first request right.
FORK_READY_S = 180


def _start_fork(ctx: RunContext, first: plans.Step, echo: Callable[[str], None]) -> None:
    """A new fork: every engine under test started afresh, and for `direct` its back ends, each
    ready once it answers the fork's first scenario right (run.json `fork_starts`). A resumed run
    starts the fork it resumes afresh too: a fork's steps are never measured across processes
    without its record saying so (`resumed`)."""
    began = time.monotonic()
    names = sorted({t.esb for t in ctx.targets.values() if t.kind == "esb"})
    if any(t.kind == "direct" for t in ctx.targets.values()):
        names += list(roles.BACKENDS)
    restarted = {}
    for name in names:
        echo(f"fork {first.fork}: starting {name} afresh")
        try:
            restarted[name] = ctx.restart_esb(name)
        except EsbperfError as e:
            raise EsbperfError(f"fork {first.fork}: {name} did not start afresh: {e}; `esbperf run --resume "
                               f"{ctx.dir}` tries again once that is fixed") from None
    for target in ctx.targets:
        while True:
            problem = verify_problem(ctx, target, first.scenario)
            if problem is None:
                break
            if time.monotonic() - began > FORK_READY_S:
                raise EsbperfError(f"fork {first.fork}: target {target} does not answer after its restart: {problem}; "
                                   f"`esbperf run --resume {ctx.dir}` tries again once that is fixed")
            time.sleep(0.5)
    done = [s for s in ctx.plan.steps(list(ctx.targets)) if s.fork == first.fork and layout.is_finished(ctx.dir, s)]
    estimate.remember(fork_start_s=time.monotonic() - began)
    ctx.record.setdefault("fork_starts", []).append(
        {"fork": first.fork, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pids": restarted,
         "ready_s": round(time.monotonic() - began, 1), **({"resumed": len(done)} if done else {})})
    ctx.record["target_warm"] = {}   # fresh processes: none is warm
    layout.write_json(ctx.dir / layout.RUN_FILE, ctx.record)


def verify_problem(ctx: RunContext, target: str, scenario: str) -> str | None:
    """Whether a target answers a request of `scenario` right (None), or what is wrong."""
    if ctx.plan.script:
        return None if procs.port_open(*ctx.targets[target].address) or ctx.targets[target].kind == "direct" \
            else "not answering"
    try:
        outcomes = verify_target(ctx.testbed, target, [scenario], size=1024, timeout=5)
    except (OSError, EsbperfError) as e:
        return str(e)
    failed = [o for o in outcomes if not o.ok]
    return f"{failed[0].url}: {failed[0].detail}" if failed else None


def _check_restart(plan: plans.Plan, targets: dict[str, topology.Target],
                   restart_esb: Callable[[str], int] | None) -> None:
    if plan.forks > 1 and restart_esb is None:
        raise EsbperfError(f"plan {plan.name} runs {plan.forks} forks, each starting the engines under test (and the "
                           "back ends, for direct) afresh, which needs them started by esbperf's launcher (`esbperf "
                           "demo`, `esbperf round`, or `esbperf testbed start`); none started them")
    if plan.restart == "per-step" and restart_esb is None and any(t.kind == "esb" for t in targets.values()):
        raise EsbperfError(f"plan {plan.name} restarts the ESB before each step (restart: per-step), which needs the "
                           "ESB started by esbperf's launcher (`esbperf demo`, or `esbperf testbed start`); none started it")


def _runner_cores(testbed: topology.Testbed) -> tuple[int, ...] | None:
    """The runner runs on the client host: on its cores when the testbed pins it on this machine."""
    return None if testbed.client.ssh else testbed.client.cpus


def _check_schedule(plan: plans.Plan, schedule: Schedule | None) -> None:
    if plan.capacity and schedule is None:
        raise EsbperfError(f"plan {plan.name} is a capacity search, whose rates are chosen as it goes: run it with "
                           "`esbperf run` or `esbperf capacity`")


def _token_file(testbed: topology.Testbed, given: Path | None, recorded: Path | None = None) -> Path | None:
    """The console's token file: given, else $ESBPERF_CONSOLE_TOKEN decides, else the one of the
    console that answers at the testbed's API address, among the token files this machine holds:
    the one a resumed run recorded, the one the launcher (`esbperf testbed start`) left, and the one
    of a console started by hand (`esbperf console`; None stands for it). A console that stopped
    leaves its file behind, so a file whose token the console refuses is passed over; when none is
    taken (or the console does not answer), the newest file, whose console most likely runs."""
    if given is not None or os.environ.get(TOKEN_ENV):
        return given
    by_hand = default_token_file()
    found = {p.resolve(): p for p in (recorded, hosts.console_token(testbed), by_hand) if p is not None and p.is_file()}
    if not found:
        return None
    chosen = max(found.values(), key=lambda p: p.stat().st_mtime)
    if len(found) > 1:
        for path in found.values():
            try:
                ControlClient(testbed.api_url, read_token(path), timeout=2).version()
            except ConsoleUnreachable:
                break
            except EsbperfError:
                continue   # refused: a token of a console that is gone
            chosen = path
            break
    return None if chosen.resolve() == by_hand.resolve() else chosen


@dataclass
class _Session:
    """What a new run and a resumed one both do before their first step: check the console, the
    targets, the agents and the clocks, holding the console's lock from the start."""

    plan: plans.Plan
    testbed: topology.Testbed
    targets: dict[str, topology.Target]
    local: collect.LocalAgents
    token_file: Path | None
    verify: bool
    max_skew_ms: float
    restart_esb: Callable[[str], int] | None
    console: Console
    began: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        _check_restart(self.plan, self.targets, self.restart_esb)
        self.client = self.connect()

    def connect(self) -> ControlClient:
        """A client of the console (re-reading the token: a restarted console has a new one)."""
        return control_client(self.testbed, self.token_file)

    def console_held(self):
        return locks.console_held(self.testbed.api_url, self.token_file)

    def preflight(self) -> tuple[list[Agent], list[str], dict]:
        """The run's agents, the monitored roles and every host's clock skew; raises what refuses the run."""
        agents = preflight.check(self.client, self.targets, self.plan, self.testbed, self.local, self.verify,
                                 self.console.print)
        self.plan.check_agents(len(agents), AgentConfig.load().max_worker_processes, f"the {len(agents)} agent(s)")
        monitored = preflight.monitored_roles(self.testbed)
        return agents, monitored, preflight.clock_skews(self.testbed, monitored, self.max_skew_ms,
                                                        [a.host for a in agents], self.console.print)

    def context(self, run_dir: Path, agents: list[Agent], record: dict, monitored: list[str],
                warm: frozenset[str] = frozenset(), also_warm: list[plans.Step] | None = None,
                carry: pool.Carry | None = None) -> RunContext:
        # Agents on this machine, then those on hosts reached over ssh (`esbperf testbed start` put them there).
        fetchers = [self.local, *ssh.agent_fetchers(self.testbed)]
        return RunContext(run_dir, self.plan, self.testbed, self.targets, agents, fetchers, self.connect, record,
                          self.verify, monitored, self.began, self.local.state_dirs, self.restart_esb,
                          record.get("cross_check"), warm, also_warm=list(also_warm or []), carry=carry)


def start(plan: plans.Plan, target_names: str | list[str], testbed: topology.Testbed, out: Path,
          verify: bool = True, console: Console | None = None,
          local_state_dirs: Iterable[Path] = (), max_skew_ms: float = MAX_SKEW_MS,
          token_file: Path | None = None, script: user_script.UserScript | None = None,
          script_properties: Path | None = None, restart_esb: Callable[[str], int] | None = None,
          cross_check: str | None = None, after: Path | None = None,
          schedule: Schedule | None = None, engine_settings: dict[str, dict] | None = None,
          also_warm: list[plans.Step] | None = None, carry: pool.Carry | None = None) -> Path:
    """Run `plan` against the target(s) into a new run folder under `out`; return that folder.

    script: a user's own Grinder script (user_script.load) runs the steps instead of scenario.py;
    the plan is then one loaded for it (plans.load(..., script=NAME)), and the scenario contract is
    not verified (the script has its own checks). restart_esb: the launcher's restart of an ESB by
    name, returning its new pid (a plan with `restart: per-step` needs it).

    local_state_dirs: state folders of this machine's agents besides the default one (a launcher
    that gave the client's services a state folder of their own). token_file: the console's token
    (default: $ESBPERF_CONSOLE_TOKEN, or the token file of this state folder's console).
    cross_check: "wrk" to measure each closed-model step with wrk too (esbperf/run/crosscheck.py).
    after: a run this same session finished just before, with the same client, testbed and services
    (`esbperf demo` runs three): its client calibration is this run's too when it covers this plan's
    payloads, and the targets it measured are warm (run.json says so: `calibration_from`, `warm_from`).
    engine_settings: the launcher's, by engine it started: the settings it was given (run.json `engines`).
    also_warm: steps of runs the session will make next against the same targets (`esbperf demo`'s
    later plans): each target is warmed under their loads as well as this plan's (warmup.loads_of).
    carry: the session's warm pool between its runs (pool.Carry): this run takes the pool the run
    before left, when it loads the same model, and leaves its own; the caller closes what is left."""
    crosscheck.require(cross_check)
    _check_schedule(plan, schedule)
    names = [target_names] if isinstance(target_names, str) else list(target_names)
    if not names:
        raise EsbperfError("give at least one --target")
    if bool(script) != bool(plan.script):
        raise EsbperfError("a user's script needs a plan loaded for it, and such a plan needs its script")
    if plan.arrivals == "poisson" and plan.seed is None:   # drawn once, recorded with the plan: --resume reuses it
        plan.seed = secrets.randbelow(2**31)
    session = _Session(plan, testbed, preflight.targets_of(testbed, names, plan),
                       collect.LocalAgents([state_dir(), *local_state_dirs, *hosts.local_agent_states(testbed)]),
                       _token_file(testbed, token_file), verify and not script, max_skew_ms,
                       restart_esb or hosts.esb_restarter(testbed, plan.restart == "per-step" or plan.forks > 1),
                       console or Console())
    with session.console_held() as console_lock, procs.on_cores(_runner_cores(testbed)):
        agents, monitored, skews = session.preflight()
        run_dir = layout.new_run_dir(out.resolve(), f"{plan.name}-{'+'.join(names)}-{time.strftime('%Y%m%d-%H%M%S')}")
        console_lock.note(f"run folder {run_dir}")
        with locks.run_dir_held(run_dir):
            record = _record(plan, session.targets, testbed, agents, session.client.version(), engine_settings)
            record["monitored_roles"] = monitored
            record["samplers"] = preflight.monitor_samplers(testbed, monitored)
            record["clock_skew"] = {"max_ms": max_skew_ms, "hosts": skews}
            record["local_state_dirs"] = [str(d) for d in session.local.state_dirs]
            if cross_check:
                record["cross_check"] = cross_check
                record["machine_wander"] = _machine_wander(plan, testbed, session.console)
            warm = _carry_over(after, plan, record) if after else frozenset()
            if session.token_file:
                record["console_token_file"] = str(session.token_file)   # where, for --resume; never the token
            if script:
                kept = user_script.keep(script, run_dir, script_properties)
                record["script"] = kept.record()
                _stage_script(record, kept, run_dir)
            layout.write_json(run_dir / layout.RUN_FILE, record)
            steps = "steps chosen as it goes" if schedule else f"{len(plan.steps(names))} steps"
            session.console.print(
                f"run {run_dir} — {steps} of {plan.warmup_label()} warm-up and {plan.duration_s:g} s measured against "
                f"{', '.join(names)}; agents: {', '.join(f'{a.name} ({a.host})' for a in agents)}; "
                f"monitors: {', '.join(monitored) or 'none'}")
            _execute_interruptibly(session.context(run_dir, agents, record, monitored, warm, also_warm, carry),
                                   session.client,
                                   session.console, schedule)
    return run_dir


def _machine_wander(plan: plans.Plan, testbed: topology.Testbed, console: Console) -> dict:
    """How far the esb host's cores' own speed moves between a bracket's two windows (esbperf/run/wander.py),
    measured before the first step while the engines idle; wrk's bracket allows for it (the analysis's
    `target-drift`). Not measured on an esb host reached over ssh."""
    esb_host = testbed.hosts["esb"]
    if esb_host.ssh:
        return {"skipped": "the esb host is reached over ssh"}
    gap_s = 2 * plan.duration_s + plan.warmup_s   # before's start to after's: its window, the step's warm-up (at least) and window
    console.print(f"measuring the machine's own wander on the esb host's cores "
                  f"({wander.probe_seconds(plan.duration_s):g} s; wrk's brackets allow for it)")
    found = wander.measure(esb_host.cpus, plan.duration_s, gap_s)
    if found.get("wander") is not None:
        console.print(f"the machine's speed moves {found['wander']:.1%} (SD of a {plan.duration_s:g}-s window) "
                      f"between windows {gap_s:g} s apart")
    return found


def _carry_over(before: Path, plan: plans.Plan, record: dict) -> frozenset[str]:
    """What a run takes from the run of its session just before (start's `after`): the client's
    calibration, when its payloads span this plan's (the analysis interpolates between them), and
    the targets that run measured, which need no warm-up; both recorded in `record`."""
    previous = layout.read_json(before / layout.RUN_FILE)
    calibration = previous.get("calibration")
    if isinstance(calibration, dict) and calibration and not plan.script:
        measured = [plans.parse_size(label) for label in calibration]
        if min(measured) <= min(plan.sizes()) and max(plan.sizes()) <= max(measured):
            record["calibration"] = calibration
            record["calibration_from"] = before.name
    warm = frozenset(t["name"] for t in previous.get("targets", [])) & {t["name"] for t in record["targets"]}
    if warm:
        record["warm_from"] = {"run": before.name, "targets": sorted(warm)}
        # How warm that run found them: its targets' verdicts hold for this run's steps too.
        record["target_warm"] = {t: v for t, v in (previous.get("target_warm") or {}).items() if t in warm}
    return warm


def resume(run_dir: Path, verify: bool = True, console: Console | None = None,
           max_skew_ms: float = MAX_SKEW_MS, token_file: Path | None = None,
           restart_esb: Callable[[str], int] | None = None, schedule: Schedule | None = None) -> Path:
    """Continue a run with its unfinished steps, using the plan and targets it recorded (and with
    `schedule`, the steps it chooses: Schedule)."""
    run_dir = run_dir.resolve()
    record = layout.read_json(run_dir / layout.RUN_FILE)
    if record.get("layout") != LAYOUT:
        raise EsbperfError(f"{run_dir} was made by an earlier esbperf (its step folders have no target level); "
                           "finish it with that version, or start a new run")
    plan = plans.Plan.from_dict(record["plan"], f"{run_dir / layout.RUN_FILE} (plan)")
    if record.get("script"):
        _stage_script(record, user_script.from_record(run_dir, record["script"]), run_dir)
        verify = False
    testbed = topology.load(record["testbed"]["file"])
    recorded = Path(record["console_token_file"]) if record.get("console_token_file") else None
    crosscheck.require(record.get("cross_check"))
    _check_schedule(plan, schedule)
    session = _Session(plan, testbed, preflight.targets_of(testbed, [t["name"] for t in record["targets"]], plan),
                       collect.LocalAgents([state_dir(), *map(Path, record.get("local_state_dirs", [])),
                                            *hosts.local_agent_states(testbed)]),
                       _token_file(testbed, token_file, recorded), verify, max_skew_ms,
                       restart_esb or hosts.esb_restarter(testbed, plan.restart == "per-step" or plan.forks > 1),
                       console or Console())
    with session.console_held() as console_lock, locks.run_dir_held(run_dir), procs.on_cores(_runner_cores(testbed)):
        console_lock.note(f"run folder {run_dir}")
        agents, monitored, skews = session.preflight()
        steps = plan.steps(list(session.targets))
        done = sum(layout.is_finished(run_dir, s) for s in steps)
        if done == len(steps) and not schedule:
            session.console.print(f"{run_dir}: all {done} steps are already finished")
            return run_dir
        # What this resume found, recorded before its first step (a resume that stops early keeps it too).
        record.setdefault("clock_skew_resumed", []).append({"max_ms": max_skew_ms, "hosts": skews})
        record["agents"] = [{"name": a.name, "host": a.host} for a in agents]
        record["restart"] = plan.restart
        record["finished"] = None
        layout.write_json(run_dir / layout.RUN_FILE, record)
        session.console.print(f"resuming {run_dir}: " + ("its steps chosen as it goes" if schedule else
                                                          f"{done} of {len(steps)} steps already finished"))
        _execute_interruptibly(session.context(run_dir, agents, record, monitored), session.client, session.console,
                               schedule)
    return run_dir


def _stage_script(record: dict, script: user_script.UserScript, run_dir: Path) -> None:
    """Put the run's script where the console distributes from (again on --resume: the staging
    folder is not kept); run.json names it for the workers (esbperf.user.script)."""
    record["script"]["staged"] = user_script.stage(script, ConsoleConfig.load().distribution_directory, run_dir.name)


def _execute_interruptibly(ctx: RunContext, client: ControlClient, console: Console,
                           schedule: Schedule | None = None) -> None:
    procs.raise_on_sigterm()
    distribution = ConsoleConfig.load().distribution_directory
    try:
        try:
            # Staged for this command only (before the console distributes); --resume stages again.
            payloads.stage(ctx.plan.payload_files(), distribution, ctx.dir.name)
            aside = execute(ctx, client, console, schedule)
        finally:
            payloads.unstage(distribution, ctx.dir.name)
            if ctx.record.get("script"):
                shutil.rmtree(distribution / Path(ctx.record["script"]["staged"]).parent, ignore_errors=True)
    except KeyboardInterrupt:
        try:
            ctx.connect().stop_workers()
        except EsbperfError:
            pass
        console.print(f"[yellow]interrupted[/yellow]: finished steps are kept in {ctx.dir}; "
                      f"continue with `esbperf run --resume {ctx.dir}`")
        raise
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise EsbperfError(f"the results disk is full ({e.filename or ctx.dir}): every step finished before is "
                               f"intact in {ctx.dir}; free some space and `esbperf run --resume {ctx.dir}`") from None
        raise
    if aside:
        console.print(f"[yellow]{len(aside)} step(s) kept aside[/yellow] (their folders and reasons stay in "
                      f"{ctx.dir}); `esbperf run --resume {ctx.dir}` repeats them")


def dry_run(plan: plans.Plan, target_names: list[str], testbed: topology.Testbed, console: Console,
            cross_check: str | None = None) -> estimate.Estimate:
    """Print every step of the run and its estimated wall time (with `cross_check`, the independent
    client's seconds too); start nothing, contact nothing."""
    targets = preflight.targets_of(testbed, target_names, plan)
    steps = plan.steps(list(targets))
    agents = testbed.load_roles
    plan.check_agents(len(agents), AgentConfig.load().max_worker_processes,
                      f"the {len(agents)} load host(s) of {testbed.path} (an agent each)")
    guess = estimate.estimate(plan, steps, cross_check, warmup.loads(plan, targets))
    checked = sum(estimate.cross_check_seconds(plan, step, cross_check) > 0 for step in steps)
    table = Table(title=f"{plan.name} against {', '.join(targets)}: {len(steps)} steps "
                        f"({plan.model} model, {len(agents)} load host(s): {', '.join(agents)})")
    forked = plan.forks > 1
    for column in ("#", "target", "scenario", "payload", "users" if plan.model == "closed" else "rate/s (threads)",
                   *(["fork"] if forked else []), "iteration", "processes × threads per agent", "estimated"):
        table.add_column(column)
    for n, (step, seconds) in enumerate(guess.steps, 1):
        processes, threads = plan.processes_threads(step.users, len(agents))
        load = str(step.users) if step.rate is None else f"{plans.rate_label(step.rate)} ({step.users})"
        table.add_row(str(n), step.target, step.scenario, step.payload_label, load,
                      *([str(step.fork)] if forked else []), str(step.iteration),
                      f"{processes} × {threads}", estimate.duration(seconds))
    console.print(table)
    forks = (f"; {plan.forks} forks, each starting the engines under test afresh and warming them until settled"
             if forked else "")
    basis = (f"medians of the last {guess.measured_steps} steps measured on this machine"
             if guess.measured_steps else "defaults: no step measured on this machine yet")
    console.print(f"estimated wall time: {estimate.duration(guess.total_s)} ({estimate.duration(guess.run_overhead_s)} "
                  f"for the run's preflight, then per step the warm-up {plan.warmup_label()} or longer while workers "
                  f"start, the measurement {plan.duration_s:g} s, and the step's tail"
                  + (f"; {cross_check} measures {checked} of the steps for {plan.duration_s:g} s before and after each"
                     if checked else "") + forks
                  + f"; {basis}). "
                  "Plan and testbed are valid; nothing was started")
    return guess
