"""Sweep plans (console-config/plans/<name>.yaml): scenario × payload × users (closed model) or
× arrival rate (open model), with per-step duration and warm-up, iterations, the users →
processes × threads mapping, keep-alive and timeouts. A payload is a generated size or a user's
payload file (esbperf/core/payloads.py). Every error names the file, the field and what is allowed.

A run measures a plan against one target or several; with several, each step runs against every
target back to back, in an order rotated per iteration, so drift over the run hits them alike."""
from __future__ import annotations

import math
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from esbperf.core import capacity as capacities, payloads as payload_files, scenarios
from esbperf.core.config import load_yaml, resolve_named
from esbperf.core.errors import EsbperfError, quoted
from esbperf.core.project import CONSOLE_CONFIG

PLANS = CONSOLE_CONFIG / "plans"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|K|MB|M)?\s*$", re.IGNORECASE)
_UNIT = {"B": 1, "K": 1024, "KB": 1024, "M": 1024 * 1024, "MB": 1024 * 1024}
FIELDS = {
    "name": "a name",
    "description": "text",
    "scenarios": f"a list of scenarios ({', '.join(scenarios.names())})",
    "payloads": "a list of sizes such as 512B, 0.5KB, 100KB, 1MB, or payload files: {file: PATH} or {folder: DIR}",
    "scenario_payloads": "the payloads some scenarios are measured at, when not all of `payloads`: {SCENARIO: [SIZE, "
                         "...]}, each a scenario of the plan and each size one of its `payloads` (e.g. {cbr: [1KB]})",
    "payload_check": "how a payload file's echo is compared: bytes, envelope or xml (default envelope)",
    "users": "a list of positive integers (concurrent users; in an open-model plan the thread pool)",
    "rates": "a list of arrival rates in requests per second (positive numbers): an open-model plan",
    "arrivals": "how an open-model plan's requests arrive: uniform (evenly spaced) or poisson (exponential gaps)",
    "seed": "the seed of Poisson arrivals (a whole number; default: drawn at the run's start, recorded in run.json)",
    "duration_s": "seconds measured per step (positive number)",
    "warmup_s": "seconds of warm-up before each step's measurement (number >= 0), or auto: until the step's "
                "throughput and response time are steady (docs/methodology.md)",
    "warmup_min_s": "with warmup_s: auto, the least warm-up in seconds after the workers' first report (default 1)",
    "warmup_max_s": "with warmup_s: auto, the most (default 60): a step not steady by then is measured and named "
                    "'no steady state'",
    "target_warmup_s": "seconds each target is loaded before its first step, so the first iteration does not "
                       "measure a cold JVM (number >= 0; default 0), or per kind of target: {direct: S, floor: S, "
                       "esb: S}; with target_warmup_max_s (or warmup_s: auto), the least",
    "target_warmup_horizon_s": "the longest stretch of a target's warm-up its trend is judged over (a number of "
                               "seconds > 0, or per kind of target as target_warmup_s; default 120): settled, still "
                               "moving or not resolved, from its throughput per second (docs/methodology.md)",
    "target_warmup_max_s": "the most seconds a target is loaded before its first step: it is loaded until settled "
                           "(default with warmup_s: auto 60; otherwise target_warmup_s: judged at its end), or per "
                           "kind of target as target_warmup_s",
    "iterations": "how many times the whole plan runs (positive integer)",
    "forks": "how many times each engine under test (and for direct, its back ends) is started afresh, each fork "
             "running the plan's iterations in a process of its own (positive integer; default 1): the process, not "
             "the iteration, is what repeats a result (docs/methodology.md, \"Forks\")",
    "keepalive": "true or false",
    "timeout_s": "seconds to wait for an answer (positive number)",
    "max_threads_per_process": "worker threads per worker process at most (positive integer)",
    "restart": "per-run (the ESB runs through the whole run) or per-step (restarted and verified before each step)",
    "cross_check_iterations": "the iterations a run with --cross-check measures with the independent client too: a "
                              "list of iteration numbers, each at most `iterations` (default: every iteration)",
    "order": "planned (the default: cells as the file lists them, targets rotated per iteration) or random "
             "(each fork and iteration its cells and targets shuffled, drawn from the plan's name: docs/running.md)",
    "added_forks": "forks run after the plan's own, each against some of its targets: a list of lists of target names "
                   "(`esbperf round` adds them where a verdict needs more processes; the plan's `forks` then counts "
                   "only its own)",
    "workers": "warm (the default: one set of worker JVMs carries every step of a run, docs/grinder.md) or fresh "
               "(new worker JVMs for every step, as Grinder starts them)",
    "capacity": "the goal of a capacity search: {p99_ms: MS, max_error_percent: PERCENT, precision: SHARE, "
                "start_rate: RATE, max_rate: RATE} (docs/capacity.md); the search chooses the rates",
}
RESTARTS = ("per-run", "per-step")
WORKER_MODES = ("warm", "fresh")
ORDERS = ("planned", "random")
# The kinds of target a target warm-up may be given per (engines.warmup_kind): a JVM ESB compiles its
# path for minutes, the baseline's echoes and a native floor are warm in seconds.
WARMUP_KINDS = ("direct", "floor", "esb")


def seconds_for(kind: str, value: float | dict[str, float]) -> float:
    """A target warm-up field's seconds for a kind of target: the number, or the kind's in a mapping."""
    return value[kind] if isinstance(value, dict) else value
ARRIVALS = ("uniform", "poisson")
# A plan's name becomes its run folder's: letters, digits, '.', '_', '-', not starting with '.'.
NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$")


def parse_size(value: Any) -> int:
    """512 / "512B" / "0.5KB" / "100 KB" / "1MB" -> bytes (KB = 1024 bytes)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(value)
        return value
    m = _SIZE.match(str(value))
    if not m:
        raise ValueError(value)
    size = float(m.group(1)) * _UNIT[(m.group(2) or "B").upper()]
    if size < 1 or size != int(size):
        raise ValueError(value)
    return int(size)


SCRIPT_PAYLOAD = 0   # the payload of a user's own script's steps: whatever the script sends


def size_label(size: int) -> str:
    """Folder-friendly label: 1024 -> 1KB, 512 -> 0.5KB, 1048576 -> 1024KB, 1000 -> 1000B;
    0 (a user's script decides) -> script."""
    if size == SCRIPT_PAYLOAD:
        return "script"
    kb = size / 1024
    if size % 128 == 0:
        return f"{kb:g}KB"
    return f"{size}B"


# An open-model step without `users` gets a pool that holds rate × 20 ms of requests in flight
# (ESB answers take 0.2-2 ms), at least POOL_MIN threads. A pool that proves too small shows
# as start lag in the step's data, never as a silently lower rate.
POOL_MIN = 10
POOL_SECONDS = 0.02


def default_pool(rate: float) -> int:
    return max(POOL_MIN, math.ceil(rate * POOL_SECONDS))


def rate_label(rate: float) -> str:
    return f"{rate:g}"


@dataclass(frozen=True)
class Step:
    scenario: str
    payload_bytes: int
    users: int                  # closed model: concurrent users; open model: the thread pool
    iteration: int
    target: str = ""
    rate: float | None = None   # open model: arrivals per second over all agents
    payload_file: payload_files.PayloadFile | None = None   # None: a generated payload
    fork: int | None = None     # a plan of several forks: which process of the engine (1..forks)

    @property
    def payload_label(self) -> str:
        return self.payload_file.label if self.payload_file else size_label(self.payload_bytes)

    @property
    def model(self) -> str:
        return "closed" if self.rate is None else "open"

    def relative_dir(self) -> Path:
        """<target>/<scenario>/<payload>/<users>[/rate-<r>][/fork-<f>]/iter-<n> (no target level for
        a step of a run made before targets were interleaved; a fork level in a plan of several forks)."""
        path = Path(self.target) if self.target else Path()
        path = path / self.scenario / self.payload_label / str(self.users)
        if self.rate is not None:
            path = path / f"rate-{rate_label(self.rate)}"
        if self.fork is not None:
            path = path / f"fork-{self.fork}"
        return path / f"iter-{self.iteration}"

    def describe_load(self) -> str:
        """`proxy 1KB 20u`, `proxy 100KB 350/s (8 threads)`: what a step sends, whatever its iteration."""
        load = f"{self.users}u" if self.rate is None else f"{rate_label(self.rate)}/s ({self.users} threads)"
        return f"{self.scenario} {self.payload_label} {load}"

    def describe(self) -> str:
        fork = f"fork {self.fork} " if self.fork is not None else ""
        return f"{self.target + ' ' if self.target else ''}{self.describe_load()} {fork}iter {self.iteration}"


# A target's most warm-up with warmup_s: auto when the plan does not say (target_warmup_max_s).
DEFAULT_TARGET_WARMUP_MAX_S = 60
MAX_REPEATS = 1000   # the most iterations × forks a plan may ask for (forks.md's costliest advice: 340)


@dataclass
class Plan:
    name: str
    scenarios: list[str]
    payloads: list[int | payload_files.PayloadFile]   # generated sizes (bytes) and payload files
    users: list[int]            # empty in an open-model plan that lets each rate choose its pool
    duration_s: float
    warmup_s: float
    iterations: int = 1
    forks: int = 1              # engine processes per target, each running every iteration (Step.fork)
    keepalive: bool = True
    timeout_s: float = 120
    max_threads_per_process: int = 100
    description: str = ""
    rates: list[float] = field(default_factory=list)   # non-empty: an open-model plan
    script: str = ""            # a user's own Grinder script runs the steps (its name is the scenario)
    restart: str = "per-run"    # per-step: a fresh ESB process for every step
    payload_check: str = ""     # how payload files' echoes are compared ("" without payload files)
    # Each target loaded this long before its first step (esbperf/run/warmup.py); a mapping gives it per
    # kind of target (WARMUP_KINDS), as does target_warmup_max_s: target_warmup() reads both.
    target_warmup_s: float | dict[str, float] = 0
    # warmup_s: auto: the window opens once the step is steady (esbperf/core/steady.py), no sooner than
    # warmup_s (then the minimum) and no later than warmup_max_s after the workers' first report.
    warmup_auto: bool = False
    warmup_max_s: float = 60
    # Loaded until settled, at most this long; None: 60 s with warmup_s: auto, else target_warmup_s.
    target_warmup_max_s: float | dict[str, float] | None = None
    # A target's warm-up is judged over at most this last stretch (steady.settling).
    target_warmup_horizon_s: float | dict[str, float] = 120
    arrivals: str = "uniform"   # open model: evenly spaced, or Poisson (exponential gaps)
    seed: int | None = None     # Poisson arrivals' seed (the runner draws one when the plan has none)
    capacity: capacities.Goal | None = None   # a capacity search per target, scenario and payload
    # With --cross-check: the iterations whose closed-model steps are measured by wrk too (empty: all).
    cross_check_iterations: list[int] = field(default_factory=list)
    workers: str = "warm"       # warm: one set of worker JVMs for the run (esbperf/run/pool.py); fresh: per step
    order: str = "planned"      # random: each fork's cells and each cell's targets shuffled (steps())
    # The sizes some scenarios are measured at, when not all of `payloads` (cells()).
    scenario_payloads: dict[str, list[int]] = field(default_factory=dict)
    # Forks after the plan's own (numbered forks + 1, …), each against these of its targets (steps()).
    added_forks: list[list[str]] = field(default_factory=list)
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def model(self) -> str:
        return "open" if self.rates or self.capacity else "closed"

    def pool(self, rate: float) -> int:
        """The thread pool of a capacity probe at `rate`: the plan's `users`, or one the goal sizes."""
        return self.users[0] if self.users else max(default_pool(rate), self.capacity.pool(rate))

    def loads(self) -> list[tuple[int, float | None]]:
        """(users, rate) of each load level: users alone (closed), or each rate with each pool. A
        capacity plan's search chooses its rates as it goes: here only its first."""
        if self.capacity:
            return [(self.pool(self.capacity.start_rate), self.capacity.start_rate)]
        if not self.rates:
            return [(u, None) for u in self.users]
        return [(u, r) for r in self.rates for u in (self.users or [default_pool(r)])]

    def steps(self, targets: list[str] | None = None) -> list[Step]:
        """Every step in run order: forks outermost (each fork of every target at once: its engines
        started afresh before it), then iterations, then the cells (scenario, payload, load), each
        against every target back to back: the cells in the file's order and the targets' order
        rotated by one per iteration, or with `order: random` both shuffled per fork and iteration
        (Abedi and Brecht's randomised multiple interleaved trials), from a generator seeded with the
        plan's name, the fork and the iteration: the same plan runs its steps in the same order. After
        the plan's forks, its `added_forks`, each against those of the targets it names."""
        everyone = targets or [""]
        out = []
        chosen = [everyone] * self.forks + [[t for t in everyone if t in added] for added in self.added_forks]
        for f, targets in enumerate(chosen, start=1):
            if not targets:   # an added fork of none of these targets
                continue
            for i in range(1, self.iterations + 1):
                cells = [(s, p, users, rate) for s, p in self.cells() for users, rate in self.loads()]
                shift = (i - 1 + f - 1) % len(targets)
                rotated = targets[shift:] + targets[:shift]
                drawn = random.Random(f"{self.name}/fork {f}/iteration {i}") if self.order == "random" else None
                if drawn is not None:
                    drawn.shuffle(cells)
                for s, p, users, rate in cells:
                    size, file = (p, None) if isinstance(p, int) else (p.size, p)
                    order = drawn.sample(targets, len(targets)) if drawn is not None else rotated
                    out += [Step(s, size, users, i, t, rate, file, f if len(chosen) > 1 else None) for t in order]
        return out

    def cells(self) -> list[tuple[str, int | payload_files.PayloadFile]]:
        """(scenario, payload) of every cell the plan measures, in the file's order: each scenario at
        each of `payloads`, or at those `scenario_payloads` gives it."""
        return [(s, p) for s in self.scenarios for p in self.payloads
                if s not in self.scenario_payloads or p in self.scenario_payloads[s]]

    def target_warmup(self, kind: str) -> tuple[float, float]:
        """The least and the most seconds a target of `kind` (WARMUP_KINDS) is loaded before its first
        step: the same unless warmup_s is auto."""
        least = seconds_for(kind, self.target_warmup_s)
        if self.target_warmup_max_s is None:
            return least, max(least, DEFAULT_TARGET_WARMUP_MAX_S) if self.warmup_auto else least
        return least, max(least, seconds_for(kind, self.target_warmup_max_s))

    def target_horizon(self, kind: str) -> float:
        """How long a target of `kind` must have stopped moving to count as warm (steady.settled)."""
        return seconds_for(kind, self.target_warmup_horizon_s)

    def warms_targets(self) -> bool:
        """Whether any kind of target is loaded before its first step."""
        return any(self.target_warmup(kind)[0] > 0 for kind in WARMUP_KINDS)

    def cross_checks(self, iteration: int) -> bool:
        """Whether a run with --cross-check measures this iteration's closed-model steps with wrk too."""
        return not self.cross_check_iterations or iteration in self.cross_check_iterations

    def sizes(self) -> list[int]:
        """Every payload's size in bytes, generated or a file's."""
        return [p if isinstance(p, int) else p.size for p in self.payloads]

    def calibration_sizes(self) -> list[int]:
        """The payloads a run calibrates the client at (esbperf/run/calibration.py): the smallest
        and the largest."""
        return sorted({min(self.sizes()), max(self.sizes())})

    def payload_files(self) -> list[payload_files.PayloadFile]:
        return [p for p in self.payloads if not isinstance(p, int)]

    def step_seconds(self) -> float:
        """A step's warm-up and measurement at most (an auto warm-up's longest)."""
        return (self.warmup_max_s if self.warmup_auto else self.warmup_s) + self.duration_s

    def warmup_label(self) -> str:
        """"5 s", or "auto (1-60 s)"."""
        return f"auto ({self.warmup_s:g}-{self.warmup_max_s:g} s)" if self.warmup_auto else f"{self.warmup_s:g} s"

    def check_agents(self, agents: int, max_processes: int, where: str) -> None:
        """One line when a load level needs more worker processes per agent than an agent starts
        (agents/agent.yaml `max_worker_processes`); `where` names the agents (for the message)."""
        for users, _ in self.loads():
            processes, threads = self.processes_threads(users, agents)
            if processes > max_processes:
                raise EsbperfError(
                    f"{self.source or self.name}: {users} users need {processes} worker processes of {threads} threads "
                    f"on each of {where}, and an agent starts at most {max_processes} (agents/agent.yaml "
                    f"max_worker_processes): give fewer users, more threads per process (max_threads_per_process "
                    f"{self.max_threads_per_process}), or more load hosts")

    def processes_threads(self, users: int, agents: int = 1) -> tuple[int, int]:
        """Worker processes and threads per agent for `users` concurrent users over `agents`:
        ceil(share ÷ max_threads_per_process) processes of ceil(share ÷ processes) threads.

        Every agent gets the same start signal, so each runs processes x threads >= its share;
        the threads beyond `users` stop at once (scenario.py), so exactly `users` load the target."""
        per_agent = math.ceil(users / agents)
        processes = math.ceil(per_agent / self.max_threads_per_process)
        return processes, math.ceil(per_agent / processes)

    @staticmethod
    def process_rate(rate: float, processes: int, agents: int) -> float:
        """The open model's arrivals per second of each worker process: the step's `rate` split
        evenly over the `processes` of each of the `agents` (every process keeps a schedule of
        its own)."""
        return rate / (processes * agents)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        if not d["rates"]:
            d.pop("rates")           # a closed plan, as its file says it
        if not d["script"]:
            d.pop("script")
        if d["restart"] == "per-run":
            d.pop("restart")         # the default, as plans without the field say it
        if d["arrivals"] == "uniform" and not self.capacity:
            d.pop("arrivals")
        if d["seed"] is None:
            d.pop("seed")
        if d.pop("warmup_auto"):     # as the file says it
            d["warmup_min_s"], d["warmup_s"] = d["warmup_s"], "auto"
        else:
            d.pop("warmup_max_s")
        if d["target_warmup_max_s"] is None:
            d.pop("target_warmup_max_s")
        if d["target_warmup_horizon_s"] == 120:
            d.pop("target_warmup_horizon_s")   # the default, as plans without the field say it
        if not d["cross_check_iterations"]:
            d.pop("cross_check_iterations")
        if d["workers"] == "warm":
            d.pop("workers")         # the default, as plans without the field say it
        if d["order"] == "planned":
            d.pop("order")
        if d["forks"] == 1:
            d.pop("forks")
        if not d["added_forks"]:
            d.pop("added_forks")
        # Those of its own scenarios (a round's part, or --only, keeps some of a plan's scenarios).
        d["scenario_payloads"] = {k: v for k, v in d["scenario_payloads"].items() if k in self.scenarios}
        if not d["scenario_payloads"]:
            d.pop("scenario_payloads")
        if self.capacity is None:
            d.pop("capacity")
        else:
            d["capacity"] = self.capacity.to_dict()
        # Files by absolute path, pinned by hash: --resume refuses a file that changed.
        d["payloads"] = [p if isinstance(p, int) else {"file": p.path, "sha256": p.sha256} for p in self.payloads]
        if not d["payload_check"]:
            d.pop("payload_check")
        return d

    @classmethod
    def from_dict(cls, data: dict, source: str) -> "Plan":
        """A plan as recorded in run.json (to_dict), validated again."""
        data = dict(data)
        original = data.pop("source", "")
        script = data.pop("script", "")
        if script:                   # as recorded: the script's name as scenario, its own payload
            data.pop("scenarios", None)
            if data.get("payloads") == [SCRIPT_PAYLOAD]:
                del data["payloads"]
        plan = _validate(data, source, script)
        plan.source = original or source
        return plan


def resolve(name_or_path: str | Path) -> Path:
    return resolve_named(name_or_path, PLANS, "plan")


def load(name_or_path: str | Path, script: str = "") -> Plan:
    """The plan `name_or_path`; with `script` (a user's own Grinder script's name), a plan of
    users, durations and iterations for it: no scenarios, payloads only as a setting for the script."""
    path = resolve(name_or_path)
    return _validate(load_yaml(path), str(path), script)


def _validate(data: dict, source: str, script: str = "") -> Plan:
    def fail(name: str, got: Any) -> None:
        shown = repr(got)   # an arbitrary value shown in part: the message stays a readable line
        raise EsbperfError(f"{source}: field '{name}' must be {FIELDS[name]}, "
                           f"got {shown if len(shown) <= 120 else shown[:117] + '...'}")

    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise EsbperfError(f"{source}: unknown field {quoted(unknown[0])} (allowed: {', '.join(FIELDS)})")
    if script and "scenarios" in data:
        raise EsbperfError(f"{source}: field 'scenarios' does not apply with --script: the script is the one "
                           "scenario; remove it (or give the plan without --script)")
    open_model = "rates" in data or "capacity" in data
    for required in (() if script else ("scenarios", "payloads")) + ("duration_s",) + (() if open_model else ("users",)):
        if required not in data:
            raise EsbperfError(f"{source}: field '{required}' is missing; it must be {FIELDS[required]}")

    def number(name: str, default: Any, minimum: float, integer: bool = False, strict: bool = True):
        value = data.get(name, default)
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or value < minimum or (strict and value == minimum and minimum == 0):
            fail(name, value)
        return value

    def per_kind(name: str, default: float) -> float | dict[str, float]:
        """A number of seconds >= 0, or one per kind of target: every kind of WARMUP_KINDS, no other."""
        value = data.get(name, default)
        if not isinstance(value, dict):
            return number(name, default, 0, strict=False)
        if set(value) != set(WARMUP_KINDS) or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0
                                                  for v in value.values()):
            raise EsbperfError(f"{source}: field '{name}' per kind of target must give each of "
                               f"{', '.join(WARMUP_KINDS)} a number of seconds >= 0, got {value!r}")
        return {kind: value[kind] for kind in WARMUP_KINDS}

    def a_list(name: str) -> list:
        value = data[name]
        if not isinstance(value, list) or not value:
            raise EsbperfError(f"{source}: field '{name}' must be a non-empty list: {FIELDS[name]}; got {value!r}")
        return value

    names = scenarios.names()
    scenario_list = [script] if script else a_list("scenarios")
    for i, s in enumerate([] if script else scenario_list):
        if s not in names:
            raise EsbperfError(f"{source}: scenarios[{i}]: unknown scenario {s!r} (allowed: {', '.join(names)})")
    payloads = ([] if "payloads" in data or not script else [SCRIPT_PAYLOAD]) + _payloads(
        a_list("payloads") if "payloads" in data else [], scenario_list, source, script)
    contract = scenarios.contract()
    payload_check = ""
    if any(not isinstance(p, int) for p in payloads):
        payload_check = data.get("payload_check", contract.DEFAULT_FILE_CHECK)
        if payload_check not in contract.FILE_CHECKS:
            fail("payload_check", payload_check)
    elif "payload_check" in data:
        raise EsbperfError(f"{source}: field 'payload_check' applies only to payload files, and the plan has none")
    if data.get("users") == [] and (data.get("rates") or data.get("capacity")):
        del data["users"]            # as run.json records an open plan that let each rate choose its pool
    users = []
    for i, u in enumerate(a_list("users") if "users" in data else []):
        if isinstance(u, bool) or not isinstance(u, int) or u < 1:
            raise EsbperfError(f"{source}: users[{i}]: must be a positive integer, got {u!r}")
        users.append(u)
    rates = []
    for i, r in enumerate(a_list("rates") if "rates" in data else []):
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not r > 0 or r != r or r == float("inf"):
            raise EsbperfError(f"{source}: rates[{i}]: must be a positive number of requests per second, got {r!r}")
        rates.append(r)
    # Each value is a step folder of its own: a second copy would be measured, then refused.
    for name, values in (("scenarios", [] if script else scenario_list), ("users", users), ("rates", rates)):
        _once(source, name, values)
    goal = None
    if "capacity" in data:
        goal = capacities.parse(data["capacity"], lambda k: f"field {quoted('capacity' + ('.' + k if k else ''))}",
                                source)
        if rates:
            raise EsbperfError(f"{source}: field 'rates' does not go with 'capacity': the capacity search chooses "
                               "the rates; remove one")
        if len(users) > 1:
            raise EsbperfError(f"{source}: field 'users' of a capacity plan is its one thread pool (or leave it out: "
                               f"each probe's pool then follows its rate and the goal), got {users!r}")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise EsbperfError(f"{source}: field 'name' must be a plain name (letters, digits, '.', '_', '-', not "
                           f"starting with '.', at most 100 characters; it names the run folder), got {name!r}")
    restart = data.get("restart", "per-run")
    if restart not in RESTARTS:
        fail("restart", restart)
    workers = data.get("workers", "warm")
    if workers not in WORKER_MODES:
        fail("workers", workers)
    order = data.get("order", "planned")
    if order not in ORDERS:
        fail("order", order)
    arrivals = data.get("arrivals", "poisson" if goal else "uniform")   # capacity: requests arrive at random
    if arrivals not in ARRIVALS:
        fail("arrivals", arrivals)
    if arrivals != "uniform" and not rates and not goal:
        raise EsbperfError(f"{source}: field 'arrivals' applies to an open-model plan (one with rates); this one has "
                           "users only")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31):
        fail("seed", seed)
    if seed is not None and arrivals != "poisson":
        raise EsbperfError(f"{source}: field 'seed' is the seed of Poisson arrivals; give arrivals: poisson or remove it")
    keepalive = data.get("keepalive", True)
    if not isinstance(keepalive, bool):
        fail("keepalive", keepalive)
    iterations = number("iterations", 1, 1, integer=True)
    forks = number("forks", 1, 1, integer=True)
    if iterations * forks > MAX_REPEATS:   # a plan's steps are listed before it runs: 10**20 would exhaust memory
        raise EsbperfError(f"{source}: fields 'iterations' ({iterations}) and 'forks' ({forks}) make "
                           f"{iterations * forks} repeats of each step; at most {MAX_REPEATS}")
    if forks > 1 and restart == "per-step":
        raise EsbperfError(f"{source}: field 'forks' does not go with restart: per-step (every step is a process of "
                           "its own already); remove one")
    checked = _cross_check_iterations(data, source, iterations, bool(rates or goal))
    added = data.get("added_forks", [])
    if not isinstance(added, list) or not all(isinstance(a, list) and a and all(isinstance(t, str) and t for t in a)
                                              for a in added):
        fail("added_forks", added)
    if added and forks < 2:
        raise EsbperfError(f"{source}: field 'added_forks' adds to a plan of forks (2 or more), this one runs {forks}")
    by_scenario = _scenario_payloads(data.get("scenario_payloads", {}), scenario_list, payloads, source)
    warmup_auto = data.get("warmup_s") == "auto"
    target_warmup_s = per_kind("target_warmup_s", 0)
    horizon = per_kind("target_warmup_horizon_s", 120)
    if any(seconds_for(kind, horizon) <= 0 for kind in WARMUP_KINDS):
        raise EsbperfError(f"{source}: field 'target_warmup_horizon_s' must be more than 0 seconds, got {horizon!r}")
    if warmup_auto:
        warmup_s = number("warmup_min_s", 1, 0, strict=False)
        warmup_max_s = number("warmup_max_s", 60, 0)
        if warmup_max_s < warmup_s:
            raise EsbperfError(f"{source}: field 'warmup_max_s' ({warmup_max_s:g}) must be at least warmup_min_s "
                               f"({warmup_s:g})")
    else:
        for bound in ("warmup_min_s", "warmup_max_s"):
            if bound in data:
                raise EsbperfError(f"{source}: field '{bound}' applies to warmup_s: auto; this plan's warm-up is "
                                   f"fixed ({data.get('warmup_s', 0)!r})")
        warmup_s, warmup_max_s = number("warmup_s", 0, 0, strict=False), 60
    # A target's warm-up may go on until settled whatever its steps' own warm-up is.
    target_warmup_max_s = per_kind("target_warmup_max_s", None) if "target_warmup_max_s" in data else None
    if target_warmup_max_s is not None:
        by_kind = isinstance(target_warmup_max_s, dict) or isinstance(target_warmup_s, dict)
        for kind in WARMUP_KINDS:
            most, at_least = seconds_for(kind, target_warmup_max_s), seconds_for(kind, target_warmup_s)
            if most < at_least:
                of = f" for {kind}" if by_kind else ""
                raise EsbperfError(f"{source}: field 'target_warmup_max_s' ({most:g}{of}) must be at least "
                                   f"target_warmup_s ({at_least:g}{of})")
    return Plan(
        name=name,
        description=str(data.get("description", "")),
        scenarios=list(scenario_list), payloads=payloads, users=users, rates=rates, script=script,
        duration_s=number("duration_s", None, 0),
        warmup_s=warmup_s, warmup_auto=warmup_auto, warmup_max_s=warmup_max_s,
        iterations=iterations, forks=forks,
        keepalive=keepalive,
        timeout_s=number("timeout_s", 120, 0),
        max_threads_per_process=number("max_threads_per_process", 100, 1, integer=True),
        restart=restart,
        payload_check=payload_check,
        target_warmup_s=target_warmup_s, target_warmup_max_s=target_warmup_max_s, target_warmup_horizon_s=horizon,
        arrivals=arrivals, seed=seed, capacity=goal, cross_check_iterations=checked, workers=workers,
        order=order, scenario_payloads=by_scenario, added_forks=[list(a) for a in added], source=source,
    )


def _cross_check_iterations(data: dict, source: str, iterations: int, open_model: bool) -> list[int]:
    """The plan's `cross_check_iterations`, checked: iteration numbers of this plan, each once."""
    if "cross_check_iterations" not in data:
        return []
    value = data["cross_check_iterations"]
    if open_model:
        raise EsbperfError(f"{source}: field 'cross_check_iterations' applies to closed-model steps; an open-model "
                           "plan (rates or capacity) is never cross-checked (wrk has no arrival rate): remove it")
    if not isinstance(value, list) or not value:
        raise EsbperfError(f"{source}: field 'cross_check_iterations' must be a non-empty list: "
                           f"{FIELDS['cross_check_iterations']}; got {value!r}")
    for i, n in enumerate(value):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= iterations:
            raise EsbperfError(f"{source}: cross_check_iterations[{i}]: must be an iteration of the plan, 1 to "
                               f"{iterations} (its `iterations`), got {n!r}")
    _once(source, "cross_check_iterations", value)
    return sorted(value)


def _scenario_payloads(value: Any, scenario_list: list[str], payloads: list, source: str) -> dict[str, list[int]]:
    """`scenario_payloads`: per scenario of the plan, the sizes of its `payloads` it is measured at."""
    if not isinstance(value, dict):
        raise EsbperfError(f"{source}: field 'scenario_payloads' must be {FIELDS['scenario_payloads']}; got {value!r}")
    sizes = [p for p in payloads if isinstance(p, int)]
    out: dict[str, list[int]] = {}
    for scenario, listed in value.items():
        if scenario not in scenario_list:
            raise EsbperfError(f"{source}: field 'scenario_payloads': {scenario!r} is not one of the plan's scenarios "
                               f"({', '.join(scenario_list)})")
        if not isinstance(listed, list) or not listed:
            raise EsbperfError(f"{source}: scenario_payloads.{scenario}: must be a non-empty list of the plan's "
                               f"payload sizes; got {listed!r}")
        chosen = []
        for i, p in enumerate(listed):
            try:
                size = parse_size(p)
            except ValueError:
                size = None
            if size not in sizes:
                raise EsbperfError(f"{source}: scenario_payloads.{scenario}[{i}]: {p!r} is not one of the plan's "
                                   f"payload sizes ({', '.join(size_label(s) for s in sizes)})")
            chosen.append(size)
        _once(source, f"scenario_payloads.{scenario}", chosen)
        out[scenario] = [s for s in sizes if s in chosen]   # in the order of `payloads`
    return out


def _payloads(items: list, scenario_list: list[str], source: str, script: str) -> list:
    """The `payloads` list: sizes, {file: PATH} (with sha256: HEX as run.json records it) and
    {folder: DIR} (its *.xml files, smallest first); paths relative to the plan file's folder."""
    out: list = []
    fields: list[str] = []   # the item each payload came from, for error lines
    for i, p in enumerate(items):
        where = f"{source}: payloads[{i}]"
        if not isinstance(p, dict):
            try:
                out.append(parse_size(p))
            except ValueError:
                raise EsbperfError(f"{where}: {p!r} is not a size (e.g. 512B, 0.5KB, 100KB, 1MB) "
                                   "or a payload file ({file: PATH} or {folder: DIR})") from None
            fields.append(where)
            continue
        kind = [k for k in ("file", "folder") if k in p]
        if len(kind) != 1 or set(p) - {"file", "folder", "sha256"} or ("sha256" in p and kind != ["file"]) \
                or not isinstance(p[kind[0]], str) or not p[kind[0]]:
            raise EsbperfError(f"{where}: must be {{file: PATH}} or {{folder: DIR}}, got {p!r}")
        if script:
            raise EsbperfError(f"{where}: payload files are for esbperf's scenarios; a user's script sends its own")
        path = Path(source).parent / Path(p[kind[0]]).expanduser()
        for f in [path] if kind == ["file"] else payload_files.folder_files(path, where):
            out.append(payload_files.load(f, where, scenario_list, p.get("sha256")))
            fields.append(where)
    # Step folders are named by payload label and the analysis tells payloads apart by size:
    # a payload file must differ from every other payload in both.
    def label(p) -> str:
        return size_label(p) if isinstance(p, int) else p.label

    def size(p) -> int:
        return p if isinstance(p, int) else p.size
    for n, p in enumerate(out):
        for m, q in enumerate(out[:n]):
            if isinstance(p, int) and isinstance(q, int) and p == q:
                raise EsbperfError(f"{fields[n]}: {size_label(p)} ({p} bytes) is listed twice (also as {fields[m]}; "
                                   "each payload is a step of its own: list it once)")
            if label(p) == label(q) or size(p) == size(q):
                same = f"label {label(p)}" if label(p) == label(q) else f"size {size(p)} bytes"
                raise EsbperfError(f"{fields[n]}: {getattr(p, 'path', label(p))} has the {same} of "
                                   f"{getattr(q, 'path', label(q))} ({fields[m]}); each payload needs its own "
                                   "label (its step folders) and size (the analysis's key)")
    return out


def _once(source: str, field_name: str, values: list) -> None:
    """One line naming a value listed twice."""
    for i, value in enumerate(values):
        if value in values[:i]:
            raise EsbperfError(f"{source}: {field_name}[{i}]: {value!r} is listed twice (each value is a step of its "
                               "own: list it once)")
