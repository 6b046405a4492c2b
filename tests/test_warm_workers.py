"""Warm workers (esbperf/run/pool.py): one set of worker JVMs carries a run's steps through the
console's step board. Each step's rows land in that step's logs, none lost and none counted twice,
whatever changes from one step to the next: users up and down, the payload, the target, the
closed and the open model."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import ECHO_PORTS, HOST, write_testbed
from esbperf.core import plan as plans, topology
from esbperf.results.datalog import log_stats
from esbperf.run import collect, runner
from esbperf.run.pool import WarmPool
from esbperf.run.workers import ConsoleWatch, Layout, now_ms
from esbperf.services import esb

NGINX_PORT = 16311
# What each of a step's threads says in the step's worker log as it leaves it (scenario.py, Part.close).
LEFT = re.compile(r"thread-(\d+)[^:]*: \d+ right answers of (\d+) transactions")
# What each worker says at its start of the interval Grinder read then (scenario.py); a warm
# worker's step log begins with those start lines.
REPORTS = re.compile(r"esbperf: this worker reports to the console every (\d+) ms")


def report_intervals(folder: Path) -> set[int]:
    """The report intervals a step's workers say they use, from their logs of the step."""
    return {int(ms) for log in folder.glob("*.log") if not log.name.endswith("-data.log")
            for ms in REPORTS.findall(log.read_text())}


def rows_of(folder: Path) -> dict[str, list[list[int]]]:
    """Each data log's rows (its header left out), as integers."""
    found = {}
    for log in sorted(folder.glob("*-data.log")):
        lines = log.read_text().splitlines()
        assert lines and lines[0].startswith("Thread, Run, Test, Start time (ms since Epoch)"), (log, lines[:1])
        found[log.name[:-len("-data.log")]] = [[int(v) for v in line.split(", ")] for line in lines[1:]]
    return found


def assert_every_row_in_its_step(folder: Path, payload_bytes: int, users: int | None) -> int:
    """Every thread of the step logged as many rows as it says it made transactions, each row of
    the step's payload and begun inside the step; the threads that took part; the step's rows."""
    meta = json.loads((folder / "step.json").read_text())
    total, threads = 0, set()
    for worker, rows in rows_of(folder / "logs").items():
        said = Counter()
        for match in LEFT.finditer((folder / "logs" / f"{worker}.log").read_text()):
            said[int(match.group(1))] += int(match.group(2))
        made = Counter(row[0] for row in rows)
        assert made == said, (folder, worker, made, said)   # none lost, none twice
        assert all(row[7] == payload_bytes for row in rows), folder
        assert all(meta["start_ms"] <= row[3] <= meta["end_ms"] + 10_000 for row in rows), folder
        threads |= {(worker, t) for t in made}
        total += len(rows)
        assert "closed normally:" in (folder / "logs" / f"{worker}.log").read_text().splitlines()[-1]
    if users is not None:
        assert len(threads) == users, (folder, threads)
    assert meta["workers_mode"] == "warm"
    return total


@pytest.fixture(scope="module")
def nginx(echoes, tmp_path_factory):
    """nginx, a floor: a second target for the workers to change to."""
    backends = {ws: f"http://{HOST}:{port}" for ws, port in ECHO_PORTS.items()}
    process = esb.start_esb("nginx", HOST, NGINX_PORT, backends, workdir=tmp_path_factory.mktemp("nginx"))
    yield process
    process.stop()


@pytest.mark.slow
def test_warm_workers_carry_a_run_and_every_row_lands_in_its_step(grinder, echoes, nginx, tmp_path):
    path = write_testbed(tmp_path / "warm.yaml", ECHO_PORTS)
    data = yaml.safe_load(path.read_text())
    data["hosts"]["esb"]["esb_ports"]["nginx"] = NGINX_PORT
    data["targets"]["nginx"] = {"kind": "esb", "esb": "nginx"}
    path.write_text(yaml.safe_dump(data))
    testbed = topology.load(path)
    plan_file = tmp_path / "handover.yaml"
    # Users up (1 -> 3) and down (3 -> 2), the payload (1 KB -> 5 KB), the target (direct <-> nginx).
    plan_file.write_text(yaml.safe_dump({"name": "handover", "scenarios": ["proxy"], "payloads": ["1KB", "5KB"],
                                         "users": [1, 3, 2], "duration_s": 2, "warmup_s": 1, "timeout_s": 10}))
    the_plan = plans.load(plan_file)
    run_dir = runner.start(the_plan, ["direct", "nginx"], testbed, tmp_path / "results")
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and record["workers"]["mode"] == "warm"
    assert len(record["workers"]["starts"]) == 1, "one set of workers carried every step"
    # The client's calibration started them, with no report interval of its own (the distributed
    # grinder.properties says 500 ms): they report at the run's all the same, as step.json says.
    run_interval = max(50, round(record["console_sample_interval_ms"] / 5))
    assert record["workers"]["report_interval_ms"] == run_interval
    # The largest step's layout over the two agents: 3 users -> 1 process of 2 threads per agent.
    assert (record["workers"]["processes"], record["workers"]["threads"]) == (1, 2)
    for step in the_plan.steps(["direct", "nginx"]):
        folder = run_dir / step.relative_dir()
        assert assert_every_row_in_its_step(folder, step.payload_bytes, step.users) > 0
        meta = json.loads((folder / "step.json").read_text())
        console = dict(zip(meta["console"]["columns"], meta["console"]["totals"]))
        stats = log_stats(sorted((folder / "logs").glob("*-data.log")), meta["warmup_end_ms"], meta["end_ms"])
        assert stats.errors == 0 and console["Errors"] == 0
        assert meta["threads_seen"] == step.users
        assert report_intervals(folder / "logs") == {meta["report_interval_ms"]} == {run_interval}
    # The workers' own logs (their start and final statistics) come home at the run's end.
    assert list((run_dir / collect.POOL_FOLDER).glob("*/logs/*.log"))


@pytest.mark.slow
def test_a_pool_hands_closed_open_and_closed_steps_over(grinder, echoes, testbed_file, state_dir, tmp_path):
    testbed = topology.load(testbed_file)
    watch = ConsoleWatch(grinder, {"test-1", "test-2"}, lambda *a: None)
    grinder.settle()
    fetchers = [collect.LocalAgents([state_dir])]
    run = f"handover-{now_ms()}"
    pool = WarmPool(1, 2, 2, testbed.board_url, True, 10, 100, lambda: grinder, tmp_path, fetchers)
    base = {"esbperf.keepalive": "true", "esbperf.timeout.ms": 10000,
            "esbperf.target.kind": "direct",
            **{f"esbperf.backend.{ws}": f"http://{HOST}:{port}" for ws, port in ECHO_PORTS.items()}}
    steps = [("closed 1", {"esbperf.scenario": "proxy", "esbperf.users": 1, "esbperf.payload.bytes": 1024}, None),
             ("open 40/s", {"esbperf.scenario": "raw", "esbperf.users": 4, "esbperf.payload.bytes": 2048,
                            "esbperf.rate": 20, "esbperf.arrivals": "uniform"}, 20),
             ("closed 2", {"esbperf.scenario": "proxy", "esbperf.users": 2, "esbperf.payload.bytes": 3072}, None)]
    try:
        for name, settings, rate in steps:
            relative = collect.step_log_folder(run, Path(name.replace(" ", "-").replace("/", "")), str(now_ms()))
            ordered = now_ms()
            began = pool.begin(watch, {**base, **settings}, Layout(1, 2, relative, rate is not None))
            watch.wait_until(began.first_report_ms + 2500, name, began.workers)
            pool.end_step()
            folder = tmp_path / name.replace(" ", "-").replace("/", "")
            assert not pool.bring_home(relative, folder / "logs")
            (folder / "step.json").write_text(json.dumps({"start_ms": ordered, "end_ms": now_ms(),
                                                          "workers_mode": "warm"}))
            made = assert_every_row_in_its_step(folder, settings["esbperf.payload.bytes"],
                                                None if rate else settings["esbperf.users"])
            assert report_intervals(folder / "logs") == {100}
            if rate:   # 20/s per process, 2 processes, for about 2.5 s
                assert 60 <= made <= 130, made
            for log in (folder / "logs").glob("*-data.log"):
                header = log.read_text().splitlines()[0]
                assert header.endswith("Response us, Latency us, Start lag us"), header
            for rows in rows_of(folder / "logs").values():
                if not rate:   # a closed step of a pool that logs the open model: due start = start
                    assert all(row[10] == row[9] and row[11] == 0 for row in rows)
                else:
                    assert all(row[10] >= row[9] for row in rows)
        assert len(pool.starts) == 1
    finally:
        pool.close()
    assert not grinder.running_workers(), "closing the pool ends its workers"
