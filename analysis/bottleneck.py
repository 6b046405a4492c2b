"""Is a host the bottleneck of a step? One rule, applied to each step's monitor files
(esbperf/analysis/monitor.py); docs/monitoring.md explains it.

- A sample stamped t covers the second before t, so the samples of a measurement window
  (start, end] are those stamped in it: one stamped at its start covers the warm-up's last second.
- CPU: `cpu.total` samples stamped in the window.
- Network: ONE interface per direction counts: the host's test-network interface when the
  testbed names it (`hosts.<role>.interface`), otherwise the interface that carried the most
  bytes in that direction during the window. Interfaces are never added up: a bridge and the
  link under it (br0 over eth0) count the same bytes twice. Loopback never counts.
- A rate is a counter's increase between two consecutive samples over their time apart; an
  interval counts when its later sample is stamped in the window; a decrease (the counter was reset)
  leaves that interval out. The mean rate is the bytes of the counted intervals over their time.
- A resource is a bottleneck when it stays above THRESHOLD_PERCENT for SUSTAIN_SAMPLES
  consecutive samples, or when its mean over the window is above it."""
from __future__ import annotations

from dataclasses import dataclass, field

THRESHOLD_PERCENT = 85.0    # a host resource above this is a bottleneck ...
SUSTAIN_SAMPLES = 3         # ... when held for this many consecutive samples, or on average
LOOPBACK = "lo"             # not a link: loopback traffic never leaves the host

Point = tuple[int, float]   # (time ms, value)


@dataclass
class Link:
    """One direction of the counted interface over the window."""

    interface: str | None = None
    mbit: float | None = None                                # mean rate, Mbit/s (10^6 bit/s)
    series: list[Point] = field(default_factory=list)        # rate of each interval, at its end


@dataclass
class HostLoad:
    role: str
    cpu_mean: float | None = None
    cpu_max: float | None = None
    rx: Link = field(default_factory=Link)
    tx: Link = field(default_factory=Link)
    link_mbit: float | None = None
    bottlenecks: list[dict] = field(default_factory=list)   # {role, resource, max/mean/sustained_percent}

    @property
    def link_percent(self) -> float | None:
        """max(rx, tx) of the counted interface as a percent of the link; None when unknown."""
        if not self.link_mbit or self.rx.mbit is None or self.tx.mbit is None:
            return None
        return 100.0 * max(self.rx.mbit, self.tx.mbit) / self.link_mbit


def in_window(t: int, measure_ms: int, end_ms: int | None) -> bool:
    """Whether a sample stamped t belongs to the window (measure_ms, end_ms] (no end: open)."""
    return t > measure_ms and (end_ms is None or t <= end_ms)


def _intervals(points: list[Point], measure_ms: int, end_ms: int | None) -> list[tuple[int, int, float]]:
    """(end ms, length ms, bytes) of each interval between consecutive samples ending in the window."""
    points = sorted(points)
    return [(t1, t1 - t0, v1 - v0) for (t0, v0), (t1, v1) in zip(points, points[1:])
            if in_window(t1, measure_ms, end_ms) and t1 > t0 and v1 >= v0]


def counted_link(counters: dict[str, list[Point]], measure_ms: int, interface: str | None = None,
                 end_ms: int | None = None) -> Link:
    """The counted interface of one direction (see the module's rule) and its rates."""
    intervals = {name: _intervals(points, measure_ms, end_ms) for name, points in counters.items()
                 if name != LOOPBACK}
    intervals = {name: found for name, found in intervals.items() if found}
    if not intervals:
        return Link()
    if interface not in intervals:   # not named, or not seen: the busiest (ties: the first name)
        interface = max(sorted(intervals), key=lambda name: sum(b for _, _, b in intervals[name]))
    chosen = intervals[interface]
    seconds = sum(ms for _, ms, _ in chosen) / 1000
    return Link(interface, sum(b for _, _, b in chosen) * 8 / 1e6 / seconds,
                [(t, b * 8 / 1e6 / (ms / 1000)) for t, ms, b in chosen])


def _judge(role: str, resource: str, percents: list[float], mean: float,
           threshold: float = THRESHOLD_PERCENT) -> dict | None:
    """A verdict when the resource held above `threshold` for SUSTAIN_SAMPLES samples, or its mean is."""
    if not percents:
        return None
    held = max(min(percents[i:i + SUSTAIN_SAMPLES]) for i in range(max(1, len(percents) - SUSTAIN_SAMPLES + 1)))
    if held > threshold or mean > threshold:
        return {"role": role, "resource": resource, "max_percent": round(max(percents), 1),
                "mean_percent": round(mean, 1), "sustained_percent": round(held, 1)}
    return None


def assess(role: str, cpu: list[Point], rx: dict[str, list[Point]], tx: dict[str, list[Point]],
           measure_ms: int, link_mbit: float | None = None, interface: str | None = None,
           end_ms: int | None = None) -> HostLoad:
    """A host's CPU and network over the measurement window (measure_ms, end_ms] and its
    bottlenecks. `cpu`: (time, cpu.total %) samples; `rx`/`tx`: per interface (time, cumulative
    bytes) samples, those of the warm-up included (the first interval of the window needs one)."""
    load = HostLoad(role, link_mbit=link_mbit if link_mbit and link_mbit > 0 else None)
    cpu_values = [v for t, v in sorted(cpu) if in_window(t, measure_ms, end_ms)]
    if cpu_values:
        load.cpu_mean, load.cpu_max = sum(cpu_values) / len(cpu_values), max(cpu_values)
        verdict = _judge(role, "cpu", cpu_values, load.cpu_mean)
        if verdict:
            load.bottlenecks.append(verdict)
    load.rx = counted_link(rx, measure_ms, interface, end_ms)
    load.tx = counted_link(tx, measure_ms, interface, end_ms)
    if load.link_mbit:
        for direction, link in (("rx", load.rx), ("tx", load.tx)):
            if link.series:
                percents = [100.0 * mbit / load.link_mbit for _, mbit in link.series]
                verdict = _judge(role, f"link-{direction}", percents, 100.0 * link.mbit / load.link_mbit)
                if verdict:
                    load.bottlenecks.append(verdict)
    return load


# The client must not be the bottleneck: a load host (the client, load2, ...) whose cores, or whose
# worker JVMs, were busier than this during the window made the step client-bound, whatever the
# other hosts did (Hyperfoil's watchdog fails a run at 80 % of an agent's CPU).
CLIENT_BOUND_PERCENT = 80.0


def client_bound(role: str, cpu_percents: list[float], proc_percents: list[float], cores: int | None) -> list[dict]:
    """The verdicts that make a step client-bound on a load host: its CPU (`cpu.total`, of its own
    cores) or its worker JVMs' (`proc.cpu`, % of one core, over `cores`) above CLIENT_BOUND_PERCENT,
    held for SUSTAIN_SAMPLES samples or on average over the window."""
    found = []
    if cpu_percents:
        verdict = _judge(role, "cpu", cpu_percents, sum(cpu_percents) / len(cpu_percents), CLIENT_BOUND_PERCENT)
        found += [verdict] if verdict else []
    if proc_percents and cores:
        workers = [p / cores for p in proc_percents]
        verdict = _judge(role, "workers", workers, sum(workers) / len(workers), CLIENT_BOUND_PERCENT)
        found += [verdict] if verdict else []
    return found
