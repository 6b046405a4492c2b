"""What a run shows while it runs: on a terminal a live bar with the step's phase, seconds left and
the console's latest TPS; anywhere else (a CI log, a pipe) one plain line per event, never wrapped,
printed as it happens, so a script reading the output knows when a step measures and when it ends."""
from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class RunProgress:
    """The live view of a run's steps: `with RunProgress(console, total, done) as p: ...`; a total
    of None when the run chooses its steps as it goes (a capacity search)."""

    def __init__(self, console: Console, total: int | None, done: int):
        self.console = console
        self.total = total
        self.done = done
        self.label = ""
        self.live = console.is_terminal
        self._phase = ""
        self._bar: Progress | None = None
        self._task = None

    def __enter__(self) -> "RunProgress":
        if self.live:
            counter = "{task.completed}" + ("" if self.total is None else "/{task.total}")
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(counter),
                                 TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=self.console)
            self._bar.__enter__()
            self._task = self._bar.add_task("steps", total=self.total, completed=self.done, live="")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def step(self, label: str) -> None:
        """A step begins."""
        self.label = label
        self._phase = ""

    def tick(self, phase: str, left_s: float, latest: dict) -> None:
        """The step's phase, the seconds left in it, the console's latest sample."""
        if self._bar is not None:
            live = phase
            if latest:
                live = f"{phase} {left_s:4.0f}s  TPS {latest.get('TPS') or 0:8.1f}  errors {latest.get('Errors', 0)}"
            self._bar.update(self._task, description=f"step {self._number()} {self.label}", live=live)
        elif phase.split(" (")[0] != self._phase:   # a plain log: one line per phase, not per poll
            self._phase = phase.split(" (")[0]      # (an auto warm-up's reason changes at every sample)
            if "(auto: " in phase:
                said = f"{self._phase} (until steady, at most {left_s:.0f} s)"
            else:
                said = phase + (f" ({left_s:.0f} s)" if left_s > 0 else "")
            self.print(f"step {self._number()} {self.label}: {said}")

    def _number(self) -> str:
        return f"{self.done + 1}" if self.total is None else f"{self.done + 1}/{self.total}"

    def finished(self, line: str) -> None:
        """The step ended and counts: its one-line summary."""
        self.done += 1
        self.print(f"done {self.label}: {line}", style="green")
        if self._bar is not None:
            self._bar.advance(self._task)

    def aside(self, reason: str) -> None:
        """The step was kept aside; the run goes on."""
        self.done += 1
        self.print(f"kept aside {self.label}: {reason}", style="red")
        if self._bar is not None:
            self._bar.advance(self._task)

    def print(self, text: str, style: str | None = None) -> None:
        if self.console.quiet:
            return
        if self.live:
            self.console.print(f"[{style}]{text}[/{style}]" if style else text, highlight=False)
        else:   # no colour codes, no wrapping: one event, one line
            print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)
