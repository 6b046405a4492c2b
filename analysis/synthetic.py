"""Synthetic results folders in the sweep runner's layout, for the tests and the benchmark.

Data logs have Grinder 3.11's format (", " between fields, the header line first); monitor files
the monitor's long format. Values are drawn from a seeded generator, so a folder is the same
every time it is made."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import polars as pl

from esbperf.core.plan import size_label
from esbperf.core.roles import BACKENDS, CLIENT, ESB, FIXED as ROLES

# Grinder's six columns and esbperf's byte columns (logs before the workers timed in µs, other scripts) ...
DATA_LOG_HEADER = ("Thread, Run, Test, Start time (ms since Epoch), Test time, Errors, "
                   "HTTP status, Request bytes, Response bytes")
# ... with the workers' wire time in µs (every step since issue 12) ...
US_DATA_LOG_HEADER = DATA_LOG_HEADER + ", Response us"
# ... and in an open-model step the latency from the due start and the start's lag.
OPEN_DATA_LOG_HEADER = US_DATA_LOG_HEADER + ", Latency us, Start lag us"
THESIS_PAYLOADS = {size_label(b): b for b in (1024, 50 * 1024, 100 * 1024, 500 * 1024, 1024 * 1024)}
THESIS_USERS = (1, 20, 40, 80, 160, 320)
BASE_MS = 1_795_239_161_376


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def plan_dict(name: str = "thesis", **changes) -> dict:
    """A plan as run.json holds it (esbperf.core.plan.Plan.to_dict)."""
    plan = {"name": name, "description": "synthetic", "scenarios": ["proxy"],
            "payloads": list(THESIS_PAYLOADS.values()), "users": list(THESIS_USERS), "duration_s": 300,
            "warmup_s": 30, "iterations": 1, "keepalive": True, "timeout_s": 120, "max_threads_per_process": 100}
    return {**plan, **changes}


def hosts(link_mbit: float | None, shared_cpus: bool = False) -> dict:
    """The emulated five hosts, each pinned to a CPU of its own unless `shared_cpus`."""
    return {role: {"address": f"198.18.0.{n}", "link_mbit": link_mbit, "cpus": [] if shared_cpus else [i]}
            for i, (role, n) in enumerate(zip(ROLES, (10, 20, 31, 32, 33)))}


def write_run(run_dir: Path, target: str, plan_name: str = "thesis", plan: dict | None = None,
              testbed: str = "emulated", finished: bool = True, link_mbit: float = 1000,
              shared_cpus: bool = False, **more) -> Path:
    """run.json in the runner's shape (esbperf/run/runner.py); `more` adds fields (calibration,
    clock_skew, …)."""
    return write_json(run_dir / "run.json", {
        **more,
        "plan": plan if plan is not None else plan_dict(plan_name),
        "target": {"name": target, "kind": "direct" if target == "direct" else "esb",
                   "esb": None if target == "direct" else target, "url": "http://198.18.0.20:8280", "backends": {}},
        "testbed": {"name": testbed, "file": f"console-config/testbeds/{testbed}.yaml", "emulated": True},
        "hosts": hosts(link_mbit, shared_cpus),
        "agents": ["client-1"],
        "environment": {"esbperf": "0.1.0", "os": "Linux-6.1-x86_64", "cpu": "synthetic", "cores": 2,
                        "memory_bytes": 24 << 30, "python": "3.11.7", "java": "17.0.15",
                        "git": {"commit": "0" * 40, "dirty": False}},
        "versions": {"grinder": "3.11", "esb": None if target == "direct" else target},
        "started": "2026-11-21T05:00:00+0000",
        "finished": "2026-11-21T06:00:00+0000" if finished else None}).parent


def step_dir(run_dir: Path, scenario: str, payload_label: str, users: int, iteration: int) -> Path:
    return run_dir / scenario / payload_label / str(users) / f"iter-{iteration}"


def xcheck_record(tps: float, mean_ms: float, connections: int, seconds: float = 10.0, p50_ms: float | None = None,
                  p99_ms: float | None = None, errors: int = 0, start_ms: int = BASE_MS) -> dict:
    """step.json `xcheck` as the runner writes it after a closed-model step: wrk against the same
    target with as many connections as users (p50 and p99 default to the mean and twice it)."""
    return {"tool": "wrk", "url": "http://198.18.0.20:8280/services/proxy", "connections": connections,
            "threads": min(connections, 2), "seconds": seconds, "keepalive": True,
            "requests": round(tps * seconds), "errors": errors, "tps": tps, "mean_ms": mean_ms,
            "p50_ms": mean_ms if p50_ms is None else p50_ms, "p99_ms": 2 * mean_ms if p99_ms is None else p99_ms,
            "started_ms": start_ms, "ended_ms": start_ms + round(seconds * 1000)}


def write_step(folder: Path, scenario: str, target: str, payload_bytes: int, payload_label: str,
               users: int, iteration: int, start_ms: int = BASE_MS, warmup_s: int = 30,
               duration_s: int = 300, plan: str = "thesis", link_mbit: float | None = 1000,
               bottlenecks: list | None = None, rate: float | None = None, xcheck: dict | None = None,
               fork: int | None = None) -> Path:
    """step.json in the runner's shape, and an empty logs/ folder; with `rate`, an open-model step;
    with `xcheck`, the wrk cross-check (xcheck_record, or {"skipped": reason}); with `fork`, the
    engine process that measured it (a plan of `forks: N`)."""
    write_json(folder / "step.json", {
        "scenario": scenario, "target": target, "payload_bytes": payload_bytes, "payload_label": payload_label,
        "users": users, "model": "closed" if rate is None else "open", "rate": rate,
        "processes": 1, "threads": users, "agents": 1, "iteration": iteration, "plan": plan,
        "duration_s": duration_s, "warmup_s": warmup_s, "keepalive": True, "timeout_s": 120,
        "start_ms": start_ms, "first_report_ms": start_ms + 500, "warmup_end_ms": start_ms + warmup_s * 1000,
        "end_ms": start_ms + (warmup_s + duration_s) * 1000, "versions": {"grinder": "3.11"}, "hosts": hosts(link_mbit),
        "target_urls": {}, "bottlenecks": bottlenecks or [], "monitors": {}, "console": {},
        **({} if xcheck is None else {"xcheck": xcheck}), **({} if fork is None else {"fork": fork})})
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    return folder


def write_random_logs(folder: Path, rows: int, files: int, start_ms: int, end_ms: int,
                      mean_ms: float = 20.0, error_rate: float = 0.0, payload_bytes: int = 1024,
                      seed: int = 1, micros: bool = True, lag_us: float | None = None,
                      threads: int = 20, first_file: int = 0) -> list[Path]:
    """`rows` rows spread over `files` worker data logs (by `threads` threads), start times uniform in
    [start_ms, end_ms),
    response times exponential around `mean_ms`, in µs (`Response us`) and whole ms (`Test time`);
    with `lag_us`, open-model columns too (start lags exponential around it); the files are numbered from
    `first_file` (a second call beside the first writes a later part of the same window)."""
    rng = np.random.default_rng(seed)
    paths = []
    header = DATA_LOG_HEADER if not micros else US_DATA_LOG_HEADER if lag_us is None else OPEN_DATA_LOG_HEADER
    for f in range(files):
        n = rows // files + (1 if f < rows % files else 0)
        errors = (rng.random(n) < error_rate).astype(np.int64)
        us = np.maximum(1, rng.exponential(mean_ms * 1000, n).astype(np.int64))
        columns = {
            "thread": rng.integers(0, threads, n), "run": np.arange(n) // 20, "test": np.ones(n, dtype=np.int64),
            "start": np.sort(rng.integers(start_ms, end_ms, n)), "time": us // 1000, "errors": errors,
            "status": np.where(errors == 1, 500, 200), "request": np.full(n, payload_bytes),
            "response": np.full(n, payload_bytes) + rng.integers(40, 80, n)}
        if micros:
            columns["us"] = us
        if micros and lag_us is not None:
            lag = rng.exponential(lag_us, n).astype(np.int64)
            columns["latency"], columns["lag"] = us + lag, lag
        frame = pl.DataFrame(columns)
        lines = frame.select(pl.concat_str([pl.col(c).cast(pl.String) for c in frame.columns], separator=", "))
        path = folder / "logs" / f"client-{first_file + f}-data.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            out.write((header + "\n").encode())
            lines.write_csv(out, include_header=False, quote_style="never")
        paths.append(path)
    return paths


def write_monitor(folder: Path, role: str, start_ms: int, warmup_end_ms: int, end_ms: int,
                  cpu_percent: float, rx_mbit: float, tx_mbit: float, interfaces=("eth0",),
                  gaps_ms: tuple[float, ...] = (), proc_cpu: tuple[float, ...] = (),
                  watches: tuple[str, ...] = ()) -> Path:
    """Samples once a second: constant CPU, counters growing at the given rates (split over the
    interfaces), plus a loopback interface whose traffic must not count; every 2 s, one
    `proc.cpu` row per value of `proc_cpu` (watched processes, % of one core), named by `watches`
    (the monitor's --match texts) or `pid 4000`, `pid 4001`, …"""
    rows = []
    for t in range(start_ms, end_ms + 1, 1000):
        phase = "warmup" if t < warmup_end_ms else "measure"
        elapsed = (t - start_ms) / 1000
        rows.append((t, phase, "cpu.total", "", cpu_percent))
        rows.append((t, phase, "cpu.user", "", cpu_percent * 0.8))
        for name in interfaces:
            rows.append((t, phase, "net.rx_bytes", name, rx_mbit * 1e6 / 8 * elapsed / len(interfaces)))
            rows.append((t, phase, "net.tx_bytes", name, tx_mbit * 1e6 / 8 * elapsed / len(interfaces)))
        rows.append((t, phase, "net.rx_bytes", "lo", 1e9 * elapsed))
        if (t - start_ms) % 2000 == 0:
            rows += [(t, phase, "proc.cpu", watches[i] if i < len(watches) else f"pid {4000 + i}", value)
                     for i, value in enumerate(proc_cpu)]
    for i, gap in enumerate(gaps_ms):
        rows.append((warmup_end_ms + 1000 * (i + 1), "measure", "gap", "timeout", gap))
    frame = pl.DataFrame(rows, schema=["time_ms", "phase", "metric", "subject", "value"], orient="row")
    path = folder / f"monitor-{role}.csv"
    frame.write_csv(path)
    return path


def gc_line(time_ms: int, message: str, uptime_ms: int = 60_000) -> str:
    """A line as `-Xlog:gc` writes it with esbperf's decorators (esbperf/services/jvm.py)."""
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time_ms // 1000)) + f".{time_ms % 1000:03d}+0000"
    return f"[{iso}][{time_ms}ms][{uptime_ms}ms][info][gc] {message}\n"


def write_gc_log(folder: Path, role: str, pauses: list[tuple[int, float, int]], committed_mb: int = 256) -> Path:
    """A step's GC window `gc-<role>.log`: one G1 young pause per (end time ms, length ms, heap
    after MB), each followed by a concurrent phase (not a pause)."""
    lines = []
    for n, (t, ms, after) in enumerate(pauses):
        lines.append(gc_line(t, f"GC({2 * n}) Pause Young (Normal) (G1 Evacuation Pause) "
                                f"{after + 40}M->{after}M({committed_mb}M) {ms:.3f}ms"))
        lines.append(gc_line(t, f"GC({2 * n + 1}) Concurrent Mark Cycle 25.125ms"))
    path = folder / f"gc-{role}.log"
    path.write_text("".join(lines))
    return path


def thesis_run(run_dir: Path, target: str, rows_per_step: int, files: int = 2, iterations: int = 1,
               scenario: str = "proxy", duration_s: int = 300, warmup_s: int = 30, seed: int = 1,
               esb_cpu: float = 40.0, sweeps: str = "both", plan: str = "thesis", gc: bool = False,
               shared_cpus: bool = False) -> Path:
    """A run of the thesis's sweeps with random logs: `payload` (1 user), `users` (100 KB) or both;
    with `gc`, GC windows of the ESB and echoes: a pause a second of 2 + users / 40 ms."""
    steps = [(label, size, 1) for label, size in THESIS_PAYLOADS.items()] if sweeps != "users" else []
    steps += [("100KB", THESIS_PAYLOADS["100KB"], u) for u in THESIS_USERS
              if sweeps != "payload" and (u != 1 or sweeps == "users")]
    payloads = sorted({size for _, size, _ in steps})
    write_run(run_dir, target, plan=plan_dict(plan, payloads=payloads, users=sorted({u for _, _, u in steps}),
                                             duration_s=duration_s, warmup_s=warmup_s, iterations=iterations),
              shared_cpus=shared_cpus)
    roles = [*BACKENDS, CLIENT] + ([] if target == "direct" else [ESB])
    for k, (label, size, users) in enumerate(steps):
        for it in range(1, iterations + 1):
            folder = write_step(step_dir(run_dir, scenario, label, users, it), scenario, target, size, label,
                                users, it, duration_s=duration_s, warmup_s=warmup_s, plan=plan)
            meta = json.loads((folder / "step.json").read_text())
            write_random_logs(folder, rows_per_step, files, meta["start_ms"], meta["end_ms"],
                              mean_ms=2 + size / 20000 + users / 4, payload_bytes=size,
                              seed=seed * 1000 + k * 10 + it)
            for role in roles:
                cpu = min(99.0, esb_cpu + users / 10) if role == "esb" else 15.0
                # Each host has one core (hosts()): its watched JVM takes most of what the core does.
                write_monitor(folder, role, meta["start_ms"], meta["warmup_end_ms"], meta["end_ms"],
                              cpu_percent=cpu, rx_mbit=size * users / 50000, tx_mbit=size * users / 50000,
                              proc_cpu=() if role == "client" else (0.9 * cpu,))
                if gc and role != "client":
                    write_gc_log(folder, role, [(t, 2 + users / 40, 100 + users)
                                                for t in range(meta["start_ms"] + 500, meta["end_ms"], 1000)])
    return run_dir


# --- a round's runs: several targets interleaved, as `esbperf round` runs them (tests/test_round.py) ---

ROUND_ENGINES = {"nginx": ("floor", "nginx:"), "haproxy": ("floor", "haproxy -db -f"),
                 "camel": ("ESB", "org.apache.camel.main.Main"), "synapse": ("ESB", "org.apache.synapse.SynapseServer"),
                 "spring-integration": ("ESB", "esbperf-spring-integration"),
                 "reference": ("reference", "esbperf.reference.ReferenceMain")}


def round_run(run_dir: Path, plan_name: str, targets: dict[str, float], scenarios: list[str],
              payloads: dict[str, int], users: list[int], iterations: int, window_s: int = 4,
              base_ms: float = 2.0, engine_cpu: float = 60.0, seed: int = 1, slower: dict | None = None,
              busy: set | None = None, forks: int = 1, fork_speed: dict | None = None,
              xchecks: dict | None = None, skip: set | None = None, noise: float = 0.0,
              drifting: set | None = None) -> Path:
    """A closed-model run of several targets interleaved step by step: each target's response times
    exponential around base_ms × its factor in `targets` (direct 1.0, …) × (1 + users / 20), as many
    transactions as Little's law gives its users in the window; the esb host's monitor watches every
    engine of ROUND_ENGINES by its --match text, the target's own at engine_cpu × its factor, the
    others idle. `slower` {(target, scenario, users, iteration): factor} slows one step down; in the
    steps of `busy` {(target, scenario, users, iteration)} a neighbour engine is busy (30 % of a core).
    With `forks` N > 1, each target is measured in N engine processes of `iterations` iterations
    each (step folders `…/fork-<F>/iter-<n>`, step.json `fork`, run.json `forks`), each process at
    its own speed: `fork_speed` {(target, fork): speed} (0.8: 20 % slower) in every step; `noise`
    varies each step's speed at random by that share (a normal deviation, seeded). `xchecks`
    {(target, scenario, users, iteration): step.json xcheck}; the steps of `skip` {(target,
    scenario, users, iteration)} are not written (a run stopped before them); in the steps of `drifting`
    (the same keys) response times double halfway through the window, so its throughput halves there."""
    engines = {name: {"kind": kind, "version": f"{name} 1.0"} for name, (kind, _) in ROUND_ENGINES.items()
               if name in targets}
    matches = {name: match for name, (_, match) in ROUND_ENGINES.items() if name in targets}
    plan = plan_dict(plan_name, scenarios=scenarios, payloads=list(payloads.values()), users=users,
                     duration_s=window_s, warmup_s=2, iterations=iterations)
    if forks > 1:
        plan["forks"] = forks
    write_run(run_dir, "+".join(targets), plan=plan, engine_matches=matches, engines=engines,
              console_sample_interval_ms=250, **({"forks": forks} if forks > 1 else {}),
              targets=[{"name": t, "kind": "direct" if t == "direct" else "esb", "esb": None if t == "direct" else t}
                       for t in targets])
    start = BASE_MS
    n = 0
    for fork, it in ((f, i) for f in range(1, forks + 1) for i in range(1, iterations + 1)):
        order = list(targets)[(it - 1) % len(targets):] + list(targets)[:(it - 1) % len(targets)]
        for scenario in scenarios:
            for label, size in payloads.items():
                for u in users:
                    for target in order:
                        n += 1
                        if (target, scenario, u, it) in (skip or ()):
                            continue
                        where = run_dir / target / scenario / label / str(u)
                        folder = write_step((where / f"fork-{fork}" if forks > 1 else where) / f"iter-{it}", scenario,
                                            target, size, label, u, it, start_ms=start, warmup_s=2,
                                            duration_s=window_s, plan=plan_name, fork=fork if forks > 1 else None,
                                            xcheck=(xchecks or {}).get((target, scenario, u, it)))
                        meta = json.loads((folder / "step.json").read_text())
                        factor = targets[target] * (slower or {}).get((target, scenario, u, it), 1.0) \
                            / (fork_speed or {}).get((target, fork), 1.0)
                        if noise:
                            factor /= max(0.2, 1 + np.random.default_rng(seed * 7919 + n).normal(0, noise))
                        mean = base_ms * factor * (1 + u / 20) * (1 + size / 200_000)
                        rows = max(400, round(u * window_s * 1000 / mean))
                        begin, end = meta["warmup_end_ms"], meta["end_ms"]
                        if (target, scenario, u, it) in (drifting or ()):   # the second half at half the rate
                            half = (begin + end) // 2
                            write_random_logs(folder, rows // 4, 1, half, end, mean_ms=2 * mean, payload_bytes=size,
                                              seed=seed * 100_000 + n + 1, threads=u, first_file=1)
                            rows, end = rows // 2, half
                        write_random_logs(folder, rows, 1, begin, end, mean_ms=mean,
                                          payload_bytes=size, seed=seed * 100_000 + n, threads=u)
                        idle = 30.0 if (target, scenario, u, it) in (busy or ()) else 0.5
                        proc = [engine_cpu * targets[name] if name == target else idle for name in matches]
                        for role in ROLES:
                            write_monitor(folder, role, meta["start_ms"], meta["warmup_end_ms"], meta["end_ms"],
                                          cpu_percent=30.0, rx_mbit=10.0, tx_mbit=10.0,
                                          proc_cpu=tuple(proc) if role == ESB else (),
                                          watches=tuple(matches.values()) if role == ESB else ())
                        start += (window_s + 3) * 1000
    return run_dir


# --- interval series, for esbperf/core/steady.py (tests/test_steady.py, analysis/bench/steady_rates.py) ---

SERIES_TPS = 2000.0        # 1 user, 1 KB: ~2000 transactions a second ...
SERIES_NOISE = 0.03        # ... with a few % noise over a second; the mean response time with MEAN_NOISE
SERIES_MEAN_NOISE = 0.02


def shipped_sample_interval_s() -> float:
    """How often the runner asks steady(): once a console sample (console-config/console.yaml
    `sample_interval_ms`; esbperf/run/workers.py until_steady)."""
    from esbperf.core.config import ConsoleConfig
    return ConsoleConfig.load().sample_interval_ms / 1000


def step_series(shape, seed: int, n: int = 200, poisson_level: float | None = None,
                interval_s: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """TPS and mean response time (ms) per interval of `interval_s` of a closed-model step whose speed
    follows `shape(t)` (t in s; 1 = steady): the mean response time is its inverse. The noise is that
    of a second (SERIES_NOISE) scaled to the interval (× √(1 s ÷ interval): fewer transactions). With
    `poisson_level` the TPS are Poisson counts of that level a second times the speed (a 1 MB step:
    ~20 a second)."""
    rng = np.random.default_rng(seed)
    speed = shape(np.arange(n, dtype=float) * interval_s)
    scale = 1 / math.sqrt(interval_s)
    if poisson_level is None:
        tps = SERIES_TPS * speed * (1 + rng.normal(0, SERIES_NOISE * scale, n))
    else:
        tps = rng.poisson(poisson_level * speed * interval_s).astype(float) / interval_s
    return tps, 1.0 / speed * (1 + rng.normal(0, SERIES_MEAN_NOISE * scale, n))


def window_opens(tps: np.ndarray, mean: np.ndarray, *, horizon_s: float, interval_s: float,
                 max_s: float = 60) -> float | None:
    """When (s after the load began) a runner asking steady() once an interval, over the `horizon_s`
    to come (the step's duration_s), opens the window; None when it never does by max_s (the step
    would be measured at warmup_max_s: "no steady state")."""
    from esbperf.core.steady import steady

    for k in range(1, round(max_s / interval_s) + 1):
        if steady(tps[:k], mean[:k], interval_s, horizon_s=horizon_s).steady:
            return k * interval_s
    return None


def whole_ms(gaps_s: np.ndarray) -> np.ndarray:
    """Start times (ms since the epoch) of arrivals `gaps_s` apart, as Grinder logs them: whole ms."""
    return np.floor(np.cumsum(gaps_s) * 1000.0 + BASE_MS)


# --- the demo's three runs: an ESB and the baseline interleaved, as `esbperf demo` writes them ---

# The demo's figures on 2 cores (2026-11-28): TPS by (target, payload KB, users) of the closed-model
# steps. Camel 3,520 TPS at 1 KB 1 user and ~3,800 from 20 users at 100 KB, on its own core (the engine
# the bound); direct ~50,000 at 1 KB 1 user, client-bound from 20 users at 100 KB (8,000–9,200).
DEMO_TPS = {
    "camel": {(1, 1): 3520, (50, 1): 1550, (100, 1): 1480, (500, 1): 380, (1024, 1): 190,
              (100, 20): 3800, (100, 40): 3760, (100, 80): 3720, (100, 160): 3650, (100, 320): 3560},
    "direct": {(1, 1): 50000, (50, 1): 12000, (100, 1): 7000, (500, 1): 1700, (1024, 1): 880,
               (100, 20): 8100, (100, 40): 8600, (100, 80): 9200, (100, 160): 8800, (100, 320): 8500},
}
DEMO_RATES = (150, 250, 350)
# The demo's cores on 2 CPUs (`cpus: auto`): the esb host on one, the client and the back ends on the other.
DEMO_CPUS = {CLIENT: [0], ESB: [1], **{b: [0] for b in BACKENDS}}


def demo_runs(root: Path, esb: str = "camel", warm: bool = True, window_s: int = 2, iterations: int = 2,
              unsteady: int = 0, seed: int = 1) -> list[Path]:
    """The three runs of `esbperf demo` (demo-payload, demo-concurrency, demo-open), the ESB and
    direct interleaved step by step at DEMO_TPS (open model: at DEMO_RATES, keeping the schedule),
    `iterations` each, on the demo's cores (DEMO_CPUS: the client and the back ends share one, so
    their CPU figures are one curve). The ESB's steps from 20 users are bound by its core, direct's
    by the client. `warm` False: no target was judged warm (every step `target-not-warm`, as in the
    demo of 2026-11-28); `unsteady` steps (the first ones) had no steady state in their warm-up."""
    plans = [("demo-payload", [(kb, 1, None) for kb in (1, 50, 100, 500, 1024)]),
             ("demo-concurrency", [(100, u, None) for u in (1, 20, 40, 80, 160, 320)]),
             ("demo-open", [(100, 4, r) for r in DEMO_RATES])]
    runs, start, n = [], BASE_MS, 0
    for plan_name, steps in plans:
        run_dir = root / f"{plan_name}-{esb}+direct"
        plan = plan_dict(plan_name, payloads=sorted({kb * 1024 for kb, _, _ in steps}),
                         users=sorted({u for _, u, r in steps if r is None}), duration_s=window_s, warmup_s="auto",
                         iterations=iterations, **({"rates": list(DEMO_RATES)} if plan_name == "demo-open" else {}))
        write_run(run_dir, f"{esb}+direct", plan=plan,
                  targets=[{"name": t, "kind": "direct" if t == "direct" else "esb",
                            "esb": None if t == "direct" else t} for t in (esb, "direct")])
        info = json.loads((run_dir / "run.json").read_text())
        for role, cpus in DEMO_CPUS.items():
            info["hosts"][role].update(cpus=cpus, link_mbit=10000)
        write_json(run_dir / "run.json", info)
        for it in range(1, iterations + 1):
            for kb, users, rate in steps:
                for target in ((esb, "direct") if it % 2 else ("direct", esb)):
                    n += 1
                    size = kb * 1024
                    label = size_label(size)
                    folder = run_dir / target / "proxy" / label / str(users)
                    folder = (folder / f"rate-{rate:g}" if rate else folder) / f"iter-{it}"
                    write_step(folder, "proxy", target, size, label, users, it, start_ms=start, warmup_s=3,
                               duration_s=window_s, plan=plan_name, link_mbit=10000, rate=rate)
                    meta = json.loads((folder / "step.json").read_text())
                    for role, cpus in DEMO_CPUS.items():
                        meta["hosts"][role].update(cpus=cpus)
                    meta["workers_ready_ms"] = BASE_MS - 60_000
                    meta["target_warm"] = {"settled": warm, **({} if warm else {"reason": "still climbing"})}
                    if n <= unsteady:
                        meta["warmup"] = {"steady": False, "reason": "throughput still moving at warmup_max_s"}
                    write_json(folder / "step.json", meta)
                    # Iterations differ by a few per cent (the range the report shows).
                    tps = (rate if rate else DEMO_TPS[target if target == "direct" else "camel"][(kb, users)]) \
                        * (1 + 0.03 * (it - 1.5))
                    rows = round(tps * window_s)
                    # Open model: a service time that grows with the offered rate (the ESB's larger).
                    mean_ms = ((0.6 if target == "direct" else 1.4) * (1 + rate / 500)) if rate else users * 1000 / tps
                    write_random_logs(folder, rows, 1, meta["warmup_end_ms"], meta["end_ms"], mean_ms=mean_ms,
                                      payload_bytes=size, seed=seed * 100_000 + n, threads=users,
                                      lag_us=20.0 if rate else None)
                    bound = not rate and users >= 20
                    shared = 95.0 if bound and target == "direct" else 60.0          # the client's core ...
                    workers = 85.0 if bound and target == "direct" else 45.0         # ... its worker JVMs' share
                    esb_cpu = 97.0 if bound and target != "direct" else 40.0 if target != "direct" else 2.0
                    mbit = tps * size * 8 / 1e6
                    for role in ROLES:
                        cpu = esb_cpu if role == ESB else shared
                        write_monitor(folder, role, meta["start_ms"], meta["warmup_end_ms"], meta["end_ms"],
                                      cpu_percent=cpu, rx_mbit=mbit if role != ESB or target != "direct" else 0.0,
                                      tx_mbit=mbit if role != ESB or target != "direct" else 0.0,
                                      proc_cpu=(cpu if role == ESB else workers if role == CLIENT
                                                else 10.0 + BACKENDS.index(role) / 2,))
                    start += (3 + window_s + 2) * 1000
        runs.append(run_dir)
    return runs
