"""The machine's own wander: how far the speed of a set amount of work moves between two windows
seconds apart on the esb host's cores, measured before a cross-checked run (run.json `machine_wander`).

wrk's bracket (esbperf/run/crosscheck.py) reads a target just before and just after a step and calls
the target moved when the two differ by more than chance allows (the analysis's `target-drift`). On a
virtual machine whose host's other tenants come and go, chance is mostly the machine: a set loop on
one core here (2026-11-29) ran 0.79-1.15 × its mean speed from one 4-s window to the next, and the
reference engine, whose work per request is set, moved as far between its brackets. The allowance
takes this run's measured wander rather than a constant from another day.

Where the machine wanders is its memory more than its cores: on the 2-vCPU development machine
(2026-12-06) a loop of register arithmetic on the esb core moved 1.4-2.7 % between 10-s windows while
random reads over a few MB on the same core, nothing else running, moved 5-13 %, and an engine, which
reads and writes memory all the time, moves with the reads, by a power of their speed (0.1-0.5 for
the reference engine: docs/benchmarks/noise.md). Neither figure is the engine's wander, so the
allowance keeps the arithmetic's (`wander`, as measured since 2026-11-29; its false alarms are what
`esbperf selftest --check bracket` counts) and the probe times random reads over WORKING_SET_BYTES in
turn with it (`reads`, kept beside it in run.json), each window's speed of one kind from its own chunks.

The same reads, paced to a small share of a core (Pace), run beside a target while it warms up: its
throughput follows their speed second by second (correlation 0.45-0.93 on the reference engine here,
the higher the noisier the machine), so the warm-up's trend is judged with that speed taken out
(steady.settling's `machine`).

    python -m esbperf.run.wander SECONDS              the probe: each chunk pair's seconds, "reads arithmetic" a line
    python -m esbperf.run.wander --pace SHARE SECONDS  the paced probe: "ms reads cpu_s" about every 100 ms"""
from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Sequence

# Loop turns a timed arithmetic chunk: about a millisecond of one core.
CHUNK_TURNS = 20_000
# A read chunk: this many random reads, each depending on the chunk before, over a table larger than a
# core's own caches (so they go to the caches and memory the host shares among its tenants). Beside the
# reference engine under load here, tables of 4-16 MB followed its throughput second by second at a
# correlation of 0.45-0.93, median 0.82 (1 MB: 0.42, 128 MB: 0.58; docs/benchmarks/noise.md).
CHUNK_READS = 16_384
WORKING_SET_BYTES = 8 * 1024 * 1024
# The paced probe: this share of one core (its chunks' CPU time over wall time), in chunks of PACE_READS
# reads, its speed reported every PACE_REPORT_S: a hundred or more chunks a second, and 3 % of the core
# taken from the target while it warms up (nothing is measured then).
PACE_SHARE = 0.03
PACE_READS = 4096
PACE_REPORT_S = 0.1
# The probe lasts this many windows of the step's length, at least MIN_PROBE_S: enough pairs of
# windows a bracket's gap apart to tell their spread.
PROBE_WINDOWS = 10
MIN_PROBE_S = 30.0


def probe_seconds(window_s: float) -> float:
    return max(MIN_PROBE_S, PROBE_WINDOWS * window_s)


def _table(reads: int):
    """The probe's table (a random permutation of its own indices) and its first `reads` places."""
    import numpy as np

    rng = np.random.default_rng(0)
    table = rng.permutation(WORKING_SET_BYTES // 8)
    return table, rng.integers(0, len(table), reads)


def spin(seconds: float) -> list[tuple[float, float]]:
    """Each chunk pair's wall times (s) — random reads, then arithmetic — for `seconds`: the same work
    every chunk, so a longer chunk is a slower machine."""
    table, at = _table(CHUNK_READS)
    found, began = [], time.perf_counter()
    while True:
        start = time.perf_counter()
        at = table[at]
        middle = time.perf_counter()
        n = 0
        for i in range(CHUNK_TURNS):
            n += i
        end = time.perf_counter()
        found.append((middle - start, end - middle))
        if end - began >= seconds:
            return found


def summarize(chunks: Sequence[float], window_s: float, gap_s: float, spans: Sequence[float] | None = None) -> dict:
    """Speeds of windows of `window_s` starting at every chunk, paired with the window starting
    `gap_s` later; `wander` is the relative standard deviation of one window's speed that the pairs'
    differences imply (their SD ÷ √2 ÷ the mean speed), `move_p95` the 95th percentile of how far
    apart a pair was (a share of the mean). `spans`: the wall time each chunk's turn took when the
    probe times two kinds in turn (default: the chunk's own); a window's speed is its chunks over their
    own time."""
    spans = chunks if spans is None else spans
    ends, busy = [0.0], [0.0]
    for c, span in zip(chunks, spans):
        ends.append(ends[-1] + span)
        busy.append(busy[-1] + c)
    speeds: list[tuple[float, float]] = []     # (start time, chunks a second)
    j = 0
    for i in range(len(chunks)):
        j = max(j, i)
        while j < len(chunks) and ends[j + 1] - ends[i] < window_s:
            j += 1
        if j >= len(chunks):
            break
        speeds.append((ends[i], (j + 1 - i) / (busy[j + 1] - busy[i])))
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
                              preexec_fn=_pinned(cpus))
    except (OSError, subprocess.SubprocessError) as e:   # the run goes on: its brackets allow the constant
        return {"skipped": f"the probe could not run: {e}"}
    pairs = [tuple(float(v) for v in line.split()) for line in done.stdout.splitlines()] if done.returncode == 0 else []
    if not pairs or any(len(p) != 2 for p in pairs):
        return {"skipped": f"the probe failed (exit {done.returncode}): {done.stderr.strip()[-200:]}"}
    reads, arithmetic = [p[0] for p in pairs], [p[1] for p in pairs]
    spans = [a + b for a, b in pairs]
    memory = summarize(reads, window_s, gap_s, spans)
    return {**summarize(arithmetic, window_s, gap_s, spans),
            "reads": {"wander": memory["wander"], "move_p95": memory["move_p95"],
                      "working_set_mb": WORKING_SET_BYTES // 2 ** 20},
            "cpus": list(cpus or [])}


def _pinned(cpus: Sequence[int] | None):
    """A child's start-up that pins it to `cpus` (None: no pinning)."""
    return (lambda: os.sched_setaffinity(0, list(cpus))) if cpus else None


def pace(share: float, seconds: float) -> None:
    """The paced probe: chunks of PACE_READS reads, each followed by a sleep that keeps their CPU time
    to `share` of the wall time; every PACE_REPORT_S a line "ms reads cpu_s" (ms since the epoch, the
    reads since the last line and the CPU time they took: the thread's own, so time the core gave
    others does not count as slowness). Stops after `seconds`, or when its parent is gone."""
    table, at = _table(PACE_READS)
    parent, ends = os.getppid(), time.monotonic() + seconds
    reads, cpu, report = 0, 0.0, time.monotonic() + PACE_REPORT_S
    while time.monotonic() < ends and os.getppid() == parent:
        began, used = time.monotonic(), time.thread_time()
        at = table[at]
        took = time.thread_time() - used
        reads, cpu = reads + PACE_READS, cpu + took
        now = time.monotonic()
        if now >= report:
            try:
                sys.stdout.write(f"{time.time() * 1000:.0f} {reads} {cpu:.6f}\n")
                sys.stdout.flush()
            except BrokenPipeError:   # the reader is gone: so is the probe's purpose
                return
            reads, cpu, report = 0, 0.0, now + PACE_REPORT_S
        time.sleep(max(0.0, took / share - (now - began)))


class Pace:
    """The paced probe beside a warming target, on `cpus` (None: wherever the kernel puts it), at most
    `seconds`: its reports gathered as they come; speeds() gives the machine's speed per bucket."""

    def __init__(self, cpus: Sequence[int] | None, seconds: float, share: float = PACE_SHARE):
        self.reports: list[tuple[float, int, float]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "esbperf.run.wander", "--pace", str(share), str(seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            preexec_fn=_pinned(cpus))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                ms, reads, cpu = line.split()
                self.reports.append((float(ms), int(reads), float(cpu)))
            except ValueError:
                continue

    def speeds(self, start_ms: float, bucket_s: float, buckets: int) -> list[float | None]:
        """Reads per CPU-second in each of `buckets` buckets of `bucket_s` from `start_ms` (a report
        counts in the bucket its time falls in), None where none fell."""
        reads, cpu = [0] * buckets, [0.0] * buckets
        for ms, n, took in list(self.reports):
            i = int((ms - start_ms) // (bucket_s * 1000))
            if 0 <= i < buckets:
                reads[i] += n
                cpu[i] += took
        return [r / c if c > 0 else None for r, c in zip(reads, cpu)]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(5)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pace"]:
        pace(float(argv[1]), float(argv[2]))
        return 0
    for reads, arithmetic in spin(float(argv[0])):
        sys.stdout.write(f"{reads:.6f} {arithmetic:.6f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
