"""The testbed: the hosts of a testbed file (esbperf/topology.py), emulated on this machine or
real, and what is done to them from the client host.

Modules:
    netns       the emulated LAN: a network namespace per host on a bridge, tc rate limits
    fault       network faults on an emulated host's link (loss, delay, partitions)
    preflight   `testbed check`: reachability, clock skew, versions and tuning of every host
    services    the launcher: every service of a testbed on its host, started in order (the demo)
    cli         the `esbperf testbed` commands

Python API (each takes a Testbed, a testbed name or a file):
    up(testbed) / down(testbed) -> list of what changed;  status(testbed) -> dict;
    with emulated(testbed): ...   # up for the block, down afterwards whatever happens
    check(testbed, target=None) -> (reports, failures, warnings)   # any testbed, no root needed
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from esbperf import topology
from esbperf.testbed import netns, preflight
from esbperf.topology import Testbed

EMULATED = "emulated"


def load(testbed: Testbed | str | Path | None) -> Testbed:
    """A Testbed as given, or loaded by name or file (default: the emulated one)."""
    return testbed if isinstance(testbed, Testbed) else topology.load(testbed, default=EMULATED)


def up(testbed: Testbed | str | Path | None = None) -> list[str]:
    return netns.up(load(testbed))


def down(testbed: Testbed | str | Path | None = None) -> list[str]:
    return netns.down(load(testbed))


def status(testbed: Testbed | str | Path | None = None) -> dict[str, Any]:
    return netns.status(load(testbed))


@contextmanager
def emulated(testbed: Testbed | str | Path | None = None) -> Iterator[Testbed]:
    with netns.emulated(load(testbed)) as tb:
        yield tb


def check(testbed: Testbed | str | Path, target: str | None = None, roles: list[str] | None = None,
          timeout: float = 3.0, max_skew_ms: float = 100.0
          ) -> tuple[list[preflight.HostReport], list[str], list[str]]:
    """The preflight of any testbed: (per-host reports, failures, warnings). `target`: probe
    only that target's ESB port (direct: none); default every ESB port."""
    tb = testbed if isinstance(testbed, Testbed) else topology.load(testbed)
    esbs = None
    if target:
        esb = tb.target(target).esb
        esbs = {esb} if esb else set()
    reports = preflight.check(tb, esbs, roles, timeout)
    failures, warnings = preflight.problems(tb, reports, max_skew_ms, all_esbs=esbs is None)
    return reports, failures, warnings
