"""The machine's own wander: how far the speed of a set amount of CPU work moves between two windows
seconds apart on the esb host's cores, measured before a cross-checked run (run.json `machine_wander`).

wrk's bracket (esbperf/run/crosscheck.py) reads a target just before and just after a step and calls
the target moved when the two differ by more than chance allows (the analysis's `target-drift`). On a
virtual machine whose host's other tenants come and go, chance is mostly the machine: a set loop on
one core here (2026-11-29) ran 0.79-1.15 × its mean speed from one 4-s window to the next, and the
reference engine, whose work per request is set, moved as far between its brackets. The allowance
takes this run's measured wander rather than a constant from another day.

    python -m esbperf.run.wander SECONDS      the probe itself: each chunk's seconds, one a line"""
from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from typing import Sequence

# Loop turns a timed chunk: a few milliseconds of one core, so that a window holds hundreds of chunks.
CHUNK_TURNS = 20_000
# The probe lasts this many windows of the step's length, at least MIN_PROBE_S: enough pairs of
# windows a bracket's gap apart to tell their spread.
PROBE_WINDOWS = 10
MIN_PROBE_S = 30.0


def probe_seconds(window_s: float) -> float:
    return max(MIN_PROBE_S, PROBE_WINDOWS * window_s)


def spin(seconds: float) -> list[float]:
    """Each chunk's wall time (s), for `seconds`: the same work every chunk, so a longer chunk is a slower core."""
    found, began = [], time.perf_counter()
    while True:
        start = time.perf_counter()
        n = 0
        for i in range(CHUNK_TURNS):
            n += i
        end = time.perf_counter()
        found.append(end - start)
        if end - began >= seconds:
            return found


def summarize(chunks: Sequence[float], window_s: float, gap_s: float) -> dict:
    """Speeds of windows of `window_s` starting at every chunk, paired with the window starting
    `gap_s` later; `wander` is the relative standard deviation of one window's speed that the pairs'
    differences imply (their SD ÷ √2 ÷ the mean speed), `move_p95` the 95th percentile of how far
    apart a pair was (a share of the mean)."""
    ends = [0.0]
    for c in chunks:
        ends.append(ends[-1] + c)
    speeds: list[tuple[float, float]] = []     # (start time, chunks a second)
    j = 0
    for i in range(len(chunks)):
        j = max(j, i)
        while j < len(chunks) and ends[j + 1] - ends[i] < window_s:
            j += 1
        if j >= len(chunks):
            break
        speeds.append((ends[i], (j + 1 - i) / (ends[j + 1] - ends[i])))
    moves, k = [], 0
    for start, speed in speeds:
        while k < len(speeds) and speeds[k][0] < start + gap_s:
            k += 1
        if k >= len(speeds):
            break
        moves.append(speeds[k][1] - speed)
    record = {"seconds": round(ends[-1], 1), "window_s": window_s, "gap_s": gap_s, "chunks": len(chunks),
              "pairs": len(moves), "wander": None, "move_p95": None}
    if len(moves) < 3:
        return record
    mean = statistics.fmean(s for _, s in speeds)
    relative = sorted(abs(m) / mean for m in moves)
    record["wander"] = round(statistics.stdev(moves) / math.sqrt(2) / mean, 4)
    record["move_p95"] = round(relative[min(len(relative) - 1, int(0.95 * len(relative)))], 4)
    return record


def measure(cpus: Sequence[int] | None, window_s: float, gap_s: float) -> dict:
    """The probe on `cpus` (None: wherever the kernel puts it), as a process of its own so that the
    runner's own threads stay where they are; summarized (summarize)."""
    seconds = probe_seconds(window_s)
    try:
        done = subprocess.run([sys.executable, "-m", "esbperf.run.wander", str(seconds)], capture_output=True,
                              text=True, timeout=seconds + 60,
                              preexec_fn=(lambda: os.sched_setaffinity(0, list(cpus))) if cpus else None)
    except (OSError, subprocess.SubprocessError) as e:   # the run goes on: its brackets allow the constant
        return {"skipped": f"the probe could not run: {e}"}
    chunks = [float(line) for line in done.stdout.split()] if done.returncode == 0 else []
    if not chunks:
        return {"skipped": f"the probe failed (exit {done.returncode}): {done.stderr.strip()[-200:]}"}
    return {**summarize(chunks, window_s, gap_s), "cpus": list(cpus or [])}


def main(argv: list[str]) -> int:
    for chunk in spin(float(argv[0])):
        sys.stdout.write(f"{chunk:.6f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
