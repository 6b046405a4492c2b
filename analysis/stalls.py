"""The delayed-ACK stall: response times that pile up at a TCP delayed-acknowledgement timer while
the target idles.

A peer that writes one message in two pieces (headers, then body) on a connection without
TCP_NODELAY sends the first piece and holds the second until it is acknowledged (Nagle); the
receiver, waiting for the rest, delays its acknowledgement until its timer fires — about 40 ms on
Linux, up to 200 ms on Windows. Each such request then takes the timer plus its real work, so its
response time sits just above the timer (or a multiple of it, when it happens on both legs), and
the target's CPU stays low because it is mostly waiting. The Grinder's stock HTTP plugin does this
on a reused connection (docs/grinder.md), and so may an ESB towards its back ends.

One rule, applied to each step: a step stalls when at least STALL_SHARE of its successful
transactions pile up in a band just above a timer or its double (PILE_FACTOR times as many as in as
wide a range below it), and the target's process CPU (the ESB JVM, or the first back end's for the
baseline) is below LOW_CPU_PERCENT of one core, or unknown (no monitor), which the warning then says."""
from __future__ import annotations

from esbperf.results.histogram import Histogram

# (name, timer ms): the delayed-ACK timers a stall waits out.
TIMERS = (("Linux", 40.0), ("Windows", 200.0))
# A stalled request takes the timer plus its own work: from the timer to this share above it.
BAND_ABOVE = 0.25
STALL_SHARE = 0.2          # of a step's successful transactions, in the bands
PILE_FACTOR = 3            # a band holds this many times what as wide a range below it holds
LOW_CPU_PERCENT = 50.0     # of one core: a target this idle is waiting, not working


def bands() -> list[tuple[str, float, float]]:
    """(what, low ms, high ms) of each band: each timer and its double (both legs stalled)."""
    return [(f"{times}× the {name} timer ({timer * times:g} ms)", timer * times, timer * times * (1 + BAND_ABOVE))
            for name, timer in TIMERS for times in (1, 2)]


def _count(h: Histogram, low_ms: float, high_ms: float) -> int:
    return h.count_between(low_ms * 1000, high_ms * 1000)


def share_in_bands(h: Histogram | None) -> tuple[float, str]:
    """The share of a histogram's values (µs) piled up in the stall bands, and the band holding most
    of them. A band counts only as a pile: it holds PILE_FACTOR times the values of as wide a range
    just below it (an even spread of slow answers crosses the bands too, without piling up)."""
    if h is None or not h.n:
        return 0.0, ""
    best, best_count, total = "", 0, 0
    for what, low, high in bands():
        count = _count(h, low, high)
        if count < PILE_FACTOR * max(1, _count(h, low - (high - low), low)):
            continue
        total += count
        if count > best_count:
            best, best_count = what, count
    return total / h.n, best


def stalls(h: Histogram | None, target_cpu_percent: float | None) -> bool:
    """Whether a step's response times (µs histogram) show the delayed-ACK stall (module doc)."""
    share, _ = share_in_bands(h)
    return share >= STALL_SHARE and (target_cpu_percent is None or target_cpu_percent < LOW_CPU_PERCENT)
