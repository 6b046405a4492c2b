"""The goal of a capacity search — a plan's `capacity:` and `esbperf capacity`'s options — checked
once, with the bounds of the search. How a probe is judged against the goal, and how the rates are
chosen, is analysis/capacity.py's (docs/capacity.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from esbperf.core.errors import EsbperfError

# A probe's achieved rate must be within this share of the offered rate.
RATE_TOLERANCE = 0.02
# The search grows (or, when its first rate is already over, shrinks) the rate by this factor
# until a probe is judged over (within), then bisects between the two.
GROWTH = 2.0
# Shrinking stops below this rate (requests per second): a target that holds no rate above it
# within the goal is reported as below it.
MIN_RATE = 1.0
# Probe rates are rounded to this many significant digits (folder names stay short; 0.5 % at most).
RATE_DIGITS = 3
# The thread pool of a probe holds this many times rate × p99 goal requests in flight: Little's law
# says a target within the goal has at most rate × mean latency (< p99) of them on average, and
# the headroom covers the Poisson bursts, so the pool is not what fails a probe that the target holds.
POOL_HEADROOM = 2

FIELDS = {
    "p99_ms": "the p99 latency goal in ms, measured from each request's due time (a positive number; required)",
    "max_error_percent": "the share of failed requests a probe may have, in percent (0 to 100; default 0.1)",
    "precision": "how close the search brackets the capacity: it stops when the lowest rate judged over is "
                 "at most (1 + precision) × the highest judged within (a number between 0 and 1; default 0.05)",
    "start_rate": "the first rate probed, in requests per second (a positive number; default 100)",
    "max_rate": "the highest rate probed, in requests per second (a positive number, at least start_rate; "
                "default 100000)",
}
DEFAULTS = {"max_error_percent": 0.1, "precision": 0.05, "start_rate": 100.0, "max_rate": 100000.0}


@dataclass(frozen=True)
class Goal:
    """What a capacity search looks for: the highest rate whose probe keeps p99 latency from the
    due time within `p99_ms`, errors at most `max_error_percent`, and the achieved rate within
    RATE_TOLERANCE of the offered one; bracketed to `precision`, between `start_rate` (where it
    begins) and `max_rate` (where growing stops)."""

    p99_ms: float
    max_error_percent: float = DEFAULTS["max_error_percent"]
    precision: float = DEFAULTS["precision"]
    start_rate: float = DEFAULTS["start_rate"]
    max_rate: float = DEFAULTS["max_rate"]

    def pool(self, rate: float) -> int:
        """The threads a probe at `rate` needs so that the client's pool never fails it (POOL_HEADROOM)."""
        return math.ceil(rate * self.p99_ms / 1000 * POOL_HEADROOM)

    def to_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in FIELDS}


def parse(data: Any, name_of: Callable[[str], str], where: str) -> Goal:
    """A Goal from a mapping of FIELDS; one line naming `where`, the field (`name_of(key)`) and what
    is allowed for anything wrong."""
    if not isinstance(data, dict):
        raise EsbperfError(f"{where}: {name_of('')} must be a mapping of {', '.join(FIELDS)}, got {data!r}")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise EsbperfError(f"{where}: {name_of(str(unknown[0]))} is not a capacity setting (allowed: {', '.join(FIELDS)})")
    if data.get("p99_ms") is None:
        raise EsbperfError(f"{where}: {name_of('p99_ms')} is missing; it must be {FIELDS['p99_ms']}")
    values = {}
    for name in FIELDS:
        value = data.get(name, DEFAULTS.get(name))
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if ok and name == "max_error_percent":
            ok = 0 <= value <= 100
        elif ok and name == "precision":
            ok = 0 < value < 1
        elif ok:
            ok = value > 0
        if not ok:
            raise EsbperfError(f"{where}: {name_of(name)} must be {FIELDS[name]}, got {value!r}")
        values[name] = float(value)
    if values["max_rate"] < values["start_rate"]:
        raise EsbperfError(f"{where}: {name_of('max_rate')} ({values['max_rate']:g}) is below "
                           f"{name_of('start_rate')} ({values['start_rate']:g})")
    return Goal(**values)


def round_rate(rate: float) -> float:
    """A probe's rate, to RATE_DIGITS significant digits."""
    if rate <= 0:
        return rate
    digits = RATE_DIGITS - 1 - math.floor(math.log10(rate))
    return float(round(rate, digits))
