"""Bringing a step's worker logs home (esbperf/run/collect.py): a worker tells the console it has
finished before its JVM writes its final statistics and flushes the last block of its data log,
and its agent drops a start signal sent before it has reaped the worker; so logs are brought
home once the agent's worker processes are gone and nothing holds them open."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from esbperf.run import collect

HEADER = "Thread, Run, Test, Start time (ms since Epoch), Test time, Errors\n"
ROWS = "".join(f"0, {i}, 1, {1_700_000_000_000 + i}, 1, 0\n" for i in range(2000))

# A worker on its way out: the data log already on disk ends in a cut line (a 64 KB block written
# mid-row); a moment later the final statistics and the rest of the data log follow, then it exits.
WORKER = textwrap.dedent("""
    import sys, time
    folder, rows = sys.argv[1], sys.stdin.read()
    cut = len(rows) // 2 + 3
    with open(folder + "/a1-0-data.log", "w") as data, open(folder + "/a1-0.log", "w") as log:
        data.write(rows[:cut]); data.flush()
        log.write("worker process 0\\n"); log.flush()
        print("on its way out", flush=True)
        time.sleep(float(sys.argv[2]))
        log.write("Final statistics for this process:\\n")
        data.write(rows[cut:])
""")

# An agent as the runner finds one (its working folder, `net.grinder.Grinder` on its command line)
# that reaps its worker only a while after the worker has exited.
AGENT = textwrap.dedent("""
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], "0"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    worker.stdin.write(sys.stdin.read()); worker.stdin.close()
    print(worker.stdout.readline().strip(), flush=True)
    time.sleep(float(sys.argv[3]))
    worker.wait()
    time.sleep(30)
""")


def step_folders(tmp_path: Path) -> tuple[str, Path, Path]:
    relative = collect.step_log_folder("run-1", Path("camel/proxy/1KB/1/iter-1"), "123")
    agent_folder = tmp_path / "state" / "agents" / "a1"
    (agent_folder / relative).mkdir(parents=True)
    return relative, agent_folder, agent_folder / relative


def bring_home(tmp_path: Path, relative: str) -> tuple[list[str], Path, float]:
    home = tmp_path / "step" / "logs"
    began = time.monotonic()
    problems = collect.bring_home([collect.Worker("w0", "a1-0", "a1")], relative, home,
                                  [collect.LocalAgents([tmp_path / "state"])])
    return problems, home, time.monotonic() - began


def test_logs_still_held_open_by_a_finishing_worker_come_home_whole(tmp_path):
    relative, _, source = step_folders(tmp_path)
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(source), "1.0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker.stdin.write(HEADER + ROWS)
    worker.stdin.close()
    assert worker.stdout.readline().strip() == "on its way out"
    threading.Thread(target=worker.wait, daemon=True).start()   # its parent reaps it at once
    problems, home, waited = bring_home(tmp_path, relative)
    assert worker.wait(10) == 0
    assert problems == []
    assert (home / "a1-0-data.log").read_text() == HEADER + ROWS
    assert not source.exists(), "nothing of the step stays behind in the agent's folder"
    assert 0.9 < waited < 5, f"waited {waited:.1f} s for a worker that closed its logs after 1 s"


def test_logs_come_home_once_the_agent_has_reaped_its_worker(tmp_path):
    relative, agent_folder, source = step_folders(tmp_path)
    agent = subprocess.Popen([sys.executable, "-c", AGENT, WORKER, str(source), "1.5", "net.grinder.Grinder"],
                             cwd=agent_folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        agent.stdin.write(HEADER + ROWS)
        agent.stdin.close()
        assert agent.stdout.readline().strip() == "on its way out"
        problems, home, waited = bring_home(tmp_path, relative)
        assert problems == [] and (home / "a1-0-data.log").read_text() == HEADER + ROWS
        assert 1.4 < waited < 6, f"waited {waited:.1f} s for an agent that reaps its worker after 1.5 s"
    finally:
        agent.kill()
        agent.wait()


def test_logs_still_held_open_after_the_wait_are_a_step_problem_not_silence(tmp_path):
    """A worker that still holds its logs open when the wait runs out: its logs come home all the
    same (a step kept aside keeps them), and the step has a problem saying why, where the wait's
    time-out used to pass unnoticed and its last rows went missing."""
    relative, _, source = step_folders(tmp_path)
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(source), "30"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        worker.stdin.write(HEADER + ROWS)
        worker.stdin.close()
        assert worker.stdout.readline().strip() == "on its way out"
        home = tmp_path / "step" / "logs"
        problems = collect.bring_home([collect.Worker("w0", "a1-0", "a1")], relative, home,
                                      [collect.LocalAgents([tmp_path / "state"], wait_s=0.5)])
    finally:
        worker.kill()
        worker.wait()
    assert problems[0] == ("agent a1: its workers had not ended, or still held their logs open, 0.5 s after the "
                           "step (their last rows may be missing)"), problems
    assert (home / "a1-0-data.log").is_file() and not source.exists()


def test_a_workers_last_transaction_is_read_from_the_tail_of_its_data_log(tmp_path: Path):
    """The proof that a worker ran to the window's end (esbperf/run/step.py): its last logged
    transaction's end, start plus test time, found in a log longer than the tail read."""
    worker = collect.Worker("w0", "a1-0", "a1")
    header = "Thread, Run, Test, Start time (ms since Epoch), Test time, Errors, HTTP status\n"
    rows = "".join(f"{i % 7}, {i}, 1, {1_000_000 + 10 * i}, 3, 0, 200\n" for i in range(20_000))
    log = tmp_path / f"{worker.name}-data.log"
    log.write_text(header + rows + "3, 20000, 1, 1500000, 40, 0, 200\n"
                                          + "4, 20001, 1, 1200000, 5, 0")   # a last line cut short
    assert collect.last_row_ms(tmp_path, worker) == 1_500_040
    log.write_text(header)
    assert collect.last_row_ms(tmp_path, worker) is None
    assert collect.last_row_ms(tmp_path, collect.Worker("w1", "a1-1", "a1")) is None
