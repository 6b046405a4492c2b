"""Synthetic results folders in the sweep runner's layout, for the tests and the benchmark.

Data logs have Grinder 3.11's format (", " between fields, the header line first); monitor files
the monitor's long format. Values are drawn from a seeded generator, so a folder is the same
every time it is made."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

DATA_LOG_HEADER = ("Thread, Run, Test, Start time (ms since Epoch), Test time, Errors, "
                   "HTTP status, Request bytes, Response bytes")
THESIS_PAYLOADS = {"1KB": 1024, "50KB": 50 * 1024, "100KB": 100 * 1024, "500KB": 500 * 1024, "1MB": 1024 * 1024}
THESIS_USERS = (1, 20, 40, 80, 160, 320)
BASE_MS = 1_795_239_161_376


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def write_run(run_dir: Path, target: str, plan_name: str = "thesis", plan: dict | None = None,
              testbed: str = "emulated") -> Path:
    plan = plan if plan is not None else {"name": plan_name, "duration_s": 300, "warmup_s": 30, "iterations": 1}
    return write_json(run_dir / "run.json", {
        "os": "Linux 6.1 x86_64", "cpu": "synthetic 2 cores", "memory": "24 GiB", "java": "17.0.15",
        "grinder": "3.11", "jython": "2.7.4", "git_revision": "0000000", "plan_name": plan_name,
        "plan": plan, "target": target, "testbed": testbed,
        "start": "2026-11-21T05:00:00Z", "end": "2026-11-21T06:00:00Z"}).parent


def step_dir(run_dir: Path, scenario: str, payload_label: str, users: int, iteration: int) -> Path:
    return run_dir / scenario / payload_label / str(users) / f"iter-{iteration}"


def write_step(folder: Path, scenario: str, target: str, payload_bytes: int, payload_label: str,
               users: int, iteration: int, start_ms: int = BASE_MS, warmup_s: int = 30,
               duration_s: int = 300, plan: str = "thesis", link_mbit: float | None = 1000,
               bottlenecks: list | None = None) -> Path:
    hosts = {role: {"link_mbit": link_mbit} for role in ("esb", "ws1", "ws2", "ws3", "client")} if link_mbit else {}
    write_json(folder / "step.json", {
        "scenario": scenario, "target": target, "payload_bytes": payload_bytes, "payload_label": payload_label,
        "users": users, "processes": 1, "threads": users, "iteration": iteration, "plan": plan,
        "start_ms": start_ms, "warmup_end_ms": start_ms + warmup_s * 1000,
        "end_ms": start_ms + (warmup_s + duration_s) * 1000, "duration_s": duration_s, "warmup_s": warmup_s,
        "keepalive": True, "versions": {}, "hosts": hosts, "bottlenecks": bottlenecks or [], "console": {}})
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    return folder


def write_random_logs(folder: Path, rows: int, files: int, start_ms: int, end_ms: int,
                      mean_ms: float = 20.0, error_rate: float = 0.0, payload_bytes: int = 1024,
                      seed: int = 1) -> list[Path]:
    """`rows` rows spread over `files` worker data logs, start times uniform in [start_ms, end_ms)."""
    rng = np.random.default_rng(seed)
    paths = []
    for f in range(files):
        n = rows // files + (1 if f < rows % files else 0)
        errors = (rng.random(n) < error_rate).astype(np.int64)
        frame = pl.DataFrame({
            "thread": rng.integers(0, 20, n), "run": np.arange(n) // 20, "test": np.ones(n, dtype=np.int64),
            "start": np.sort(rng.integers(start_ms, end_ms, n)),
            "time": np.maximum(1, rng.exponential(mean_ms, n).astype(np.int64)), "errors": errors,
            "status": np.where(errors == 1, 500, 200), "request": np.full(n, payload_bytes),
            "response": np.full(n, payload_bytes) + rng.integers(40, 80, n)})
        lines = frame.select(pl.concat_str([pl.col(c).cast(pl.String) for c in frame.columns], separator=", "))
        path = folder / "logs" / f"client-{f}-data.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            out.write((DATA_LOG_HEADER + "\n").encode())
            lines.write_csv(out, include_header=False, quote_style="never")
        paths.append(path)
    return paths


def write_monitor(folder: Path, role: str, start_ms: int, warmup_end_ms: int, end_ms: int,
                  cpu_percent: float, rx_mbit: float, tx_mbit: float, interfaces=("eth0",),
                  gaps_ms: tuple[float, ...] = ()) -> Path:
    """Samples once a second: constant CPU, counters growing at the given rates (split over the
    interfaces), plus a loopback interface whose traffic must not count."""
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
    for i, gap in enumerate(gaps_ms):
        rows.append((warmup_end_ms + 1000 * (i + 1), "measure", "gap", "timeout", gap))
    frame = pl.DataFrame(rows, schema=["time_ms", "phase", "metric", "subject", "value"], orient="row")
    path = folder / f"monitor-{role}.csv"
    frame.write_csv(path)
    return path


def thesis_run(run_dir: Path, target: str, rows_per_step: int, files: int = 2, iterations: int = 1,
               scenario: str = "proxy", duration_s: int = 300, warmup_s: int = 30, seed: int = 1,
               esb_cpu: float = 40.0) -> Path:
    """A run of the thesis's two sweeps (payload at 1 user, users at 100 KB) with random logs."""
    write_run(run_dir, target)
    steps = [(label, size, 1) for label, size in THESIS_PAYLOADS.items()]
    steps += [("100KB", THESIS_PAYLOADS["100KB"], u) for u in THESIS_USERS if u != 1]
    roles = ["ws1", "ws2", "ws3", "client"] + ([] if target == "direct" else ["esb"])
    for k, (label, size, users) in enumerate(steps):
        for it in range(1, iterations + 1):
            folder = write_step(step_dir(run_dir, scenario, label, users, it), scenario, target, size, label,
                                users, it, duration_s=duration_s, warmup_s=warmup_s)
            meta = json.loads((folder / "step.json").read_text())
            write_random_logs(folder, rows_per_step, files, meta["start_ms"], meta["end_ms"],
                              mean_ms=2 + size / 20000 + users / 4, payload_bytes=size,
                              seed=seed * 1000 + k * 10 + it)
            for role in roles:
                write_monitor(folder, role, meta["start_ms"], meta["warmup_end_ms"], meta["end_ms"],
                              cpu_percent=min(99.0, esb_cpu + users / 10) if role == "esb" else 15.0,
                              rx_mbit=size * users / 50000, tx_mbit=size * users / 50000)
    return run_dir
