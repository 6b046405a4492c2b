"""`esbperf run`: a whole plan through the real console and agents, one results folder per step.

The runner talks to the console only through its control API. A run measures one target or
several: with several (`--target camel --target direct`), each step runs against every target back
to back, the order rotated per iteration, so drift over the run hits them alike. Each step is one
StepRunner (esbperf/step.py): the workers of every agent, warm-up, measurement, logs brought home
from every agent (esbperf/collect.py), checks, monitors, step folder.

What stops a run, and what only spoils a step, is decided by the cause (step.StepAside); every
interrupted run — Ctrl-C, a full disk, a console gone for good — keeps its finished steps, and
`esbperf run --resume DIR` continues it."""
from __future__ import annotations

import errno
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from esbperf import (collect, environment, estimate, payloads, plan as plans, procs, results, scenarios, topology,
                     user_script)
from esbperf.config import AgentConfig, ConsoleConfig, state_dir
from esbperf.console import TOKEN_ENV, ControlClient, control_client, statistics
from esbperf.errors import EsbperfError
from esbperf.step import Agent, RunContext, StepAside, StepRunner
from esbperf.testbed import hosts, ssh
from esbperf.verify import verify_target

PREFLIGHT_TIMEOUT_S = 5
AGENT_WAIT_S = 10
MAX_SKEW_MS = 100.0   # a host's clock further off than this refuses the run (monitor windows would shift)
LAYOUT = 2   # step folders <target>/<scenario>/<payload>/<users>/[rate-<r>/]iter-<n>


def _targets(testbed: topology.Testbed, names: Iterable[str]) -> dict[str, topology.Target]:
    names = list(names)
    if len(set(names)) != len(names):
        raise EsbperfError(f"a target is named twice: {', '.join(names)}")
    return {name: testbed.target(name) for name in names}


def agent_hosts(testbed: topology.Testbed, agents: list[dict], local: collect.LocalAgents) -> list[Agent]:
    """Which host each connected agent runs on: the load host it is named after (`load2`,
    `load2-1`), or this machine when its working folder is here. An agent that is neither is a
    stray (say, a daemon agent of an earlier session) and is refused: its logs could not be brought
    home, and it would take a share of every step's users."""
    names = [a["name"] for a in agents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise EsbperfError(f"two agents named {twice[0]} are connected to the console; their logs would collide. "
                           "Stop one (each agent needs a name of its own: --host-id)")
    found = []
    for name in names:
        role = next((r for r in testbed.load_roles if name == r or name.startswith(f"{r}-")), None)
        if role is None and any(f.is_dir() for f in local.folders(name)):
            role = "client"
        if role is None:
            raise EsbperfError(f"agent {name} is connected to the console but runs on no host of {testbed.path} "
                               f"(not on this machine, and no load host is named {name}); stop it, or add its host "
                               "to the testbed and name the agent after it")
        found.append(Agent(name, role))
    return found


def preflight(client: ControlClient, targets: dict[str, topology.Target], plan: plans.Plan,
              testbed: topology.Testbed, local: collect.LocalAgents, verify: bool,
              echo: Callable[[str], None]) -> list[Agent]:
    """Check the console, every target and the agents; return the run's agents."""
    client.timeout = PREFLIGHT_TIMEOUT_S
    client.version()   # raises with the address it tried
    for target in targets.values():
        for url in [target.url] if target.kind == "esb" else list(dict.fromkeys(target.backends.values())):
            host, port = topology.host_port(url)
            if not procs.port_open(host, port, PREFLIGHT_TIMEOUT_S):
                raise EsbperfError(f"target {target.name} does not answer at {url} (tried for {PREFLIGHT_TIMEOUT_S} s)")
    try:
        connected = client.wait_for_agents(1, AGENT_WAIT_S)
    except EsbperfError:
        raise EsbperfError(f"no agent is connected to the console at {testbed.client.address}:{testbed.console_port}; "
                           "start one with `esbperf agent`") from None
    agents = agent_hosts(testbed, connected, local)
    if verify:
        for target in targets.values():
            outcomes = verify_target(testbed, target.name, plan.scenarios, size=1024, timeout=plan.timeout_s,
                                     files=plan.payload_files(), check=plan.payload_check)
            failed = [o for o in outcomes if not o.ok]
            if failed:
                first = failed[0]
                raise EsbperfError(f"target {target.name} fails verification: {len(failed)} of {len(outcomes)} checks, "
                                   f"first: {first.scenario} {first.url}: {first.detail} "
                                   f"(see `esbperf verify --target {target.name}`)")
            echo(f"verified {target.name}: {len(outcomes)} checks passed")
    return agents


def monitored_roles(testbed: topology.Testbed) -> list[str]:
    """Roles whose monitor answers now; only those are collected for each step."""
    return [role for role, host in testbed.hosts.items()
            if host.monitor_port and procs.port_open(host.address, host.monitor_port, 0.5)]


def monitor_samplers(testbed: topology.Testbed, roles: list[str]) -> dict[str, str | None]:
    """Which sampler each monitor runs (sigar, or OSHI where sigar's library cannot load), for run.json."""
    from esbperf.monitor import status

    return {role: (status(testbed.hosts[role].address, testbed.hosts[role].monitor_port, PREFLIGHT_TIMEOUT_S)
                   or {}).get("sampler") for role in roles}


def clock_skews(testbed: topology.Testbed, roles: list[str], max_skew_ms: float) -> dict[str, dict | None]:
    """Each monitored host's clock against this machine's (its monitor stamps every answer), for
    run.json; a clock off by more than max_skew_ms refuses the run: each step's monitor window is
    cut by the runner's clock."""
    from esbperf.testbed.preflight import clock_skew

    skews: dict[str, dict | None] = {}
    for role in roles:
        host = testbed.hosts[role]
        measured = clock_skew(host.address, host.monitor_port, PREFLIGHT_TIMEOUT_S)
        skews[role] = None if measured is None else {"skew_ms": round(measured[0], 1), "error_ms": round(measured[1], 1)}
        if measured and abs(measured[0]) - measured[1] > max_skew_ms:
            raise EsbperfError(f"{role}'s clock is {measured[0]:+.0f} ms off this machine's (limit ±{max_skew_ms:g} ms, "
                               "--max-skew-ms); synchronise the clocks (NTP/chrony) before measuring")
    return skews


def _record(plan: plans.Plan, targets: dict[str, topology.Target], testbed: topology.Testbed, agents: list[Agent],
            grinder_version: str) -> dict:
    record = {
        "layout": LAYOUT,
        "plan": plan.to_dict(),
        "targets": [{"name": t.name, "kind": t.kind, "esb": t.esb, "url": t.url, "backends": t.backends}
                    for t in targets.values()],
        "testbed": {"name": testbed.name, "file": str(testbed.path), "emulated": testbed.emulated},
        "hosts": {role: {"address": h.address, "link_mbit": h.link_mbit, "cpus": list(h.cpus or []),
                         "interface": h.interface}   # the bottleneck rule's interface (esbperf/bottleneck.py)
                  for role, h in testbed.hosts.items()},
        "agents": [{"name": a.name, "host": a.host} for a in agents],
        "environment": environment.describe(),
        "versions": {"grinder": grinder_version},
        "jvm_args": {"console": ConsoleConfig.load().jvm_args, "agent": AgentConfig.load().agent_jvm_args,
                     "worker": AgentConfig.load().worker_jvm_args},
        "console_sample_interval_ms": ConsoleConfig.load().sample_interval_ms,
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


def execute(ctx: RunContext, client: ControlClient, console: Console) -> list[str]:
    """Run every unfinished step; returns the reasons of the steps kept aside (the run went on)."""
    steps = ctx.plan.steps(list(ctx.targets))
    todo = [s for s in steps if not results.is_finished(ctx.dir, s)]
    _prepare(client)
    calibrating = time.monotonic()
    if "calibration" not in ctx.record and not ctx.plan.script:   # the client calibrated is scenario.py
        ctx.record["calibration"] = calibrate(ctx, client, console)
        results.write_json(ctx.dir / results.RUN_FILE, ctx.record)
    calibration_wall = time.monotonic() - calibrating
    aside: list[str] = []
    steps_wall = 0.0
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console) as progress:
        task = progress.add_task("steps", total=len(steps), completed=len(steps) - len(todo), live="")
        for step in todo:
            label = step.describe()

            def tick(phase: str, left_s: float, latest: dict) -> None:
                live = phase
                if latest:
                    live = f"{phase} {left_s:4.0f}s  TPS {latest.get('TPS') or 0:8.1f}  errors {latest.get('Errors', 0)}"
                progress.update(task, description=f"step {progress.tasks[0].completed + 1}/{len(steps)} {label}",
                                live=live)

            runner = StepRunner(ctx, client, tick)
            try:
                folder = runner.execute(step)
            except StepAside as e:
                client = runner.client   # a console that came back has a new client
                if e.stop_run:
                    raise EsbperfError(f"step {label}: {e}; `esbperf run --resume {ctx.dir}` continues the run "
                                       "once that is fixed") from None
                progress.console.print(f"[red]kept aside[/red] {label}: {e}")
                aside.append(f"{label}: {e}")
                _prepare(client)
                progress.advance(task)
                continue
            record = results.read_json(folder / results.STEP_FILE)
            steps_wall += record["wall_s"]
            estimate.remember_step(record)
            totals = statistics(record["console"])
            # The console's own TPS divides by its sample periods; the window is what was measured.
            window_s = (record["end_ms"] - record["warmup_end_ms"]) / 1000
            progress.console.print(f"[green]done[/green] {label}: {totals.get('Tests', 0)} transactions, "
                                   f"{totals.get('Errors', 0)} errors, TPS {totals.get('Tests', 0) / window_s:.1f}, "
                                   f"mean {totals.get('Mean Test Time (ms)') or 0:.1f} ms")
            progress.advance(task)
    if not aside:
        ctx.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        results.write_json(ctx.dir / results.RUN_FILE, ctx.record)
        if steps_wall:
            estimate.remember(run_overhead_s=time.monotonic() - ctx.began - steps_wall - calibration_wall)
    return aside


def calibrate(ctx: RunContext, client: ControlClient, console: Console) -> dict:
    """Calibrate the client before the first step, at the plan's smallest and largest payload: what
    it adds to every transaction inside and outside the clock (run.json `calibration`, by payload)."""
    sizes = sorted({min(ctx.plan.sizes()), max(ctx.plan.sizes())})   # estimate.calibrated_sizes
    found = {}
    for size in sizes:
        began = time.monotonic()
        summary = StepRunner(ctx, client, lambda *a: None).calibrate(size)
        estimate.remember(calibration_s=time.monotonic() - began)
        found[plans.size_label(size)] = summary
        console.print(f"client calibration at {plans.size_label(size)}: timed floor {summary['floor_mean_us']:.0f} µs "
                      f"(p99 {summary['floor_p99_us']:.0f}), {summary['outside_clock_us']:.1f} µs per transaction "
                      f"outside the clock")
    return found


def _check_restart(plan: plans.Plan, targets: dict[str, topology.Target],
                   restart_esb: Callable[[str], int] | None) -> None:
    if plan.restart == "per-step" and restart_esb is None and any(t.kind == "esb" for t in targets.values()):
        raise EsbperfError(f"plan {plan.name} restarts the ESB before each step (restart: per-step), which needs the "
                           "ESB started by esbperf's launcher (`esbperf demo`, or `esbperf testbed start`); none started it")


def _context(run_dir: Path, plan: plans.Plan, testbed: topology.Testbed, targets: dict[str, topology.Target],
             agents: list[Agent], local: collect.LocalAgents, connect: Callable[[], ControlClient],
             record: dict, verify: bool, roles: list[str], began: float,
             restart_esb: Callable[[str], int] | None) -> RunContext:
    record["restart"] = plan.restart
    # Agents on this machine, then those on hosts reached over ssh (`esbperf testbed start` put them there).
    fetchers = [local, *ssh.agent_fetchers(testbed)]
    return RunContext(run_dir, plan, testbed, targets, agents, fetchers, connect, record, verify, roles, began,
                      local.state_dirs, restart_esb)


def start(plan: plans.Plan, target_names: str | list[str], testbed: topology.Testbed, out: Path,
          verify: bool = True, console: Console | None = None,
          local_state_dirs: Iterable[Path] = (), max_skew_ms: float = MAX_SKEW_MS,
          token_file: Path | None = None, script: user_script.UserScript | None = None,
          script_properties: Path | None = None, restart_esb: Callable[[str], int] | None = None) -> Path:
    """Run `plan` against the target(s) into a new run folder under `out`; return that folder.

    script: a user's own Grinder script (user_script.load) runs the steps instead of scenario.py;
    the plan is then one loaded for it (plans.load(..., script=NAME)), and the scenario contract is
    not verified (the script has its own checks). restart_esb: the launcher's restart of an ESB by
    name, returning its new pid (a plan with `restart: per-step` needs it).

    local_state_dirs: state folders of this machine's agents besides the default one (a launcher
    that gave the client's services a state folder of their own). token_file: the console's token
    (default: $ESBPERF_CONSOLE_TOKEN, or the token file of this state folder's console)."""
    began = time.monotonic()
    console = console or Console()
    names = [target_names] if isinstance(target_names, str) else list(target_names)
    if not names:
        raise EsbperfError("give at least one --target")
    targets = _targets(testbed, names)
    if bool(script) != bool(plan.script):
        raise EsbperfError("a user's script needs a plan loaded for it, and such a plan needs its script")
    verify = verify and not script
    local = collect.LocalAgents([state_dir(), *local_state_dirs, *hosts.local_agent_states(testbed)])
    if token_file is None and not os.environ.get(TOKEN_ENV):
        token_file = hosts.console_token(testbed)   # the console `esbperf testbed start` started, if it did
    restart_esb = restart_esb or hosts.esb_restarter(testbed, plan.restart)
    _check_restart(plan, targets, restart_esb)
    connect = lambda: control_client(testbed, token_file)   # noqa: E731 - re-read: a restarted console has a new token
    client = connect()
    agents = preflight(client, targets, plan, testbed, local, verify, console.print)
    roles = monitored_roles(testbed)
    skews = clock_skews(testbed, roles, max_skew_ms)
    run_dir = results.new_run_dir(out.resolve(), f"{plan.name}-{'+'.join(names)}-{time.strftime('%Y%m%d-%H%M%S')}")
    record = _record(plan, targets, testbed, agents, client.version())
    record["monitored_roles"] = roles
    record["samplers"] = monitor_samplers(testbed, roles)
    record["clock_skew"] = {"max_ms": max_skew_ms, "hosts": skews}
    record["local_state_dirs"] = [str(d) for d in local.state_dirs]
    if token_file:
        record["console_token_file"] = str(token_file)   # where, for --resume; never the token
    if script:
        kept = user_script.keep(script, run_dir, script_properties)
        record["script"] = kept.record()
        _stage_script(record, kept, run_dir)
    results.write_json(run_dir / results.RUN_FILE, record)
    ctx = _context(run_dir, plan, testbed, targets, agents, local, connect, record, verify, roles, began, restart_esb)
    console.print(f"run {run_dir} — {len(plan.steps(names))} steps of {plan.step_seconds():g} s against "
                  f"{', '.join(names)}; agents: {', '.join(f'{a.name} ({a.host})' for a in agents)}; "
                  f"monitors: {', '.join(roles) or 'none'}")
    _execute_interruptibly(ctx, client, console)
    return run_dir


def resume(run_dir: Path, verify: bool = True, console: Console | None = None,
           max_skew_ms: float = MAX_SKEW_MS, token_file: Path | None = None,
           restart_esb: Callable[[str], int] | None = None) -> Path:
    """Continue a run with its unfinished steps, using the plan and targets it recorded."""
    began = time.monotonic()
    console = console or Console()
    run_dir = run_dir.resolve()
    record = results.read_json(run_dir / results.RUN_FILE)
    if record.get("layout") != LAYOUT:
        raise EsbperfError(f"{run_dir} was made by an earlier esbperf (its step folders have no target level); "
                           "finish it with that version, or start a new run")
    plan = plans.Plan.from_dict(record["plan"], f"{run_dir / results.RUN_FILE} (plan)")
    if record.get("script"):
        _stage_script(record, user_script.from_record(run_dir, record["script"]), run_dir)
        verify = False
    testbed = topology.load(record["testbed"]["file"])
    targets = _targets(testbed, [t["name"] for t in record["targets"]])
    restart_esb = restart_esb or hosts.esb_restarter(testbed, plan.restart)
    _check_restart(plan, targets, restart_esb)
    local = collect.LocalAgents([state_dir(), *map(Path, record.get("local_state_dirs", [])),
                                 *hosts.local_agent_states(testbed)])
    if token_file is None and record.get("console_token_file"):
        token_file = Path(record["console_token_file"])
    if token_file is None and not os.environ.get(TOKEN_ENV):
        token_file = hosts.console_token(testbed)
    connect = lambda: control_client(testbed, token_file)   # noqa: E731
    client = connect()
    agents = preflight(client, targets, plan, testbed, local, verify, console.print)
    roles = monitored_roles(testbed)
    record.setdefault("clock_skew_resumed", []).append({"max_ms": max_skew_ms,
                                                        "hosts": clock_skews(testbed, roles, max_skew_ms)})
    steps = plan.steps(list(targets))
    done = sum(results.is_finished(run_dir, s) for s in steps)
    if done == len(steps):
        console.print(f"{run_dir}: all {done} steps are already finished")
        return run_dir
    record["agents"] = [{"name": a.name, "host": a.host} for a in agents]
    ctx = _context(run_dir, plan, testbed, targets, agents, local, connect, record, verify, roles, began, restart_esb)
    console.print(f"resuming {run_dir}: {done} of {len(steps)} steps already finished")
    _execute_interruptibly(ctx, client, console)
    return run_dir


def _stage_script(record: dict, script: user_script.UserScript, run_dir: Path) -> None:
    """Put the run's script where the console distributes from (again on --resume: the staging
    folder is not kept); run.json names it for the workers (esbperf.user.script)."""
    record["script"]["staged"] = user_script.stage(script, ConsoleConfig.load().distribution_directory, run_dir.name)


def _execute_interruptibly(ctx: RunContext, client: ControlClient, console: Console) -> None:
    procs.raise_on_sigterm()
    distribution = ConsoleConfig.load().distribution_directory
    try:
        try:
            # Staged for this command only (before the console distributes); --resume stages again.
            payloads.stage(ctx.plan.payload_files(), distribution, ctx.dir.name)
            aside = execute(ctx, client, console)
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


def plan_run(plan: plans.Plan, target_names: list[str], testbed: topology.Testbed, console: Console) -> estimate.Estimate:
    """Print every step of the run and its estimated wall time; start nothing, contact nothing."""
    targets = _targets(testbed, target_names)
    steps = plan.steps(list(targets))
    agents = testbed.load_roles
    guess = estimate.estimate(plan, steps)
    table = Table(title=f"{plan.name} against {', '.join(targets)}: {len(steps)} steps "
                        f"({plan.model} model, {len(agents)} load host(s): {', '.join(agents)})")
    for column in ("#", "target", "scenario", "payload", "users" if plan.model == "closed" else "rate/s (threads)",
                   "iteration", "processes × threads per agent", "estimated"):
        table.add_column(column)
    for n, (step, seconds) in enumerate(guess.steps, 1):
        processes, threads = plan.processes_threads(step.users, len(agents))
        load = str(step.users) if step.rate is None else f"{plans.rate_label(step.rate)} ({step.users})"
        table.add_row(str(n), step.target, step.scenario, step.payload_label, load, str(step.iteration),
                      f"{processes} × {threads}", estimate.duration(seconds))
    console.print(table)
    basis = (f"medians of the last {guess.measured_steps} steps measured on this machine"
             if guess.measured_steps else "defaults: no step measured on this machine yet")
    console.print(f"estimated wall time: {estimate.duration(guess.total_s)} ({estimate.duration(guess.run_overhead_s)} "
                  f"for the run's preflight, then per step the warm-up {plan.warmup_s:g} s or longer while workers "
                  f"start, the measurement {plan.duration_s:g} s, and the step's tail; {basis}). "
                  "Plan and testbed are valid; nothing was started")
    return guess


@click.command()
@click.option("--plan", "plan_name", metavar="NAME|FILE", help="Plan (console-config/plans/<NAME>.yaml or a file).")
@click.option("--target", "target_names", metavar="NAME", multiple=True,
              help="Target from the testbed file (e.g. camel, synapse, direct); repeat it to measure several "
                   "targets step by step in one run (order rotated per iteration).")
@click.option("--scenario", "only", multiple=True, help="Run only these scenarios (repeatable); default: the plan's.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the run folder.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", help="Testbed description (default: local).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue this run folder with its unfinished steps.")
@click.option("--no-verify", is_flag=True,
              help="Skip checking each scenario once before measuring, and again after a step with errors.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write the run's report (RUN/report) when the run ends.")
@click.option("--dry-run", is_flag=True,
              help="Print every step and the estimated wall time, check plan and testbed, start nothing.")
@click.option("--max-skew-ms", default=MAX_SKEW_MS, show_default=True, type=click.FloatRange(min=0),
              help="Refuse the run when a monitored host's clock is further off this machine's.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="The console's control-API token (default: $ESBPERF_CONSOLE_TOKEN, or the token file of "
                   "the console started from this state folder).")
@click.option("--script", "script_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Run this Grinder 3 Jython script (your own) instead of esbperf's scenarios; the plan "
                   "gives users, durations and iterations, no scenarios.")
@click.option("--properties", "properties_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The script's grinder.properties: the settings that shape its load (sleep factors, ramp-up).")
def run(plan_name, target_names, only, out, testbed_name, resume_dir, no_verify, report, dry_run, max_skew_ms,
        token_file, script_file, properties_file) -> None:
    """Run a sweep plan against one or more targets through the console; one results folder per step."""
    if resume_dir:
        if dry_run:
            raise EsbperfError("--dry-run plans a new run; it does not take --resume")
        if plan_name or target_names or only or script_file or properties_file:
            raise EsbperfError("--resume continues a run with its own plan, targets and script; do not give "
                               "--plan/--target/--scenario/--script/--properties")
        folder = resume(resume_dir, verify=not no_verify, max_skew_ms=max_skew_ms, token_file=token_file)
    else:
        if not plan_name or not target_names:
            raise EsbperfError("give --plan and --target (or --resume DIR)")
        if properties_file and not script_file:
            raise EsbperfError("--properties is the properties file of a --script; give the script too")
        script = user_script.load(script_file, properties_file) if script_file else None
        the_plan = plans.load(plan_name, script=script.name if script else "")
        if script and only:
            raise EsbperfError("--scenario chooses esbperf's scenarios; a --script is its own one scenario")
        if script and script.ignored:
            click.echo(f"{properties_file}: ignored (set per step by the runner, or by the testbed): "
                       f"{', '.join(script.ignored)}")
        if only:
            known = scenarios.names()
            for s in only:
                if s not in known:
                    raise EsbperfError(f"unknown scenario '{s}' (known: {', '.join(known)})")
            the_plan.scenarios = list(only)
        if dry_run:
            plan_run(the_plan, list(target_names), topology.load(testbed_name), Console())
            return
        folder = start(the_plan, list(target_names), topology.load(testbed_name), out, verify=not no_verify,
                       max_skew_ms=max_skew_ms, token_file=token_file, script=script, script_properties=properties_file)
    click.echo(f"results: {folder}")
    if report:
        from esbperf.analysis.report import write_report   # matplotlib only once there is data
        try:
            click.echo(f"report: {write_report([folder]) / 'report.html'}")
        except Exception as e:   # noqa: BLE001 - whatever went wrong, the run itself is complete
            # The run's data is complete and safe; only its summary failed.
            click.echo(f"esbperf: the run's data is safe, but its report failed: {e}; retry with "
                       f"`esbperf report {folder}`", err=True)
