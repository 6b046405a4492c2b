"""The esb host's other engines read before a step is measured (esbperf/run/neighbours.py), from a
monitor's samples as the esb host's monitor serves them (proc.cpu per --match text, every 2 s),
in the test's time: what counts as a neighbour, which readings are judged, when a wait ends, and
what a step records of it."""
from __future__ import annotations

import pytest

from esbperf.core import steady
from esbperf.run import neighbours

SYNAPSE, SI, CAMEL = "org.apache.synapse.SynapseServer", "esbperf.springintegration.EsbApplication", "org.apache.camel.main.Main"
T0 = 1_800_000_000_000


class Monitor:
    """A monitor's process readings: `cpu[match]` as a function of the reading's time (ms); a
    reading every 2 s from T0; the test's clock is the newest time served."""

    def __init__(self, cpu: dict, error: str | None = None):
        self.cpu, self.error, self.now_ms, self.asked = cpu, error, T0, 0

    def pull(self, from_ms: int, to_ms: int):
        self.asked += 1
        if self.error:
            return [], self.error
        return [(t, "proc.cpu", match, str(f(t))) for t in range(T0, self.now_ms + 1, 2000) if from_ms <= t
                for match, f in self.cpu.items()] + [(self.now_ms, "cpu.user", "", "80")], None

    def clock(self) -> float:
        return self.now_ms / 1000

    def sleep(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@pytest.fixture
def patched(monkeypatch):
    def use(monitor: Monitor) -> Monitor:
        monkeypatch.setattr(neighbours, "now_ms", lambda: monitor.now_ms)
        monkeypatch.setattr(neighbours.time, "sleep", monitor.sleep)
        return monitor
    return use


def test_the_neighbours_are_every_engine_but_the_steps_own_added_up_in_the_newest_readings(patched):
    m = patched(Monitor({SYNAPSE: lambda t: 3, SI: lambda t: 90, CAMEL: lambda t: 4 if t < T0 + 6000 else 1}))
    m.now_ms = T0 + 8000
    of_si = neighbours.Neighbours(m.pull, frozenset({SYNAPSE, SI, CAMEL}), own=SI)
    assert of_si.busiest(T0 + 1000, 1) == (1, 4.0, None)              # 3 + 1: SI's own 90 is not a neighbour's
    assert of_si.busiest(T0 + 1000, 3) == (3, 7.0, None)              # the readings at 4, 6 and 8 s
    assert of_si.busiest(T0 + 7000, 3) == (1, 4.0, None)              # none before `since`
    assert neighbours.Neighbours(m.pull, frozenset({SYNAPSE, SI, CAMEL})).busiest(T0, 1)[1] == 94.0
    # The step's own engine alone on the host (the demo: Camel and direct): its readings are the
    # host's, its neighbours read 0 in them.
    assert neighbours.Neighbours(m.pull, frozenset({CAMEL, SYNAPSE + "-not-running"}), own=CAMEL).busiest(T0, 1) == (1, 0.0, None)


def test_a_wait_ends_when_the_newest_readings_are_quiet_or_at_its_most(patched):
    m = patched(Monitor({SYNAPSE: lambda t: 50 if t < T0 + 5000 else 1}))
    engines = neighbours.Neighbours(m.pull, frozenset({SYNAPSE}))
    seen = engines.wait(T0, 2, 60, sleep_s=1, clock=m.clock)
    assert seen == {"quiet": True, "waited_s": 8.0}                    # readings at 6 and 8 s, both at 1 %
    m = patched(Monitor({SYNAPSE: lambda t: 50}))
    assert neighbours.Neighbours(m.pull, frozenset({SYNAPSE})).wait(T0, 2, 10, clock=m.clock) == {
        "quiet": False, "waited_s": 10.0, "busiest_percent": 50.0}
    m = patched(Monitor({}, error="monitor at 198.18.0.20:7077 does not answer (refused)"))
    assert neighbours.Neighbours(m.pull, frozenset({SYNAPSE})).wait(T0, 2, 10, clock=m.clock)["quiet"] is None


def test_a_steps_gate_holds_it_while_a_neighbour_is_busy_and_says_how_long(patched):
    """Synapse, loaded by the step before, holds half a core for 5 s into Spring Integration's
    step (as it did in the quick round of 2026-12-06): the gate says no until a reading shows it
    quiet, and the step records the wait; a quiet host is never held, and a monitor that does not
    answer holds nothing."""
    m = patched(Monitor({SYNAPSE: lambda t: 57 if t <= T0 + 4000 else 0.5, SI: lambda t: 95}))
    gate = neighbours.Gate(neighbours.Neighbours(m.pull, frozenset({SYNAPSE, SI}), own=SI), T0 - 2000, clock=m.clock)
    answers = []
    while not answers or not answers[-1]:
        answers.append(gate())
        m.sleep(0.5)
    assert answers.count(False) == 12 and gate.record() == {"quiet": True, "waited_s": 6.0, "busiest_percent": 57.0}
    quiet = neighbours.Gate(neighbours.Neighbours(m.pull, frozenset({SYNAPSE, SI}), own=SI), T0, clock=m.clock)
    assert quiet() and quiet.record() == {"quiet": True, "waited_s": 0.0, "busiest_percent": 0.5}
    assert neighbours.Gate(neighbours.Neighbours(m.pull, frozenset(), own=SI), T0).record() == {"quiet": None}
    m.error = "monitor at 198.18.0.20:7077 does not answer (refused)"
    lost = neighbours.Gate(neighbours.Neighbours(m.pull, frozenset({SYNAPSE}), own=SI), T0, clock=m.clock)
    assert lost() and lost.record() == {"quiet": None, "error": m.error}
    silent = patched(Monitor({}))   # a monitor that watches no engine's processes
    mute = neighbours.Gate(neighbours.Neighbours(silent.pull, frozenset({SYNAPSE}), own=SI), T0, clock=silent.clock)
    answers = []
    while not answers or not answers[-1]:
        answers.append(mute())
        silent.sleep(0.5)
    assert answers.count(False) == 2 * neighbours.NO_READINGS_S + 1
    assert mute.record() == {"quiet": None, "error": "no reading of the engines' processes from the esb host's "
                                                      f"monitor in {neighbours.NO_READINGS_S} s"}
    assert steady.NEIGHBOURS_BUSY_PERCENT == 5.0   # the analysis's `busy-neighbours` line, the same
