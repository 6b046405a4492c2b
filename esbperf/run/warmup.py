"""A warm target before the first measured step: each target of a run is loaded for the plan's
`target_warmup_s` (its kind's, when the plan gives one per kind: a JVM ESB compiles its path for
minutes) before its first step, by the same workers and requests as its steps (the plan's scenarios
in turn, at the first step's payload and users), so that iteration 1 does not measure a JVM that is
still compiling the path; and on until it is settled — its throughput no longer moving over the
plan's `target_warmup_horizon_s` (steady.settling: a minute or more, not the seconds a step's own window
judges) — at most `target_warmup_max_s` (when the plan gives one, or with `warmup_s: auto`; otherwise judged at the end of the
fixed time). A plan of several forks warms every fork's fresh engines so.

Nothing of it is measured; run.json records what was done (`target_warmup`), and each step says
whether its target was judged warm (step.json `target_warm`): a step of a target whose warm-up ended
unsettled, or that was never warmed, gets a validity warning of its own (`target-not-warm`),
whatever its window showed. A target restarted before every step (`restart: per-step`) gets only
each step's own warm-up: warming it before would warm a process that is about to go."""
from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping

from esbperf.core import busy, engines, plan as plans, roles, steady, topology
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.run import collect, gauge, wander
from esbperf.run.problems import StepProblem
from esbperf.run.context import RunContext
from esbperf.run.step import step_properties
from esbperf.run.workers import ConsoleWatch, Layout, now_ms
from esbperf.services import esb
from esbperf.services.console import statistics

FOLDER = ".warmup"   # the workers' logs come home here and are deleted: nothing of it is a result
MIN_PHASE_S = 2.0    # the least a target is loaded at each of its loads before the one it is judged at
QUIET_MAX_S = 60     # how long the esb host may take to be quiet after the targets' warm-up
QUIET_READINGS = 2   # ... as consecutive process readings (the monitor reads processes every 2 s)
STILL_COMPILING = "still compiling"   # a JVM target's warm-up outcome beside steady's three


def first_steps(steps: list[plans.Step]) -> dict[str, plans.Step]:
    """Each target's first step among `steps`, in run order."""
    first: dict[str, plans.Step] = {}
    for step in steps:
        first.setdefault(step.target, step)
    return first


def loads(plan: plans.Plan, targets: Mapping[str, topology.Target]) -> dict[str, tuple[str, int]]:
    """What warm_targets will load, for the estimate: each target's kind and how many scenarios."""
    return {name: (engines.warmup_kind(t.kind, t.esb), 1 if plan.script else len(plan.scenarios))
            for name, t in targets.items()}


def warm_verdict(found: dict, horizon_s: float, compiler: dict | None = None) -> dict:
    """A target's verdict from its warm-up's watch (step.json `target_warm`): `settled` True when
    warm — its throughput settled and, for a JVM, its compiler quiet (`compiler`: the gate's record,
    gauge.CompilerGate) —, False when its throughput is still moving or its compiler still busy at
    the end — the answers that spoil its steps — and None when not resolved; `outcome` says which
    in words."""
    outcome = found.get("outcome", steady.SETTLED if found["steady"] else steady.UNRESOLVED)
    reason = found["reason"]
    if compiler is not None and compiler.get("quiet") is False and outcome != steady.MOVING:
        # However its throughput reads, a JVM whose compiler is still at work is not warm.
        outcome = STILL_COMPILING
        reason = (f"its compiler still busy: {compiler['percent']:g} % of a core over the last "
                  f"{gauge.COMPILER_WINDOW_S} s (quiet: {gauge.COMPILER_QUIET_PERCENT:g} % or less); its throughput "
                  + reason.removeprefix("settled: "))
    settled = True if outcome == steady.SETTLED else False if outcome in (steady.MOVING, STILL_COMPILING) else None
    return {"settled": settled, "outcome": outcome, "reason": reason, "horizon_s": horizon_s,
            **{k: found[k] for k in ("judged_s", "slope_per_min", "low", "high", "resolve_s", "machine_coef")
               if k in found},
            **({"compiler": compiler} if compiler is not None else {}),
            "bucket_s": found["interval_s"], "tps": found["tps"],
            **({"machine": found["machine"]} if "machine" in found else {})}


def loads_of(target: str, first: plans.Step, steps: list[plans.Step], plan: plans.Plan) -> list[plans.Step]:
    """What a target is warmed under: every load it will be measured at (scenario, payload, users,
    rate) among `steps` — a JIT compiles the paths a load takes, and a target warmed at one user is
    not warm at twenty — each once, the first step's last (a user's script: its scenario only). The
    others heaviest first (the most users, then the highest rate; else in run order): a JIT compiles
    a path once it has run it often enough, and one user runs it a few hundred times a second
    (Camel's compiler in the demo was still busy after 6-9 s at each 1-user load, quiet after 7 s
    at 320 users)."""
    if plan.script:
        return [first]
    found: dict[tuple, plans.Step] = {}
    for s in steps:
        if s.target == target:
            found.setdefault((s.scenario, s.payload_bytes, s.users, s.rate), replace(s, fork=first.fork))
    key = (first.scenario, first.payload_bytes, first.users, first.rate)
    others = [s for k, s in found.items() if k != key]
    return sorted(others, key=lambda s: (-s.users, -(s.rate or 0))) + [first]


def machine_pace(testbed: topology.Testbed, seconds: float) -> wander.Pace | None:
    """The machine's speed beside a warming target (wander.Pace) on the esb host's cores, where this
    machine holds them: its memory's speed moves the engine's from second to second, and the warm-up's
    trend is judged with it taken out. None for an esb host reached over ssh (its own machine), or
    where the probe cannot start: the trend is then judged on the throughput alone, as before."""
    host = testbed.hosts[roles.ESB]
    if host.ssh:
        return None
    try:
        return wander.Pace(host.cpus, seconds)
    except (OSError, subprocess.SubprocessError):
        return None


def not_warmed(reason: str) -> dict:
    """A target's verdict when it was not warmed at all (step.json `target_warm`)."""
    return {"settled": None, "reason": reason}


def warm_targets(ctx: RunContext, watch: ConsoleWatch, steps: list[plans.Step],
                 echo: Callable[[str], None], verdicts: dict[str, dict] | None = None) -> list[dict]:
    """Load each target of `steps` before its first step; what was done, for run.json. Each
    target's verdict (settled or not, and why) goes into `verdicts`."""
    plan = ctx.plan
    verdicts = {} if verdicts is None else verdicts
    if not plan.warms_targets() or not steps:
        for target in first_steps(steps):
            verdicts[target] = not_warmed("the plan warms no target up (target_warmup_s)")
        return []
    done = []
    for target, first in first_steps(steps).items():
        t = ctx.targets[target]
        kind = engines.warmup_kind(t.kind, t.esb)
        least, most = plan.target_warmup(kind)
        if least <= 0:
            verdicts[target] = not_warmed(f"the plan warms no {kind} target up (target_warmup_s)")
            continue
        if plan.restart == "per-step" and t.kind == "esb":
            done.append({"target": target, "skipped": "restarted before every step (restart: per-step)"})
            verdicts[target] = not_warmed("restarted before every step (restart: per-step)")
            continue
        phases = loads_of(target, first, [*steps, *ctx.also_warm], plan)
        share = max(MIN_PHASE_S, least / len(phases))
        started, started_ms = time.monotonic(), now_ms()
        for n, load in enumerate(phases):
            began = time.monotonic()
            last = n == len(phases) - 1   # the first step's load, last: it goes on until settled
            # Each load at least its share, and on until the target's compiler is quiet (a JIT compiles
            # the paths each load takes), within the plan's most: what is left of it, less the shares of
            # the loads still to come, split among this one and them.
            left = most - (began - started) - share * (len(phases) - 1 - n)
            cap = max(share, left if last else left / (len(phases) - n))
            try:
                totals, verdict = _load(ctx, watch, load, share, cap, plan.target_horizon(kind), judged=last,
                                        compiler_since_ms=started_ms)
            except (StepProblem, EsbperfError) as e:
                raise EsbperfError(f"warming target {target} up failed: {_why(e)}; `esbperf run --resume {ctx.dir}` "
                                   "tries again once that is fixed") from None
            done.append({"target": target, "scenario": load.scenario, "payload": load.payload_label,
                         "users": load.users, **({"rate": load.rate} if load.rate is not None else {}),
                         "least_s": round(share, 1), "seconds": round(time.monotonic() - began, 1),
                         "transactions": totals.get("Tests") or 0, "errors": totals.get("Errors") or 0,
                         **({"compiler": verdict["compiler"]} if "compiler" in verdict and not last else {}),
                         **({"fork": first.fork} if first.fork is not None else {})})
            how = ""
            if last:
                done[-1].update(steady=verdict["settled"], **{k: v for k, v in verdict.items() if k != "settled"})
                verdicts[target] = {**{k: v for k, v in verdict.items() if k not in ("account", "tps", "machine")},   # run.json keeps them once
                                    **({"fork": first.fork} if first.fork is not None else {})}
                if isinstance(verdicts[target].get("compiler"), dict):
                    verdicts[target]["compiler"] = {k: v for k, v in verdicts[target]["compiler"].items() if k != "series"}
                how = f" ({verdict['reason']})"
            elif isinstance(verdict.get("compiler"), dict) and verdict["compiler"].get("quiet") is not None:
                how = f" (compiler {'quiet' if verdict['compiler']['quiet'] else 'still busy'})"
            echo(f"warmed {target} up: {load.describe_load()} for {done[-1]['seconds']:g} s{how}, "
                 f"{done[-1]['transactions']} transactions, {done[-1]['errors']} errors")
    return done


def _why(e: StepProblem | EsbperfError) -> str:
    """What broke a warm-up: a step's problem, or the console's own error (said with what it broke)."""
    return e.reason if isinstance(e, StepProblem) else str(e)


def warm_workers(ctx: RunContext, watch: ConsoleWatch, step: plans.Step, seconds: float) -> None:
    """Load `step`'s target at its load for `seconds`, unjudged: new warm workers compile meanwhile."""
    try:
        _load(ctx, watch, step, seconds, seconds, seconds, judged=False, compiler=False)
    except (StepProblem, EsbperfError) as e:
        raise EsbperfError(f"warming the workers up failed: {_why(e)}; `esbperf run --resume {ctx.dir}` tries "
                           "again once that is fixed") from None


def _load(ctx: RunContext, watch: ConsoleWatch, step: plans.Step, seconds: float,
          most_s: float, horizon_s: float, judged: bool = True, compiler: bool = True,
          compiler_since_ms: int | None = None) -> tuple[dict, dict]:
    """The workers of `step` (the run's: warm ones warm up with the target) for `seconds` after their
    first report, and on until settled over `horizon_s` (steady.settling; not `judged`: its
    throughput is not asked) and, with `compiler`, the target's compiler quiet (gauge.CompilerGate:
    its readings since `compiler_since_ms`, default this load's first report: a compiler quiet at the
    end of the load before and quiet under this one has been quiet throughout), at most `most_s`; the
    console's totals and the verdict."""
    processes, threads = ctx.plan.processes_threads(step.users, len(ctx.agents))
    log_folder = collect.step_log_folder(ctx.dir.name, Path("warmup") / step.target / step.scenario, str(now_ms()))
    properties = step_properties(ctx, step, processes, threads, log_folder)
    properties["grinder.duration"] = int((max(seconds, most_s) + 60) * 1000)   # the safety net
    try:
        first = ctx.workers.begin(watch, properties, Layout(processes, threads, log_folder, step.rate is not None))
        # Judged over what it has, at most the horizon: a fixed warm-up shorter than its horizon too.
        bucket = steady.SETTLE_BUCKET_S
        pace = machine_pace(ctx.testbed, max(seconds, most_s) + 60)
        jit = gauge.compiler_of(ctx, step.target) if compiler else None
        quiet = None if jit is None else gauge.CompilerGate(jit, compiler_since_ms or first.first_report_ms)
        judge = ((lambda tps, _mean, machine: steady.settling(tps, bucket, horizon_s, machine)) if judged else
                 (lambda *_: steady.Steadiness(True, "not judged: a load before the one the target is judged at")))
        try:
            found = watch.until_steady(first.workers, first.first_report_ms + int(seconds * 1000),
                                       first.first_report_ms + int(max(seconds, most_s) * 1000),
                                       bucket, horizon_s, f"warming {step.target} up", judge=judge,
                                       machine=pace, ready=quiet)
        finally:
            if pace is not None:
                pace.close()
        record = None
        if quiet is not None:
            record = quiet.record()
            if found.get("start_ms") and not record.get("native"):
                record["series"] = jit.series(found["start_ms"], bucket, len(found["tps"]))
        verdict = warm_verdict(found, horizon_s, record)
        target = ctx.targets[step.target]
        if target.kind == "esb" and target.esb:   # an engine that keeps an account: what it said at the verdict
            account = esb.read_account(target.esb, *target.address)
            if account is not None:
                verdict["account"] = account
        totals = statistics(watch.call(watch.client.data))
        ctx.workers.end_step()
    except BaseException:
        ctx.workers.discard()
        raise
    home = ctx.dir / FOLDER
    ctx.workers.bring_home(log_folder, home / layout.LOGS)
    shutil.rmtree(home, ignore_errors=True)
    return totals, verdict


def wait_quiet(ctx: RunContext, echo: Callable[[str], None]) -> dict | None:
    """After the targets' warm-up, wait until every engine on the esb host is idle (together below
    busy.NEIGHBOURS_BUSY_PERCENT of a core in their last QUIET_READINGS readings), at most
    QUIET_MAX_S: an engine just warmed compiles on for a while, and a step measured meanwhile
    against another target shares its host's CPU with it. What was seen, for run.json; None when
    there is no esb-host monitor to ask."""
    engines_there = gauge.on_esb_host(ctx)
    if engines_there is None:
        return None
    seen = engines_there.wait(now_ms(), QUIET_READINGS, QUIET_MAX_S, sleep_s=1)
    if seen["quiet"]:
        echo(f"esb host quiet after {seen['waited_s']:.0f} s")
    elif seen["quiet"] is False:
        echo(f"esb host still busy after {seen['waited_s']:.0f} s (engines at {seen['busiest_percent']:.0f} % of a "
             "core); measuring anyway")
    return seen
