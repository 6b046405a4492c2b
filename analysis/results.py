"""Results folders as the sweep runner writes them (esbperf/results.py): a run (`run.json`) and
its steps.

Steps are found by their `step.json`, never by folder names. A step still being written lives in
a folder whose name starts with `.tmp-`, an interrupted one is set aside as `.aborted-…`; both
are counted and skipped, as is anything else under a hidden folder (e.g. a report being written)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esbperf.errors import EsbperfError
from esbperf.plan import size_label

UNFINISHED_PREFIXES = (".tmp-", ".aborted-", ".failed-")
BASELINE_TARGET = "direct"
# step.json fields the analysis cannot do without, and their types.
REQUIRED_STEP_FIELDS = {"scenario": str, "target": str, "payload_bytes": int, "users": int,
                        "iteration": int, "warmup_end_ms": int, "end_ms": int}


@dataclass
class Step:
    dir: Path
    meta: dict[str, Any]

    @property
    def key(self) -> tuple:
        """What identifies a step within a run."""
        m = self.meta
        return (m["scenario"], m["target"], m["payload_bytes"], m["users"], m["iteration"])

    @property
    def payload_label(self) -> str:
        return self.meta.get("payload_label") or size_label(self.meta["payload_bytes"])

    def link_mbit(self, role: str) -> float | None:
        host = (self.meta.get("hosts") or {}).get(role) or {}
        value = host.get("link_mbit") if isinstance(host, dict) else None
        return value if isinstance(value, (int, float)) and value > 0 else None


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
    def is_baseline(self) -> bool:
        return self.target == BASELINE_TARGET

    @property
    def testbed(self) -> str:
        testbed = self.info.get("testbed")
        return str(testbed.get("name") if isinstance(testbed, dict) else testbed or "")

    @property
    def finished(self) -> bool:
        """False while the runner is still at it (or was stopped): run.json's `finished` is empty."""
        return "finished" not in self.info or bool(self.info["finished"])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise EsbperfError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise EsbperfError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise EsbperfError(f"{path}: expected a JSON object")
    return data


def _check_step(path: Path, meta: dict[str, Any]) -> None:
    for name, kind in REQUIRED_STEP_FIELDS.items():
        value = meta.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise EsbperfError(f"{path}: field '{name}' must be {kind.__name__}, got {value!r}")
    if meta["end_ms"] <= meta["warmup_end_ms"]:
        raise EsbperfError(f"{path}: empty measurement window (end_ms {meta['end_ms']} <= "
                           f"warmup_end_ms {meta['warmup_end_ms']})")


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
    if not (path / "run.json").exists():
        inside = sorted(p.parent.name for p in path.glob("*/run.json"))
        hint = f"; it holds the runs {', '.join(inside[:5])}{', …' if len(inside) > 5 else ''}" if inside else ""
        raise EsbperfError(f"{path}: not a run folder (no run.json){hint}")
    info = _read_json(path / "run.json")
    unfinished = sum(1 for p in path.rglob(".*") if p.is_dir() and p.name.startswith(UNFINISHED_PREFIXES))
    steps, seen = [], {}
    for step_file in sorted(path.glob("**/step.json")):
        if any(part.startswith(".") for part in step_file.relative_to(path).parts):
            continue
        meta = _read_json(step_file)
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


def label_runs(runs: list[Run]) -> None:
    """Label runs drawn together: the target, plus the run's name when two share a target."""
    targets = [r.target for r in runs]
    for r in runs:
        r.label = r.target if targets.count(r.target) == 1 else f"{r.target} ({r.name})"
