"""What the client itself adds per transaction, measured before a run's first step.

A calibration runs the scenario `calibrate` (grinder-scripts/scenario.py): each worker process
starts a server on loopback inside itself that answers every request at once with a canned answer
(the raw echo's answer to the raw request), and the normal client path runs against it: prepared
request, timed exchange, fast answer check, data-log columns, Grinder's per-test bookkeeping.
Nothing but the client is measured, so:

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

The data logs are read as every step's are (esbperf/results/datalog.py): the same parser, the
same percentiles.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Callable

from esbperf.core import plan as plans
from esbperf.core.errors import EsbperfError
from esbperf.results import layout
from esbperf.results.datalog import RESPONSE_US, log_stats
from esbperf.results.files import read_header
from esbperf.run import collect
from esbperf.run.problems import StepProblem
from esbperf.run.workers import ConsoleWatch, Layout, Workers, now_ms

WARMUP_S, MEASURE_S = 2, 3   # a calibration's warm-up and measurement
SAFETY_NET_S = 30            # the workers stop by themselves this long after, should nobody stop them


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
    for path in paths:
        header, _ = read_header(path)
        if header is not None and RESPONSE_US not in [n.strip() for n in header.split(",")]:
            raise EsbperfError(f"{path}: data log has no {RESPONSE_US!r} column (header: {header[:160]!r})")
    stats = log_stats(paths, window_start_ms, window_end_ms)
    floor = stats.response
    if not floor.n:
        raise EsbperfError(f"no successful calibration transaction in the window ({len(paths)} data log(s), "
                           f"{stats.errors} error(s)); see the worker logs")
    window_s = (window_end_ms - window_start_ms) / 1000
    cycle = window_s * 1e6 * stats.threads / stats.starts
    return {
        "log_files": len(paths),
        "threads": stats.threads,
        "window_s": window_s,
        "transactions": stats.transactions,
        "errors": stats.errors,
        "tps": stats.transactions / window_s,
        "floor_mean_us": floor.mean,
        "floor_p50_us": float(floor.percentile(50)),
        "floor_p99_us": float(floor.percentile(99)),
        "floor_max_us": float(floor.max),
        "cycle_us": cycle,
        "outside_clock_us": cycle - floor.mean,
    }


def calibrate(run_dir: Path, console: ConsoleWatch, workers: Workers, keepalive: bool, timeout_s: float,
              payload_bytes: int) -> dict:
    """One worker thread per agent against an instant server inside its own process, at this
    payload, by the run's `workers` (warm ones take it as a step of their own); its logs are kept
    in RUN/calibration/<payload>/ and its summary returned."""
    label = plans.size_label(payload_bytes)
    folder = run_dir / "calibration" / label
    log_folder = collect.step_log_folder(run_dir.name, Path("calibration") / label, str(now_ms()))
    properties = {"grinder.runs": 0, "grinder.duration": int((WARMUP_S + MEASURE_S + SAFETY_NET_S) * 1000),
                  "esbperf.scenario": "calibrate", "esbperf.users": 0,
                  "esbperf.payload.bytes": payload_bytes, "esbperf.keepalive": str(keepalive).lower(),
                  "esbperf.timeout.ms": int(timeout_s * 1000)}
    try:
        began = workers.begin(console, properties, Layout(1, 1, log_folder))
        console.wait_until(began.first_report_ms + WARMUP_S * 1000, "calibrating the client", began.workers)
        window_start = now_ms()
        console.wait_until(window_start + MEASURE_S * 1000, "calibrating the client", began.workers)
        window_end = now_ms()
        workers.end_step()
    except StepProblem as e:
        workers.discard()
        raise EsbperfError(f"the client's calibration failed: {e.reason}") from None
    except BaseException:
        workers.discard()
        raise
    problems = workers.bring_home(log_folder, folder / layout.LOGS)
    if problems:
        raise EsbperfError(f"the client's calibration failed: {problems[0]}")
    summary = summarise(layout.data_logs(folder), window_start, window_end)
    layout.write_json(folder / "calibration.json", summary)
    return summary


def calibrate_run(run_dir: Path, console: ConsoleWatch, plan: plans.Plan, workers: Workers,
                  echo: Callable[[str], None], took: Callable[[float], None] = lambda seconds: None) -> dict:
    """Calibrate the client before the first step (at plan.calibration_sizes()): what it adds to
    every transaction inside and outside the clock (run.json `calibration`, by payload)."""
    found = {}
    for size in plan.calibration_sizes():
        began = time.monotonic()
        summary = calibrate(run_dir, console, workers, plan.keepalive, plan.timeout_s, size)
        took(time.monotonic() - began)
        found[plans.size_label(size)] = summary
        echo(f"client calibration at {plans.size_label(size)}: timed floor {summary['floor_mean_us']:.0f} µs "
             f"(p99 {summary['floor_p99_us']:.0f}), {summary['outside_clock_us']:.1f} µs per transaction "
             f"outside the clock")
    return found
