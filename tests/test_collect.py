"""Bringing a step's worker logs home (esbperf/run/collect.py): a worker tells the console it has
finished before its JVM writes its final statistics and flushes the last block of its data log,
so logs still held open are waited for, and only a log that stays cut short is reported."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from esbperf.run import collect

HEADER = "Thread, Run, Test, Start time (ms since Epoch), Test time, Errors\n"
ROWS = "".join(f"0, {i}, 1, {1_700_000_000_000 + i}, 1, 0\n" for i in range(2000))

# A worker on its way out: the data log already on disk ends in a cut line (a 64 KB block written
# mid-row); a moment later the final statistics and the rest of the data log follow, then it exits.
WORKER = textwrap.dedent("""
    import sys, time
    folder, rows = sys.argv[1], sys.stdin.read()
    header, cut = rows.index("\\n") + 1, len(rows) // 2 + 3
    with open(folder + "/a1-0-data.log", "w") as data, open(folder + "/a1-0.log", "w") as log:
        data.write(rows[:cut]); data.flush()
        log.write("worker process 0\\n"); log.flush()
        print("on its way out", flush=True)
        time.sleep(float(sys.argv[2]))
        log.write("Final statistics for this process:\\n")
        data.write(rows[cut:])
""")


def worker_on_its_way_out(agent_folder: Path, rows: str, closes_after_s: float) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", WORKER, str(agent_folder), str(closes_after_s)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    process.stdin.write(rows)
    process.stdin.close()
    assert process.stdout.readline().strip() == "on its way out"
    return process


def test_logs_still_held_open_by_a_finishing_worker_come_home_whole(tmp_path):
    relative = collect.step_log_folder("run-1", Path("camel/proxy/1KB/1/iter-1"), "123")
    source = tmp_path / "state" / "agents" / "a1" / relative
    source.mkdir(parents=True)
    process = worker_on_its_way_out(source, HEADER + ROWS, closes_after_s=1.0)
    home = tmp_path / "step" / "logs"
    problems = collect.bring_home([collect.Worker("w0", "a1-0", "a1")], relative, home,
                                  [collect.LocalAgents([tmp_path / "state"])])
    assert process.wait(10) == 0
    assert problems == []
    assert (home / "a1-0-data.log").read_text() == HEADER + ROWS
    assert not source.exists(), "nothing of the step stays behind in the agent's folder"
