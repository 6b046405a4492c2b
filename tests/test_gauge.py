"""The esb host as the runner reads it before a step is measured (esbperf/run/gauge.py), from a
monitor's samples as the esb host's monitor serves them (proc.cpu per --match text, every 2 s;
proc.jit, a JVM's compiler threads, every second), in the test's time: what counts as a neighbour,
which readings are judged, when a wait ends, when a target's compiler is quiet, and what a step
records of it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from esbperf.core import busy, steady
from esbperf.run import gauge

SYNAPSE, SI, CAMEL = "org.apache.synapse.SynapseServer", "esbperf.springintegration.EsbApplication", "org.apache.camel.main.Main"
T0 = 1_800_000_000_000


class Monitor:
    """A monitor's process readings: `cpu[match]` as a function of the reading's time (ms); a
    reading every 2 s from T0; the test's clock is the newest time served."""

    def __init__(self, cpu: dict, error: str | None = None, jit: dict | None = None):
        self.cpu, self.error, self.now_ms, self.asked, self.jit = cpu, error, T0, 0, jit or {}
        self.jit_late_ms = 0    # the compiler's readings this late (a monitor on a saturated core)

    def pull(self, from_ms: int, to_ms: int):
        self.asked += 1
        if self.error:
            return [], self.error
        return [(t, "proc.cpu", match, str(f(t))) for t in range(T0, self.now_ms + 1, 2000) if from_ms <= t
                for match, f in self.cpu.items()] + \
            [(t, "proc.jit", match, str(f(t))) for t in range(T0 + 1000, min(self.now_ms - self.jit_late_ms, to_ms) + 1, 1000)
             if from_ms <= t for match, f in self.jit.items()] + [(self.now_ms, "cpu.user", "", "80")], None

    def clock(self) -> float:
        return self.now_ms / 1000

    def sleep(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@pytest.fixture
def patched(monkeypatch):
    def use(monitor: Monitor) -> Monitor:
        monkeypatch.setattr(gauge, "now_ms", lambda: monitor.now_ms)
        monkeypatch.setattr(gauge.time, "sleep", monitor.sleep)
        return monitor
    return use


def test_the_neighbours_are_every_engine_but_the_steps_own_added_up_in_the_newest_readings(patched):
    m = patched(Monitor({SYNAPSE: lambda t: 3, SI: lambda t: 90, CAMEL: lambda t: 4 if t < T0 + 6000 else 1}))
    m.now_ms = T0 + 8000
    of_si = gauge.Neighbours(m.pull, frozenset({SYNAPSE, SI, CAMEL}), own=SI)
    assert of_si.busiest(T0 + 1000, 1) == (1, 4.0, None)              # 3 + 1: SI's own 90 is not a neighbour's
    assert of_si.busiest(T0 + 1000, 3) == (3, 7.0, None)              # the readings at 4, 6 and 8 s
    assert of_si.busiest(T0 + 7000, 3) == (1, 4.0, None)              # none before `since`
    assert gauge.Neighbours(m.pull, frozenset({SYNAPSE, SI, CAMEL})).busiest(T0, 1)[1] == 94.0
    # The step's own engine alone on the host (the demo: Camel and direct): its readings are the
    # host's, its neighbours read 0 in them.
    assert gauge.Neighbours(m.pull, frozenset({CAMEL, SYNAPSE + "-not-running"}), own=CAMEL).busiest(T0, 1) == (1, 0.0, None)


def test_a_wait_ends_when_the_newest_readings_are_quiet_or_at_its_most(patched):
    m = patched(Monitor({SYNAPSE: lambda t: 50 if t < T0 + 5000 else 1}))
    engines = gauge.Neighbours(m.pull, frozenset({SYNAPSE}))
    seen = engines.wait(T0, 2, 60, sleep_s=1, clock=m.clock)
    assert seen == {"quiet": True, "waited_s": 8.0}                    # readings at 6 and 8 s, both at 1 %
    m = patched(Monitor({SYNAPSE: lambda t: 50}))
    assert gauge.Neighbours(m.pull, frozenset({SYNAPSE})).wait(T0, 2, 10, clock=m.clock) == {
        "quiet": False, "waited_s": 10.0, "busiest_percent": 50.0}
    m = patched(Monitor({}, error="monitor at 198.18.0.20:7077 does not answer (refused)"))
    assert gauge.Neighbours(m.pull, frozenset({SYNAPSE})).wait(T0, 2, 10, clock=m.clock)["quiet"] is None


def test_a_steps_gate_holds_it_while_a_neighbour_is_busy_and_says_how_long(patched):
    """Synapse, loaded by the step before, holds half a core for 5 s into Spring Integration's
    step (as it did in the quick round of 2026-12-06): the gate says no until a reading shows it
    quiet, and the step records the wait; a quiet host is never held, and a monitor that does not
    answer holds nothing."""
    m = patched(Monitor({SYNAPSE: lambda t: 57 if t <= T0 + 4000 else 0.5, SI: lambda t: 95}))
    gate = gauge.Gate(gauge.Neighbours(m.pull, frozenset({SYNAPSE, SI}), own=SI), T0 - 2000, clock=m.clock)
    answers = []
    while not answers or not answers[-1]:
        answers.append(gate())
        m.sleep(0.5)
    assert answers.count(False) == 12 and gate.record() == {"quiet": True, "waited_s": 6.0, "busiest_percent": 57.0}
    quiet = gauge.Gate(gauge.Neighbours(m.pull, frozenset({SYNAPSE, SI}), own=SI), T0, clock=m.clock)
    assert quiet() and quiet.record() == {"quiet": True, "waited_s": 0.0, "busiest_percent": 0.5}
    assert gauge.Gate(gauge.Neighbours(m.pull, frozenset(), own=SI), T0).record() == {"quiet": None}
    m.error = "monitor at 198.18.0.20:7077 does not answer (refused)"
    lost = gauge.Gate(gauge.Neighbours(m.pull, frozenset({SYNAPSE}), own=SI), T0, clock=m.clock)
    assert lost() and lost.record() == {"quiet": None, "error": m.error}
    silent = patched(Monitor({}))   # a monitor that watches no engine's processes
    mute = gauge.Gate(gauge.Neighbours(silent.pull, frozenset({SYNAPSE}), own=SI), T0, clock=silent.clock)
    answers = []
    while not answers or not answers[-1]:
        answers.append(mute())
        silent.sleep(0.5)
    assert answers.count(False) == 2 * gauge.NO_READINGS_S + 1
    assert mute.record() == {"quiet": None, "error": "no reading of the engines' processes from the esb host's "
                                                      f"monitor in {gauge.NO_READINGS_S} s"}
    assert busy.NEIGHBOURS_BUSY_PERCENT == 5.0   # the analysis's `busy-neighbours` line, the same


def test_a_targets_compiler_holds_its_warm_up_until_ten_seconds_of_it_are_quiet(patched):
    """Spring Integration compiling at 40 % of its core for its first 20 s, then idle: the gate says
    no until the newest 10 s of readings average 5 % of a core or less, and records how long it held
    the warm-up; the warm-up's figure gets the compiler per bucket."""
    m = patched(Monitor({SI: lambda t: 95}, jit={SI: lambda t: 40.0 if t <= T0 + 20_000 else 0.5}))
    gate = gauge.CompilerGate(gauge.Compiler(m.pull, SI), T0, clock=m.clock)
    answers = []
    while not answers or not answers[-1]:
        m.sleep(1)
        answers.append(gate())
    # Quiet once its newest ten readings average 5 % or less: those of 20-29 s, one of them the last
    # busy second's (40 %), nine at 0.5 %; the first answer at 1 s, yes at 29 s.
    assert m.now_ms == T0 + 29_000 and answers.count(False) == 28
    assert gate.record() == {"quiet": True, "percent": 4.45, "quiet_after_s": 28.0}
    m.sleep(5)
    assert gate() and gate.record()["quiet_after_s"] == 28.0     # asked on, quiet since
    # Its readings 7 s late, the window asked holds 8 s of them: a short window, neither busy nor quiet, keeps it quiet.
    m.sleep(10)
    m.jit_late_ms = 7000
    assert gauge.Compiler(m.pull, SI).busy(T0)[0] < gauge.COMPILER_WINDOW_S
    assert gate() and gate.record()["quiet_after_s"] == 28.0
    m.jit_late_ms = 0
    assert gauge.Compiler(m.pull, SI).series(T0, 5.0, 6) == [40.0, 40.0, 40.0, 40.0, 0.5, 0.5]
    # Still compiling at the warm-up's end: the record says so, with the last window's share.
    busy = gauge.CompilerGate(gauge.Compiler(m.pull, SI), T0, clock=m.clock)
    m.now_ms = T0 + 15_000
    assert not busy() and busy.record() == {"quiet": False, "percent": 40.0}
    # A warm-up shorter than the window, its compiler quiet in what there is: not told, not busy.
    m = patched(Monitor({SI: lambda t: 95}, jit={SI: lambda t: 0.2}))
    short = gauge.CompilerGate(gauge.Compiler(m.pull, SI), T0, clock=m.clock)
    m.now_ms = T0 + 6000
    assert not short() and short.record() == {"quiet": None, "percent": 0.2, "covered_s": 6.0}


def test_an_engine_without_a_compiler_and_a_monitor_that_does_not_answer_hold_nothing(patched):
    """nginx has processes but no compiler threads (no proc.jit): after a few seconds without
    readings the gate lets its warm-up go, judged on its throughput alone. A monitor that does not
    answer holds nothing either, and says why."""
    nginx = "nginx: master process"
    m = patched(Monitor({nginx: lambda t: 30}))
    m.now_ms = T0 + 2000
    gate = gauge.CompilerGate(gauge.Compiler(m.pull, nginx), T0, clock=m.clock)
    answers = []
    while not answers or not answers[-1]:
        answers.append(gate())
        m.sleep(0.5)
    assert answers.count(False) == 2 * gauge.NO_READINGS_S + 1
    assert gate.record() == {"quiet": None, "native": True}
    m.error = "monitor at 198.18.0.20:7090 does not answer (refused)"
    lost = gauge.CompilerGate(gauge.Compiler(m.pull, SI), T0, clock=m.clock)
    assert lost() and lost.record() == {"quiet": None, "error": m.error}
    assert gauge.all_ready(None, None) is None
    asked = []
    both = gauge.all_ready(lambda: asked.append(1) or False, lambda: asked.append(2) or True)
    assert both() is False and asked == [1, 2]   # each gate asked, so that each keeps its record


def test_a_jvm_whose_throughput_settled_is_not_warm_while_its_compiler_is_busy():
    """The target's verdict (step.json `target_warm`): its throughput settled and its compiler quiet
    is warm; its compiler still at work when the warm-up ends is not, whatever the throughput read
    (it spoils the target's steps, as still moving does); a native engine is judged on its throughput."""
    from esbperf.run import warmup

    settled = {"steady": True, "outcome": steady.SETTLED, "reason": "settled: +0.4 %/min over the last 60 s (…)",
               "interval_s": 1.0, "tps": [4000.0] * 60}
    warm = warmup.warm_verdict(settled, 60, {"quiet": True, "percent": 0.3, "quiet_after_s": 12.0})
    assert warm["settled"] is True and warm["compiler"]["quiet"] is True
    busy = warmup.warm_verdict(settled, 60, {"quiet": False, "percent": 9.5})
    assert busy["settled"] is False and busy["outcome"] == warmup.STILL_COMPILING
    assert busy["reason"].startswith("its compiler still busy: 9.5 % of a core over the last 10 s (quiet: 5 % or less)")
    assert "+0.4 %/min" in busy["reason"]
    native = warmup.warm_verdict(settled, 60, {"quiet": None, "native": True})
    assert native["settled"] is True
    moving = {**settled, "steady": False, "outcome": steady.MOVING, "reason": "still climbing: …"}
    assert warmup.warm_verdict(moving, 60, {"quiet": False, "percent": 9.5})["outcome"] == steady.MOVING


def test_the_reports_warm_up_figure_draws_each_targets_throughput_and_compiler_from_run_json(tmp_path):
    """run.json `target_warmup` (a block per warm-up, its targets' loads in turn; the last load of each
    carries the series): one graph per run, a throughput panel and, where a JVM's compiler was read,
    a compiler panel, one series per target and fork; a native engine's has no compiler series."""
    from esbperf.analysis import graphs

    judged = {"target": "camel", "fork": 1, "bucket_s": 1.0, "tps": [100.0, 2000.0, 4000.0],
              "compiler": {"quiet": True, "series": [60.0, 20.0, 0.5]}}
    info = {"target_warmup": [{"at": "…", "targets": [
        {"target": "camel", "scenario": "proxy", "seconds": 3.0},               # a load before: no series
        judged, {"target": "nginx", "bucket_s": 1.0, "tps": [9000.0, 9100.0, 9050.0],
                 "compiler": {"quiet": None, "native": True}}]}]}
    [graph] = graphs.warmup_graphs([SimpleNamespace(name="run-a", info=info)], {})
    throughput, compiler = graph.panels
    assert [s.label for s in throughput.series] == ["camel fork 1", "nginx"]
    assert throughput.series[0].x == [1.0, 2.0, 3.0] and throughput.series[0].y == [100.0, 2000.0, 4000.0]
    assert [s.label for s in compiler.series] == ["camel fork 1"] and compiler.series[0].y == [60.0, 20.0, 0.5]
    assert graphs.warmup_graphs([SimpleNamespace(name="run-b", info={})], {}) == []
    assert graphs.draw(graph, tmp_path)   # it draws


def test_a_target_is_warmed_under_its_heaviest_loads_first_and_its_first_steps_load_last():
    """The demo's Camel: its compiler still busy after 6-9 s at each 1-user load, quiet after 7 s at
    320 users: the loads it will be measured at, the most users (then the highest rate) first, each
    once, and last the load of its first step, the one it is judged at."""
    from esbperf.core import plan as plans
    from esbperf.run import warmup

    def step(size: int, users: int, rate: float | None = None, target: str = "camel") -> plans.Step:
        return plans.Step("proxy", size, users, 1, target=target, rate=rate)

    first = step(1024, 1)
    steps = [first, step(1024, 1, target="direct"), step(102400, 1), step(102400, 1), step(102400, 20),
             step(102400, 320), step(102400, 150, 600.0), step(102400, 150, 1200.0)]
    plan = SimpleNamespace(script=None)
    loads = warmup.loads_of("camel", first, steps, plan)
    assert [(s.payload_bytes, s.users, s.rate) for s in loads] == [
        (102400, 320, None), (102400, 150, 1200.0), (102400, 150, 600.0), (102400, 20, None), (102400, 1, None),
        (1024, 1, None)]
