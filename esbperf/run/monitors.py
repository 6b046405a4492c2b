"""A step's monitor samples: after the measurement, the runner pulls the step's window from the
monitor of every watched host (esbperf/services/monitor.py) into the step folder as
`monitor-<role>.csv` (esbperf/results/layout.py), marking where samples are missing. The
analysis judges the files (esbperf/analysis/bottleneck.py)."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Iterable

from esbperf.core.errors import EsbperfError
from esbperf.core.topology import Testbed
from esbperf.results import layout
from esbperf.services.monitor import INTERVAL_MS, Sample, pull

GAP_AFTER_MS = 2 * INTERVAL_MS   # samples further apart than this leave a gap
SPOOL_DELAY_MS = 200             # a sample is in the monitor's spool this soon after it is stamped


def collect_step(testbed: Testbed, step_dir: Path, warmup_start_ms: int, measure_start_ms: int,
                 end_ms: int, roles: Iterable[str] | None = None) -> dict:
    """Pull the samples stamped in [warmup_start_ms, end_ms] from the monitor of every role that has a
    monitor_port (or of `roles`) into step_dir/monitor-<role>.csv; those stamped in
    (measure_start_ms, end_ms] are the measurement's (StepWindow). A monitor that does not answer, or whose samples stop,
    leaves `gap` rows and an error line for that role; it never stops the run."""
    if not warmup_start_ms <= measure_start_ms < end_ms:
        raise EsbperfError(f"collect_step: the step's times must satisfy warmup start <= measure start < end, "
                           f"got {warmup_start_ms}, {measure_start_ms}, {end_ms}")
    chosen = [r for r, h in testbed.hosts.items() if h.monitor_port] if roles is None else list(roles)
    for role in chosen:
        if role not in testbed.hosts:
            raise EsbperfError(f"collect_step: unknown role '{role}' (roles: {', '.join(testbed.hosts)})")
        if not testbed.hosts[role].monitor_port:
            raise EsbperfError(f"collect_step: {testbed.path}: hosts.{role} has no monitor_port")
    if chosen:
        _wait_for_last_sample(end_ms)
    step_dir.mkdir(parents=True, exist_ok=True)
    window = StepWindow(warmup_start_ms, measure_start_ms, end_ms)
    result: dict = {"monitors": {}}
    for role in chosen:
        host = testbed.hosts[role]
        # Through the end: /samples' `to` is exclusive, and the sample stamped at the end is the window's.
        samples, error, skew, sampler = pull(host.address, host.monitor_port, window.warmup, window.end + 1)
        gaps = _gaps(samples, window, error)
        _write_csv(layout.monitor_file(step_dir, role), samples, gaps, window)
        result["monitors"][role] = {
            "rows": len(samples),
            "gaps_ms": sum(g[3] for g in gaps),
            "error": error,
            "clock_skew_ms": skew,
            "sampler": sampler,
        }
    return result


class StepWindow:
    """One step's times. A sample stamped t covers the second before it (its CPU figures are since
    the previous sample), so the samples of the measurement are those stamped in (measure, end];
    those stamped in (warmup, measure] are the warm-up's."""

    def __init__(self, warmup: int, measure: int, end: int):
        self.warmup, self.measure, self.end = warmup, measure, end

    def phase(self, time_ms: int) -> str:
        return "measure" if self.measure < time_ms <= self.end else "warmup"


def _wait_for_last_sample(end_ms: int) -> None:
    """The last sample of the window is stamped at or before its end: give the monitor a moment to
    have spooled it."""
    lead = end_ms - time.time() * 1000
    if lead > INTERVAL_MS:
        raise EsbperfError(f"collect_step: the step ends {lead / 1000:.1f} s in the future; "
                           "collect a step once it has ended")
    time.sleep(max(0.0, (end_ms + SPOOL_DELAY_MS - time.time() * 1000) / 1000))


def _gaps(samples: list[Sample], window: StepWindow, error: str | None) -> list[tuple[int, str, str, int]]:
    """(start_ms, phase, reason, span_ms) of the parts of the window without host samples, split at
    the measurement's start so each phase's loss is known. A sample at t covers the second
    before t (its CPU figures are since the previous sample), so one late or failed sample
    loses nothing; two seconds without any do."""
    reason = error or "no samples"
    ticks = sorted({t for t, metric, _, _ in samples if metric == "cpu.total"})
    spans = []
    if not ticks:
        spans.append((window.warmup, window.end))
    else:
        if ticks[0] - window.warmup > GAP_AFTER_MS:
            spans.append((window.warmup, ticks[0] - INTERVAL_MS))
        for before, after in zip(ticks, ticks[1:]):
            if after - before > GAP_AFTER_MS:
                spans.append((before, after - INTERVAL_MS))
        if window.end - ticks[-1] > GAP_AFTER_MS:
            spans.append((ticks[-1], window.end))
    gaps = []
    for start, stop in spans:
        for phase, part_start, part_stop in (("warmup", start, min(stop, window.measure)),
                                             ("measure", max(start, window.measure), stop)):
            if part_stop > part_start:
                gaps.append((part_start, phase, reason, part_stop - part_start))
    return gaps


def _write_csv(path: Path, samples: list[Sample], gaps: list[tuple[int, str, str, int]], window: StepWindow) -> None:
    """Written to a temporary file and renamed, so a reader never sees half a file."""
    rows = [(t, window.phase(t), metric, _plain(subject), value) for t, metric, subject, value in samples]
    rows += [(t, phase, "gap", _plain(reason), str(span)) for t, phase, reason, span in gaps]
    rows.sort(key=lambda r: r[0])   # stable: a tick's rows keep the monitor's order
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(layout.MONITOR_HEADER)
        writer.writerows(rows)
    os.replace(partial, path)


def _plain(subject: str) -> str:
    """Subjects never need CSV quoting (the analysis reads the files without quote handling)."""
    return subject.replace(",", ";").replace('"', "'").replace("\r", " ").replace("\n", " ")


