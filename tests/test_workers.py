"""The workers of a run's steps (esbperf/run/workers.py, esbperf/run/pool.py) against a console of
the test's own: its list of workers, its step board and the workers' answers do what each test
says, in the test's time (no JVM, no waiting). What is checked is what the runner concludes from
what a console shows: a moment's absence is no end, an end is one; a step starts once every thread
of it runs; a step's end waits as long as a request may take; the board's lease is renewed whatever
a renewal raises; warm workers report at the run's interval whatever step started them; a session's next run takes
the warm pool only when it fits; and the runner takes the token of the console that answers."""
from __future__ import annotations

import http.client
import math
import os
import time as real_time
from pathlib import Path

import pytest

from esbperf.core import topology
from esbperf.core.errors import EsbperfError
from esbperf.run import pool, runner, workers
from esbperf.run.pool import WarmPool
from esbperf.run.problems import Incomplete, WorkersEnded, WorkersHang
from esbperf.run.workers import ConsoleWatch, FreshWorkers, Layout
from esbperf.services import console

AGENTS = ("load-1", "load-2")
STEP = {"grinder.runs": 0, "esbperf.scenario": "proxy", "esbperf.users": 4, "esbperf.payload.bytes": 1024}
CALIBRATION = {"grinder.runs": 0, "grinder.duration": 35_000, "esbperf.scenario": "calibrate", "esbperf.users": 0}


class Clock:
    """The test's time: it passes only when the code under test sleeps."""

    def __init__(self):
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.001)


class FakeConsole:
    """A console with two agents and their workers, as the runner's client sees it. Each worker
    adopts the board's latest order `adopt_s` after it was posted, and a step's threads have all
    begun their part `join_s` after that. `unlisted[id]`: the console leaves that worker out of its list until then
    (math.inf: a killed worker, which also never answers the board again)."""

    def __init__(self, clock=real_time):
        self.clock = clock
        self.workers: dict[str, dict] = {}
        self.unlisted: dict[str, float] = {}
        self.orders: list[tuple[float, dict]] = []
        self.adopt_s = 0.0
        self.join_s = 0.0
        self.started: list[dict] = []
        self.leases: list[str] = []

    # the console
    def agents(self) -> list[dict]:
        now = self.clock.time()
        return [{"name": agent, "workers": [{"id": i, "name": w["name"], "state": w["state"]}
                                            for i, w in self.workers.items()
                                            if w["agent"] == agent and self.unlisted.get(i, 0) <= now]}
                for agent in AGENTS]

    def recording(self, action: str) -> dict:
        return {}

    def data(self, latest: bool = False) -> dict:
        return {"columns": ["Tests", "Errors"], "totals": [0, 0], "status": {}}

    def start_workers_and_wait(self, properties: dict, count: int) -> set[str]:
        self.started.append(dict(properties))
        ids = set()
        for agent in AGENTS:
            for n in range(count // len(AGENTS)):
                i = f"id-{len(self.workers)}"
                self.workers[i] = {"name": f"{agent}-{n}", "agent": agent, "state": "RUNNING"}
                ids.add(i)
        return ids

    def stop_workers(self) -> None:
        for w in self.workers.values():
            w["state"] = "FINISHED"

    def wait_workers_finished(self, ids: set[str], timeout: float) -> bool:
        return True

    # the step board
    def board_order(self, order: dict) -> None:
        self.orders.append((self.clock.time(), order))

    def board_lease(self, key: str, lease_s: float) -> None:
        self.leases.append(key)

    def board_status(self) -> dict:
        entries = {}
        now = self.clock.time()
        for i, w in self.workers.items():
            if w["state"] != "RUNNING" or self.unlisted.get(i, 0) == math.inf:
                continue
            held = [(at, o) for at, o in self.orders if now - at >= self.adopt_s]
            if not held:
                entries[w["name"]] = {"state": "ready"}
                continue
            at, order = held[-1]
            takes = 2 if order["kind"] == "step" else 0
            begun = takes if now - at >= self.adopt_s + self.join_s else 0
            entries[w["name"]] = {"state": f"adopted:{order['seq']}", "begun": begun, "takes": takes}
        return {"listening": True, "workers": entries}


@pytest.fixture
def clock(monkeypatch) -> Clock:
    the_clock = Clock()
    monkeypatch.setattr(workers, "time", the_clock)
    monkeypatch.setattr(pool, "time", the_clock)
    return the_clock


def warm_pool(fake: FakeConsole, tmp_path: Path, timeout_s: float = 10) -> WarmPool:
    return WarmPool(1, 2, len(AGENTS), "http://127.0.0.1:1/order", False, timeout_s, 50, lambda: fake, tmp_path, [])


def watch_of(fake: FakeConsole) -> ConsoleWatch:
    return ConsoleWatch(fake, set(AGENTS), lambda *a: None)


def test_a_moment_out_of_the_consoles_list_is_no_end_but_a_long_absence_is(clock):
    fake = FakeConsole(clock)
    watch = watch_of(fake)
    ids = fake.start_workers_and_wait({}, 2)
    started = {i: workers.Worker(i, fake.workers[i]["name"], fake.workers[i]["agent"]) for i in ids}
    for i in ids:   # a saturated client: both workers miss the console's list for 3 s
        fake.unlisted[i] = clock.now + 3
    watch.watch(started)
    assert set(watch.ended_early) == ids and not watch.gone(started)
    clock.sleep(3)
    watch.watch(started)
    assert not watch.unseen, "back in the list: it was only late"
    assert set(watch.ended_early) == ids, "the step's check still asks its data logs"
    for i in ids:   # killed: never listed again
        fake.unlisted[i] = math.inf
    watch.watch(started)
    clock.sleep(workers.WORKER_GONE_S - 1)
    watch.watch(started)
    clock.sleep(1)
    with pytest.raises(WorkersEnded, match="the workers ended before the step did"):
        watch.watch(started)


def test_workers_the_console_saw_finish_have_ended_at_once(clock):
    fake = FakeConsole(clock)
    watch = watch_of(fake)
    ids = fake.start_workers_and_wait({}, 2)
    started = {i: workers.Worker(i, fake.workers[i]["name"], fake.workers[i]["agent"]) for i in ids}
    fake.stop_workers()
    with pytest.raises(WorkersEnded):
        watch.watch(started)


def test_a_drop_while_warming_one_target_does_not_fail_the_next_targets_hand_over(clock, tmp_path):
    fake = FakeConsole(clock)
    watch = watch_of(fake)   # the run's watch, which every target's warm-up shares
    the_pool = warm_pool(fake, tmp_path)
    began = the_pool.begin(watch, STEP, Layout(1, 2, "runs/r/warmup/nginx/proxy/1"))
    first = sorted(began.workers)[0]
    fake.unlisted[first] = clock.now + 3
    watch.wait_until(workers.now_ms() + 5000, "warming nginx up", began.workers)
    the_pool.end_step()
    again = the_pool.begin(watch, STEP, Layout(1, 2, "runs/r/warmup/direct/proxy/1"))
    assert again.workers == began.workers and again.record["workers_reused"]
    the_pool.end_step()
    the_pool.close()


def test_a_worker_killed_mid_step_fails_the_steps_end_in_one_line(clock, tmp_path):
    fake = FakeConsole(clock)
    watch = watch_of(fake)
    the_pool = warm_pool(fake, tmp_path)
    began = the_pool.begin(watch, STEP, Layout(1, 2, "runs/r/direct/proxy/1KB/4/iter-1/1"))
    killed = sorted(began.workers)[0]
    fake.unlisted[killed] = math.inf
    with pytest.raises(Incomplete, match=rf"^worker {fake.workers[killed]['name']} did not end normally: it ended "
                                         r"during the step \(killed, or its agent died\) while the others left"):
        the_pool.end_step()
    the_pool.discard()


def test_a_steps_end_waits_as_long_as_a_request_may_take(clock, tmp_path):
    fake = FakeConsole(clock)
    the_pool = warm_pool(fake, tmp_path, timeout_s=60)
    the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/1"))
    fake.adopt_s = 80   # a thread whose request took 80 s of its 60 s timeout and the margin
    asked = clock.now
    the_pool.end_step()
    assert clock.now - asked >= 80
    fake.adopt_s = 0
    the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/2"))
    fake.adopt_s = 1000   # stuck
    asked = clock.now
    with pytest.raises(WorkersHang, match=r"has not left the step with their logs closed within 100 s"):
        the_pool.end_step()
    assert clock.now - asked == pytest.approx(60 + pool.CLOSE_MARGIN_S + pool.ANSWER_MARGIN_S, abs=1)
    the_pool.discard()


def test_a_step_starts_its_clock_once_every_thread_of_it_took_part(clock, tmp_path):
    fake = FakeConsole(clock)
    fake.join_s = 4   # new worker JVMs' threads still building their TestRunners on a busy client
    the_pool = warm_pool(fake, tmp_path)
    began = the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/1"))
    posted = fake.orders[-1][0]
    assert began.first_report_ms >= (posted + 4) * 1000
    fake.join_s = pool.JOIN_S + 1
    with pytest.raises(Incomplete, match=r"has not had every thread of step \d+ begin its part within 60 s \(it says "
                                         r"adopted:\d+, 0 of its 2 threads begun\)"):
        the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/2"))
    the_pool.discard()


def test_warm_workers_report_at_the_runs_interval_whatever_step_started_them(tmp_path):
    fake = FakeConsole()
    the_pool = warm_pool(fake, tmp_path)
    began = the_pool.begin(watch_of(fake), CALIBRATION, Layout(1, 1, "runs/r/calibration/1KB/1"))
    [start] = fake.started
    assert start["grinder.reportToConsole.interval"] == 50, "the calibration sets none; Grinder's file says 500"
    assert began.record["report_interval_ms"] == 50 and the_pool.record()["report_interval_ms"] == 50
    the_pool.close()


def test_fresh_workers_report_at_the_steps_interval_else_the_runs(tmp_path):
    fake = FakeConsole()
    fresh = FreshWorkers(len(AGENTS), [], 50, tmp_path, "the plan asks for new worker JVMs per step")
    began = fresh.begin(watch_of(fake), CALIBRATION, Layout(1, 1, "runs/r/calibration/1KB/1"))
    assert fake.started[-1]["grinder.reportToConsole.interval"] == 50 == began.record["report_interval_ms"]
    assert (fake.started[-1]["grinder.processes"], fake.started[-1]["grinder.threads"]) == (1, 1)
    fresh.end_step()
    began = fresh.begin(watch_of(fake), {**STEP, "grinder.reportToConsole.interval": 5000}, Layout(2, 3, "runs/r/s/1"))
    assert began.record == {"workers_mode": "fresh", "report_interval_ms": 5000}
    assert len(began.workers) == 4
    fresh.end_step()


def test_the_lease_is_renewed_whatever_a_renewal_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "RENEW_S", 0.01)
    fake = FakeConsole()
    failures = [http.client.IncompleteRead(b""), ValueError("a garbled answer"), console.ConsoleUnreachable("gone")]
    renew = fake.board_lease

    def flaky(key, lease_s):
        if failures:
            raise failures.pop(0)
        renew(key, lease_s)
    fake.board_lease = flaky
    the_pool = warm_pool(fake, tmp_path)
    the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/1"))
    deadline = real_time.monotonic() + 5
    while len(fake.leases) < 3 and real_time.monotonic() < deadline:
        real_time.sleep(0.01)
    assert not failures and len(fake.leases) >= 3, "the renewer goes on after any error"
    assert the_pool.lease_problem is None
    the_pool.close()


def test_the_runner_takes_the_token_of_the_console_that_answers(tmp_path, monkeypatch):
    """`testbed start` then `testbed stop` leave the launcher's token file; a console started by
    hand writes its own. The runner takes the one the console accepts, whichever is newer."""
    testbed = topology.load("local")
    stale, by_hand = tmp_path / "services" / "control-api.token", tmp_path / "console" / "control-api.token"
    for path, token in ((by_hand, "live"), (stale, "stale")):
        path.parent.mkdir(parents=True)
        path.write_text(token + "\n")
    os.utime(stale, (by_hand.stat().st_mtime + 1,) * 2)   # the stale one is the newer file
    monkeypatch.delenv(console.TOKEN_ENV, raising=False)
    monkeypatch.setattr(runner.hosts, "console_token", lambda _testbed: stale)
    monkeypatch.setattr(runner, "default_token_file", lambda: by_hand)
    asked = []

    class Client:
        def __init__(self, url, token, timeout):
            self.token = token

        def version(self):
            asked.append(self.token)
            if self.token != "live":
                raise EsbperfError("the token was refused (a console restarted since?)")
            return "3.11"
    monkeypatch.setattr(runner, "ControlClient", Client)
    assert runner._token_file(testbed, None) is None, "the hand-started console's: the default"
    assert runner._token_file(testbed, None, recorded=stale) is None, "a resumed run's stale file is passed over too"
    by_hand.write_text("gone\n")   # that console stopped too, and the launcher's came back
    stale.write_text("live\n")
    assert runner._token_file(testbed, None) == stale
    given = tmp_path / "given.token"
    assert runner._token_file(testbed, given) == given, "a token file given is taken as given"

    def unreachable(self):
        raise console.ConsoleUnreachable("does not answer")
    monkeypatch.setattr(Client, "version", unreachable)
    os.utime(by_hand, (stale.stat().st_mtime + 1,) * 2)
    assert runner._token_file(testbed, None) is None, "no console answers: the newest file"


def test_a_sessions_next_run_takes_the_warm_pool_only_if_it_fits(tmp_path):
    fake = FakeConsole()
    the_pool = warm_pool(fake, tmp_path)   # closed model, 1 process x 2 threads an agent
    the_pool.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/1"))
    the_pool.end_step()
    with pool.Carry() as carry:
        assert carry.keep(the_pool, "run-1")
        assert carry.take(False, 1, 2) == (the_pool, "run-1") and the_pool.running   # the same workers, not restarted
        assert len(fake.started) == 1
        assert carry.keep(the_pool, "run-1")
        assert carry.take(True, 1, 2) is None and not the_pool.running   # an open-model run: they are ended
    again = warm_pool(fake, tmp_path)
    again.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/2"))
    again.end_step()
    with pool.Carry() as carry:
        carry.keep(again, "run-2")
        assert carry.take(False, 1, 3) is None and not again.running   # too small for the next run's steps
    last = warm_pool(fake, tmp_path)
    last.begin(watch_of(fake), STEP, Layout(1, 2, "runs/r/s/3"))
    last.end_step()
    with pool.Carry() as carry:
        carry.keep(last, "run-3")
    assert not last.running   # the session's end ends what is left


class LoadedConsole(FakeConsole):
    """A console whose workers have done 1,000 transactions a second, 2 ms each, since it began."""

    def __init__(self, clock):
        super().__init__(clock)
        self.began = clock.time()

    def data(self, latest: bool = False) -> dict:
        tests = int((self.clock.time() - self.began) * 1000)
        return {"columns": ["Tests", "Errors", workers.MEAN_MS], "totals": [tests, 0, 2.0], "status": {}}


def test_a_steady_warm_up_goes_on_until_the_esb_hosts_other_engines_are_quiet(clock):
    """A load steady at once ends its warm-up at its first judged interval, unless `ready` (the esb
    host's other engines quiet, esbperf/run/gauge.py) says no: then it goes on, still judged,
    until `ready` says yes, and never past its latest."""
    steady_at_two = lambda tps, _mean, _machine: workers.steady.Steadiness(len(tps) >= 2, f"{len(tps)} intervals")
    fake = LoadedConsole(clock)
    ids = fake.start_workers_and_wait({}, 2)
    started = {i: workers.Worker(i, fake.workers[i]["name"], fake.workers[i]["agent"]) for i in ids}
    began = clock.now

    found = watch_of(fake).until_steady(started, 0, workers.now_ms() + 30_000, 0.5, 1, judge=steady_at_two)
    assert found["steady"] and clock.now - began < 1.5
    asked: list[float] = []
    quiet_after = clock.now + 4

    def ready() -> bool:
        asked.append(clock.now)
        return clock.now >= quiet_after
    found = watch_of(fake).until_steady(started, 0, workers.now_ms() + 30_000, 0.5, 1, judge=steady_at_two,
                                        ready=ready)
    assert found["steady"] and quiet_after <= clock.now < quiet_after + 0.7 and len(asked) >= 6
    held = watch_of(fake).until_steady(started, 0, workers.now_ms() + 3_000, 0.5, 1, judge=steady_at_two,
                                       ready=lambda: False)
    assert 3 <= clock.now - quiet_after < 3.5 and held["steady"]   # the load's own verdict, said as it was
