"""`esbperf capacity`: the highest open-model rate each target holds within a latency goal, by a
search of real steps (analysis/capacity.py, docs/capacity.md):

    esbperf capacity --target T --p99-ms MS [--scenario S] [--payload SIZE] [...]   a new search
    esbperf capacity --plan P --target T [...]                                      a plan's `capacity:`
    esbperf capacity --resume DIR                                                   an interrupted one

`esbperf run` hands plans with `capacity:` (and the resume of their runs) to the same functions.
Each probe is a step of the runner, in its own folder; at the end the searches are read back from
the folders, printed, and written to RUN/capacity/ (probes.csv, capacity.csv, the graphs)."""
from __future__ import annotations

import math
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from esbperf.cli.output import console as run_console, report as _report
from esbperf.core import capacity as capacities, plan as plans, topology
from esbperf.core.config import AgentConfig
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.run import estimate, runner
from esbperf.run.preflight import MAX_SKEW_MS
from esbperf.run.context import RunContext

NAME = "capacity"      # the plan (and run folder) of a search given by options


def _schedule(ctx: RunContext):
    from esbperf.analysis.capacity import Searches
    return Searches(ctx.dir, ctx.plan, list(ctx.targets), max_pool(ctx.plan, len(ctx.agents))).steps()


def max_pool(plan: plans.Plan, agents: int) -> int:
    """The most threads a probe's workers may have: what `agents` agents start (agents/agent.yaml
    `max_worker_processes` processes of the plan's `max_threads_per_process` threads each)."""
    return agents * AgentConfig.load().max_worker_processes * plan.max_threads_per_process


def is_capacity_run(run_dir: Path) -> bool:
    """Whether a run folder holds a capacity search (its recorded plan has `capacity`)."""
    if not (Path(run_dir) / layout.RUN_FILE).is_file():
        return False
    plan = layout.read_json(Path(run_dir) / layout.RUN_FILE).get("plan")
    return isinstance(plan, dict) and bool(plan.get("capacity"))


def start(plan: plans.Plan, targets: list[str], testbed: topology.Testbed, out: Path, console: Console,
          **options) -> Path:
    """Run the plan's searches into a new run folder; print and write their results."""
    folder = runner.start(plan, targets, testbed, out, console=console, schedule=_schedule, **options)
    finish(folder, console)
    return folder


def resume(run_dir: Path, console: Console, **options) -> Path:
    """Continue an interrupted search: the probes it has are read again, the next ones run."""
    folder = runner.resume(run_dir, console=console, schedule=_schedule, **options)
    finish(folder, console)
    return folder


def finish(run_dir: Path, console: Console) -> Path:
    """The run's searches read back from its folders: printed, and written to RUN/capacity/."""
    from esbperf.analysis import capacity as analysis
    record = layout.read_json(run_dir / layout.RUN_FILE)
    plan = plans.Plan.from_dict(record["plan"], f"{run_dir / layout.RUN_FILE} (plan)")
    searches = analysis.replay(run_dir, plan, [t["name"] for t in record["targets"]],
                               max_pool(plan, len(record.get("agents") or [])))
    table = Table(title=f"capacity probes: p99 from the due time ≤ {plan.capacity.p99_ms:g} ms, errors ≤ "
                        f"{plan.capacity.max_error_percent:g} %, achieved rate within "
                        f"{100 * capacities.RATE_TOLERANCE:g} % of the offered one"
                        + (" plus 1.96 standard deviations of the Poisson draw" if plan.arrivals == "poisson" else "")
                        + f" ({plan.arrivals} arrivals)")
    for column in ("target", "scenario", "payload", "it", "#", "phase", "rate/s", "threads", "achieved/s", "errors %",
                   "p99 ms", "verdict"):
        table.add_column(column)
    for row in analysis.probe_rows(searches):
        table.add_row(row["target"], row["scenario"], row["payload"], str(row["iteration"]), str(row["probe"]),
                      row["phase"], f"{row['rate']:g}", str(row["users"]), _figure(row["start_rate"], ".1f"),
                      _figure(row["error_percent"], ".2f"), _figure(row["lat_p99_ms"], ".1f"),
                      row["verdict"] + (f": {row['reasons']}" if row["reasons"] else ""))
    console.print(table)
    for r in searches.results:
        console.print(f"capacity {r.target} {r.scenario} {r.payload_label} (iteration {r.iteration}): {r.describe()}")
    if not searches.finished:
        console.print(f"[yellow]the search is unfinished[/yellow]: `esbperf capacity --resume {run_dir}` goes on")
    out = analysis.write(searches)
    console.print(f"capacity: {out / 'capacity.csv'}, {out / 'probes.csv'}, graphs in {out}")
    return out


def _figure(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def bisections(goal: capacities.Goal) -> int:
    """The bisections that narrow a bracket of one growth step (× 2) to the goal's precision."""
    return math.ceil(math.log2(math.log(capacities.GROWTH) / math.log(1 + goal.precision)))


def search_probes(goal: capacities.Goal, capacity_over_start: float) -> int:
    """The probes of a search whose capacity lies between start_rate and `capacity_over_start` ×
    start_rate, at most: the first, the doublings until one is over, then the bisections."""
    return math.floor(math.log(capacity_over_start, capacities.GROWTH)) + 2 + bisections(goal)


def print_dry_run(plan: plans.Plan, targets: list[str], testbed: topology.Testbed, console: Console) -> None:
    """The searches a run would make and a bound on their wall time; nothing started."""
    from esbperf.run import preflight
    preflight.targets_of(testbed, targets, plan)
    goal = plan.capacity
    # Probes before bisecting: doublings up to max_rate, or halvings down to MIN_RATE, and the first.
    grow = max(math.floor(math.log(goal.max_rate / goal.start_rate, capacities.GROWTH)) + 2,
               math.floor(math.log(goal.start_rate / capacities.MIN_RATE, capacities.GROWTH)) + 2)
    bisect = bisections(goal)
    first = plan.steps(targets)
    guess = estimate.estimate(plan, first)
    per_probe = guess.steps[0][1]
    searches = len(first)
    forks = f"{plan.forks} fork(s), each starting the engines afresh, × " if plan.forks > 1 else ""
    console.print(f"{searches} capacity search(es) ({forks}{plan.iterations} iteration(s) × {', '.join(plan.scenarios)} × "
                  f"{len(plan.payloads)} payload(s) × {', '.join(targets)}), each from {goal.start_rate:g}/s, "
                  f"× {capacities.GROWTH:g} until a probe is over the goal (at most {goal.max_rate:g}/s), then at most "
                  f"{bisect} bisections to {100 * goal.precision:g} %")
    typical = search_probes(goal, 8)
    console.print(f"a probe takes about {estimate.duration(per_probe)}; a search whose capacity is 8 × start_rate "
                  f"takes {typical} probes ({estimate.duration(typical * per_probe)}), at most "
                  f"{grow + bisect} ({estimate.duration((grow + bisect) * per_probe)}); the run's own overhead "
                  f"{estimate.duration(guess.run_overhead_s)}. Plan and testbed are valid; nothing was started")


def options_plan(targets: tuple[str, ...], scenario: str, payload: str, duration_s: float, warmup_s: float,
                 iterations: int, users: int | None, seed: int | None, goal: dict, forks: int = 1) -> plans.Plan:
    """The plan of a search given by options, checked as a plan file is."""
    data = {"name": NAME, "scenarios": [scenario], "payloads": [payload], "duration_s": duration_s,
            "warmup_s": warmup_s, "iterations": iterations, "forks": forks, "arrivals": "poisson",
            "capacity": {k: v for k, v in goal.items() if v is not None}}
    if users is not None:
        data["users"] = [users]
    if seed is not None:
        data["seed"] = seed
    return plans.Plan.from_dict(data, "esbperf capacity")


@click.command()
@click.option("--target", "target_names", metavar="NAME", multiple=True,
              help="Target from the testbed file; repeat it to search several (one after the other).")
@click.option("--p99-ms", type=click.FloatRange(min=0, min_open=True),
              help="The goal: p99 latency from each request's due time, in ms (required without --plan).")
@click.option("--max-error-percent", type=click.FloatRange(0, 100),
              help=f"Failed requests a probe may have, in percent [default: {capacities.DEFAULTS['max_error_percent']:g}].")
@click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Stop when the lowest rate over the goal is at most (1 + this) × the highest within "
                   f"[default: {capacities.DEFAULTS['precision']:g}].")
@click.option("--start-rate", type=click.FloatRange(min=0, min_open=True),
              help=f"The first rate probed, requests/s [default: {capacities.DEFAULTS['start_rate']:g}].")
@click.option("--max-rate", type=click.FloatRange(min=0, min_open=True),
              help=f"The highest rate probed, requests/s [default: {capacities.DEFAULTS['max_rate']:g}].")
@click.option("--scenario", default="proxy", show_default=True, help="The scenario probed.")
@click.option("--payload", default="1KB", show_default=True, help="The request size (512B, 1KB, 100KB, …).")
@click.option("--duration-s", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds measured per probe.")
@click.option("--warmup-s", default=20.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds of warm-up before each probe's measurement (the target settling at the probe's rate).")
@click.option("--iterations", default=1, show_default=True, type=click.IntRange(min=1),
              help="Searches per target (each a whole search: their spread is the result's noise).")
@click.option("--forks", default=1, show_default=True, type=click.IntRange(min=1),
              help="Engine processes per target, each started afresh and searched --iterations times (the process, "
                   "not the search, is what repeats a capacity: docs/capacity.md).")
@click.option("--users", type=click.IntRange(min=1),
              help="A fixed thread pool per probe [default: max(10, 2 × rate × p99 goal), per rate].")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), help="The seed of the Poisson arrivals [default: drawn].")
@click.option("--plan", "plan_name", metavar="NAME|FILE",
              help="A plan with `capacity:` (its scenarios, payloads, durations and goal) instead of the options above.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", help="Testbed description (default: local).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives the run folder.")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue this capacity run (its own plan and targets).")
@click.option("--dry-run", is_flag=True, help="Print the searches and a bound on their wall time; start nothing.")
@click.option("--no-verify", is_flag=True, help="Skip checking each scenario once before the first probe.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Also write the run's report (RUN/report) when the searches end.")
@click.option("--max-skew-ms", default=MAX_SKEW_MS, show_default=True, type=click.FloatRange(min=0),
              help="Refuse the run when a host's clock is further off this machine's.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="The console's control-API token (default: as `esbperf run` finds it).")
def capacity(target_names, p99_ms, max_error_percent, precision, start_rate, max_rate, scenario, payload, duration_s,
             warmup_s, iterations, forks, users, seed, plan_name, testbed_name, out, resume_dir, dry_run, no_verify,
             report, max_skew_ms, token_file) -> int:
    """Find the highest open-model rate (Poisson arrivals) each target holds with p99 latency from the
    due time within --p99-ms, errors within --max-error-percent and the achieved rate within 2 % of
    the offered one plus 1.96 standard deviations of the Poisson draw: grow the rate × 2, then bisect
    to --precision; every probe a step of its own."""
    goal = {"p99_ms": p99_ms, "max_error_percent": max_error_percent, "precision": precision,
            "start_rate": start_rate, "max_rate": max_rate}
    con = run_console()
    common = dict(verify=not no_verify, max_skew_ms=max_skew_ms, token_file=token_file)
    ctx = click.get_current_context()
    given = [p.opts[0] for p in ctx.command.params
             if ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
             and p.name not in ("no_verify", "report", "max_skew_ms", "token_file", "resume_dir")]
    if resume_dir:
        if given:
            raise EsbperfError(f"--resume continues a run with its own plan and targets; do not give {'/'.join(given)}")
        if not is_capacity_run(resume_dir):
            raise EsbperfError(f"{resume_dir} is not a capacity run; `esbperf run --resume {resume_dir}` continues it")
        folder = resume(resume_dir, con, **common)
        return _report(folder) if report else 0
    if not target_names:
        raise EsbperfError("give --target (or --resume DIR)")
    if plan_name:
        shaped = sorted(set(given) - {"--target", "--plan", "--testbed", "--out", "--dry-run"})
        if shaped:
            raise EsbperfError(f"--plan gives the search's goal, scenarios, payloads and durations; do not give "
                               f"{'/'.join(shaped)}")
        plan = plans.load(plan_name)
        if plan.capacity is None:
            raise EsbperfError(f"plan {plan.name} has no `capacity:` goal (docs/capacity.md); `esbperf run` runs it")
    else:
        if p99_ms is None:
            raise EsbperfError("give the goal, --p99-ms MS (or a --plan with `capacity:`)")
        plan = options_plan(target_names, scenario, payload, duration_s, warmup_s, iterations, users, seed, goal,
                            forks)
    testbed = topology.load(testbed_name)
    if dry_run:
        print_dry_run(plan, list(target_names), testbed, con)
        return 0
    folder = start(plan, list(target_names), testbed, out, con, **common)
    click.echo(f"results: {folder}")
    return _report(folder) if report else 0

