"""Faults during a run (docs/faults.md): an agent, a worker or the console killed mid-step, an agent
that joins mid-run or was never the run's, Ctrl-C at any moment, the results disk filling up. After
each, every finished step is intact, the spoilt step is kept aside with its reason, and `--resume`
finishes the run with the same steps as an undisturbed run, none twice.

The faults kill what they test, so this file has a console and agents of its own (ports 16530/16531);
the echo back ends are the session's."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ECHO_PORTS, HOST, ONE_STEP_PLAN, esbperf_process, wait_for, write_plan, write_testbed
from esbperf.analysis.runs import load_run
from esbperf.core import plan as plans, procs, topology
from esbperf.core.errors import EsbperfError
from esbperf.run import runner
from esbperf.services import agent, console

pytestmark = pytest.mark.slow

CONSOLE_PORT, API_PORT = 16530, 16531


# Two steps of 2 users: 2 s of warm-up, 3 s measured.
FAULTS_PLAN = {**ONE_STEP_PLAN, "payloads": ["1KB", "2KB"], "users": [2], "duration_s": 3, "warmup_s": 2}


def measuring(lab: "Lab", results: Path, step: str) -> bool:
    """Whether a step's workers load the target: its folder begun, a worker per agent running, and
    the console's latest sample counting tests. (Not the data logs' size: Grinder writes them in
    64 KB blocks, so a slow step's first block may come only when its workers end.)"""
    if not list(results.glob(f"*/{step}/.tmp-iter-1")):
        return False
    if not all(worker_pids(lab.state_dir / "agents" / name) for name in ("fault-1", "fault-2")):
        return False
    latest = console.statistics(lab.client.data(latest=True))
    return (latest.get("Tests") or 0) > 0


def finished_steps(run_dir: Path) -> list[tuple]:
    """Every finished step of a run, as the analysis reads them (it refuses a step counted twice)."""
    return sorted(s.key for s in load_run(run_dir).steps)


@dataclass
class Lab:
    testbed: topology.Testbed
    console: procs.Process
    agents: list[procs.Process]
    state_dir: Path
    workdir: Path

    @property
    def token(self) -> Path:
        return console.token_file(self.workdir / "console")

    @property
    def client(self) -> console.ControlClient:
        return console.control_client(self.testbed, self.token, timeout=30)

    def start_agent(self, name: str, folder: Path | None = None) -> procs.Process:
        [process] = agent.agent_processes(HOST, CONSOLE_PORT, 1, host_id=name,
                                          workdir=folder or self.state_dir / "agents")
        self.agents.append(process.start())
        return process

    def restart_console(self) -> None:
        self.console = console.start_console(self.testbed, workdir=self.workdir / "console")


@pytest.fixture
def lab(state_dir, echoes, tmp_path):
    testbed = topology.load(write_testbed(tmp_path / "faults.yaml", ECHO_PORTS, console_port=CONSOLE_PORT,
                                          api_port=API_PORT))
    the_lab = Lab(testbed, console.start_console(testbed, workdir=tmp_path / "console"), [], state_dir, tmp_path)
    try:
        for name in ("fault-1", "fault-2"):
            the_lab.start_agent(name)
        the_lab.client.wait_for_agents(2, 60)
        yield the_lab
    finally:
        for a in the_lab.agents:
            a.stop()
        the_lab.console.stop()


class Background(threading.Thread):
    """An action beside the run; join() re-raises what went wrong in it."""

    def __init__(self, action):
        super().__init__(daemon=True)
        self.action, self.error = action, None
        self.start()

    def run(self):
        try:
            self.action()
        except BaseException as e:   # noqa: BLE001 - handed to the test by join()
            self.error = e

    def join(self, timeout=None):
        super().join(timeout)
        if self.error:
            raise self.error


def worker_pids(agent_folder: Path) -> list[int]:
    """The worker JVMs an agent started (their JVM options name the agent's Jython cache)."""
    out = subprocess.run(["pgrep", "-f", f"{agent_folder}/jython-cache"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.long
def test_an_agent_killed_mid_step_keeps_the_step_aside_and_resume_finishes(lab, tmp_path):
    the_plan = plans.load(write_plan(tmp_path / "agentless.yaml", FAULTS_PLAN, duration_s=6))

    def kill_the_second_agent():
        wait_for(lambda: measuring(lab, tmp_path / "results", "direct/proxy/1KB/2"), 180, "the first step's workers")
        time.sleep(2.5)
        os.kill(lab.agents[1].pid, signal.SIGKILL)   # the agent JVM: its worker goes with it
    killer = Background(kill_the_second_agent)
    with pytest.raises(EsbperfError, match=r"^step direct proxy 1KB 2u iter 1: agent fault-2 left the console during "
                                           r"the step .*kept aside in direct/proxy/1KB/2/\.failed-iter-1-.*--resume") as e:
        runner.start(the_plan, "direct", lab.testbed, tmp_path / "results", token_file=lab.token)
    assert "\n" not in str(e.value)
    killer.join(5)
    [run_dir] = (tmp_path / "results").iterdir()
    [aside] = run_dir.glob("direct/proxy/1KB/2/.failed-iter-1-*")
    assert "agent fault-2 left" in json.loads((aside / "step.json").read_text())["failed"]
    assert not (run_dir / "direct/proxy/2KB").exists(), "the run stopped at the spoilt step"

    lab.agents[1].stop()
    lab.start_agent("fault-2")
    lab.client.wait_for_agents(2, 60)
    runner.resume(run_dir, token_file=lab.token)
    assert len(finished_steps(run_dir)) == len(the_plan.steps(["direct"])) == 2
    assert json.loads((run_dir / "run.json").read_text())["finished"]


@pytest.mark.long
def test_a_worker_killed_mid_step_spoils_that_step_only(lab, tmp_path):
    the_plan = plans.load(write_plan(tmp_path / "workerless.yaml", FAULTS_PLAN, duration_s=6))

    def kill_one_worker():
        wait_for(lambda: measuring(lab, tmp_path / "results", "direct/proxy/1KB/2"), 180, "the first step's workers")
        time.sleep(2.5)
        [pid] = worker_pids(lab.state_dir / "agents" / "fault-1")
        os.kill(pid, signal.SIGKILL)
    killer = Background(kill_one_worker)
    run_dir = runner.start(the_plan, "direct", lab.testbed, tmp_path / "results", token_file=lab.token)
    killer.join(5)
    [aside] = run_dir.glob("direct/proxy/1KB/2/.failed-iter-1-*")
    reason = json.loads((aside / "step.json").read_text())["failed"]
    assert "worker fault-1-" in reason and "did not end normally" in reason, reason
    assert (run_dir / "direct/proxy/2KB/2/iter-1/step.json").is_file(), "the run went on with the next step"
    record = json.loads((run_dir / "run.json").read_text())
    assert not record["finished"], "a run with a step aside is not finished"
    assert record["workers"]["mode"] == "warm" and len(record["workers"]["starts"]) == 2, \
        "the step set aside discarded its warm workers; the next step started new ones"

    runner.resume(run_dir, token_file=lab.token)
    assert len(finished_steps(run_dir)) == 2
    assert json.loads((run_dir / "run.json").read_text())["finished"]


@pytest.mark.long
def test_the_console_killed_and_restarted_mid_step(lab, tmp_path):
    the_plan = plans.load(write_plan(tmp_path / "consoleless.yaml", FAULTS_PLAN, duration_s=6))

    def restart_the_console():
        wait_for(lambda: measuring(lab, tmp_path / "results", "direct/proxy/1KB/2"), 180, "the first step's workers")
        time.sleep(2.5)
        os.killpg(lab.console.pid, signal.SIGKILL)
        time.sleep(2)
        lab.restart_console()
    restarter = Background(restart_the_console)
    run_dir = runner.start(the_plan, "direct", lab.testbed, tmp_path / "results", token_file=lab.token)
    restarter.join(30)
    [aside] = run_dir.glob("direct/proxy/1KB/2/.failed-iter-1-*")
    assert "the console stopped answering" in json.loads((aside / "step.json").read_text())["failed"]
    assert (run_dir / "direct/proxy/2KB/2/iter-1/step.json").is_file(), "the run waited for it and went on"
    runner.resume(run_dir, token_file=lab.token)
    assert len(finished_steps(run_dir)) == 2


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
def test_agents_that_are_not_the_runs_are_refused_in_one_line(lab, tmp_path):
    the_plan = plans.load(write_plan(tmp_path / "crowded.yaml", FAULTS_PLAN))
    # An agent that joins mid-run would take a share of every later step's users.
    joiner = Background(lambda: (wait_for(lambda: measuring(lab, tmp_path / "results", "direct/proxy/1KB/2"), 180,
                                          "workers"), lab.start_agent("late")))
    with pytest.raises(EsbperfError, match=r"agent late joined the console during the run \(the run's agents: "
                                           r"fault-1, fault-2\); stop it, or start a new run that includes it") as e:
        runner.start(the_plan, "direct", lab.testbed, tmp_path / "results", token_file=lab.token)
    assert "\n" not in str(e.value)
    joiner.join(5)
    lab.agents.pop().stop()

    # A stray agent (an earlier session's daemon, on no host of the testbed) is refused before anything runs.
    lab.start_agent("stray", folder=tmp_path / "elsewhere")
    names = lambda: sorted(a["name"] for a in lab.client.agents())   # noqa: E731
    wait_for(lambda: names() == ["fault-1", "fault-2", "stray"], 60, "the stray agent, and the late one gone")
    with pytest.raises(EsbperfError, match=r"^agent stray is connected to the console but runs on no host of "):
        runner.start(the_plan, "direct", lab.testbed, tmp_path / "refused", token_file=lab.token)
    assert not (tmp_path / "refused").exists()


@pytest.mark.long
def test_ctrl_c_at_any_moment_loses_nothing_and_counts_nothing_twice(lab, tmp_path):
    plan_file = write_plan(tmp_path / "interrupted.yaml", FAULTS_PLAN, payloads=["1KB", "2KB", "3KB"], users=[1],
                           duration_s=2)
    out = tmp_path / "results"
    args = ["run", "--plan", str(plan_file), "--target", "direct", "--testbed", str(lab.testbed.path), "--out",
            str(out), "--no-report", "--token-file", str(lab.token)]
    # Ctrl-C in the preflight, in a warm-up, while measuring, and between steps.
    for delay in (1.0, 6.5, 9.0, 12.5):
        process = esbperf_process(*args, state_dir=lab.state_dir)
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=60)
        assert process.returncode in (0, 130, 2), output
        if process.returncode != 0:
            assert output.rstrip().splitlines()[-1].startswith("esbperf: "), output
        runs = [p for p in out.iterdir() if (p / "run.json").is_file()] if out.exists() else []
        if runs:
            args = ["run", "--resume", str(runs[0]), "--no-report"]
    [run_dir] = [p for p in out.iterdir() if (p / "run.json").is_file()]
    while not json.loads((run_dir / "run.json").read_text())["finished"]:
        process = esbperf_process("run", "--resume", str(run_dir), "--no-report", state_dir=lab.state_dir)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
    steps = finished_steps(run_dir)
    assert len(steps) == len(set(steps)) == 3
    assert not list(run_dir.rglob(".tmp-*")), "no step half-written outside a kept-aside folder"


def fill(disk: Path, leave: int) -> None:
    """Take a disk's free room, but `leave` bytes."""
    st = os.statvfs(disk)
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


@pytest.mark.long
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_results_disk_stops_the_run_and_resume_finishes_it(lab, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "esbperf-test-disk", str(disk)], check=True)
    try:
        the_plan = plans.load(write_plan(tmp_path / "filling.yaml", FAULTS_PLAN, payloads=["1KB", "2KB", "3KB"],
                                         users=[1]))
        # The disk fills up once the first step is written.
        filler = Background(lambda: (wait_for(lambda: list(disk.glob("*/direct/proxy/1KB/1/iter-1/step.json")), 60,
                                              "the first step"), fill(disk, leave=64 * 1024)))
        with pytest.raises(EsbperfError, match=r"^the results disk is full .*every step finished before is intact in "
                                               r".*--resume") as e:
            runner.start(the_plan, "direct", lab.testbed, disk, token_file=lab.token)
        filler.join(5)
        assert "\n" not in str(e.value)
        [run_dir] = [p for p in disk.iterdir() if p.is_dir()]
        written = finished_steps(run_dir)
        assert len(written) == 1, "the step written before is intact"
        subprocess.run(["mount", "-o", "remount,size=1g", str(disk)], check=True)
        runner.resume(run_dir, token_file=lab.token)
        steps = finished_steps(run_dir)
        assert set(written) <= set(steps) and len(steps) == len(set(steps)) == 3
    finally:
        subprocess.run(["umount", str(disk)], check=False)
