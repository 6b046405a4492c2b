"""A short soak (`make test-long`): ten minutes of one-minute steps at 20 and 320 users (100 KB,
`proxy`, Camel) on a testbed of its own, the sweep repeated in cycles; every long-lived process is
read at the end of every step and compared with itself at the same step of later cycles: none may
grow in memory (a JVM's live heap and native memory, another process's RSS) faster than a coarse
limit, nor gain descriptors or threads (grinder-scripts/bench/bench_soak.py; its hour-long run and
the figures are in docs/running.md). The verdict itself is driven here by made-up series, growing
and flat."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grinder-scripts" / "bench"))

import bench_soak  # noqa: E402
from bench_soak import Checkpoint, Heap  # noqa: E402

MB = 1 << 20
STEPS, CYCLES, STEP_S = 2, 6, 300      # two steps a cycle, ten minutes a cycle, an hour in all


def cycles(rss, fds=lambda t: 100, heap=None, jcmd_answers=lambda cycle: True) -> list[Checkpoint]:
    """A process "esb (jvm)" read at the end of every step of CYCLES cycles: its RSS (bytes) and
    descriptors as functions of the time (s); at each cycle's end, when `heap` gives its (live,
    native) bytes and jcmd answers, its heap after a full collection."""
    points = []
    for cycle in range(1, CYCLES + 1):
        for step in range(STEPS):
            t = ((cycle - 1) * STEPS + step + 1) * STEP_S
            point = Checkpoint(cycle, step, t, {"esb (jvm)": (int(rss(t)), int(fds(t)), 40)})
            if heap is not None and step == STEPS - 1 and jcmd_answers(cycle):
                live, native = heap(t)
                point.heaps["esb (jvm)"] = Heap(int(live), 512 * MB, int(rss(t)), int(rss(t) - native), 10 * MB)
            points.append(point)
    return points


def growing(points: list[Checkpoint], max_growth: float = 5.0) -> bool:
    return bench_soak.process_growth("esb (jvm)", points).growing(max_growth)


def test_a_jvm_is_judged_by_its_live_heap_and_native_memory_when_jcmd_answered_every_cycle():
    steady = lambda t: (100 * MB, 150 * MB)                   # noqa: E731
    leaking = lambda t: (100 * MB * (1 + 0.3 * t / 3600), 150 * MB)   # noqa: E731  30 %/h of live heap
    assert not growing(cycles(lambda t: 400 * MB, heap=steady))
    assert growing(cycles(lambda t: 400 * MB, heap=leaking))
    # RSS creeping while G1 sizes its heap, live heap and native memory flat: not a leak.
    sizing = cycles(lambda t: 400 * MB * (1 + 0.2 * t / 3600), heap=steady)
    assert bench_soak.process_growth("esb (jvm)", sizing).by_heap and not growing(sizing)


def test_a_jvm_whose_jcmd_answered_in_some_cycles_only_is_judged_by_its_rss():
    """jcmd answered at one cycle end of five: no heap slope, and the JVM used to be judged by
    nothing at all; its RSS, growing 40 %/h, is judged instead."""
    points = cycles(lambda t: 400 * MB * (1 + 0.4 * t / 3600), heap=lambda t: (100 * MB, 150 * MB),
                    jcmd_answers=lambda cycle: cycle == 3)
    found = bench_soak.process_growth("esb (jvm)", points)
    assert not found.by_heap and len(found.heaps) == 1 and found.cycle_ends == 5
    assert found.rss[0] > 30 and growing(points)
    # jcmd answering at four of five cycle ends: RSS is judged, beside the heap's own slope.
    flat = cycles(lambda t: 400 * MB, heap=lambda t: (100 * MB, 150 * MB), jcmd_answers=lambda cycle: cycle != 4)
    assert not bench_soak.process_growth("esb (jvm)", flat).by_heap and not growing(flat)
    leaking = cycles(lambda t: 400 * MB, heap=lambda t: (100 * MB * (1 + 0.3 * t / 3600), 150 * MB),
                     jcmd_answers=lambda cycle: cycle != 4)
    assert growing(leaking)


def test_a_descriptor_a_step_is_a_leak_and_noise_is_not():
    assert growing(cycles(lambda t: 400 * MB, fds=lambda t: 100 + t // STEP_S))
    assert not growing(cycles(lambda t: 400 * MB, fds=lambda t: 100 + (t // STEP_S) % 3))


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(2400)   # ten minutes of load and the sweeps around them: past the default 600 s
def test_ten_minutes_of_load_grow_nothing():
    # Two load levels, so that ten minutes hold four cycles after the first (growth is judged from the
    # second on); 10 minutes cannot tell a slow leak at the hour's 5 % from noise: the short soak catches
    # what grows fast (a descriptor or thread per step, memory per transaction).
    process = subprocess.Popen([sys.executable, str(ROOT / "grinder-scripts" / "bench" / "bench_soak.py"),
                                "--minutes", "10", "--step-seconds", "60", "--users", "20,320",
                                "--max-growth", "25"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        stdout, stderr = process.communicate(timeout=1800)
    except subprocess.TimeoutExpired:
        process.terminate()     # SIGTERM, not a kill: the bench takes its namespaces down first
        stdout, stderr = process.communicate(timeout=120)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert "growing: none" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
