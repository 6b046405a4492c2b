"""`esbperf run`: the command line of a run, in three modes, each taking its own options:

    esbperf run --plan P --target T [...]              a new run of esbperf's scenarios
    esbperf run --plan P --target T --script F [...]   a new run of a user's own Grinder script
    esbperf run --resume DIR                           the unfinished steps of an earlier run

`--dry-run` prints a new run's steps and estimated wall time and starts nothing. After a run that
ended, its report is written (unless --no-report); the command's exit status says whether both did:
0 all well, 2 an error (one line), 3 the run finished but its report failed (the data is safe)."""
from __future__ import annotations

from pathlib import Path

import click

from esbperf.core import plan as plans, scenarios, topology
from esbperf.core.errors import EsbperfError
from esbperf.cli import capacity
from esbperf.cli.output import console, report as _report
from esbperf.run import crosscheck, runner, user_script
from esbperf.run.preflight import MAX_SKEW_MS

# Which options each mode takes (the flags every mode takes are not listed).
NEW_RUN = {"plan_name", "target_names", "only", "out", "testbed_name", "dry_run", "cross_check"}
SCRIPT_RUN = {"plan_name", "target_names", "out", "testbed_name", "dry_run", "script_file", "properties_file"}
RESUME = {"resume_dir"}
COMMON = {"no_verify", "report", "max_skew_ms", "token_file"}
OPTION_NAMES = {"plan_name": "--plan", "target_names": "--target", "only": "--scenario", "out": "--out",
                "testbed_name": "--testbed", "resume_dir": "--resume", "dry_run": "--dry-run",
                "script_file": "--script", "properties_file": "--properties", "cross_check": "--cross-check"}
DEFAULTS = {"out": Path("results")}
# Why a mode refuses an option: for the option, or for the mode as a whole.
WHY_NOT = {
    ("resume", "--dry-run"): "--dry-run plans a new run; it does not take --resume",
    "resume": "--resume continues a run with its own plan, targets and script; do not give {options}",
    ("script", "--scenario"): "--scenario chooses esbperf's scenarios; a --script is its own one scenario",
    "script": "a --script run does not take {options}",
    ("new", "--properties"): "--properties is the properties file of a --script; give the script too",
    "new": "a run does not take {options}",
}


def mode_of(options: dict) -> str:
    """Which mode the options ask for; a one-line error for options the mode does not take."""
    given = {name for name, value in options.items() if value not in (None, False, (), DEFAULTS.get(name))}
    if options["resume_dir"]:
        mode, allowed = "resume", RESUME
    elif options["script_file"]:
        mode, allowed = "script", SCRIPT_RUN
    else:
        mode, allowed = "new", NEW_RUN
    extra = sorted(OPTION_NAMES[n] for n in given - allowed - COMMON)
    if extra:
        raise EsbperfError(WHY_NOT.get((mode, extra[0])) or WHY_NOT[mode].format(options="/".join(extra)))
    if mode != "resume" and (not options["plan_name"] or not options["target_names"]):
        raise EsbperfError("give --plan and --target (or --resume DIR)")
    return mode


def _new_plan(options: dict, mode: str) -> tuple[plans.Plan, user_script.UserScript | None]:
    script = user_script.load(options["script_file"], options["properties_file"]) if mode == "script" else None
    plan = plans.load(options["plan_name"], script=script.name if script else "")
    if script and script.ignored:
        click.echo(f"{options['properties_file']}: ignored (set per step by the runner, or by the testbed): "
                   f"{', '.join(script.ignored)}")
    if options["only"]:
        known = scenarios.names()
        for s in options["only"]:
            if s not in known:
                raise EsbperfError(f"unknown scenario '{s}' (known: {', '.join(known)})")
        plan.scenarios = list(options["only"])
    return plan, script



@click.command()
@click.option("--plan", "plan_name", metavar="NAME|FILE", help="Plan (console-config/plans/<NAME>.yaml or a file).")
@click.option("--target", "target_names", metavar="NAME", multiple=True,
              help="Target from the testbed file (e.g. camel, synapse, direct); repeat it to measure several "
                   "targets step by step in one run (order rotated per iteration).")
@click.option("--scenario", "only", multiple=True, help="Run only these scenarios (repeatable); default: the plan's.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULTS["out"], show_default=True,
              help="Folder that receives the run folder.")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE", help="Testbed description (default: local).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue this run folder with its unfinished steps (and nothing else: its own plan, "
                   "targets and script).")
@click.option("--no-verify", is_flag=True,
              help="Skip checking each scenario once before measuring, and again after a step with errors.")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write the run's report (RUN/report) when the run ends.")
@click.option("--dry-run", is_flag=True,
              help="Print every step and the estimated wall time, check plan and testbed, start nothing.")
@click.option("--max-skew-ms", default=MAX_SKEW_MS, show_default=True, type=click.FloatRange(min=0),
              help="Refuse the run when a host's clock is further off this machine's.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="The console's control-API token (default: $ESBPERF_CONSOLE_TOKEN, or the token file of "
                   "the console started from this state folder).")
@click.option("--script", "script_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Run this Grinder 3 Jython script (your own) instead of esbperf's scenarios; the plan "
                   "gives users, durations and iterations, no scenarios.")
@click.option("--cross-check", "cross_check", type=click.Choice(crosscheck.TOOLS),
              help="After each closed-model step, measure the same target, requests and users with this "
                   "independent client too; summary.csv and the report set its figures beside esbperf's.")
@click.option("--properties", "properties_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The script's grinder.properties: the settings that shape its load (sleep factors, ramp-up).")
def run(**options) -> int:
    """Run a sweep plan against one or more targets through the console; one results folder per step."""
    mode = mode_of(options)
    verify, skew, token = not options["no_verify"], options["max_skew_ms"], options["token_file"]
    if mode == "resume" and capacity.is_capacity_run(options["resume_dir"]):
        folder = capacity.resume(options["resume_dir"], console(), verify=verify, max_skew_ms=skew, token_file=token)
    elif mode == "resume":
        folder = runner.resume(options["resume_dir"], verify=verify, max_skew_ms=skew, token_file=token,
                               console=console())
    else:
        plan, script = _new_plan(options, mode)
        testbed = topology.load(options["testbed_name"])
        if options["dry_run"]:
            if plan.capacity:
                capacity.print_dry_run(plan, list(options["target_names"]), testbed, console())
            else:
                runner.dry_run(plan, list(options["target_names"]), testbed, console(), options["cross_check"])
            return 0
        start = capacity.start if plan.capacity else runner.start   # a capacity plan's search chooses its steps
        folder = start(plan, list(options["target_names"]), testbed, options["out"], verify=verify,
                       max_skew_ms=skew, token_file=token, script=script,
                       script_properties=options["properties_file"], console=console(),
                       cross_check=options["cross_check"])
    click.echo(f"results: {folder}")
    return _report(folder) if options["report"] else 0
