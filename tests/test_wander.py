"""The machine's own wander (esbperf/run/wander.py): the speed of a set amount of work in windows as
long as a step's, paired with the window a bracket's gap later; what wrk's bracket allows for."""
from __future__ import annotations

import pytest

from esbperf.analysis.checks import XCHECK_WANDER, bracket_noise, run_wander
from esbperf.run import wander


def test_a_steady_core_wanders_not_at_all():
    found = wander.summarize([0.001] * 30_000, window_s=4.0, gap_s=10.0)
    assert found["wander"] == pytest.approx(0.0, abs=1e-6) and found["move_p95"] == pytest.approx(0.0, abs=1e-6)
    assert found["pairs"] > 10_000 and found["seconds"] == 30.0


def test_a_core_that_slows_by_a_quarter_every_other_ten_seconds_wanders_by_that_much():
    # 10 s at 1 ms a chunk, 10 s at 1.25 ms, …: windows 10 s apart differ by a fifth of the speed,
    # about half of them (those not straddling a change as much as their partner).
    chunks = [0.001] * 10_000 + [0.00125] * 8_000 + [0.001] * 10_000 + [0.00125] * 8_000
    found = wander.summarize(chunks, window_s=4.0, gap_s=10.0)
    assert 0.05 < found["wander"] < 0.2 and 0.15 < found["move_p95"] < 0.3, found


def test_a_probe_shorter_than_its_gap_tells_nothing():
    found = wander.summarize([0.001] * 5_000, window_s=4.0, gap_s=10.0)
    assert found["wander"] is None and found["pairs"] == 0
    assert wander.probe_seconds(4.0) == 40.0 and wander.probe_seconds(1.0) == wander.MIN_PROBE_S


def test_a_bracket_allows_the_runs_own_wander_and_a_run_without_one_the_measured_constant():
    steady = [1000.0, 1001.0, 999.0, 1000.0]
    assert run_wander({}) is None and run_wander({"machine_wander": {"skipped": "over ssh"}}) is None
    assert run_wander({"machine_wander": {"wander": 0.12}}) == 0.12
    assert bracket_noise(steady) == pytest.approx(bracket_noise(steady, XCHECK_WANDER))
    # A machine wandering 12 % a window: a 20 % move between the two windows is chance, not the target.
    assert bracket_noise(steady, 0.12) == pytest.approx(1.96 * 2 ** 0.5 * 0.12, rel=1e-3)
    assert bracket_noise(steady, 0.12) > 0.20


def test_a_probe_that_cannot_run_is_said_and_the_run_goes_on(monkeypatch):
    import subprocess

    def hung(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))
    monkeypatch.setattr(subprocess, "run", hung)
    found = wander.measure([0], window_s=1.0, gap_s=3.0)
    assert set(found) == {"skipped"} and "could not run" in found["skipped"]
    assert run_wander({"machine_wander": found}) is None     # its brackets then allow the constant


def test_two_kinds_timed_in_turn_each_get_their_own_speed():
    # Reads and arithmetic in turn, 1 ms each: the reads slow by half over the second 10 s (the
    # machine's memory), the arithmetic does not. Each kind's wander is its own, over the same windows.
    reads = [0.001] * 5_000 + [0.0015] * 4_000 + [0.001] * 5_000 + [0.0015] * 4_000
    arithmetic = [0.001] * len(reads)
    spans = [r + a for r, a in zip(reads, arithmetic)]
    slow = wander.summarize(reads, window_s=4.0, gap_s=10.0, spans=spans)
    steady = wander.summarize(arithmetic, window_s=4.0, gap_s=10.0, spans=spans)
    assert slow["wander"] > 0.05 and steady["wander"] == pytest.approx(0.0, abs=1e-6), (slow, steady)
    assert slow["seconds"] == steady["seconds"] == pytest.approx(sum(spans), abs=0.1)


def test_the_probe_times_random_reads_and_arithmetic_in_turn(monkeypatch):
    monkeypatch.setattr(wander, "MIN_PROBE_S", 5.0)      # the shipped 30 s tells the same, slower
    found = wander.measure([0], window_s=0.5, gap_s=1.0)
    assert found["reads"]["working_set_mb"] == wander.WORKING_SET_BYTES // 2 ** 20
    assert 0 <= found["wander"] < 1 and 0 <= found["reads"]["wander"] < 1 and found["pairs"] > 10, found


def test_a_paced_probe_that_cannot_start_leaves_the_warm_up_on_its_throughput_alone(monkeypatch):
    from esbperf.core import roles, topology
    from esbperf.run import warmup

    def refuse(*args, **kwargs):
        raise OSError("no python here")

    monkeypatch.setattr(wander.subprocess, "Popen", refuse)
    testbed = topology.load("local")
    assert not testbed.hosts[roles.ESB].ssh
    assert warmup.machine_pace(testbed, 10) is None


def test_a_paced_probe_reports_the_machines_speed_in_its_buckets():
    import time

    pace = wander.Pace(None, 30)
    try:
        began = time.time() * 1000
        time.sleep(4)           # its start (numpy's import) takes part of it
        speeds = pace.speeds(began, 0.5, 8)
    finally:
        pace.close()
    assert pace.process.returncode is not None          # closed, not left running beside the next step
    assert speeds[-1] is not None and all(v is None or v > 0 for v in speeds), speeds
