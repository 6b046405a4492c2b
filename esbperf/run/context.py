"""What every step of a run shares (RunContext), and the run's agents: apart from the step, so that
what a step asks of the run (its neighbours, its warm-up) can take the context without importing
the step."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esbperf.core import plan as plans
from esbperf.core.topology import Target, Testbed
from esbperf.run import collect
from esbperf.run.workers import Workers, run_report_interval_ms
from esbperf.services.console import ControlClient


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
    cross_check: str | None = None       # around each step, an independent client measures it too (crosscheck.py)
    warm: frozenset[str] = frozenset()   # targets a run just before this one loaded: no target warm-up
    # Steps of runs to come in the same session (`esbperf demo`'s later plans): their loads are warmed too.
    also_warm: list = field(default_factory=list)
    workers: Workers | None = None       # what loads the target, chosen as the run begins (runner.execute)
    # A session's runs one after the other (`esbperf demo`): the warm pool one leaves the next takes.
    carry: Any = None                    # pool.Carry
    carried: bool = False                # this run's workers came from the run before (already warm)
    warming_s: float = 0.0               # spent warming targets up so far (the run's overhead is the rest)

    @property
    def sample_interval_s(self) -> float:
        """The console's sample interval, as the run recorded it (console.yaml sample_interval_ms)."""
        return self.record.get("console_sample_interval_ms", 1000) / 1000

    @property
    def report_interval_ms(self) -> int:
        """How often the run's workers report to the console (workers.run_report_interval_ms)."""
        return run_report_interval_ms(self.record.get("console_sample_interval_ms", 1000))
