"""A short soak (`make test-long`): ten minutes of one-minute steps at 20 and 320 users (100 KB,
`proxy`, Camel) on a testbed of its own, the sweep repeated in cycles; every long-lived process is
read at the end of every step and compared with itself at the same step of later cycles: none may
grow in memory (a JVM's live heap and native memory, another process's RSS) faster than a coarse
limit, nor gain descriptors or threads (grinder-scripts/bench/bench_soak.py; its hour-long run and
the figures are in docs/running.md)."""
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
