"""Which resource of the testbed saturated during a step, and so what bounds its figures? One rule
for a host's resources (`assess`), applied to each step's monitor files (esbperf/analysis/monitor.py),
and one for the step's bound (`decide`, `step_bound`); docs/monitoring.md explains both.

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
- A resource is saturated when it stays above THRESHOLD_PERCENT for SUSTAIN_SAMPLES
  consecutive samples, or when its mean over the window is above it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from esbperf.analysis.runs import BASELINE_TARGET
from esbperf.core.roles import BACKENDS, CLIENT, ESB, is_load

if TYPE_CHECKING:
    from esbperf.analysis.monitor import HostStats
    from esbperf.analysis.runs import Run, Step

THRESHOLD_PERCENT = 85.0    # a host resource above this is saturated ...
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


# A load host (the client, load2, ...) whose cores, or whose worker JVMs, were busier than this
# during the window made the step client-bound, whatever the other hosts did (Hyperfoil's watchdog
# fails a run at 80 % of an agent's CPU): the client set its figures, so the target answers at
# least its TPS, within at most its response times. A bound, not a fault.
CLIENT_BOUND_PERCENT = 80.0


def client_bound(role: str, cpu_percents: list[float], proc_percents: list[float], cores: int | None,
                 shared: bool = False) -> list[dict]:
    """The verdicts that make a step client-bound on a load host: its worker JVMs' CPU (`proc.cpu`,
    % of one core, over `cores`) or, where its cores are its own, its CPU (`cpu.total`: the console,
    the agent, the workers), above CLIENT_BOUND_PERCENT, held for SUSTAIN_SAMPLES samples or on
    average over the window. Where other hosts' processes share its cores (`shared`: the echoes,
    on one machine) its CPU is theirs as much, and only the workers name the client (a full shared
    core is `decide`'s, naming what used it)."""
    found = []
    if cpu_percents and not shared:
        verdict = _judge(role, "cpu", cpu_percents, sum(cpu_percents) / len(cpu_percents), CLIENT_BOUND_PERCENT)
        found += [verdict] if verdict else []
    if proc_percents and cores:
        workers = [p / cores for p in proc_percents]
        verdict = _judge(role, "workers", workers, sum(workers) / len(workers), CLIENT_BOUND_PERCENT)
        found += [verdict] if verdict else []
    return found


# --- the bound of a step ------------------------------------------------------------------------
#
# What set a step's figures, one value per step, decided from the monitors' figures by `decide`:
#
# - client: a load host at its limit (`client_bound`, 80 %): the client's own processes, not the
#   echoes that may share its cores. The target answers at least what the client could send.
# - link: a host's link (rx or tx of its counted interface) saturated (`assess`).
# - backends: an echo's processes above THRESHOLD_PERCENT of their host's cores; or, where the echoes'
#   host has cores of its own, that host's CPU; or, where the esb host shares cores with back ends
#   (one machine), those cores saturated while the engine alone was below the threshold: the
#   echoes' share is what filled them; or, where a load host shares cores with back ends (the
#   shipped one-machine layout: the client and the lean echoes on one core), those cores saturated
#   while the workers alone were below the client's limit. A shared core's bound names what used it.
# - engine: the target's own processes (its JVM, nginx's workers) above THRESHOLD_PERCENT of the esb
#   host's cores; without a figure for them, the esb host's CPU when no back end shares its cores.
#   Never for the `direct` baseline, which has no engine: its limit is the back ends.
# - none: nothing saturated.
#
# When several saturate, the first of PRECEDENCE is the bound: the testbed before the engine, so
# that a figure is only called the engine's when nothing around the engine was at its limit too (a
# step at a link bound whose engine also read 90 % is the link's figure, not proof about the
# engine); the client first of all. A testbed bound (TESTBED) is a fact about the step, not a
# fault: the target answers at least its TPS (within at most its response times), and a comparison
# with it says "at least" or is not judged (analysis/verdicts.py `verdict`, the gate).

PRECEDENCE = ("client", "link", "backends", "engine")
BOUNDS = (*PRECEDENCE, "none")
TESTBED = ("client", "link", "backends")       # a bound that is a limit of the testbed, not of the target
NAMES = {"client": "the client", "link": "the link", "backends": "the back ends", "engine": "the engine",
         "none": "nothing (not saturated)"}


class HostFigures(Protocol):
    """What `decide` reads of a host (analysis/monitor.py's HostStats)."""

    bottlenecks: list[dict]           # `assess`'s verdicts
    proc_samples: list[float]         # the watched processes per reading, % of one core
    proc_cpu_mean: float | None
    cores: int | None


@dataclass
class Usage:
    """Processes' CPU over the window, % of one core: per reading, and the window's mean."""

    readings: list[float]
    mean: float


@dataclass
class Bound:
    kind: str | None                  # one of BOUNDS; None when no monitor file was read
    by: list[str] = field(default_factory=list)   # every saturated resource, the bound's first


def _said(verdict: dict, cores: int | None = None) -> str:
    """`esb:link-tx 94%`, `ws1:echo 91% of 1 core`: what held above the threshold, and how high."""
    of = f" of {cores} core{'s' * (cores != 1)}" if cores else ""
    return (f"{verdict['role']}:{verdict['resource']} "
            f"{max(verdict['mean_percent'], verdict['sustained_percent']):.0f}%{of}")


def _cpu(h: HostFigures) -> dict | None:
    """The host's own CPU (`cpu.total` of its cores) above the threshold."""
    return next((v for v in h.bottlenecks if v["resource"] == "cpu"), None)


def _processes(role: str, resource: str, usage: Usage, cores: int | None) -> dict | None:
    """Processes above the threshold of their host's cores."""
    if not cores or not usage.readings:
        return None
    return _judge(role, resource, [p / cores for p in usage.readings], usage.mean / cores)


def decide(hosts: Mapping[str, HostFigures], baseline: bool, engine: Usage | None,
           shares: Callable[[str, str], bool], client: list[str]) -> Bound:
    """The bound of a step (the rule above) from its hosts' figures: `engine` is the target's own
    processes on the esb host (None: not watched, or the baseline), `shares(a, b)` whether two
    roles' hosts compete for the same cores, `client` the client-bound verdicts (`client:cpu 93%`)."""
    if not hosts:
        return Bound(None)
    found: dict[str, list[str]] = {kind: [] for kind in PRECEDENCE}
    found["client"] += client
    found["link"] += [_said(v) for h in hosts.values() for v in h.bottlenecks if v["resource"].startswith("link-")]
    esb = hosts.get(ESB)
    backends = [r for r in BACKENDS if r in hosts]
    shared = [r for r in backends if esb is not None and shares(ESB, r)]
    engine_full = False
    if not baseline and esb is not None:
        verdict = _processes(ESB, "engine", engine, esb.cores) if engine else None
        if verdict is None and not (engine and esb.cores) and not shared:
            verdict = _cpu(esb)            # the host's cores are the engine's alone
        if verdict:
            found["engine"].append(_said(verdict, esb.cores if verdict["resource"] == "engine" else None))
            engine_full = True
    for role in backends:
        h = hosts[role]
        verdict = (_processes(role, "echo", Usage(h.proc_samples, h.proc_cpu_mean), h.cores)
                   if h.proc_cpu_mean is not None else None)
        # The host's CPU is the echoes' only where no other kind of host shares its cores (the esb host
        # idles in a baseline step): a shared core's is named below, with what used it.
        alone = not any(shares(role, other) for other in hosts
                        if other not in BACKENDS and not (other == ESB and baseline))
        if verdict is None and alone:
            verdict = _cpu(h)
        if verdict:
            found["backends"].append(_said(verdict, h.cores if verdict["resource"] == "echo" else None))
    for role in (r for r in hosts if r == CLIENT or is_load(r)):
        if any(said.startswith(f"{role}:") for said in client):
            continue                       # the workers themselves at their limit: `client`
        echoes_here = [r for r in backends if shares(role, r)]
        full = _cpu(hosts[role]) if echoes_here else None
        if full:
            h = hosts[role]
            mine = (f"workers {h.proc_cpu_mean / h.cores:.0f}%" if h.proc_cpu_mean is not None and h.cores
                    else "workers unknown")
            echoes = [hosts[r].proc_cpu_mean for r in echoes_here if hosts[r].proc_cpu_mean is not None]
            theirs = f", echoes {sum(echoes) / h.cores:.0f}%" if echoes and h.cores else ""
            found["backends"].append(f"{'+'.join((role, *echoes_here))}:shared cpu "
                                     f"{max(full['mean_percent'], full['sustained_percent']):.0f}% "
                                     f"({mine}{theirs} of the cores)")
    if not baseline and shared and not engine_full:
        full = next(filter(None, (_cpu(hosts[r]) for r in (ESB, *shared))), None)
        if full:
            cores = esb.cores
            mine = f"engine {engine.mean / cores:.0f}%" if engine and cores else "engine unknown"
            echoes = [hosts[r].proc_cpu_mean for r in shared if hosts[r].proc_cpu_mean is not None]
            theirs = f", echoes {sum(echoes) / cores:.0f}%" if echoes and cores else ""
            found["backends"].append(f"{'+'.join((ESB, *shared))}:shared cpu "
                                     f"{max(full['mean_percent'], full['sustained_percent']):.0f}% "
                                     f"({mine}{theirs} of the cores)")
    kind = next((k for k in PRECEDENCE if found[k]), "none")
    return Bound(kind, [said for k in PRECEDENCE for said in found[k]])


def host_cores(run: "Run", step: "Step", role: str) -> int | None:
    """The cores a role's host is pinned to (step.json, else run.json `hosts.<role>.cpus`), or None."""
    cpus = step.host(role).get("cpus") or run.hosts().get(role, {}).get("cpus")
    return len(cpus) if isinstance(cpus, list) and cpus else None


def engine_watch(run: "Run", target: str) -> str | None:
    """The esb host monitor's watch (its --match text) of the target's engine (run.json
    `engine_matches`), or None: the baseline, or an engine the runner has no match for."""
    matches = run.info.get("engine_matches")
    if not isinstance(matches, dict):
        return None
    engine = next((t.get("esb") for t in run.info.get("targets") or [] if t.get("name") == target), None)
    return matches.get(engine)


def engine_usage(run: "Run", target: str, esb: "HostStats | None") -> Usage | None:
    """The target's own processes on the esb host. Without `engine_matches` (an older run) every
    watched process there is the target's, as the esb host then ran one engine."""
    if esb is None or target == BASELINE_TARGET:
        return None
    matches = run.info.get("engine_matches")
    if isinstance(matches, dict) and matches:
        own = engine_watch(run, target)
        if own not in esb.proc_mean_by_watch:
            return None
        return Usage([v for _, v in esb.proc_by_watch[own]], esb.proc_mean_by_watch[own])
    return Usage(esb.proc_samples, esb.proc_cpu_mean) if esb.proc_cpu_mean is not None else None


def step_bound(run: "Run", step: "Step", hosts: Mapping[str, HostFigures], client: list[str]) -> Bound:
    """`decide` for a step of a run: its hosts' monitor figures (HostStats by role)."""
    target = step.meta["target"]
    return decide(hosts, target == BASELINE_TARGET, engine_usage(run, target, hosts.get(ESB)),
                  run.share_cores, client)


def pooled_bound(kinds: list[str | None]) -> tuple[str | None, int | None]:
    """A step's bound over its iterations: the first in PRECEDENCE any iteration had (a testbed
    limit in one iteration is in the pooled figures), and how many iterations had it."""
    known = [k for k in kinds if k]
    if not known:
        return None, None
    first = min(known, key=BOUNDS.index)
    return first, known.count(first)


def testbed_bound(kind: str | None) -> bool:
    """Whether a bound is the testbed's (TESTBED): the step's figures are then a floor of what the
    target does (TPS at least, response times at most), not its own."""
    return kind in TESTBED


def legacy_bound(client_bound_step: Any, bottlenecks: Any) -> str | None:
    """A step's bound as far as an analysis from before bounds tells it (a published round's
    summary.csv: `client_bound`, and `bottlenecks` as `role:resource;…`): the client, a link, or
    None where it cannot tell (a saturated CPU there may be the engine's or the back ends')."""
    if client_bound_step is True or str(client_bound_step).lower() == "true":
        return "client"
    if any(b.partition(":")[2].startswith("link-") for b in str(bottlenecks or "").split(";")):
        return "link"
    return None
