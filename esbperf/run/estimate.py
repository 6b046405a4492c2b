"""How long a run will take, before it starts (`esbperf run --dry-run`).

A step's warm-up runs until max(warm-up, worker start-up + warm-up ÷ 2) (the runner wants half of
it under load) -- an auto warm-up for start-up + the median of those measured here --, then the measurement; its tail is everything else: the console's calls, stopping the
workers, bringing the logs home, pulling the monitors' samples, the checks. A run adds its preflight
and the scripts' distribution. Start-up, tail and run overhead are measured on every run and kept in
the state folder (the last HISTORY of each); the estimate uses their medians, so it reflects this
machine and testbed. Before any run it assumes DEFAULTS."""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from esbperf.core.config import state_dir
from esbperf.core.plan import Plan, Step
from esbperf.run import wander

HISTORY = 50
DEFAULTS = {"startup_s": 3.0, "tail_s": 2.0, "calibration_s": 9.0, "run_overhead_s": 5.0, "auto_warmup_s": 5.0,
            # Warm workers (esbperf/run/pool.py): a step's hand-over and tail; fresh ones' above.
            "warm_startup_s": 0.1, "warm_tail_s": 0.4,
            # A fork of a plan of several: the engines (and back ends) started afresh and verified.
            "fork_start_s": 20.0,
            # `esbperf round`: bringing the testbed up, starting every engine and verifying them; and the
            # report and page afterwards, per step and probe analysed.
            "round_setup_s": 180.0, "round_report_per_step_s": 0.5}
FILE_NAME = "runner-overheads.json"
XCHECK_TAIL_S = 0.5   # wrk's own start and end beside the seconds it measures


def _file() -> Path:
    return state_dir() / FILE_NAME


def _load() -> dict[str, list[float]]:
    try:
        data = json.loads(_file().read_text())
    except (OSError, ValueError):
        return {}
    return {k: [float(v) for v in data.get(k, []) if isinstance(v, (int, float))] for k in DEFAULTS}


def remember(**seconds: float) -> None:
    """Add measured overheads (startup_s, tail_s, calibration_s, run_overhead_s); never fails a run."""
    try:
        data = _load()
        for kind, value in seconds.items():
            data[kind] = (data.get(kind, []) + [round(value, 3)])[-HISTORY:]
        path = _file()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass


def median(kind: str) -> float:
    """The median of what this machine measured of `kind` (a DEFAULTS key), or its default."""
    values = _load().get(kind)
    return statistics.median(values) if values else DEFAULTS[kind]


def remember_step(record: dict) -> None:
    """The start-up and tail of a finished step (its step.json), kept apart for warm workers."""
    warm = "warm_" if record.get("workers_mode") == "warm" else ""
    phases = record.get("phases_s") or {}
    remember(**{f"{warm}startup_s": (record["first_report_ms"] - record["start_ms"]) / 1000,
                f"{warm}tail_s": max(0.0, record["wall_s"] - (record["end_ms"] - record["start_ms"]) / 1000
                                     - phases.get("xcheck", 0.0) - phases.get("xcheck_before", 0.0))},
             **({"auto_warmup_s": record["warmup_used_s"]} if record.get("warmup_s") == "auto" else {}))


def step_seconds(plan: Plan, startup_s: float, tail_s: float, auto_warmup_s: float) -> float:
    """What the runner does with a step (esbperf/run/step.py)."""
    if plan.warmup_auto:
        warmup = startup_s + min(plan.warmup_max_s, max(plan.warmup_s, auto_warmup_s))
    else:
        warmup = max(plan.warmup_s, startup_s + plan.warmup_s / 2)
    return warmup + plan.duration_s + tail_s


@dataclass
class Estimate:
    steps: list[tuple[Step, float]]      # each step and its estimated seconds
    run_overhead_s: float                # preflight, distribution, the client's calibration, targets' warm-up
    measured_steps: int                  # how many measured steps the overhead is the median of

    @property
    def total_s(self) -> float:
        return self.run_overhead_s + sum(s for _, s in self.steps)


def cross_check_seconds(plan: Plan, step: Step, cross_check: str | None) -> float:
    """What the cross-check adds to a step: wrk for the step's measured duration, when the run has one
    and the step is a closed-model step of an iteration the plan cross-checks (esbperf/run/crosscheck.py)."""
    if not cross_check or step.model != "closed" or not plan.cross_checks(step.iteration):
        return 0.0
    return 2 * (plan.duration_s + XCHECK_TAIL_S)   # wrk just before the step and just after it


def estimate(plan: Plan, steps: list[Step], cross_check: str | None = None,
             warm_loads: Mapping[str, tuple[str, int]] | None = None) -> Estimate:
    """warm_loads: each target to warm up before its first step, its kind (plan.WARMUP_KINDS) and how
    many scenarios its warm-up loads in turn (warmup.loads); default: every target of `steps`, as an
    ESB, on the plan's scenarios."""
    history = _load()
    median = {k: statistics.median(history[k]) if history.get(k) else v for k, v in DEFAULTS.items()}
    warm = "warm_" if plan.workers == "warm" and not plan.script else ""
    per_step = step_seconds(plan, median[f"{warm}startup_s"], median[f"{warm}tail_s"], median["auto_warmup_s"])
    per_run = median["run_overhead_s"] + len(plan.calibration_sizes()) * median["calibration_s"]
    if cross_check and any(cross_check_seconds(plan, s, cross_check) for s in steps):
        per_run += wander.probe_seconds(plan.duration_s)   # the machine's own wander, before the first step
    if warm_loads is None:
        warm_loads = {s.target: ("esb", len(plan.scenarios) or 1) for s in steps}
    forks = max(1, len({s.fork for s in steps}))
    if plan.forks > 1:
        per_run += forks * median["fork_start_s"]
    for kind, scenarios in warm_loads.values():   # each scenario's workers started once, each fork's anew
        least, most = plan.target_warmup(kind)
        if least > 0:   # warmup_s: auto loads a target until settled: somewhere between its least and its most
            settles = max(least, min(plan.target_horizon(kind), most))   # judged over its horizon at the least
            per_run += forks * ((settles + most) / 2 + scenarios * median[f"{warm}startup_s"])
    return Estimate([(s, per_step + cross_check_seconds(plan, s, cross_check)) for s in steps], per_run,
                    len(history.get("tail_s") or []))


def duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"
