"""Results folders as the sweep runner writes them (esbperf/results/layout.py): a run (`run.json`)
and its steps.

Steps are found by their `step.json`, never by folder names. A step still being written lives in
a folder whose name starts with `.tmp-`, an interrupted one is set aside as `.aborted-…`; both
are counted and skipped, as is anything else under a hidden folder (e.g. a report being written)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esbperf.core import roles
from esbperf.core.errors import EsbperfError
from esbperf.core.plan import size_label
from esbperf.results import layout

BASELINE_TARGET = "direct"
# step.json fields the analysis cannot do without, and their types.
REQUIRED_STEP_FIELDS = {"scenario": str, "target": str, "payload_bytes": int, "users": int,
                        "iteration": int, "warmup_end_ms": int, "end_ms": int}
# step.json `xcheck` (the runner's wrk cross-check of a closed-model step): its figures, those
# the analysis needs first; or `skipped` with the reason.
XCHECK_FIGURES = ("tps", "mean_ms", "p50_ms", "p99_ms")
XCHECK_REQUIRED = ("tps", "mean_ms")


@dataclass
class Step:
    dir: Path
    meta: dict[str, Any]

    @property
    def key(self) -> tuple:
        """What identifies a step within a run."""
        m = self.meta
        return (m["scenario"], m["target"], m["payload_bytes"], m["users"], self.rate, self.fork, m["iteration"])

    @property
    def fork(self) -> int:
        """The engine process (fork) that measured the step: 1, 2, … (step.json `fork`; 1 when absent,
        as in every run before forks): its iterations are nested in it (analysis/forks.py)."""
        return self.meta.get("fork", 1)

    @property
    def model(self) -> str:
        """"open" (a fixed arrival rate) or "closed" (users in a loop; older step.json files)."""
        return "open" if self.meta.get("model") == "open" else "closed"

    @property
    def rate(self) -> float | None:
        """The open model's arrival rate over all agents (arrivals/s); None in a closed step."""
        return float(self.meta["rate"]) if self.model == "open" else None

    def host(self, role: str) -> dict:
        host = (self.meta.get("hosts") or {}).get(role)
        return host if isinstance(host, dict) else {}

    def interface(self, role: str) -> str | None:
        """The role's test-network interface, when the testbed names one."""
        value = self.host(role).get("interface")
        return value if isinstance(value, str) and value else None

    @property
    def payload_label(self) -> str:
        return self.meta.get("payload_label") or size_label(self.meta["payload_bytes"])

    def link_mbit(self, role: str) -> float | None:
        value = self.host(role).get("link_mbit")
        return value if isinstance(value, (int, float)) and value > 0 else None

    @property
    def xcheck(self) -> dict[str, Any] | None:
        """The wrk cross-check (step.json `xcheck`, checked on loading); None when the run was not
        asked for one."""
        value = self.meta.get("xcheck")
        return value if isinstance(value, dict) else None


@dataclass
class Run:
    dir: Path
    info: dict[str, Any]                    # run.json
    steps: list[Step]
    unfinished_steps: int                   # `.tmp-`, `.aborted-` and `.failed-` folders skipped
    name: str = ""                          # unique among the runs analysed together
    label: str = ""                         # what graphs and tables call it
    plan_name: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    target: str = ""

    @property
    def targets(self) -> list[str]:
        """The targets its steps measured: one, or several when the runner interleaved them."""
        return sorted({s.meta["target"] for s in self.steps})

    @property
    def has_baseline(self) -> bool:
        return BASELINE_TARGET in self.targets

    def hosts(self) -> dict[str, dict]:
        """run.json's hosts by role (address, link, cpus, interface)."""
        return {role: h for role, h in (self.info.get("hosts") or {}).items() if isinstance(h, dict)}

    def share_cores(self, a: str, b: str) -> bool:
        """Whether the hosts of two roles compete for CPU: they are one machine (the same address,
        or an emulated testbed) and their `cpus` are not disjoint (a host without `cpus` may run
        anywhere)."""
        hosts = self.hosts()
        if a not in hosts or b not in hosts:
            return False
        testbed = self.info.get("testbed")
        emulated = isinstance(testbed, dict) and bool(testbed.get("emulated"))
        if not emulated and not (hosts[a].get("address") and hosts[a].get("address") == hosts[b].get("address")):
            return False
        cpus_a, cpus_b = set(hosts[a].get("cpus") or []), set(hosts[b].get("cpus") or [])
        return not cpus_a or not cpus_b or bool(cpus_a & cpus_b)

    @property
    def roles(self) -> list[str]:
        """The host roles of the run: the fixed five and any load hosts named in run.json,
        step.json or by a step's monitor file, in data-path order."""
        names = set(roles.FIXED) | set(self.info.get("hosts") or {})
        for step in self.steps:
            names |= set(step.meta.get("hosts") or {})
            names |= layout.monitor_roles(step.dir)
        return roles.ordered(names)

    @property
    def testbed(self) -> str:
        testbed = self.info.get("testbed")
        return str(testbed.get("name") if isinstance(testbed, dict) else testbed or "")

    @property
    def finished(self) -> bool:
        """False while the runner is still at it (or was stopped): run.json's `finished` is empty."""
        return "finished" not in self.info or bool(self.info["finished"])


def _check_step(path: Path, meta: dict[str, Any]) -> None:
    for name, kind in REQUIRED_STEP_FIELDS.items():
        value = meta.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise EsbperfError(f"{path}: field '{name}' must be {kind.__name__}, got {value!r}")
    fork = meta.get("fork", 1)
    if not isinstance(fork, int) or isinstance(fork, bool) or fork < 1:
        raise EsbperfError(f"{path}: field 'fork' must be a whole number from 1 (the engine process), got {fork!r}")
    if meta.get("model") not in (None, "closed", "open"):
        raise EsbperfError(f"{path}: field 'model' must be 'closed' or 'open', got {meta['model']!r}")
    rate = meta.get("rate")
    if meta.get("model") == "open" and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
        raise EsbperfError(f"{path}: field 'rate' must be a positive number of arrivals per second in an "
                           f"open-model step, got {rate!r}")
    _check_xcheck(path, meta)
    if meta["end_ms"] <= meta["warmup_end_ms"]:
        raise EsbperfError(f"{path}: empty measurement window (end_ms {meta['end_ms']} <= "
                           f"warmup_end_ms {meta['warmup_end_ms']})")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _check_xcheck(path: Path, meta: dict[str, Any]) -> None:
    """`xcheck`, when there: {"skipped": reason}, or wrk's figures as non-negative numbers."""
    if "xcheck" not in meta or meta["xcheck"] is None:
        return
    xcheck = meta["xcheck"]
    if not isinstance(xcheck, dict):
        raise EsbperfError(f"{path}: field 'xcheck' must be an object (wrk's figures, or 'skipped' with the "
                           f"reason), got {xcheck!r}")
    if "skipped" in xcheck:
        if not isinstance(xcheck["skipped"], str) or not xcheck["skipped"]:
            raise EsbperfError(f"{path}: field 'xcheck.skipped' must say why in words, got {xcheck['skipped']!r}")
        return
    for name in XCHECK_FIGURES:
        value = xcheck.get(name)
        if (value is not None or name in XCHECK_REQUIRED) and not _number(value):
            raise EsbperfError(f"{path}: field 'xcheck.{name}' must be a non-negative number, got {value!r}")


def _name_of(value: Any) -> str:
    """run.json names things either directly or as a dict with a `name` (target, testbed)."""
    return str(value.get("name") or "") if isinstance(value, dict) else str(value or "")


def _plan_of(info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """run.json's plan name and plan, whether the plan is given as a dict or by name."""
    plan = info.get("plan")
    if isinstance(plan, dict):
        return str(info.get("plan_name") or plan.get("name") or ""), plan
    return str(info.get("plan_name") or plan or ""), {}


def load_run(path: Path) -> Run:
    """Read a run folder: run.json and every finished step. Fails clearly on an empty run."""
    path = Path(path)
    if not path.is_dir():
        raise EsbperfError(f"{path}: no such run folder")
    if not (path / layout.RUN_FILE).exists():
        inside = sorted(p.parent.name for p in path.glob(f"*/{layout.RUN_FILE}"))
        hint = f"; it holds the runs {', '.join(inside[:5])}{', …' if len(inside) > 5 else ''}" if inside else ""
        raise EsbperfError(f"{path}: not a run folder (no run.json){hint}")
    info = layout.read_json(path / layout.RUN_FILE)
    unfinished = sum(1 for p in path.rglob(".*") if p.is_dir() and p.name.startswith(layout.UNFINISHED_PREFIXES))
    steps, seen = [], {}
    for step_file in sorted(path.glob(f"**/{layout.STEP_FILE}")):
        if any(part.startswith(".") for part in step_file.relative_to(path).parts):
            continue
        meta = layout.read_json(step_file)
        _check_step(step_file, meta)
        step = Step(step_file.parent, meta)
        if step.key in seen:
            raise EsbperfError(f"{path}: two steps claim {step.key} ({seen[step.key]} and "
                               f"{step.dir.relative_to(path)}); remove one")
        seen[step.key] = step.dir.relative_to(path)
        steps.append(step)
    if not steps:
        detail = f" ({unfinished} unfinished or aborted step folder(s))" if unfinished else ""
        raise EsbperfError(f"{path}: no finished step in this run (no step.json){detail}; "
                           "was the run stopped before its first step ended?")
    plan_name, plan = _plan_of(info)
    targets = sorted({s.meta["target"] for s in steps})
    target = _name_of(info.get("target")) or "/".join(targets)
    return Run(path, info, steps, unfinished, name=path.name, plan_name=plan_name or
               str(steps[0].meta.get("plan") or ""), plan=plan, target=target)


def load_runs(paths: list[Path]) -> list[Run]:
    """Load runs and give each a unique name (its folder's, with the parent's when two share it)."""
    resolved = [Path(p).resolve() for p in paths]
    for i, p in enumerate(resolved):
        if p in resolved[:i]:
            raise EsbperfError(f"{paths[i]}: run given twice")
    runs = [load_run(p) for p in paths]
    names = [r.dir.name for r in runs]
    for r in runs:
        if names.count(r.dir.name) > 1:
            r.name = f"{r.dir.parent.name}/{r.dir.name}"
    return runs


def label_runs(runs: list[Run]) -> dict[tuple[str, str], str]:
    """Label runs drawn together, and each (run, target) series: the target, plus the run's name
    when two runs measured that target. A run that interleaved several targets gives a series
    per target, labelled exactly as if each target had had a run of its own."""
    targets = [r.target for r in runs]
    for r in runs:
        r.label = r.target if targets.count(r.target) == 1 else f"{r.target} ({r.name})"
    runs_of = {}
    for r in runs:
        for t in r.targets:
            runs_of.setdefault(t, []).append(r.name)
    return {(r.name, t): t if len(runs_of[t]) == 1 else f"{t} ({r.name})" for r in runs for t in r.targets}
