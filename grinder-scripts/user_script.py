"""Runs a user's own Grinder 3 script (`esbperf run --script FILE`) as a step's workers (Jython 2.7).

The runner stages the user's script in the distribution folder and names it in
`esbperf.user.script`; this file runs it unchanged in its own namespace, then keeps only the
step's users working (users.py): the same start message reaches every agent, so the agents
together may start more threads than the step has users, and the extra ones stop at once.

A script that says `TAKES_STEPS = True` at its top level runs in warm workers instead (the run's
worker JVMs carry every step; esbperf.client.Steps): for each step, every thread the step counts
builds a new TestRunner of the script once the step's esbperf.* settings are in
grinder.properties, calls it until the step ends, then runs its __del__ (its per-thread clean-up,
as at the end of a fresh worker's thread). Such a script reads its settings in TestRunner's
__init__, never at import (docs/running.md, "Warm workers")."""
import sys
from threading import Lock

from java.io import File
from net.grinder.script.Grinder import grinder
from org.python.core import JyAttribute

import users

_script = grinder.properties.getProperty("esbperf.user.script")
if not _script:
    raise RuntimeError("esbperf.user.script is not set: user_script.py runs the script `esbperf run --script` staged")
# Relative paths resolve against the distribution folder, as grinder.script does.
_path = grinder.properties.resolveRelativeFile(File(_script)).getPath()
_folder = File(_path).getParent()
if _folder not in sys.path:
    sys.path.insert(0, _folder)   # the user's script may import modules staged beside it
_namespace = {"__name__": "__main__", "__file__": _path}
execfile(_path, _namespace)
if "TestRunner" not in _namespace:
    raise RuntimeError("%s defines no TestRunner class: not a Grinder 3 script" % _script)
_UserTestRunner = _namespace["TestRunner"]
_board = grinder.properties.getProperty("esbperf.board.url", "")
WARM = bool(_board)
if WARM:
    if _namespace.get("TAKES_STEPS") is not True:
        raise RuntimeError("%s does not say TAKES_STEPS = True, yet warm workers were started for it" % _script)
    from esbperf.client import StepLogs, Steps
    STEPS = Steps(_board, grinder.properties.getProperty("esbperf.board.key", ""), grinder.processName,
                  StepLogs(grinder.properties.getProperty("esbperf.pool.logs", ".")),
                  grinder.properties.getLong("esbperf.board.close.ms", 150000),
                  grinder.properties.getLong("esbperf.board.lost.ms", 60000), lambda line: grinder.logger.info(line))
    AGENT = max(grinder.agentNumber, 0)
    PROCESS = grinder.processNumber - grinder.firstProcessNumber
    # After the script's import: its data-log columns are in every step's header.
    STEPS.start(AGENT, PROCESS, grinder.properties.getInt("grinder.threads", 1))
    IDLE_WAIT_MS = 500
    _applied = [None]
    _lock = Lock()


def _cleanup(runner):
    # Grinder calls a TestRunner's __del__ when its worker thread ends: the script's per-thread
    # clean-up (closing connections, writing a summary) must run as it would without us, once.
    # Jython calls __del__ again when it collects the object, at whatever moment its GC comes: its
    # finalizer is disarmed first, or a step's clean-up would run once more during a later step
    # (and write into that step's log).
    trigger = JyAttribute.getAttr(runner, JyAttribute.FINALIZE_TRIGGER_ATTR)
    if trigger is not None:
        trigger.clear()
    cleanup = getattr(runner, "__del__", None)
    if cleanup is not None:
        cleanup()


def _apply(order):
    """The step's settings into grinder.properties, once per step and process, before any of its
    TestRunners is built."""
    with _lock:
        if _applied[0] is not order:
            for name, value in order.properties.items():
                grinder.properties.setProperty(name, value)
            _applied[0] = order


class TestRunner:
    def __init__(self):
        self.order = None
        if WARM:
            self.runner = None
        else:
            self.runner = _UserTestRunner() if users.is_user(grinder) else None

    def __call__(self):
        if WARM:
            return self.warm()
        if self.runner is None:
            grinder.stopThisWorkerThread()
        self.runner()

    def warm(self):
        order = STEPS.current()
        if self.order is not None and (order is not self.order or self.order.isOver()):
            self.leave()
        if order.isEnd():
            grinder.stopThisWorkerThread()
        if self.order is None:
            if not order.takes(AGENT, PROCESS, grinder.threadNumber) or not STEPS.enter(order):
                STEPS.awaitOther(order, IDLE_WAIT_MS)
                return
            self.order = order
            try:
                _apply(order)
                self.runner = _UserTestRunner()
            except:
                STEPS.begun(order)   # nothing to wait for
                self.leave()
                raise
            STEPS.begun(order)   # its first call comes next: the step's clock waits for the last
        self.runner()

    def leave(self):
        try:
            if self.runner is not None:
                _cleanup(self.runner)
        finally:
            STEPS.leave(self.order)
            self.order = self.runner = None

    def __del__(self):   # Grinder's call at the thread's end, and Jython's when it collects us: once
        if WARM:
            if self.order is not None:
                self.leave()
        else:
            runner, self.runner = self.runner, None
            if runner is not None:
                _cleanup(runner)
