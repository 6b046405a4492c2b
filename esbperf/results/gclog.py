"""A step's window of a service's GC log: the lines the runner cuts from the ESB's and echoes'
`gc.log` (written as esbperf/services/jvm.py configures it) into the step folder as
`gc-<role>.log` (esbperf/results/layout.py), and the analysis reads (esbperf/analysis/gc.py).

Every line starts with its decorators, among them the wall clock in ms since the epoch
(`timemillis`), so a step's window is cut by the same clock as the monitors' samples:

    [2026-11-22T13:14:57.534+0000][1795353297534ms][1780ms][info][gc] GC(1885) Pause Young (Normal) (G1 Evacuation Pause) 23M->21M(32M) 0.262ms

`python -m esbperf.results.gclog LOG START_MS END_MS` prints a window, for a host reached over ssh."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from esbperf.core.errors import EsbperfError

# The leading decorators of a line, up to the wall clock: the first `[<ms since the epoch>ms]`
# (uptimemillis comes after it; 12+ digits is any time after 2001).
_WALL_CLOCK = re.compile(rb"(?:\[[^\]\n]*\])*?\[(\d{12,})ms\]")
# File times are coarser than the JVM's clock (kernel ticks): a file is skipped only when it was
# last written this long before a window.
MTIME_MARGIN_MS = 1000


def log_files(log: Path) -> list[Path]:
    """The current GC log and its archived files, oldest written first."""
    log = Path(log)
    archived = [p for p in log.parent.glob(log.name + ".*") if p.suffix[1:].isdigit()] if log.parent.is_dir() else []
    found = []
    for path in [*archived, log]:
        try:
            # File times tick coarser than the JVM writes (kernel ticks): the file rotated away and the
            # current one can share a time, and the current one is still the newest.
            found.append((path.stat().st_mtime_ns, path == log, path))
        except FileNotFoundError:   # not there, or rotated away just now: the JVM writes on meanwhile
            continue
    return [path for _, _, path in sorted(found)]


def line_time_ms(line: bytes) -> int | None:
    """A line's wall clock (the `timemillis` decorator), or None when it has none."""
    m = _WALL_CLOCK.match(line)
    return int(m.group(1)) if m else None


def stamped_lines(data: bytes, start_ms: int, end_ms: int) -> list[tuple[int, bytes]]:
    """(wall clock, line) of the whole lines of `data` stamped in [start_ms, end_ms). What
    follows the last newline is being written (or was cut short): never read."""
    found = []
    for line in data.split(b"\n")[:-1]:
        t = line_time_ms(line)
        if t is not None and start_ms <= t < end_ms:
            found.append((t, line))
    return found


def window(log: Path, start_ms: int, end_ms: int) -> str:
    """The lines of `log` and its archived files stamped in [start_ms, end_ms), in time order.

    A last line without its newline (being written) is left out; lines without a wall clock
    are too. Fails clearly when there is no such log at all."""
    files = log_files(log)
    if not files:
        raise EsbperfError(f"{log}: no GC log there (was the JVM started by esbperf, on this host?)")
    kept: list[tuple[int, int, bytes]] = []
    for path in files:
        # A file's last write comes after its last line's stamp: a file older than the window holds none of it.
        try:
            if path.stat().st_mtime_ns // 1_000_000 < start_ms - MTIME_MARGIN_MS:
                continue
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        lines = stamped_lines(data, start_ms, end_ms)
        kept += [(t, len(kept) + i, line) for i, (t, line) in enumerate(lines)]
    kept.sort()   # files in the order written, lines by their stamps
    return b"".join(line + b"\n" for _, _, line in kept).decode("utf-8", "replace")


def save_window(log: Path, start_ms: int, end_ms: int, out: Path) -> bool:
    """Write the window of `log` to `out` (even when no collection fell in it: that is a result,
    100 % GC throughput). False, and nothing written, when the service has no GC log."""
    if not log_files(log):
        return False
    text = window(log, start_ms, end_ms)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: python -m esbperf.results.gclog GC_LOG START_MS END_MS", file=sys.stderr)
        return 2
    try:
        sys.stdout.buffer.write(window(Path(argv[0]), int(argv[1]), int(argv[2])).encode("utf-8"))
    except EsbperfError as e:
        print(f"esbperf: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
