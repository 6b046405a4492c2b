"""The sweep runner: plans through the real console, agents and workers against real echo
services, one results folder per step, resume after a kill, and its error messages."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import ECHO_PORTS, HOST, IMPOSTOR_PORT, esbperf_process, wait_for, write_plan, write_testbed
from esbperf.core import plan as plans, topology
from esbperf.core.errors import EsbperfError
from esbperf.results import layout as results
from esbperf.run import preflight, runner
from esbperf.services import console


def totals(step_dir: Path) -> dict:
    data = json.loads((step_dir / "console.json").read_text())
    return dict(zip(data["columns"], data["totals"]))


def data_rows(step_dir: Path) -> list[list[str]]:
    rows = []
    for log in (step_dir / "logs").glob("*-data.log"):
        rows += [line.split(", ") for line in log.read_text().splitlines()[1:]]
    return rows


@pytest.mark.slow
def test_smoke_plan_end_to_end_against_the_baseline(grinder, echoes, testbed_file, tmp_path, monkeypatch):
    the_plan = plans.load(write_plan(tmp_path / "mini.yaml", scenarios=["proxy", "cbr-raw"],
                                     payloads=["1KB", "50KB"], users=[1, 3]))
    monkeypatch.chdir(tmp_path)   # a relative results folder, as `--out results` gives
    run_dir = runner.start(the_plan, "direct", topology.load(testbed_file), Path("results"))
    assert run_dir.is_absolute() and run_dir.parent == tmp_path / "results"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and record["plan"]["name"] == "mini" and len(record["agents"]) == 2
    assert record["environment"]["git"]["commit"]
    assert record["agents"] == [{"name": "test-1", "host": "client"}, {"name": "test-2", "host": "client"}]
    for step in the_plan.steps(["direct"]):
        folder = run_dir / step.relative_dir()
        meta = json.loads((folder / "step.json").read_text())
        assert (meta["scenario"], meta["payload_bytes"], meta["users"]) == (step.scenario, step.payload_bytes, step.users)
        assert meta["start_ms"] < meta["warmup_end_ms"] < meta["end_ms"]
        assert meta["threads_seen"] == step.users and meta["model"] == "closed" and meta["rate"] is None
        assert [a["name"] for a in meta["agents"]] == ["test-1", "test-2"] and meta["workers"]
        assert meta["versions"]["jython"] == "2.7.4" and meta["versions"]["grinder"] == "3.11"
        t = totals(folder)
        assert t["Tests"] > 0 and t["Errors"] == 0, (folder, t)
        rows = data_rows(folder)
        assert rows and all(r[5] == "0" and r[6] == "200" and int(r[7]) == step.payload_bytes for r in rows)
        # `users` threads across both agents did the work, no more.
        assert len({(log.name, r[0]) for log in (folder / "logs").glob("*-data.log")
                    for r in [l.split(", ") for l in log.read_text().splitlines()[1:]]}) == step.users
        # The window opens once every worker runs (both agents'), not at the first one's report.
        firsts = [min(int(l.split(", ")[3]) for l in lines) for log in (folder / "logs").glob("*-data.log")
                  if (lines := log.read_text().splitlines()[1:])]
        assert len(firsts) == min(step.users, 2) and max(firsts) < meta["warmup_end_ms"], (firsts, meta)
        assert meta["start_ms"] < meta["first_report_ms"] <= meta["warmup_end_ms"] - 1000 * the_plan.warmup_s / 2
    assert not list(run_dir.rglob(".tmp-*"))
    assert not list(Path(os.environ["ESBPERF_STATE"]).glob(f"agents/*/runs/{run_dir.name}/*/*/*/*/*/*")), \
        "every agent's logs were moved into the step folders"


@pytest.mark.slow
def test_routing_to_the_wrong_back_end_shows_errors_not_tps(grinder, echoes, tmp_path):
    # ws2's address leads to another service (ws9): a third of the routed requests get a wrong answer.
    wrong = topology.load(write_testbed(tmp_path / "wrong.yaml", {**ECHO_PORTS, "ws2": IMPOSTOR_PORT}))
    the_plan = plans.load(write_plan(tmp_path / "cbr.yaml", scenarios=["cbr"], users=[3]))
    with pytest.raises(EsbperfError, match=r"fails verification: 1 of 3 checks.*answered by ws9, expected ws2"):
        runner.start(the_plan, "direct", wrong, tmp_path / "refused")
    run_dir = runner.start(the_plan, "direct", wrong, tmp_path / "results", verify=False)
    t = totals(run_dir / the_plan.steps(["direct"])[0].relative_dir())
    assert t["Errors"] > 0 and t["Tests"] > 0
    assert 0.25 < t["Errors"] / (t["Errors"] + t["Tests"]) < 0.42, t


def measuring(state_dir: Path, step: str) -> list[Path]:
    """The data logs the agents write for a step of any run (in their own folders while it runs)."""
    return list(state_dir.glob(f"agents/*/runs/*/{step}/iter-*/*/*-data.log"))


def fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
@pytest.mark.slow
def test_resume_after_a_kill_continues_and_loses_nothing(grinder, echoes, testbed_file, state_dir, tmp_path):
    plan_file = write_plan(tmp_path / "three.yaml", payloads=["1KB", "2KB", "3KB"])
    out = tmp_path / "results"
    killed = esbperf_process("run", "--plan", str(plan_file), "--target", "direct", "--testbed", str(testbed_file),
                             "--out", str(out), state_dir=state_dir)
    first = lambda: next(iter(out.glob("*/direct/proxy/1KB/1/iter-1/step.json")), None)
    wait_for(first, 120, "the first step to finish")
    run_dir = first().parents[5]
    wait_for(lambda: list(run_dir.glob("direct/proxy/2KB/1/.tmp-iter-1")), 30, "the second step to start")
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(10)
    kept = fingerprint(run_dir / "direct/proxy/1KB/1/iter-1")

    resumed = esbperf_process("run", "--resume", str(run_dir), state_dir=state_dir)
    output, _ = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, output
    assert "resuming" in output and "1 of 3 steps already finished" in output
    assert fingerprint(run_dir / "direct/proxy/1KB/1/iter-1") == kept, "a finished step must not change"
    for size in ("1KB", "2KB", "3KB"):
        step = run_dir / f"direct/proxy/{size}/1/iter-1"
        assert totals(step)["Tests"] > 0
        assert len(data_rows(step)) >= totals(step)["Tests"], f"{size}: the step's own data logs hold its transactions"
    assert (run_dir / "report" / "report.html").is_file(), "the resumed run ends with its report"
    assert list(run_dir.glob("direct/proxy/2KB/1/.aborted-iter-1-*")), "the interrupted step's data is kept aside"
    assert json.loads((run_dir / "run.json").read_text())["finished"]


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
@pytest.mark.slow
def test_ctrl_c_stops_the_workers_and_keeps_finished_steps(grinder, echoes, testbed_file, state_dir, tmp_path):
    plan_file = write_plan(tmp_path / "two.yaml", payloads=["1KB", "2KB"], duration_s=20)
    out = tmp_path / "results"
    process = esbperf_process("run", "--plan", str(plan_file), "--target", "direct", "--testbed", str(testbed_file),
                              "--out", str(out), state_dir=state_dir)
    wait_for(lambda: measuring(state_dir, "direct/proxy/1KB/1"), 180, "the first step's workers")
    time.sleep(1)
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "interrupted" in output and "--resume" in output
    assert wait_for(lambda: not any(w["state"] in ("STARTED", "RUNNING")
                                    for a in grinder.agents() for w in a["workers"]), 30, "workers to stop")


MORTAL_PORT = 16084   # a ws1 of this test's own, killed in the middle of a step


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
@pytest.mark.slow
def test_a_back_end_that_dies_mid_step_stops_the_run_and_loses_nothing(grinder, echoes, state_dir, tmp_path):
    from esbperf.services.echo import start_echo

    testbed = topology.load(write_testbed(tmp_path / "mortal.yaml", {**ECHO_PORTS, "ws1": MORTAL_PORT}))
    the_plan = plans.load(write_plan(tmp_path / "two.yaml", payloads=["1KB", "2KB"], users=[2], duration_s=4))
    out = tmp_path / "results"
    ws1 = start_echo("ws1", HOST, MORTAL_PORT, workdir=tmp_path / "ws1")
    try:
        def kill_when_measuring():
            wait_for(lambda: measuring(state_dir, "direct/proxy/1KB/2"), 180, "the first step's workers")
            time.sleep(4)   # warm-up over, measuring
            os.killpg(ws1.pid, signal.SIGKILL)
        killer = threading.Thread(target=kill_when_measuring, daemon=True)
        killer.start()
        with pytest.raises(EsbperfError, match=r"step direct proxy 1KB 2u iter 1: \d+ errors, and target direct no "
                                               r"longer answers: http://127.0.0.1:16084/.*kept aside in "
                                               r"direct/proxy/1KB/2/\.failed-iter-1-.*--resume") as e:
            runner.start(the_plan, "direct", testbed, out)
        assert "\n" not in str(e.value)
        killer.join(1)
        [run_dir] = out.iterdir()
        assert not (run_dir / "direct/proxy/1KB/2/iter-1").exists(), "a step against a dead back end does not count"
        assert not (run_dir / "direct/proxy/2KB").exists(), "the run stops: no step against a dead back end"
        [aside] = run_dir.glob("direct/proxy/1KB/2/.failed-iter-1-*")
        kept = json.loads((aside / "step.json").read_text())
        assert "no longer answers" in kept["failed"] and totals(aside)["Errors"] > 0 and data_rows(aside)
        assert not any(w["state"] in ("STARTED", "RUNNING") for a in grinder.agents() for w in a["workers"])

        ws1 = start_echo("ws1", HOST, MORTAL_PORT, workdir=tmp_path / "ws1-again")
        runner.resume(run_dir)
        for size in ("1KB", "2KB"):
            t = totals(run_dir / f"direct/proxy/{size}/2/iter-1")
            assert t["Tests"] > 0 and t["Errors"] == 0, (size, t)
        assert list(run_dir.glob("direct/proxy/1KB/2/.failed-iter-1-*")) == [aside], "the failed step's data is still there"
    finally:
        ws1.stop()


@pytest.mark.parametrize("fields, message", [
    ({"colour": "blue"}, "unknown field 'colour' (allowed: name, description, scenarios"),
    ({"users": [1, -5]}, "users[1]: must be a positive integer, got -5"),
    ({"payloads": ["abc"]}, "payloads[0]: 'abc' is not a size (e.g. 512B, 0.5KB, 100KB, 1MB)"),
    ({"users": []}, "field 'users' must be a non-empty list"),
    ({"scenarios": ["proxy", "teleport"]}, "scenarios[1]: unknown scenario 'teleport' (allowed: proxy, cbr"),
    ({"duration_s": 0}, "field 'duration_s' must be seconds measured per step"),
    ({"iterations": 1.5}, "field 'iterations' must be how many times the whole plan runs"),
    ({"keepalive": "yes"}, "field 'keepalive' must be true or false"),
    ({"warmup_s": "soon"}, "field 'warmup_s' must be seconds of warm-up before each step's measurement"),
    ({"warmup_s": 3, "warmup_max_s": 9}, "field 'warmup_max_s' applies to warmup_s: auto; this plan's warm-up is fixed"),
    ({"warmup_s": "auto", "warmup_min_s": 9, "warmup_max_s": 3}, "field 'warmup_max_s' (3) must be at least warmup_min_s"),
    ({"warmup_s": "auto", "warmup_max_s": 0}, "field 'warmup_max_s' must be with warmup_s: auto, the most"),
    ({"warmup_s": 3, "target_warmup_s": 10, "target_warmup_max_s": 9}, "field 'target_warmup_max_s' (9) must be at least target_warmup_s (10)"),
    ({"warmup_s": "auto", "target_warmup_s": 9, "target_warmup_max_s": 3},
     "field 'target_warmup_max_s' (3) must be at least target_warmup_s (9)"),
    ({"target_warmup_s": {"direct": 5, "esb": 60}},
     "field 'target_warmup_s' per kind of target must give each of direct, floor, esb a number of seconds >= 0"),
    ({"target_warmup_s": {"direct": 5, "floor": 5, "esb": -1}}, "field 'target_warmup_s' per kind of target"),
    ({"warmup_s": "auto", "target_warmup_s": {"direct": 5, "floor": 5, "esb": 120}, "target_warmup_max_s": 60},
     "field 'target_warmup_max_s' (60 for esb) must be at least target_warmup_s (120 for esb)"),
])
def test_invalid_plans_say_file_field_and_what_is_allowed(tmp_path, fields, message):
    path = write_plan(tmp_path / "bad.yaml", **fields)
    with pytest.raises(EsbperfError) as e:
        plans.load(path)
    assert str(e.value).startswith(str(path) + ": ")
    assert message in str(e.value)


def test_a_plan_warms_up_until_steady_or_for_fixed_seconds_as_its_file_says(tmp_path):
    auto = plans.load(write_plan(tmp_path / "auto.yaml", warmup_s="auto", warmup_max_s=30))
    assert (auto.name, auto.warmup_auto, auto.warmup_s, auto.warmup_max_s) == ("auto", True, 1, 30)
    assert auto.step_seconds() == 32 and auto.warmup_label() == "auto (1-30 s)"
    recorded = auto.to_dict()   # as run.json keeps it, and --resume reads it back
    assert (recorded["warmup_s"], recorded["warmup_min_s"], recorded["warmup_max_s"]) == ("auto", 1, 30)
    again = plans.Plan.from_dict(recorded, "run.json")
    assert (again.name, again.warmup_auto, again.warmup_s, again.warmup_max_s) == ("auto", True, 1, 30)
    assert "target_warmup_max_s" not in recorded and again.target_warmup(plans.WARMUP_KINDS[-1])[1] == 60   # the default
    fixed = plans.load(write_plan(tmp_path / "fixed.yaml", warmup_s=3))
    assert (fixed.name, fixed.warmup_auto, fixed.step_seconds()) == ("fixed", False, 5)
    assert not {"warmup_min_s", "warmup_max_s", "target_warmup_max_s"} & set(fixed.to_dict())


def test_a_plan_may_warm_each_kind_of_target_for_its_own_time(tmp_path):
    by_kind = {"direct": 10, "floor": 10, "esb": 120}
    plan = plans.load(write_plan(tmp_path / "kinds.yaml", warmup_s="auto", target_warmup_s=by_kind,
                                 target_warmup_max_s={**by_kind, "direct": 30}))
    assert [plan.target_warmup(k) for k in plans.WARMUP_KINDS] == [(10, 30), (10, 10), (120, 120)]
    again = plans.Plan.from_dict(plan.to_dict(), "run.json")   # as run.json keeps it, and --resume reads it back
    assert again.target_warmup_s == by_kind and again.target_warmup("direct") == (10, 30)
    one = plans.load(write_plan(tmp_path / "one.yaml", warmup_s=3, target_warmup_s=20))
    assert one.target_warmup("esb") == one.target_warmup("floor") == (20, 20) and one.warms_targets()
    none = plans.load(write_plan(tmp_path / "none.yaml", target_warmup_s={"direct": 0, "floor": 0, "esb": 0}))
    assert not none.warms_targets()


def test_invalid_plan_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    path = write_plan(tmp_path / "bad.yaml", users=[0])
    process = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(path), "--target", "direct"],
                             capture_output=True, text=True)
    assert process.returncode == 2
    assert process.stderr.strip() == f"esbperf: error: {path}: users[0]: must be a positive integer, got 0"


def test_shipped_plans_are_the_thesis_and_public_rounds_sweeps():
    payload = plans.load("thesis-payload")
    assert (payload.users, payload.payloads, payload.duration_s) == ([1], [1024, 51200, 102400, 512000, 1048576], 300)
    concurrency = plans.load("thesis-concurrency")
    assert (concurrency.payloads, concurrency.users) == ([102400], [1, 20, 40, 80, 160, 320])
    # The thesis measured three tests in both sweeps: direct proxy, content-based routing, JSON↔SOAP.
    for name in ("thesis-payload", "thesis-concurrency", "thesis-open"):
        thesis = plans.load(name)
        assert thesis.scenarios == ["proxy", "cbr", "json"], name
        # A JVM engine warms at least a minute and until its rate settles (docs/methodology.md).
        assert thesis.target_warmup_s == {"direct": 10, "floor": 10, "esb": 60}, name
        assert thesis.workers == "warm", name
    rounds = plans.load("public-rounds")
    assert rounds.payloads == [512, 1024, 5120, 10240, 102400] and rounds.users[0] == 20 and rounds.users[-1] == 2560
    assert plans.load("smoke").duration_s <= 10
    open_sweep = plans.load("thesis-open")
    assert open_sweep.model == "open" and open_sweep.payloads == [102400] and open_sweep.iterations == 3
    assert all(plans.load(name).iterations == 2 for name in ("demo-payload", "demo-concurrency", "demo-open"))


def test_users_map_to_processes_and_threads():
    p = plans.load("public-rounds")
    assert p.processes_threads(2560) == (10, 256)
    assert p.processes_threads(20) == (1, 20)
    assert p.processes_threads(1, agents=2) == (1, 1)      # the second agent's thread stops at once
    assert p.processes_threads(7, agents=2) == (1, 4)
    # ceil(users ÷ max) processes, never more: 101 users were 101 worker JVMs, 2560 were 32 × 80.
    thesis = plans.load("thesis-concurrency")
    assert thesis.max_threads_per_process == 100
    assert thesis.processes_threads(101) == (2, 51)
    assert thesis.processes_threads(2560) == (26, 99)
    assert thesis.processes_threads(97) == (1, 97)


def test_unknown_target_lists_the_known_ones(testbed_file):
    with pytest.raises(EsbperfError, match=r"unknown target 'mule' in .*tests\.yaml \(known: direct, camel, synapse\)"):
        topology.load(testbed_file).target("mule")


@pytest.mark.slow   # its fixture starts the echoes (JVMs)
def test_a_console_that_does_not_answer_fails_preflight_within_5_s(echoes, tmp_path):
    silent = topology.load(write_testbed(tmp_path / "silent.yaml", ECHO_PORTS, console_port=16772, api_port=16773))
    started = time.monotonic()
    with pytest.raises(EsbperfError, match=r"control API at http://127\.0\.0\.1:16773 does not answer"):
        runner.start(plans.load("smoke"), "direct", silent, tmp_path / "results")
    assert time.monotonic() - started < 6
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


@pytest.mark.long   # a fault case (make test-long): the default suite stays inside ~30 minutes
@pytest.mark.slow
def test_a_token_left_by_a_stopped_launcher_does_not_hide_the_console_started_by_hand(grinder, echoes, testbed_file,
                                                                                      state_dir, tmp_path):
    """`esbperf testbed start` then `testbed stop` leave the launcher's token file behind; a console
    then started by hand (`esbperf console`, as `testbed commands` prints: the session's console,
    in .esbperf/console/) has a token of its own. `esbperf run` reaches it without being told."""
    from esbperf.testbed import hosts

    testbed = topology.load(testbed_file)
    stale = console.token_file(hosts.local_state(testbed, "client") / "console")
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("a-token-of-a-console-that-was-stopped-0000\n")   # newer than the live one
    env = {k: v for k, v in os.environ.items() if k != console.TOKEN_ENV}
    try:
        out = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(write_plan(tmp_path / "p.yaml")),
                              "--target", "direct", "--testbed", str(testbed_file), "--out", str(tmp_path / "results"),
                              "--no-report"], capture_output=True, text=True, env=env, timeout=300)
    finally:
        stale.unlink()
    assert out.returncode == 0, out.stdout + out.stderr
    [run_dir] = (tmp_path / "results").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["finished"] and "console_token_file" not in record, "the console started by hand: its default file"


@pytest.mark.slow   # its fixture starts a console (a JVM)
def test_a_target_that_does_not_answer_fails_preflight_with_its_address(lone_console, tmp_path):
    testbed, _ = lone_console
    with pytest.raises(EsbperfError, match=r"target camel does not answer at http://127\.0\.0\.1:16280"):
        runner.start(plans.load("smoke"), "camel", testbed, tmp_path / "results",
                     token_file=console.token_file(tmp_path / "console"))


@pytest.mark.slow
def test_the_baseline_checks_only_the_back_ends_its_scenarios_use_and_names_a_missing_one(lone_console, echoes,
                                                                                         tmp_path):
    """`--target direct` on `proxy` needs ws1 alone: a ws2 that is down does not refuse it; on `cbr`
    it does, naming ws2 (issue 27.4)."""
    testbed = topology.load(write_testbed(tmp_path / "no-ws2.yaml", {**ECHO_PORTS, "ws2": 16096},
                                          console_port=16472, api_port=16473))
    token = console.token_file(tmp_path / "console")
    with pytest.raises(EsbperfError, match=r"^no agent is connected"):   # past the back ends: ws2 was not asked
        runner.start(plans.load(write_plan(tmp_path / "proxy.yaml")), "direct", testbed, tmp_path / "r", token_file=token)
    with pytest.raises(EsbperfError, match=r"^target direct does not answer at http://127\.0\.0\.1:16096 \(back end ws2;"):
        runner.start(plans.load(write_plan(tmp_path / "cbr.yaml", scenarios=["cbr"])), "direct", testbed,
                     tmp_path / "r", token_file=token)


@pytest.mark.slow
def test_no_agent_connected_is_a_clear_message(lone_console, echoes, tmp_path):
    testbed, _ = lone_console
    with pytest.raises(EsbperfError, match=r"no agent is connected to the console at 127\.0\.0\.1:16472"):
        runner.start(plans.load("smoke"), "direct", testbed, tmp_path / "results",
                     token_file=console.token_file(tmp_path / "console"))


def test_a_run_folder_is_never_reused(tmp_path):
    first = results.new_run_dir(tmp_path, "smoke-direct-x")
    (first / "run.json").write_text("{}")
    second = results.new_run_dir(tmp_path, "smoke-direct-x")
    assert second.name == "smoke-direct-x-2" and (first / "run.json").read_text() == "{}"


@pytest.mark.long   # a real run timed against its estimate (make test-long): the default suite stays lean
@pytest.mark.slow
def test_dry_run_estimates_a_real_run_within_20_percent_and_starts_nothing(grinder, echoes, testbed_file, tmp_path):
    from esbperf.run import estimate

    testbed = topology.load(testbed_file)
    if not estimate.estimate(plans.load("smoke"), []).measured_steps:   # no run measured here yet: one first
        runner.start(plans.load(write_plan(tmp_path / "prime.yaml", payloads=["1KB", "2KB", "3KB"])), "direct",
                     testbed, tmp_path / "prime")
    plan_file = write_plan(tmp_path / "predicted.yaml", payloads=["1KB", "5KB"], users=[1, 2], duration_s=2)
    out = tmp_path / "results"
    process = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(plan_file), "--target", "direct",
                              "--testbed", str(testbed_file), "--out", str(out), "--dry-run"],
                             capture_output=True, text=True, env=dict(os.environ, COLUMNS="200"))
    assert process.returncode == 0, process.stderr
    assert "4 steps" in process.stdout and "nothing was started" in process.stdout
    assert not out.exists(), "a dry run writes no results"
    the_plan = plans.load(plan_file)
    guess = estimate.estimate(the_plan, the_plan.steps(["direct"]))
    started = time.monotonic()
    runner.start(the_plan, "direct", testbed, out)
    real = time.monotonic() - started
    assert abs(guess.total_s - real) <= 0.2 * real, (guess.total_s, real)


class SkewedMonitor:
    """A stand-in for a monitor on a host whose clock is `offset_ms` ahead. (The real monitor reads
    the real clock, and moving this machine's clock would change the system for everything else.)"""

    def __init__(self, port: int, offset_ms: int):
        import http.server

        offset = offset_ms

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"role": "ws1"}).encode()
                self.send_response(200)
                self.send_header("X-Monitor-Time-Ms", str(int(time.time() * 1000) + offset))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_a_host_clock_off_beyond_the_limit_refuses_the_run(grinder, echoes, tmp_path):
    testbed_file = write_testbed(tmp_path / "skewed.yaml", ECHO_PORTS)
    data = yaml.safe_load(testbed_file.read_text())
    data["hosts"]["ws1"]["monitor_port"] = 16099
    testbed_file.write_text(yaml.safe_dump(data))
    testbed = topology.load(testbed_file)
    monitor = SkewedMonitor(16099, offset_ms=500)
    try:
        with pytest.raises(EsbperfError, match=r"^ws1's clock is \+(4\d\d|5\d\d) ms off this machine's \(limit ±100 ms, "
                                               r"--max-skew-ms\); synchronise the clocks"):
            runner.start(plans.load(write_plan(tmp_path / "skew.yaml")), "direct", testbed, tmp_path / "refused")
        assert not (tmp_path / "refused").exists()
        assert preflight.clock_skews(testbed, ["ws1"], 1000)["ws1"]["skew_ms"] == pytest.approx(500, abs=50)
    finally:
        monitor.close()


@pytest.mark.slow
def test_an_open_model_plan_keeps_its_schedule_and_the_run_records_its_calibration(grinder, echoes, testbed_file, tmp_path):
    the_plan = plans.load(write_plan(tmp_path / "open.yaml", rates=[200, 400], users=[6], payloads=["1KB"]))
    run_dir = runner.start(the_plan, "direct", topology.load(testbed_file), tmp_path / "results")
    record = json.loads((run_dir / "run.json").read_text())
    [calibration] = record["calibration"].values()
    assert 0 < calibration["floor_mean_us"] < 5000 and calibration["outside_clock_us"] > 0 and calibration["transactions"] > 0
    assert list((run_dir / "calibration" / "1KB" / "logs").glob("*-data.log"))
    for rate in (200, 400):
        folder = run_dir / f"direct/proxy/1KB/6/rate-{rate}/iter-1"
        meta = json.loads((folder / "step.json").read_text())
        assert meta["model"] == "open" and meta["rate"] == rate and meta["threads"] * meta["processes"] * 2 >= 6
        header = next((folder / "logs").glob("*-data.log")).read_text().splitlines()[0]
        assert "Latency us" in header and "Start lag us" in header and "Response us" in header
        window_s = (meta["end_ms"] - meta["warmup_end_ms"]) / 1000
        started = sum(1 for r in data_rows(folder) if meta["warmup_end_ms"] <= int(r[3]) < meta["end_ms"])
        assert started == pytest.approx(rate * window_s, rel=0.1), "the schedule was kept over both agents"


def test_an_agent_hosts_clock_is_read_over_ssh_and_refused_when_off(tmp_path, monkeypatch):
    """Agents stamp the data-log rows each step's window cuts: a load host with no monitor has its
    clock read over ssh, and a clock off beyond the limit refuses the run (issue 23.6). The host's
    ssh is a stand-in here (no second machine, and no clock of this machine may be moved): it runs
    the command locally with a `date` 500 ms ahead."""
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "date").write_text("#!/bin/sh\nnow=$(/bin/date +%s%N)\necho $((now + 500000000))\n")
    (tmp_path / "ssh").write_text(f'#!/bin/sh\nfor last; do :; done\nPATH="{remote}:$PATH" exec sh -c "$last"\n')
    for f in (remote / "date", tmp_path / "ssh"):
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    testbed_file = write_testbed(tmp_path / "loads.yaml", ECHO_PORTS)
    data = yaml.safe_load(testbed_file.read_text())
    data["hosts"]["load2"] = {"address": "198.18.250.2", "ssh": "tester@load2"}
    testbed_file.write_text(yaml.safe_dump(data))
    testbed = topology.load(testbed_file)
    warnings = []
    with pytest.raises(EsbperfError, match=r"^load2's clock is \+(4\d\d|5\d\d) ms off this machine's \(limit ±100 ms"):
        preflight.clock_skews(testbed, [], 100, ["client", "load2"], warnings.append)
    skews = preflight.clock_skews(testbed, [], 1000, ["client", "load2"], warnings.append)
    assert skews["client"] == {"skew_ms": 0.0, "error_ms": 0.0, "how": "this machine's clock"}
    assert skews["load2"]["how"] == "ssh" and skews["load2"]["skew_ms"] == pytest.approx(500, abs=60), skews
    assert warnings == []


@pytest.mark.slow
def test_an_auto_warm_up_opens_once_steady_and_the_next_run_of_a_session_reuses_the_calibration(
        grinder, echoes, testbed_file, tmp_path):
    """warmup_s: auto through Camel: the window opens once the console's samples are steady, between
    warmup_min_s and warmup_max_s after every worker runs, and step.json keeps what was judged; a
    run that follows it in one session (the demo's three) reuses its client calibration and does
    not warm the target again."""
    from conftest import ECHO_PORTS, HOST
    from esbperf.services.esb import start_esb

    testbed = topology.load(testbed_file)
    camel = start_esb("camel", HOST, 16280, {ws: f"http://{HOST}:{p}" for ws, p in ECHO_PORTS.items()},
                      workdir=tmp_path / "camel")
    try:
        first = runner.start(plans.load(write_plan(tmp_path / "auto.yaml", warmup_s="auto", warmup_min_s=1,
                                                   warmup_max_s=15, target_warmup_s=3, target_warmup_max_s=20,
                                                   payloads=["1KB", "50KB"])),
                             "camel", testbed, tmp_path / "results")
        second = runner.start(plans.load(write_plan(tmp_path / "then.yaml", payloads=["10KB"], warmup_s=1,
                                                    target_warmup_s=3)),
                              "camel", testbed, tmp_path / "results", after=first)
    finally:
        camel.stop()
    for step in sorted(first.glob("camel/proxy/*/1/iter-1/step.json")):
        meta = json.loads(step.read_text())
        used = (meta["warmup_end_ms"] - meta["first_report_ms"]) / 1000
        assert meta["warmup_s"] == "auto" and 1 <= meta["warmup_used_s"] <= 15.5, meta["warmup_used_s"]
        assert abs(meta["warmup_used_s"] - used) < 0.01
        judged = meta["warmup"]
        assert judged["interval_s"] == 0.25 and len(judged["tps"]) == len(judged["mean_us"]) >= 1
        assert judged["steady"] is (meta["warmup_used_s"] < 15), judged["reason"]
        if judged["steady"]:   # at least ten intervals after the ramp: the test's minimum
            assert len(judged["tps"]) >= 10 and any(t for t in judged["tps"])
    first_record = json.loads((first / "run.json").read_text())
    # The target was loaded at least target_warmup_s, then on until steady (at most target_warmup_max_s).
    # Warmed under both loads it is measured at (1 KB and 50 KB), the first step's last.
    warmed = first_record["target_warmup"][0]["targets"]
    assert [w["payload"] for w in warmed] == ["50KB", "1KB"], warmed
    *before, last = warmed
    assert all(w["least_s"] <= w["seconds"] <= w["least_s"] + 5 and "steady" not in w for w in before), before
    # Settled (True), still moving (False) or not resolved (None); only settled ends it before the most.
    assert 1 <= last["seconds"] <= 20 + 5 and last["steady"] in (True, False, None), last
    # Judged beside the machine's speed (wander.Pace on the esb host's cores), bucket for bucket.
    assert len(last["machine"]) == len(last["tps"]) >= 1 and sum(not v for v in last["machine"]) <= 1, last
    assert last["steady"] or sum(w["seconds"] for w in warmed) >= 20 - 1, warmed
    record = json.loads((second / "run.json").read_text())
    assert set(first_record["calibration"]) == {"1KB", "50KB"}
    assert record["calibration"] == first_record["calibration"] and record["calibration_from"] == first.name
    assert not (second / "calibration").exists()
    assert record["warm_from"] == {"run": first.name, "targets": ["camel"]} and "target_warmup" not in record
