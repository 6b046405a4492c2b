"""Bringing a step's worker logs home from every agent, and checking that each arrived whole.

The runner gives every agent the same RELATIVE log folder (`runs/<run>/<step>/<attempt>`); Grinder
resolves it under each agent's own working folder, on whatever machine that agent runs. After the
step, each agent's folder is found and its logs are moved (this machine) or fetched (a load host
reached over ssh) into the step's `logs/`. A step counts only when every worker that ran it left
a data log and a worker log that ends with Grinder's final statistics: a worker killed mid-step
cannot write them, and its data log may end in a cut line. The console shows a worker finished a
moment before its JVM writes those statistics and flushes its data log's last block on the way out,
so an agent's logs are brought home once its worker JVMs are gone (core/procs.py, wait_workers_gone),
which is also when the agent takes a new start signal.

Where an agent's working folder is: esbperf's agents live in `<state>/agents/<agent name>`; on this
machine that is one of the state folders the runner knows (its own, and the launcher's for the
client host); on another machine the testbed's host API says (hosts reached over ssh).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from esbperf.core.errors import EsbperfError
from esbperf.core.procs import AGENT_IDLE_WAIT_S, StillWriting, wait_logs_closed, wait_workers_gone
from esbperf.results.files import ends_with_newline, tail

# What a worker writes at its normal end (also when the console stops it), never when killed; a
# warm worker, in each step's log once the step's logs are whole (esbperf.client.Steps.CLOSED).
FINAL_STATISTICS = "Final statistics for this process:"
STEP_CLOSED = "closed normally:"
RUNS_FOLDER = "runs"
POOL_FOLDER = "workers"


def step_log_folder(run_name: str, step_relative: Path, attempt: str) -> str:
    """The relative log folder every agent resolves under its own working folder."""
    return "/".join([RUNS_FOLDER, run_name, *step_relative.parts, attempt])


def pool_log_folder(run_name: str, started: str) -> str:
    """Where warm workers log what belongs to no step (their start, and their end): kept on the agents."""
    return "/".join([RUNS_FOLDER, run_name, POOL_FOLDER, started])


@dataclass(frozen=True)
class Worker:
    """A worker process of the step, as the console reported it."""

    id: str
    name: str            # <agent>-<n>: its logs are <name>.log and <name>-data.log
    agent: str


# Fetches `relative` from the working folder of the agent named so into a local folder and
# returns True, or returns False when that agent is not one it can reach. Logs it brought home
# while the agent's workers still ran (or, with workers_stay: warm workers that outlive the step,
# while a process still held them open) are a step problem: it raises StillWriting.
Fetcher = Callable[..., bool]   # (agent, relative, into, workers_stay=False) -> bool


class LocalAgents:
    """Agents on this machine: their working folders are <state>/agents/<name> under one of
    `state_dirs`; their logs are moved, so nothing of a step stays behind in an agent's folder."""

    def __init__(self, state_dirs: Iterable[Path], wait_s: float = AGENT_IDLE_WAIT_S):
        self.state_dirs = list(dict.fromkeys(Path(d).resolve() for d in state_dirs))
        self.wait_s = wait_s

    def folders(self, agent: str) -> list[Path]:
        return [d / "agents" / agent for d in self.state_dirs]

    def __call__(self, agent: str, relative: str, into: Path, workers_stay: bool = False) -> bool:
        for folder in self.folders(agent):
            source = folder / relative
            if source.is_dir():
                gone = wait_logs_closed(source, self.wait_s) if workers_stay else wait_workers_gone(folder, source,
                                                                                                    self.wait_s)
                for f in source.iterdir():    # brought home all the same: a step kept aside keeps them
                    shutil.move(str(f), into / f.name)
                _remove_empty(source, stop=folder)
                if not gone:
                    raise StillWriting(agent, self.wait_s)
                return True
        return False


def _remove_empty(folder: Path, stop: Path) -> None:
    """Remove `folder` and its parents below `stop` while they are empty."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def bring_home(workers: Iterable[Worker], relative: str, into: Path, fetchers: list[Fetcher],
               workers_stay: bool = False) -> list[str]:
    """Bring every agent's logs of the step into `into`; returns the problems found, one line
    each (an agent whose folder cannot be reached, a worker whose logs are missing or cut short).
    workers_stay: warm workers, which outlive the step (esbperf/run/pool.py)."""
    into.mkdir(parents=True, exist_ok=True)
    workers = list(workers)
    problems = []
    for agent in dict.fromkeys(w.agent for w in workers):
        try:
            found = any(fetch(agent, relative, into, workers_stay=workers_stay) for fetch in fetchers)
        except StillWriting as e:
            problems.append(str(e))
            continue
        except EsbperfError as e:   # its host could not be reached, or the copy failed
            problems.append(f"agent {agent}: its logs of this step could not be brought home: {e}")
            continue
        if not found:
            problems.append(f"agent {agent}: its logs of this step were not found (no working folder of that agent "
                            f"holds {relative}; an agent on another machine needs a testbed host with `ssh:` named "
                            f"after it, e.g. load2)")
    for w in workers:
        problems += worker_problems(into, w)
    return problems


def worker_problems(folder: Path, worker: Worker) -> list[str]:
    data, log = folder / f"{worker.name}-data.log", folder / f"{worker.name}.log"
    if not data.is_file():
        return [f"worker {worker.name} (agent {worker.agent}) left no data log"]
    if not log.is_file():
        return [f"worker {worker.name} (agent {worker.agent}) left no worker log"]
    end = tail(log)
    if FINAL_STATISTICS not in end and STEP_CLOSED not in end:
        return [f"worker {worker.name} (agent {worker.agent}) did not end normally (its log has no final "
                "statistics, nor a warm worker's step closed normally: killed, or its agent died)"]
    if not ends_with_newline(data):
        return [f"worker {worker.name} (agent {worker.agent}): its data log ends in a cut line"]
    return []


def has_rows(folder: Path, worker: Worker) -> bool:
    """Whether the worker's data log holds any transaction (more than its header line)."""
    data = folder / f"{worker.name}-data.log"
    if not data.is_file():
        return False
    with open(data, "rb") as f:
        f.readline()
        return bool(f.readline())


def last_row_ms(folder: Path, worker: Worker) -> int | None:
    """When the worker's last logged transaction ended (ms since the epoch; its start plus its
    test time), from the tail of its data log; None without rows."""
    data = folder / f"{worker.name}-data.log"
    if not data.is_file():
        return None
    with open(data, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 65536))
        lines = f.read().decode("utf-8", "replace").splitlines()
    ends = []
    for line in lines:
        fields = line.split(",")
        try:
            ends.append(int(fields[3]) + int(fields[4]))
        except (IndexError, ValueError):   # the header, or a line cut by the seek
            continue
    return max(ends, default=None)


def require_complete(problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise EsbperfError(problems[0] + more)
