"""GC windows of a step (`gc-<role>.log`: the lines the runner cut from a service's gc.log, see
esbperf/results/gclog.py) -> the garbage collection of the ESB and echo JVMs over the measurement window.

With `-Xlog:gc` the G1, Parallel and Serial collectors log one line per stop-the-world pause,
when it ends, with the heap before and after it and its length:

    [...][1795353756486ms][1368ms][info][gc] GC(7) Pause Young (Mixed) (G1 Evacuation Pause) 10M->10M(37M) 3.174ms
    [...][1795353306834ms][365ms][info][gc] GC(104) Pause Full (Ergonomics) 31M->19M(31M) 6.568ms

A pause counts when its line's wall clock (its end) is in [warmup_end_ms, end_ms). Concurrent
phases (G1's `Concurrent Mark Cycle`) run beside the application and are not pauses. GC
throughput is the share of the window the application was not paused:
100 × (1 − total pause time ÷ window)."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from esbperf.core import roles
from esbperf.results.gclog import stamped_lines

# The JVMs esbperf starts with GC logging: the ESB and the echo back ends (not the client's workers).
GC_ROLES = roles.SERVICE_JVMS
# summary.csv's GC columns, `<role>_<figure>` (stats.gc_columns, docs/analysis.md).
GC_FIGURES = ("gc_throughput_percent", "gc_pauses", "gc_pause_p99_ms", "gc_pause_max_ms",
              "heap_after_gc_mb", "heap_after_gc_max_mb")
# What a pause line says after its decorators: the kind, the heap (when the collector logs it), the length.
_MESSAGE = re.compile(r"^(?:\[[^\]]*\])+\s*(?P<message>.*)$")
_PAUSE = re.compile(r"^GC\(\d+\) Pause (?P<kind>.+?) "
                    r"(?:(?P<before>\d+)(?P<before_unit>[BKMG])->(?P<after>\d+)(?P<after_unit>[BKMG])"
                    r"\((?P<committed>\d+)(?P<committed_unit>[BKMG])\) )?"
                    r"(?P<ms>\d+(?:\.\d+)?)ms$")
MB_PER_UNIT = {"B": 1 / 1024 ** 2, "K": 1 / 1024, "M": 1.0, "G": 1024.0}   # the JVM's M is 2^20 bytes


@dataclass
class Pause:
    time_ms: int          # wall clock when it ended
    kind: str             # e.g. "Young (Normal) (G1 Evacuation Pause)", "Full (Ergonomics)", "Remark"
    ms: float
    heap_after_mb: float | None


@dataclass
class GcStats:
    role: str
    window_ms: int
    pauses: list[Pause] = field(default_factory=list)

    @property
    def pause_total_ms(self) -> float:
        return sum(p.ms for p in self.pauses)

    @property
    def throughput_percent(self) -> float:
        """Share of the window the application ran, not paused by the collector."""
        return max(0.0, 100.0 * (1.0 - self.pause_total_ms / self.window_ms))

    @property
    def pause_histogram(self) -> list[tuple[float, int]]:
        """(pause ms, count), sorted."""
        return sorted(Counter(p.ms for p in self.pauses).items())

    @property
    def pause_max_ms(self) -> float | None:
        return max((p.ms for p in self.pauses), default=None)

    @property
    def heap_after_mean_mb(self) -> float | None:
        heaps = [p.heap_after_mb for p in self.pauses if p.heap_after_mb is not None]
        return sum(heaps) / len(heaps) if heaps else None

    @property
    def heap_after_max_mb(self) -> float | None:
        return max((p.heap_after_mb for p in self.pauses if p.heap_after_mb is not None), default=None)


def parse_pause(time_ms: int, line: str) -> Pause | None:
    """A pause line's figures; None for any other line (start-up, concurrent phases, notes)."""
    message = _MESSAGE.match(line)
    m = _PAUSE.match(message.group("message")) if message else None
    if not m:
        return None
    after = float(m["after"]) * MB_PER_UNIT[m["after_unit"]] if m["after"] else None
    return Pause(time_ms, m["kind"], float(m["ms"]), after)


def gc_stats(path: Path, role: str, start_ms: int, end_ms: int) -> GcStats:
    """The pauses of a GC window file that ended in [start_ms, end_ms)."""
    stats = GcStats(role, end_ms - start_ms)
    for t, line in stamped_lines(path.read_bytes(), start_ms, end_ms):
        pause = parse_pause(t, line.decode("utf-8", "replace"))
        if pause:
            stats.pauses.append(pause)
    return stats
