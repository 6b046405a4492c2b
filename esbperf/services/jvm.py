"""Heap and garbage-collection options of the JVMs esbperf starts for a test (the ESBs and the
echo back ends).

Each such JVM logs its collections with unified JVM logging (`-Xlog`, JDK 9+) to `gc.log` in its
state folder, rotated and bounded: the current file plus FILE_COUNT archived ones (`gc.log.0` …),
each rotated at FILE_SIZE; a restarted JVM archives the previous file first. Every line starts
with its decorators, among them the wall clock in ms since the epoch (`timemillis`), which is how
a step's window is cut out of it (esbperf/results/gclog.py).

The collector is named (G1) rather than left to the JVM: JDK 17 picks Serial on a machine, or a
CPU set, of one CPU (an emulated host pinned to one core), and results would change collector
with the pinning."""
from __future__ import annotations

import os
import re
from pathlib import Path

from esbperf.core.errors import EsbperfError

LOG_NAME = "gc.log"
FILE_COUNT = 5             # archived files besides the current one
FILE_SIZE = "20m"          # at most (1 + FILE_COUNT) × 20 MB per JVM: hours of collections under load
COLLECTOR = "-XX:+UseG1GC"
# ISO time for people; ms since the epoch to cut windows; uptime to see a restart.
DECORATORS = "time,timemillis,uptimemillis,level,tags"
_HEAP = re.compile(r"[1-9][0-9]*[kKmMgG]")
# A JVM engine's JIT compiler threads ahead of its own threads on a busy core: HotSpot sets their
# native priority (a nice value on Linux) when told to use native priorities. Under a saturating
# load on one core, Spring Integration's C2 got 5.6 % of the core and the engine read half its warm
# throughput after 120 s; with its compiler at nice -10 it compiled its path in ~45 s under the same
# load (docs/benchmarks/warm-up.md). A warm engine's compiler is idle, so what is measured after the
# warm-up is the same. Setting native priorities needs root (CAP_SYS_NICE): without it HotSpot warns
# once and leaves every thread at its default — the warm-up then takes longer, and says so.
# ESBPERF_COMPILER_PRIORITY=0 in the launcher's environment leaves it out (to measure without it).
COMPILER_PRIORITY = ["-XX:ThreadPriorityPolicy=1", "-XX:CompilerThreadPriority=-10"]


def compiler_priority() -> list[str]:
    """The options that put a JVM engine's compiler threads first (COMPILER_PRIORITY), or none."""
    return [] if os.environ.get("ESBPERF_COMPILER_PRIORITY", "1") == "0" else list(COMPILER_PRIORITY)


def log_path(workdir: Path) -> Path:
    """Where a service started in `workdir` (its state folder) logs its collections."""
    return Path(workdir).absolute() / LOG_NAME


def heap_option(heap: str, what: str) -> str:
    """-Xmx for a heap limit like 512m or 2g; a clear error otherwise."""
    if not _HEAP.fullmatch(heap or ""):
        raise EsbperfError(f"{what} heap must look like 512m or 2g, got {heap!r}")
    return f"-Xmx{heap}"


def fixed_heap(heap: str, what: str) -> list[str]:
    """-Xms and -Xmx at the same size: a heap never resized under load (a JVM growing its heap while
    warmed or measured reads slower for it); and every page of it touched at start (AlwaysPreTouch):
    else G1 widens its young generation after ~25 s of load (100 MB to 750 MB of the 2 GB) and the
    engine faults in fresh pages for the next ~50 s — the flat reference read 13-20 % slower over
    that minute, which the warm-up's rule rightly called falling (docs/benchmarks/warm-up.md)."""
    limit = heap_option(heap, what)
    return ["-Xms" + limit.removeprefix("-Xmx"), limit, "-XX:+AlwaysPreTouch"]


def jvm_options(log: Path, *, file_count: int = FILE_COUNT, file_size: str = FILE_SIZE) -> list[str]:
    """The collector and GC logging options of a JVM that logs to `log` (made absolute: the JVM
    runs in a folder of its own). The rotation is bounded: `file_count` archived files, each
    rotated at `file_size`."""
    text = str(Path(log).absolute())
    # -Xlog reads '"' as its quoting and expands %p and %t in file names.
    if any(c in text for c in '"%\n'):
        raise EsbperfError(f"{text}: a GC log path cannot hold '\"', '%' or a line break (JVM -Xlog syntax); "
                           "choose another state folder (ESBPERF_STATE)")
    return [COLLECTOR, f'-Xlog:gc:file="{text}":{DECORATORS}:filecount={file_count},filesize={file_size}']


def mention(service_log: Path, log: Path) -> None:
    """Say in a service's own log where its GC log is, for a person reading it."""
    service_log.parent.mkdir(parents=True, exist_ok=True)
    with open(service_log, "a", encoding="utf-8") as out:
        out.write(f"esbperf: GC log {log} (rotated to {log.name}.0 to {log.name}.{FILE_COUNT - 1})\n")


