"""A run never ends half done and never runs twice (issue 23.8–23.10), through the real console,
agents and echo: an error mid-step stops the workers and keeps the step aside with the way to
resume; a resume records what it found before its first step; a report that fails after a run
is its own exit status; one run per console and one writer per run folder, a dead one's lock
taken over."""
from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ECHO_PORTS, HOST, write_plan, write_testbed
from esbperf.core import plan as plans, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import locks, runner
from esbperf.run.problems import StepAside, TargetDown
from esbperf.run.step import StepRunner
from esbperf.services.console import ControlClient

pytestmark = pytest.mark.slow

CUTTING_PORT = 16094   # a ws1 of this file's own: answers whole at first, then cut short


def running_workers(grinder) -> set[str]:
    deadline = time.monotonic() + 10
    while grinder.running_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    return grinder.running_workers()


def test_an_error_of_the_console_mid_step_stops_the_workers_and_keeps_the_step_aside(
        grinder, echoes, testbed_file, tmp_path, monkeypatch):
    the_plan = plans.load(write_plan(tmp_path / "broken-console.yaml", duration_s=3, warmup_s=1))
    original = ControlClient.data
    warm_ups_read = []

    def data(self, latest=False):
        # The step's totals: the console answers an error (the warm-ups before it read them unharmed).
        if not latest and any(Path(f.filename).name == "step.py" for f in inspect.stack()):
            raise EsbperfError("console GET /recording/data: the console broke")
        warm_ups_read.append(latest)
        return original(self, latest)
    monkeypatch.setattr(ControlClient, "data", data)
    with pytest.raises(EsbperfError, match=r"^step direct proxy 1KB 1u iter 1: console GET /recording/data: the "
                                           r"console broke; the step is kept aside in direct/proxy/1KB/1/\.failed-iter-1-"
                                           r".*`esbperf run --resume .*` continues the run") as e:
        runner.start(the_plan, "direct", topology.load(testbed_file), tmp_path / "results")
    assert "\n" not in str(e.value) and False in warm_ups_read, "the warm-up read its totals first"
    assert running_workers(grinder) == set(), "the workers were stopped at once"
    [run_dir] = (tmp_path / "results").iterdir()
    assert not list(run_dir.rglob(".tmp-*")), "no half-written step folder is left"
    [aside] = run_dir.glob("direct/proxy/1KB/1/.failed-iter-1-*")
    assert "the console broke" in json.loads((aside / "step.json").read_text())["failed"]


class CuttingEcho:
    """ws1 for this test: passes the first `whole` requests to the real echo and answers every later
    one with a body cut short (Content-Length says more than it sends), as an overloaded target may."""

    def __init__(self, port: int, real_port: int, whole: int = 1):
        self.real_port, self.whole, self.served = real_port, whole, 0
        self.server = socket.create_server((HOST, port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        with connection:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:           # the client went away: nothing to answer (no busy loop)
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                while len(body) < length:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    body += chunk
                self.served += 1
                if self.served <= self.whole:
                    path = head.split(b" ")[1].decode()
                    headers = dict(line.decode().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
                    request = urllib.request.Request(f"http://{HOST}:{self.real_port}{path}", data=body,
                                                     headers={k: v for k, v in headers.items() if k.lower() != "host"})
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        content = answer.read()
                        extra = f"X-Echo-Backend: {answer.headers['X-Echo-Backend']}\r\n"
                    connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=UTF-8\r\n{extra}"
                                       f"Content-Length: {len(content)}\r\nConnection: close\r\n\r\n".encode() + content)
                else:
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 4000\r\n\r\n<soap")
            except (OSError, StopIteration, ValueError):
                pass

    def close(self) -> None:
        self.server.close()


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
def test_an_answer_cut_short_after_errors_stops_the_run_with_the_way_to_resume(grinder, echoes, tmp_path):
    """After a step with errors the runner asks the target once more; an answer cut short (an
    IncompleteRead) is a target that no longer answers right, not a traceback (issue 23.9)."""
    testbed = topology.load(write_testbed(tmp_path / "cutting.yaml", {**ECHO_PORTS, "ws1": CUTTING_PORT}))
    echo = CuttingEcho(CUTTING_PORT, ECHO_PORTS["ws1"])
    try:
        the_plan = plans.load(write_plan(tmp_path / "cut.yaml", duration_s=2, warmup_s=1))
        with pytest.raises(EsbperfError, match=r"^step direct proxy 1KB 1u iter 1: \d+ errors, and target direct no "
                                               r"longer answers: .*kept aside in direct/proxy/1KB/1/\.failed-iter-1-"
                                               r".*--resume") as e:
            runner.start(the_plan, "direct", testbed, tmp_path / "results")
    finally:
        echo.close()
    assert "\n" not in str(e.value)
    [run_dir] = (tmp_path / "results").iterdir()
    assert not list(run_dir.rglob(".tmp-*"))


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
def test_a_resume_records_what_it_found_before_its_first_step(grinder, echoes, testbed_file, tmp_path, monkeypatch):
    testbed = topology.load(testbed_file)
    the_plan = plans.load(write_plan(tmp_path / "resumed.yaml", duration_s=1, warmup_s=1))
    run_dir = runner.start(the_plan, "direct", testbed, tmp_path / "results")
    record = json.loads((run_dir / "run.json").read_text())
    assert "calibration" in record, "the resume below has nothing to calibrate, so it writes run.json only if it must"
    for key in ("agents", "restart"):
        del record[key]
    (run_dir / "run.json").write_text(json.dumps(record))
    [finished] = run_dir.glob("direct/proxy/1KB/1/iter-1")
    finished.rename(finished.with_name(".aborted-iter-1-by-the-test"))

    def spoilt(self, step):
        raise StepAside("the test spoils the step", None, True, TargetDown("the test spoils the step"))
    monkeypatch.setattr(StepRunner, "execute", spoilt)
    with pytest.raises(EsbperfError, match="the test spoils the step"):
        runner.resume(run_dir)
    again = json.loads((run_dir / "run.json").read_text())
    assert [a["host"] for a in again["agents"]] == ["client", "client"] and again["restart"] == "per-run"
    assert len(again["clock_skew_resumed"]) == 1 and again["finished"] is None


def test_the_run_command_exits_3_when_the_run_ends_but_its_report_fails(grinder, echoes, testbed_file, tmp_path,
                                                                        monkeypatch):
    from esbperf.analysis import report
    from esbperf.cli import main

    plan = write_plan(tmp_path / "unreported.yaml", duration_s=1, warmup_s=1)

    def failing(*args, **kwargs):
        raise RuntimeError("the test breaks the report")
    monkeypatch.setattr(report, "build_report", failing)
    with pytest.raises(SystemExit) as e:
        main(["run", "--plan", str(plan), "--target", "direct", "--testbed", str(testbed_file),
              "--out", str(tmp_path / "results")])
    assert e.value.code == 3
    [run_dir] = (tmp_path / "results").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["finished"], "the run itself is complete"


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
def test_a_second_run_against_a_busy_console_and_a_second_writer_of_a_run_folder_are_refused(
        grinder, echoes, testbed_file, tmp_path):
    def esbperf_run(*args: str) -> list[str]:
        return [sys.executable, "-m", "esbperf", "run", *args]
    first = subprocess.Popen(esbperf_run("--plan", str(write_plan(tmp_path / "first.yaml", duration_s=8, warmup_s=1)),
                                         "--target", "direct", "--testbed", str(testbed_file),
                                         "--out", str(tmp_path / "first"), "--no-report"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 90
    while not list((tmp_path / "first").glob("*/direct/proxy/1KB/1/.tmp-iter-1")) and time.monotonic() < deadline:
        time.sleep(0.2)
    [first_dir] = (tmp_path / "first").iterdir()
    second = subprocess.run(esbperf_run("--plan", str(write_plan(tmp_path / "second.yaml")), "--target", "direct",
                                        "--testbed", str(testbed_file), "--out", str(tmp_path / "second")),
                            capture_output=True, text=True, timeout=120)
    output, _ = first.communicate(timeout=120)
    assert second.returncode == 2, second.stdout + second.stderr
    [line] = second.stderr.splitlines()
    assert line.startswith(f"esbperf: error: another esbperf run (pid {first.pid}, run folder {first_dir}) is using "
                           "the console at"), line
    assert first.returncode == 0, output
    assert json.loads((first_dir / "run.json").read_text())["finished"], "the first run was not disturbed"
    assert not (tmp_path / "second").exists() or not any((tmp_path / "second").iterdir())
    first = {"dir": first_dir}

    # Two writers of one run folder: the second is refused while the first holds it ...
    with locks.run_dir_held(first["dir"]):
        resumed = subprocess.run([sys.executable, "-m", "esbperf", "run", "--resume", str(first["dir"])],
                                 capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 2 and f"(pid {os.getpid()}, run folder {first['dir']}) is writing to" in resumed.stderr
    # ... and a dead holder's lock is taken over.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from esbperf.run import locks; locks.Lock(Path(sys.argv[1])).acquire('dead', '{pid}'); "
                               "print('held', flush=True); time.sleep(60)", str(first["dir"] / locks.RUN_LOCK)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    resumed = subprocess.run([sys.executable, "-m", "esbperf", "run", "--resume", str(first["dir"]), "--no-report"],
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0 and "all 1 steps are already finished" in resumed.stdout, resumed.stderr
