"""Rounds (console-config/rounds/<name>.yaml): a public comparison that one command reruns
(`esbperf round`). A round names its testbed, the closed-model plan and the targets it measures, the
capacity plans and the targets they search, the independent client that cross-checks the closed
steps, and the folder its results are published in; a `quick` variant does the same with less.
Every error names the file and the field.

A round may hold a standard and a control: `reference`, the target that is its measuring standard (the
reference engine: a set amount of work per request, so that its figures say how fast the machine is
for the same code), and a variant's `control`, a second set of forks of some of its targets run as a
part of its own, whose figures are set against theirs in the closed plan (the control pair: two
independent sets of processes of one engine, whose verdict must read "no difference shown"), and a
variant's `context`, targets shown beside the measured ones but not ranked (the floors, the reference
engine), in a closed plan of their own with as few forks as their role needs.

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
    "reference": "the target that is the round's measuring standard (the reference engine, esb-projects/README.md): "
                 "a target of the full round's closed plan or its context",
    "ranked": "the engines the round ranks, its page leading with their ranking at every cell all were measured at: "
              "a list of targets of the full round's closed plan",
    "full": "the round: {closed: PLAN, targets: [...], capacity: [PLAN, ...], capacity_targets: [...]}",
    "quick": "the quick variant, with the fields of `full`",
}
VARIANT_FIELDS = {
    "closed": "a closed-model plan (no rates, no capacity)",
    "targets": "the targets of the closed plan: a non-empty list of the testbed's target names",
    "capacity": "a list of plans with a `capacity:` goal (may be empty)",
    "capacity_targets": "the targets every capacity plan searches: a list of the testbed's target names",
    "cross_check": "this variant's independent client, over the round's `cross_check`: wrk, or none",
    "context": "targets shown beside the closed plan's, not ranked: {closed: PLAN, targets: [...]}, a closed plan of "
               "their own (a part after the closed plan's), against targets of the testbed the closed plan does not "
               "measure",
    "added_forks": "forks added where verdicts need them: {most: FORKS, budget_s: SECONDS}: after every part, the "
                   "closed plan's forks again for the engines of its unresolved pairs, up to `most` forks an engine "
                   "(more than the closed plan's) while the round stays within `budget_s` (docs/round-3/README.md)",
    "control": "the control pair: {closed: PLAN, targets: [...]}, a closed plan of 2 forks or more whose steps the "
               "closed plan also measures, against targets of the closed plan: each measured again in forks of its "
               "own, a part after the closed plan's",
}
CONTROL_FIELDS = ("closed", "targets")


@dataclass(frozen=True)
class Part:
    """One run of a round: a plan (or the scenarios of it that these targets all serve) and its targets."""

    kind: str                     # "closed", "context", "control" (the control pair's second forks), "capacity"
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
    control: plans.Plan | None = None          # the control pair's plan, and the targets it measures again
    control_targets: tuple[str, ...] = ()
    cross_check: str | None = None             # the variant's own, or the round's
    context: plans.Plan | None = None          # the plan of the targets shown beside, not ranked, and those targets
    context_targets: tuple[str, ...] = ()
    # Forks added where verdicts are unresolved: at most this many an engine, within this many seconds.
    most_forks: int = 0
    budget_s: float = 0

    def parts(self, testbed: topology.Testbed) -> list[Part]:
        """The runs in order: the closed plan's parts, the context's, the control pair's, then each
        capacity plan's."""
        closed = [Part("closed", p, t) for p, t in split(self.closed, self.targets, testbed)]
        if self.context is not None:
            closed += [Part("context", p, t) for p, t in split(self.context, self.context_targets, testbed)]
        control = [Part("control", p, t) for p, t in split(self.control, self.control_targets, testbed)] \
            if self.control is not None else []
        return closed + control + [Part("capacity", p, t) for plan in self.capacity
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
    reference: str | None = None
    ranked: tuple[str, ...] = ()

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
    full, quick = (_variant(data[v], v, source, cross_check) for v in VARIANTS)
    reference = data.get("reference")
    if reference is not None and (not isinstance(reference, str) or
                                  reference not in full.targets + full.context_targets):
        raise EsbperfError(f"{source}: field 'reference' must be {FIELDS['reference']} "
                           f"({', '.join(full.targets + full.context_targets)}), got {reference!r}")
    ranked = data.get("ranked", [])
    if not isinstance(ranked, list) or not all(isinstance(t, str) and t in full.targets for t in ranked) \
            or len(set(ranked)) != len(ranked):
        raise EsbperfError(f"{source}: field 'ranked' must be {FIELDS['ranked']} ({', '.join(full.targets)}), "
                           f"got {ranked!r}")
    return Round(name, str(data.get("description", "")), text("testbed", data["testbed"]), ROOT / published,
                 cross_check, full, quick, source, reference, tuple(ranked))


def _variant(data: Any, name: str, source: str, cross_check: str | None) -> Variant:
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
    measured = names("targets", True)
    control, control_targets = _control(data.get("control"), closed, measured, f"{name}.control", source) \
        if "control" in data else (None, ())
    context, context_targets = _context(data.get("context"), measured, f"{name}.context", source) \
        if "context" in data else (None, ())
    own = data.get("cross_check", cross_check)
    if own not in (None, "none", "wrk"):
        raise fail("cross_check", own)
    most, budget_s = closed.forks, 0
    if "added_forks" in data:
        added = data["added_forks"]
        if not isinstance(added, dict) or set(added) != {"most", "budget_s"} or isinstance(added["most"], bool) \
                or not isinstance(added["most"], int) or added["most"] <= closed.forks \
                or isinstance(added["budget_s"], bool) or not isinstance(added["budget_s"], (int, float)) \
                or added["budget_s"] <= 0:
            raise fail("added_forks", added)
        most, budget_s = added["most"], added["budget_s"]
    return Variant(name, closed, measured, capacity, targets, control, control_targets,
                   None if own == "none" else own, context, context_targets, most, budget_s)


def _closed_part(data: Any, field: str, kind: str, source: str):
    """The closed plan of a variant's `control` or `context` ({closed: PLAN, targets: [...]}), and the
    one-line error of that field."""
    def fail(why: str) -> EsbperfError:
        return EsbperfError(f"{source}: field '{field}' must be {VARIANT_FIELDS[kind]}; {why}")

    if not isinstance(data, dict) or set(data) != set(CONTROL_FIELDS):
        raise fail(f"got {data!r}")
    if not isinstance(data["closed"], str):
        raise fail(f"its `closed` is {data['closed']!r}")
    plan = plans.load(data["closed"])
    if plan.model != "closed":
        raise fail(f"{plan.name} is not a closed-model plan")
    return plan, fail


def _context(data: Any, measured: tuple[str, ...], field: str, source: str) -> tuple[plans.Plan, tuple[str, ...]]:
    """A variant's context: a closed plan of its own against targets the closed plan does not measure."""
    plan, fail = _closed_part(data, field, "context", source)
    targets = data["targets"]
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets) \
            or len(set(targets)) != len(targets) or set(targets) & set(measured):
        raise fail(f"its targets must be targets the closed plan does not measure ({', '.join(measured)}), each once; "
                   f"got {targets!r}")
    return plan, tuple(targets)


def _control(data: Any, closed: plans.Plan, measured: tuple[str, ...], field: str,
             source: str) -> tuple[plans.Plan, tuple[str, ...]]:
    """A variant's control pair: its plan (closed, 2 forks or more, its every step one the closed plan
    has, each side's forks the units of the pair's interval) and its targets (the closed plan's)."""
    plan, fail = _closed_part(data, field, "control", source)
    for side in (plan, closed):
        if side.forks < 2:
            raise fail(f"{side.name} runs {side.forks} fork: a pair of fork sets needs 2 forks or more a side (their "
                       "processes are the units of its interval)")
    extra = [f"{what} {', '.join(map(str, sorted(set(mine) - set(theirs))))}"
             for what, mine, theirs in (("scenarios", plan.scenarios, closed.scenarios),
                                        ("payloads", plan.sizes(), closed.sizes()), ("users", plan.users, closed.users))
             if set(mine) - set(theirs)]
    if extra:
        raise fail(f"{plan.name} measures {'; '.join(extra)}, which {closed.name} does not: the pair compares steps "
                   "both measured")
    targets = data["targets"]
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t in measured for t in targets) \
            or len(set(targets)) != len(targets):
        raise fail(f"its targets must be targets of {closed.name} ({', '.join(measured)}), each once; got {targets!r}")
    return plan, tuple(targets)
