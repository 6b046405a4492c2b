"""A short soak (`make test-long`): the thesis concurrency sweep for ten minutes in one-minute steps
on a testbed of its own, every long-lived process sampled; none may grow in memory faster than a
coarse limit, nor in descriptors or threads (grinder-scripts/bench/bench_soak.py; its hour-long run
and the figures are in docs/running.md)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Ten minutes of load and the sweeps around them: past pytest-timeout's default 600 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(2400)]


def test_ten_minutes_of_load_grow_nothing():
    # 10 minutes cannot tell a JVM's heap settling from a slow leak at the hour's 5 %: the short soak
    # catches what grows fast (a descriptor or thread per step, memory per transaction).
    process = subprocess.Popen([sys.executable, str(ROOT / "grinder-scripts" / "bench" / "bench_soak.py"),
                                "--minutes", "10", "--step-seconds", "60", "--max-growth", "25"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        stdout, stderr = process.communicate(timeout=1800)
    except subprocess.TimeoutExpired:
        process.terminate()     # SIGTERM, not a kill: the bench takes its namespaces down first
        stdout, stderr = process.communicate(timeout=120)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert "growing: none" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
