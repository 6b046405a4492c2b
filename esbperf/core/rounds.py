"""Rounds (console-config/rounds/<name>.yaml): a public comparison that one command reruns
(`esbperf round`). A round names its testbed, the closed-model plan and the targets it measures, the
capacity plans and the targets they search, the independent client that cross-checks the closed
steps, and the folder its results are published in; a `quick` variant does the same with less.
Every error names the file and the field.

A plan's scenarios that not every target serves (a floor serves only some: esb-projects/README.md)
are split off: each group of scenarios runs as a part of its own with the targets that serve them
all, interleaved step by step (`split`)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from esbperf.core import engines, plan as plans, topology
from esbperf.core.config import load_yaml, resolve_named
from esbperf.core.errors import EsbperfError, quoted
from esbperf.core.project import CONSOLE_CONFIG, ROOT

ROUNDS = CONSOLE_CONFIG / "rounds"
VARIANTS = ("full", "quick")
FIELDS = {
    "name": "a plain name (it names the results folder)",
    "description": "text",
    "testbed": "the testbed the round measures on (a name of console-config/testbeds/ or a file)",
    "published": "the folder, relative to the checkout, that `esbperf round --publish` writes the results into",
    "cross_check": "the independent client that measures the closed steps of the plan's cross_check_iterations "
                   "too (wrk), or none",
    "full": "the round: {closed: PLAN, targets: [...], capacity: [PLAN, ...], capacity_targets: [...]}",
    "quick": "the quick variant, with the fields of `full`",
}
VARIANT_FIELDS = {
    "closed": "a closed-model plan (no rates, no capacity)",
    "targets": "the targets of the closed plan: a non-empty list of the testbed's target names",
    "capacity": "a list of plans with a `capacity:` goal (may be empty)",
    "capacity_targets": "the targets every capacity plan searches: a list of the testbed's target names",
}


@dataclass(frozen=True)
class Part:
    """One run of a round: a plan (or the scenarios of it that these targets all serve) and its targets."""

    kind: str                     # "closed" or "capacity"
    plan: plans.Plan
    targets: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.plan.name} ({', '.join(self.plan.scenarios)}) against {', '.join(self.targets)}"


@dataclass(frozen=True)
class Variant:
    name: str                     # "full" or "quick"
    closed: plans.Plan
    targets: tuple[str, ...]
    capacity: tuple[plans.Plan, ...]
    capacity_targets: tuple[str, ...]

    def parts(self, testbed: topology.Testbed) -> list[Part]:
        """The runs in order: the closed plan's parts, then each capacity plan's."""
        closed = [Part("closed", p, t) for p, t in split(self.closed, self.targets, testbed)]
        return closed + [Part("capacity", p, t) for plan in self.capacity
                         for p, t in split(plan, self.capacity_targets, testbed)]


@dataclass(frozen=True)
class Round:
    name: str
    description: str
    testbed: str
    published: Path
    cross_check: str | None
    full: Variant
    quick: Variant
    source: str

    def variant(self, quick: bool) -> Variant:
        return self.quick if quick else self.full


def serves(testbed: topology.Testbed, target: str, scenario: str) -> bool:
    """Whether a target of the testbed serves a scenario: the baseline and an engine esbperf does not
    know serve every one (verify says whether they do), an engine its `serves` list."""
    t = testbed.target(target)
    engine = engines.load_all().get(t.esb) if t.kind == "esb" else None
    return engine is None or engine.serves is None or scenario in engine.serves


def split(plan: plans.Plan, targets: tuple[str, ...], testbed: topology.Testbed) -> list[tuple[plans.Plan, tuple[str, ...]]]:
    """The plan's scenarios grouped by the targets that serve them, in the plan's order: each group a
    plan of its own (named `<plan>-<scenario>-…` when the plan splits) with those targets. A scenario
    no target serves is an error."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for scenario in plan.scenarios:
        serving = tuple(t for t in targets if serves(testbed, t, scenario))
        if not serving:
            raise EsbperfError(f"{plan.source or plan.name}: no target of {', '.join(targets)} serves {scenario}")
        groups.setdefault(serving, []).append(scenario)
    if len(groups) == 1:
        [(serving, _)] = groups.items()
        return [(plan, serving)]
    return [(replace(plan, name=f"{plan.name}-{'-'.join(group)}", scenarios=group), serving)
            for serving, group in groups.items()]


def resolve(name_or_path: str | Path) -> Path:
    return resolve_named(name_or_path, ROUNDS, "round")


def load(name_or_path: str | Path) -> Round:
    path = resolve(name_or_path)
    return _validate(load_yaml(path), str(path))


def _validate(data: dict, source: str) -> Round:
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise EsbperfError(f"{source}: unknown field {quoted(unknown[0])} (allowed: {', '.join(FIELDS)})")
    for required in ("testbed", "published", *VARIANTS):
        if required not in data:
            raise EsbperfError(f"{source}: field '{required}' is missing; it must be {FIELDS[required]}")

    def text(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise EsbperfError(f"{source}: field '{name}' must be {FIELDS[name]}, got {value!r}")
        return value

    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not plans.NAME_RE.match(name):
        raise EsbperfError(f"{source}: field 'name' must be {FIELDS['name']}, got {name!r}")
    published = Path(text("published", data["published"]))
    if published.is_absolute() or ".." in published.parts:
        raise EsbperfError(f"{source}: field 'published' must be a folder inside the checkout, given relative to "
                           f"it, got {data['published']!r}")
    cross_check = data.get("cross_check")
    if cross_check not in (None, "wrk"):
        raise EsbperfError(f"{source}: field 'cross_check' must be {FIELDS['cross_check']}, got {cross_check!r}")
    return Round(name, str(data.get("description", "")), text("testbed", data["testbed"]), ROOT / published,
                 cross_check, *(_variant(data[v], v, source) for v in VARIANTS), source)


def _variant(data: Any, name: str, source: str) -> Variant:
    if not isinstance(data, dict):
        raise EsbperfError(f"{source}: field '{name}' must be {FIELDS[name]}, got {data!r}")
    unknown = [k for k in data if k not in VARIANT_FIELDS]
    if unknown:
        raise EsbperfError(f"{source}: unknown field {quoted(f'{name}.{unknown[0]}')} "
                           f"(allowed: {', '.join(VARIANT_FIELDS)})")

    def fail(field: str, got: Any) -> EsbperfError:
        return EsbperfError(f"{source}: field '{name}.{field}' must be {VARIANT_FIELDS[field]}, got {got!r}")

    def names(field: str, required: bool) -> tuple[str, ...]:
        value = data.get(field, None if required else [])
        if not isinstance(value, list) or (required and not value) or \
                not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value):
            raise fail(field, value)
        return tuple(value)

    if not isinstance(data.get("closed"), str):
        raise fail("closed", data.get("closed"))
    closed = plans.load(data["closed"])
    if closed.model != "closed":
        raise fail("closed", data["closed"])
    capacity = tuple(plans.load(p) for p in names("capacity", False))
    for p in capacity:
        if p.capacity is None:
            raise EsbperfError(f"{source}: field '{name}.capacity': plan {p.name} has no `capacity:` goal")
    targets = names("capacity_targets", bool(capacity))
    return Variant(name, closed, names("targets", True), capacity, targets)
