"""What can go wrong in a step, as types: the type says whether the run can go on after it
(`stops_run`). The runner never decides by a message's text."""
from __future__ import annotations

from pathlib import Path

from esbperf.core.errors import EsbperfError


class StepProblem(Exception):
    """Why a step cannot count. `stops_run`: the steps after it cannot be measured either."""

    stops_run = False

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class WorkersEnded(StepProblem):
    """Every worker ended before the step did (see their logs in the step folder)."""


class NoReport(StepProblem):
    """The workers reported nothing before the step's end."""


class Incomplete(StepProblem):
    """A worker's logs are missing or cut short, a worker died mid-step, or fewer threads than
    users loaded the target."""


class AgentsChanged(StepProblem):
    """An agent joined or left the console."""
    stops_run = True


class WorkersHang(StepProblem):
    """Workers still run after the stop signal."""
    stops_run = True


class TargetDown(StepProblem):
    """The target no longer answers (or a restarted ESB never did)."""
    stops_run = True


class ConsoleLost(StepProblem):
    """The console's control API stopped answering in the middle of a step."""
    stops_run = True


class Unexpected(StepProblem):
    """Any other error mid-step (the console answered an error, the network failed)."""
    stops_run = True


class StepAside(EsbperfError):
    """The step was kept aside (its folder and why are in `aside`); `stop_run`: the steps after
    it cannot be measured either until someone acts."""

    def __init__(self, message: str, aside: Path | None, stop_run: bool, problem: StepProblem | None = None):
        super().__init__(message)
        self.aside = aside
        self.stop_run = stop_run
        self.problem = problem


