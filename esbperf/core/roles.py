"""The roles of a testbed's hosts, defined once: the client (console, runner, agents), the ESB host,
the three back-end hosts, and any number of further load hosts (agents and a monitor).

The back ends' names are the ESB contract's (grinder-scripts/contract.py, which the Grinder
workers read too): they are read from there, not written again."""
from __future__ import annotations

import re
from typing import Iterable

from esbperf.core.errors import EsbperfError
from esbperf.core.scenarios import contract

CLIENT = "client"
ESB = "esb"
BACKENDS: tuple[str, ...] = tuple(contract().BACKENDS)     # ws1, ws2, ws3
FIXED = (CLIENT, ESB, *BACKENDS)                            # every testbed has these five
SERVICE_JVMS = (ESB, *BACKENDS)                              # the JVMs esbperf starts under test (GC logged)
# Further load hosts, beside the client: load2, load3, ... load99.
LOAD = re.compile(r"^load([2-9]|[1-9][0-9])$")
LOAD_EXAMPLE = "load2, load3, ... load99"


def is_load(name: str) -> bool:
    return bool(LOAD.match(str(name)))


def is_role(name: str) -> bool:
    """One of the five fixed roles, or a load host."""
    return name in FIXED or is_load(name)


def check(name: str) -> str:
    """`name` if it is a role; a one-line error naming the roles otherwise."""
    if not is_role(name):
        raise EsbperfError(f"unknown role '{name}' (roles: {', '.join(FIXED)}, and load hosts {LOAD_EXAMPLE})")
    return name


def load_number(name: str) -> int:
    """load7 -> 7 (for ordering)."""
    return int(LOAD.match(name).group(1))


def ordered(names: Iterable[str]) -> list[str]:
    """The roles among `names` in reading order: client, load2, load3, …, esb, ws1, ws2, ws3."""
    names = set(names)
    loads = sorted((n for n in names if is_load(n)), key=load_number)
    return [*([CLIENT] if CLIENT in names else []), *loads, *(r for r in FIXED[1:] if r in names)]
