"""What `esbperf demo` and `esbperf round` share: a testbed brought up on this machine with every
service started on its host, for the runner to use, and everything stopped and taken down again
whatever happens.

An emulated testbed (network namespaces) is brought up first, unless it already is (someone
else's, or a killed run's: it stays up then). The services are the launcher's of esbperf/testbed/:
started as child processes here (services.py), or with `ssh` in the background on each host over
ssh (hosts.py, the emulated testbed's ssh mode). What is yielded are the runner's launcher options
(runner.start's local_state_dirs, token_file, restart_esb, engine_settings)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from rich.console import Console

from esbperf import testbed as testbeds
from esbperf.core import topology
from esbperf.core.errors import EsbperfError
from esbperf.testbed import hosts, install, services

@contextmanager
def launched(testbed: topology.Testbed, engines: str | Sequence[str], workdir: Path, console: Console,
             ssh: bool = False, settings: dict[str, dict[str, object]] | None = None) -> Iterator[dict]:
    """The testbed up and its services started, with `engines` on the esb host (one, or several:
    with `ssh`, one and the floors), each with its `settings` (by engine: esb.settings_for; a restart
    keeps them); yields the runner's launcher options. On leaving, stops what was started and takes
    down what was brought up, even after an error or Ctrl-C."""
    brought_up = []
    # What the run records of each engine started here: the settings it was given (none: its defaults).
    started_with = {name: dict((settings or {}).get(name, {}))
                    for name in ([engines] if isinstance(engines, str) else engines)}
    console.print(f"testbed {testbed.name}: {testbed.cpu_split()}")
    if testbed.emulated:
        if os.geteuid() != 0:
            raise EsbperfError("the emulated testbed needs root (network namespaces); run as root or use --testbed local")
        brought_up = testbeds.up(testbed)
        if brought_up:
            console.print(f"testbed {testbed.name}: up ({len(brought_up)} changes)")
        else:   # someone else's (or a killed run's): not ours to remove
            console.print(f"testbed {testbed.name}: was already up; it stays up (`esbperf testbed down` removes it)")
    group = None
    started = False
    try:
        if ssh:
            install.install(testbed, echo=lambda line: console.print(f"installed {line}"))
            started = True   # from here on, whatever was started is stopped again
            esb = engines if isinstance(engines, str) else engines[0]
            hosts.start(testbed, esb, echo=lambda line: console.print(f"started {line}"), root=workdir,
                        settings=settings)
            yield dict(local_state_dirs=hosts.local_agent_states(testbed, workdir),
                       token_file=hosts.console_token(testbed, workdir),
                       restart_esb=hosts.esb_restarter(testbed, True, workdir),
                       engine_settings=started_with)
        else:
            group = services.start(testbed, engines, workdir, echo=console.print, settings=settings)
            yield dict(local_state_dirs=services.state_dirs(workdir),
                       token_file=services.console_token_file(workdir),
                       restart_esb=services.esb_restarter(group, testbed),
                       engine_settings=started_with)
    finally:
        if group:
            group.stop_all()
        if started:
            for line in hosts.stop(testbed, root=workdir)[1]:
                console.print(f"[red]could not stop: {line}[/red]")
        if brought_up:
            testbeds.down(testbed)
            console.print(f"testbed {testbed.name}: down")
