"""`esbperf run`: a whole plan through the real console and agents, one results folder per step.

The runner talks to the console only through its control API. For each step it starts the
workers with the step's properties, lets them warm up (the workers' own start-up happens inside
the warm-up), zeroes the console's statistics, measures for the step's duration, stops the
workers, and writes the step folder: step.json, console.json (the console's statistics), the
agents' data and worker logs, and the monitors' samples of the step's window."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from esbperf import environment, plan as plans, procs, results, scenarios, topology
from esbperf.config import AgentConfig, ConsoleConfig
from esbperf.console import ControlClient, statistics
from esbperf.errors import EsbperfError
from esbperf.verify import verify_target

PREFLIGHT_TIMEOUT_S = 5
AGENT_WAIT_S = 10


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Run:
    """A run folder and what it was started with (run.json)."""

    dir: Path
    plan: plans.Plan
    target: topology.Target
    testbed: topology.Testbed
    record: dict[str, Any] = field(default_factory=dict)
    verify: bool = True   # check the target's answers before the run and after a step with errors


def _url_host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host.strip("[]"), int(port)


def preflight(client: ControlClient, target: topology.Target, plan: plans.Plan, testbed: topology.Testbed,
              verify: bool, echo: Callable[[str], None]) -> list[dict]:
    """Check the console, agents and target answer; return the connected agents."""
    client.timeout = PREFLIGHT_TIMEOUT_S
    client.version()   # raises with the address it tried
    urls = [target.url] if target.kind == "esb" else list(target.backends.values())
    for url in urls:
        host, port = _url_host_port(url)
        if not procs.port_open(host, port, PREFLIGHT_TIMEOUT_S):
            raise EsbperfError(f"target {target.name} does not answer at {url} (tried for {PREFLIGHT_TIMEOUT_S} s)")
    try:
        agents = client.wait_for_agents(1, AGENT_WAIT_S)
    except EsbperfError:
        raise EsbperfError(f"no agent is connected to the console at {testbed.client.address}:{testbed.console_port}; "
                           "start one with `esbperf agent`") from None
    if verify:
        outcomes = verify_target(testbed, target.name, plan.scenarios, size=1024, timeout=plan.timeout_s)
        failed = [o for o in outcomes if not o.ok]
        if failed:
            first = failed[0]
            raise EsbperfError(f"target {target.name} fails verification: {len(failed)} of {len(outcomes)} checks, "
                               f"first: {first.scenario} {first.url}: {first.detail} (see `esbperf verify --target {target.name}`)")
        echo(f"verified {target.name}: {len(outcomes)} checks passed")
    return agents


def monitored_roles(testbed: topology.Testbed) -> list[str]:
    """Roles whose monitor answers now; only those are collected for each step."""
    return [role for role, host in testbed.hosts.items()
            if host.monitor_port and procs.port_open(host.address, host.monitor_port, 0.5)]


def step_properties(run: Run, step: plans.Step, processes: int, threads: int, log_dir: Path) -> dict[str, Any]:
    target, plan = run.target, run.plan
    properties = {
        "grinder.processes": processes,
        "grinder.threads": threads,
        "grinder.runs": 0,
        # A safety net only: the runner stops the workers at the end of the measurement.
        "grinder.duration": int((plan.step_seconds() + 60) * 1000),
        # Absolute: an agent resolves a relative folder against its own working folder.
        "grinder.logDirectory": str(log_dir.resolve()),
        "esbperf.users": step.users,
        "esbperf.scenario": step.scenario,
        "esbperf.target.kind": target.kind,
        "esbperf.payload.bytes": step.payload_bytes,
        "esbperf.keepalive": str(plan.keepalive).lower(),
        "esbperf.timeout.ms": int(plan.timeout_s * 1000),
    }
    if target.kind == "esb":
        properties["esbperf.target.url"] = target.url
    for backend, url in target.backends.items():
        properties[f"esbperf.backend.{backend}"] = url
    return properties


class StepRunner:
    """Runs one step at a time against the console; reports progress through `on_tick`."""

    def __init__(self, run: Run, client: ControlClient, agents: int, roles: list[str],
                 on_tick: Callable[[str, float, dict], None]):
        self.run = run
        self.client = client
        self.agents = agents
        self.roles = roles
        self.on_tick = on_tick

    def _wait_until(self, deadline_ms: int, phase: str, workers: set[str]) -> None:
        while True:
            left = deadline_ms - now_ms()
            if left <= 0:
                return
            latest = statistics(self.client.data(latest=True))
            self.on_tick(phase, left / 1000, latest)
            if not self._running(workers):
                raise EsbperfError("the workers ended before the step did; see the worker logs in the step folder")
            time.sleep(min(1.0, left / 1000))

    def _running(self, workers: set[str]) -> bool:
        return any(w["id"] in workers and w["state"] in ("STARTED", "RUNNING")
                   for a in self.client.agents() for w in a.get("workers", []))

    def execute(self, step: plans.Step) -> Path:
        run, plan, client = self.run, self.run.plan, self.client
        tmp = results.begin_step(run.dir, step)
        processes, threads = plan.processes_threads(step.users, self.agents)
        client.recording("stop")
        client.recording("reset")
        client.recording("start")
        start_ms = now_ms()
        workers = client.start_workers_and_wait(step_properties(run, step, processes, threads, tmp / "logs"),
                                                processes * self.agents)
        stopped = False
        try:
            # Warm-up: from the start signal (worker start-up included), but at least half of it
            # under load, after the workers' first report.
            first_report_ms = self._first_report(start_ms + int((plan.step_seconds() + 30) * 1000), workers)
            warmup_end_ms = max(start_ms + int(plan.warmup_s * 1000), first_report_ms + int(plan.warmup_s * 500))
            self._wait_until(warmup_end_ms, "warm-up", workers)
            client.recording("zero")
            warmup_end_ms = now_ms()
            end_ms = warmup_end_ms + int(plan.duration_s * 1000)
            self._wait_until(end_ms, "measuring", workers)
            console_data = client.data()
            end_ms = now_ms()
            client.stop_workers()
            stopped = True
            client.recording("stop")
            if not client.wait_workers_finished(workers, 30):
                raise EsbperfError("the workers did not stop within 30 s of the stop signal")
        finally:
            if not stopped:
                client.stop_workers()
        logs = list((tmp / "logs").glob("*-data.log"))
        if len(logs) < len(workers):
            raise EsbperfError(f"{len(workers)} workers ran the step but {len(logs)} data logs reached {tmp / 'logs'}; "
                               "the step is not kept (were other workers running on the agents?)")
        results.write_json(tmp / "console.json", console_data)
        monitoring = self._collect_monitors(tmp, start_ms, warmup_end_ms, end_ms)
        record = {
            "scenario": step.scenario,
            "target": run.target.name,
            "payload_bytes": step.payload_bytes,
            "payload_label": step.payload_label,
            "users": step.users,
            "processes": processes,
            "threads": threads,
            "agents": self.agents,
            "iteration": step.iteration,
            "plan": plan.name,
            "duration_s": plan.duration_s,
            "warmup_s": plan.warmup_s,
            "keepalive": plan.keepalive,
            "timeout_s": plan.timeout_s,
            "start_ms": start_ms,
            "first_report_ms": first_report_ms,
            "warmup_end_ms": warmup_end_ms,
            "end_ms": end_ms,
            "versions": {**run.record.get("versions", {}), **environment.worker_versions(tmp / "logs")},
            "hosts": run.record.get("hosts", {}),
            "target_urls": {"esb": run.target.url, **run.target.backends},
            "bottlenecks": monitoring.get("bottlenecks", []),
            "monitors": monitoring.get("monitors", {}),
            "console": console_data,
        }
        errors = statistics(console_data).get("Errors") or 0
        problem = self._target_problem(step.scenario) if errors and run.verify else None
        if problem:
            aside = results.set_aside(tmp, {**record, "failed": problem})
            raise EsbperfError(f"{errors} errors in step {step.relative_dir()}, and {problem}; the step is kept aside "
                               f"in {aside.name}; once the target is back, `esbperf run --resume {run.dir}` repeats it")
        return results.finish_step(tmp, record)

    def _target_problem(self, scenario: str) -> str | None:
        """After a step with errors: does the target still answer the step's scenario? Errors from
        an overloaded but working target are results; from a dead back end or ESB they are not."""
        outcomes = verify_target(self.run.testbed, self.run.target.name, [scenario], size=1024,
                                 timeout=min(self.run.plan.timeout_s, PREFLIGHT_TIMEOUT_S))
        failed = [o for o in outcomes if not o.ok]
        if not failed:
            return None
        return f"target {self.run.target.name} no longer answers: {failed[0].url}: {failed[0].detail}"

    def _first_report(self, deadline_ms: int, workers: set[str]) -> int:
        while now_ms() < deadline_ms:
            if self.client.data(latest=True)["status"].get("state") == "Recording":
                return now_ms()
            if not self._running(workers):
                raise EsbperfError("the workers ended before reporting any test; see the worker logs in the step folder")
            self.on_tick("starting workers", 0, {})
            time.sleep(0.1)
        raise EsbperfError("the workers reported nothing before the step's end")

    def _collect_monitors(self, step_dir: Path, start_ms: int, warmup_end_ms: int, end_ms: int) -> dict:
        if not self.roles:
            return {}
        from esbperf import monitor   # only when monitors run: it needs the monitor module built
        return monitor.collect_step(self.run.testbed, step_dir, start_ms, warmup_end_ms, end_ms, roles=self.roles)


def _record(plan: plans.Plan, target: topology.Target, testbed: topology.Testbed, agents: list[dict],
            grinder_version: str) -> dict:
    return {
        "plan": plan.to_dict(),
        "target": {"name": target.name, "kind": target.kind, "esb": target.esb, "url": target.url,
                   "backends": target.backends},
        "testbed": {"name": testbed.name, "file": str(testbed.path), "emulated": testbed.emulated},
        "hosts": {role: {"address": h.address, "link_mbit": h.link_mbit, "cpus": list(h.cpus or [])}
                  for role, h in testbed.hosts.items()},
        "agents": [a["name"] for a in agents],
        "environment": environment.describe(),
        "versions": {"grinder": grinder_version, "esb": target.esb},
        "jvm_args": {"console": ConsoleConfig.load().jvm_args, "agent": AgentConfig.load().agent_jvm_args,
                     "worker": AgentConfig.load().worker_jvm_args},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "finished": None,
    }


def execute(run: Run, client: ControlClient, agents: list[dict], roles: list[str], console: Console) -> None:
    steps = run.plan.steps()
    todo = [s for s in steps if not results.is_finished(run.dir, s)]
    client.timeout = 30
    # Workers left by an interrupted run (or anyone else) must be gone before the first step.
    client.settle()
    client.distribute()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console) as progress:
        task = progress.add_task("steps", total=len(steps), completed=len(steps) - len(todo), live="")

        for step in todo:
            label = f"{step.scenario} {step.payload_label} {step.users}u iter {step.iteration}"

            def tick(phase: str, left_s: float, latest: dict) -> None:
                live = ""
                if latest:
                    tps = latest.get("TPS") or 0
                    live = f"{phase} {left_s:4.0f}s  TPS {tps:8.1f}  errors {latest.get('Errors', 0)}"
                else:
                    live = phase
                progress.update(task, description=f"step {progress.tasks[0].completed + 1}/{len(steps)} {label}",
                                live=live)

            folder = StepRunner(run, client, len(agents), roles, tick).execute(step)
            record = results.read_json(folder / results.STEP_FILE)
            totals = statistics(record["console"])
            # The console's own TPS divides by its sample periods; the window is what was measured.
            window_s = (record["end_ms"] - record["warmup_end_ms"]) / 1000
            progress.console.print(f"[green]done[/green] {label}: {totals.get('Tests', 0)} transactions, "
                                   f"{totals.get('Errors', 0)} errors, TPS {totals.get('Tests', 0) / window_s:.1f}, "
                                   f"mean {totals.get('Mean Test Time (ms)') or 0:.1f} ms")
            progress.advance(task)
    run.record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results.write_json(run.dir / results.RUN_FILE, run.record)


def start(plan: plans.Plan, target_name: str, testbed: topology.Testbed, out: Path, verify: bool = True,
          console: Console | None = None) -> Path:
    """Run `plan` against `target_name` into a new run folder under `out`; return that folder."""
    console = console or Console()
    target = testbed.target(target_name)
    client = ControlClient(testbed.api_url)
    agents = preflight(client, target, plan, testbed, verify, console.print)
    roles = monitored_roles(testbed)
    run_dir = results.new_run_dir(out.resolve(), f"{plan.name}-{target.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    run = Run(run_dir, plan, target, testbed, _record(plan, target, testbed, agents, client.version()), verify)
    run.record["monitored_roles"] = roles
    results.write_json(run_dir / results.RUN_FILE, run.record)
    console.print(f"run {run_dir} — {len(plan.steps())} steps of {plan.step_seconds():g} s "
                  f"against {target.name}; monitors: {', '.join(roles) or 'none'}")
    _execute_interruptibly(run, client, agents, roles, console)
    return run_dir


def resume(run_dir: Path, verify: bool = True, console: Console | None = None) -> Path:
    """Continue a run with its first unfinished step, using the plan and target it recorded."""
    console = console or Console()
    run_dir = run_dir.resolve()
    record = results.read_json(run_dir / results.RUN_FILE)
    plan = plans.Plan.from_dict(record["plan"], f"{run_dir / results.RUN_FILE} (plan)")
    testbed = topology.load(record["testbed"]["file"])
    target = testbed.target(record["target"]["name"])
    client = ControlClient(testbed.api_url)
    agents = preflight(client, target, plan, testbed, verify, console.print)
    roles = monitored_roles(testbed)
    run = Run(run_dir, plan, target, testbed, record, verify)
    done = sum(results.is_finished(run_dir, s) for s in plan.steps())
    if done == len(plan.steps()):
        console.print(f"{run_dir}: all {done} steps are already finished")
        return run_dir
    console.print(f"resuming {run_dir}: {done} of {len(plan.steps())} steps already finished")
    _execute_interruptibly(run, client, agents, roles, console)
    return run_dir


def _execute_interruptibly(run: Run, client: ControlClient, agents: list[dict], roles: list[str],
                           console: Console) -> None:
    procs.raise_on_sigterm()
    try:
        execute(run, client, agents, roles, console)
    except KeyboardInterrupt:
        try:
            client.stop_workers()
        except EsbperfError:
            pass
        console.print(f"[yellow]interrupted[/yellow]: finished steps are kept in {run.dir}; "
                      f"continue with `esbperf run --resume {run.dir}`")
        raise


@click.command()
@click.option("--plan", "plan_name", metavar="NAME|FILE", help="Plan (console-config/plans/<NAME>.yaml or a file).")
@click.option("--target", "target_name", metavar="NAME", help="Target from the testbed file (e.g. camel, synapse, direct).")
@click.option("--scenario", "only", multiple=True, help="Run only these scenarios (repeatable); default: the plan's.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the run folder.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", help="Testbed description (default: local).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue this run folder with its first unfinished step.")
@click.option("--no-verify", is_flag=True,
              help="Skip checking each scenario once before measuring, and again after a step with errors.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write the run's report (RUN/report) when the run is complete.")
def run(plan_name, target_name, only, out, testbed_name, resume_dir, no_verify, report) -> None:
    """Run a sweep plan against a target through the console; one results folder per step."""
    if resume_dir:
        if plan_name or target_name or only:
            raise EsbperfError("--resume continues a run with its own plan and target; do not give --plan/--target/--scenario")
        folder = resume(resume_dir, verify=not no_verify)
    else:
        if not plan_name or not target_name:
            raise EsbperfError("give --plan and --target (or --resume DIR)")
        the_plan = plans.load(plan_name)
        if only:
            known = scenarios.names()
            for s in only:
                if s not in known:
                    raise EsbperfError(f"unknown scenario '{s}' (known: {', '.join(known)})")
            the_plan.scenarios = list(only)
        folder = start(the_plan, target_name, topology.load(testbed_name), out, verify=not no_verify)
    click.echo(f"results: {folder}")
    if report:
        from esbperf.analysis.report import write_report   # matplotlib only once there is data
        try:
            click.echo(f"report: {write_report([folder]) / 'report.html'}")
        except Exception as e:   # noqa: BLE001 - whatever went wrong, the run itself is complete
            # The run's data is complete and safe; only its summary failed.
            click.echo(f"esbperf: the run is complete, but its report failed: {e}; retry with `esbperf report {folder}`",
                       err=True)
