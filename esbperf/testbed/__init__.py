"""The testbed: the hosts of a testbed file (esbperf/core/topology.py), emulated on this machine or real,
and everything done to them from the client (control) host.

Modules:
    netns       the emulated LAN: a network namespace per host on a bridge, tc rate limits
    fault       network faults on an emulated host's link (loss, delay, partitions)
    preflight   `testbed check`: reachability, clock skew, versions and tuning of every host
    ssh         reaching a host over OpenSSH (BatchMode, the user's keys and ssh config), and the
                fetcher that brings an ssh host's agent logs home
    sshd        the emulated testbed's ssh mode: an OpenSSH server in each namespace with `ssh:`
    install     `testbed install`: the same esbperf on every ssh host, in its own folder
    background  (runs on each host) services in the background with pid files: start, stop, list
    services    the launcher: every service of a testbed on its host (`testbed start|stop`, the demo)
    cli         the `esbperf testbed` commands

Python API (each takes a Testbed, a testbed name or a file; default `emulated`):
    up(testbed) / down(testbed) -> list of what changed;  status(testbed) -> dict;
    with emulated(testbed): ...   # up for the block, down afterwards whatever happens
    check(testbed, target=None) -> (reports, failures, warnings)   # any testbed, no root needed

Imports: core, services.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:   # imported when used: `background` runs on hosts that have only the standard library
    from esbperf.testbed.preflight import HostReport
    from esbperf.core.topology import Testbed

EMULATED = "emulated"


def load(testbed: Testbed | str | Path | None, default: str = EMULATED) -> Testbed:
    from esbperf.core import topology

    return testbed if isinstance(testbed, topology.Testbed) else topology.load(testbed, default=default)


def up(testbed: Testbed | str | Path | None = None) -> list[str]:
    """Bring the emulated testbed up (and, in its ssh mode, an OpenSSH server on each ssh host)."""
    from esbperf.testbed import netns, sshd

    from esbperf.testbed import fault

    tb = load(testbed)
    done = netns.up(tb)
    if any(change.startswith(("created veth", "created namespace")) for change in done):
        fault.links_replaced(tb, "up")   # new links carry no fault
    try:
        done += sshd.up(tb)
    except BaseException:
        if done:   # what this call made goes again
            down(tb)
        raise
    return done


def down(testbed: Testbed | str | Path | None = None) -> list[str]:
    from esbperf.testbed import netns, sshd

    from esbperf.testbed import fault

    tb = load(testbed)
    netns.require_root("down")
    done = sshd.down(tb) + netns.down(tb)
    if done:
        fault.links_replaced(tb, "down")   # the links, and any fault on them, are gone
    return done


def status(testbed: Testbed | str | Path | None = None) -> dict[str, Any]:
    from esbperf.testbed import netns

    return netns.status(load(testbed))


@contextmanager
def emulated(testbed: Testbed | str | Path | None = None) -> Iterator[Testbed]:
    """The testbed up for the duration of the block, and down afterwards whatever happens."""
    tb = load(testbed)
    try:
        up(tb)
        yield tb
    finally:
        down(tb)


def check(testbed: Testbed | str | Path, target: str | None = None, roles: list[str] | None = None,
          timeout: float = 3.0, max_skew_ms: float = 100.0
          ) -> tuple[list[HostReport], list[str], list[str]]:
    """The preflight of any testbed: (per-host reports, failures, warnings). `target`: probe
    only that target's ESB port (direct: none); default every ESB port."""
    from esbperf.testbed import preflight

    tb = load(testbed, default="local")
    esbs = None
    if target:
        esb = tb.target(target).esb
        esbs = {esb} if esb else set()
    reports = preflight.check(tb, esbs, roles, timeout)
    failures, warnings = preflight.problems(tb, reports, max_skew_ms, all_esbs=esbs is None)
    return reports, failures, warnings
