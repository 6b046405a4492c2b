"""What the client itself adds per transaction, from the data logs of a calibration step.

A calibration step runs the scenario `calibrate` (grinder-scripts/scenario.py): each worker
process starts a server on loopback inside itself that answers every request at once with a
canned answer (the raw echo's answer to the raw request), and the normal client path runs
against it: prepared request, timed exchange, fast answer check, data-log columns, Grinder's
per-test bookkeeping. Nothing but the client is measured, so:

- the **timed floor** (`floor_*_us`, from `Response us`) is the least a `Response us` can be on
  this machine: the client's own share of the clock (two syscalls, the loopback round trip,
  parsing the answer's head) plus the in-process server's. A step's `Response us` near the
  floor measures the client, not the system under test.
- the **cost outside the clock** (`outside_clock_us`) is what each transaction costs a worker
  thread besides its timed exchange: Jython, Grinder's per-test bookkeeping and data-log row, the
  answer check, and waiting for a CPU. It is `cycle_us - floor_mean_us`, where `cycle_us` (the
  window × threads ÷ transactions) is the mean time between two starts of one thread. In a
  closed-model step it is the time each user "thinks" between transactions without being asked
  to; it caps a thread at 1e6 / cycle_us transactions per second.
- `tps` is the client's ceiling with this many threads when the server costs nothing (shared
  CPUs: the in-process server's own work is included).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from esbperf.errors import EsbperfError

SEPARATOR = ", "
THREAD, START, ERRORS = "Thread", "Start time (ms since Epoch)", "Errors"
RESPONSE_US, LATENCY_US, START_LAG_US = "Response us", "Latency us", "Start lag us"


def read_columns(path: Path, columns: Sequence[str]) -> list[tuple[int, ...]]:
    """The named columns of every complete row of one Grinder data log, as integers.

    A last line without its newline (a worker killed mid-write) and lines that do not parse
    are left out; a missing column is a one-line error naming the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline()
        if not header.endswith("\n"):
            return []
        names = [n.strip() for n in header.split(SEPARATOR)]
        missing = [c for c in columns if c not in names]
        if missing:
            raise EsbperfError(f"{path}: data log has no {missing[0]!r} column (header: {header.strip()[:160]!r})")
        where = [names.index(c) for c in columns]
        rows = []
        for line in f:
            if not line.endswith("\n"):
                break
            fields = line.split(SEPARATOR)
            if len(fields) != len(names):
                continue
            try:
                rows.append(tuple(int(float(fields[i])) for i in where))
            except ValueError:
                continue
        return rows


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of values sorted ascending."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarise(data_log_paths: Iterable[Path], window_start_ms: int, window_end_ms: int) -> dict:
    """What the client adds per transaction, from a calibration step's data logs: the rows that
    start in [window_start_ms, window_end_ms). Returns

      log_files         data logs read
      threads           worker threads with a transaction in the window (over all files)
      window_s          the window's length
      transactions      successful transactions in the window; errors: failed ones
      tps               transactions / window_s
      floor_mean_us, floor_p50_us, floor_p99_us, floor_max_us
                        `Response us` of the successful transactions: the timed floor
      cycle_us          window × threads / (transactions + errors): a thread's mean time from
                        one start to the next
      outside_clock_us  cycle_us - floor_mean_us: each transaction's cost outside the clock

    All times in microseconds (floats) except window_s. Raises EsbperfError when the window
    holds no successful transaction or the logs lack the `Response us` column."""
    if window_end_ms <= window_start_ms:
        raise EsbperfError(f"calibration window is empty: {window_start_ms} .. {window_end_ms} ms")
    paths = [Path(p) for p in data_log_paths]
    micros: list[int] = []
    errors = 0
    threads: set[tuple[int, int]] = set()
    for index, path in enumerate(paths):
        for thread, start, failed, us in read_columns(path, (THREAD, START, ERRORS, RESPONSE_US)):
            if window_start_ms <= start < window_end_ms:
                threads.add((index, thread))
                if failed:
                    errors += 1
                else:
                    micros.append(us)
    if not micros:
        raise EsbperfError(f"no successful calibration transaction in the window ({len(paths)} data log(s), "
                           f"{errors} error(s)); see the worker logs")
    micros.sort()
    window_s = (window_end_ms - window_start_ms) / 1000
    floor_mean = sum(micros) / len(micros)
    cycle = window_s * 1e6 * len(threads) / (len(micros) + errors)
    return {
        "log_files": len(paths),
        "threads": len(threads),
        "window_s": window_s,
        "transactions": len(micros),
        "errors": errors,
        "tps": len(micros) / window_s,
        "floor_mean_us": floor_mean,
        "floor_p50_us": float(percentile(micros, 50)),
        "floor_p99_us": float(percentile(micros, 99)),
        "floor_max_us": float(micros[-1]),
        "cycle_us": cycle,
        "outside_clock_us": cycle - floor_mean,
    }
