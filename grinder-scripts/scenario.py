# -*- coding: utf-8 -*-
"""The Grinder script of every esbperf step: one scenario of the ESB contract, as one Grinder
test, against an ESB or the direct baseline. The runner sets the step through properties:

  esbperf.scenario        proxy | cbr | hbr | json | xslt | raw | cbr-raw | hbr-raw, or
                          calibrate: the raw request against a server inside this worker process
                          that answers at once (what the client itself costs; esbperf/run/calibration.py)
  esbperf.target.kind     esb | direct
  esbperf.target.url      the ESB's http://host:port (kind esb)
  esbperf.backend.wsN     each echo service's http://host:port (kind direct)
  esbperf.payload.bytes   request size
  esbperf.payload.file    a payload file to send instead of a generated body (raw scenarios): its
                          path relative to this folder, where the runner stages it
  esbperf.payload.check   how the file's echo is compared: bytes | envelope | xml (contract.py)
  esbperf.keepalive       true: one connection per thread and server; false: one per request
  esbperf.timeout.ms      connect and read timeout
  esbperf.users           closed model: concurrent users of the step over all agents; every agent
                          runs the same processes x threads, and threads beyond the users stop
  esbperf.rate            open model: starts per second for THIS worker process (absent or 0:
                          the closed model); every thread of the process serves one schedule
  esbperf.late.us         open model: a start later than due by more than this counts as late
                          in the worker log's summary (default 1000)
  esbperf.arrivals        open model: uniform (evenly spaced, the default) or poisson (exponential
                          gaps, from a generator seeded with esbperf.seed and this worker's agent
                          and process numbers, so no two processes share a sequence)
  esbperf.fastcheck.learn true (default): an answer the scenario's check accepted becomes a fast check
                          of its request (esbperf.client.KnownAnswers); false: every answer that no
                          fixed expectation foresees is judged in Jython (a benchmark's "before")
  esbperf.cpu.after.ms    the client's CPU per transaction, logged per thread at its end, counts from
                          the first transaction that ends this long after the thread's start (default 0)

Per transaction, Java does the work (esbperf.client.User): the request's bytes are prepared once
per process, the client times the exchange itself with System.nanoTime() (first byte written ->
last byte read), and a fast check on the raw answer decides right answers: its request's fixed
expectation (contract.Expected), or an answer that contract.py's check accepted before (the same
status, back-end header and body bytes: what an ESB re-serialises cannot be foreseen, but it
answers a request the same way every time). Only an answer that fails both is judged by the check,
which says why. A wrong answer (status, content or back end) marks the transaction failed, so it
counts as an error, never as TPS.

Warm workers (esbperf.board.url set): the worker JVM lives for a whole run and takes each step
from the console's step board (esbperf.client.Steps): the properties above come with each order
instead of from the start message, the threads the step leaves out wait, and each step's rows and
lines go to that step's own log folder (esbperf.client.StepLogs). What a warm worker is started with:

  esbperf.board.url       the board's GET /order address; esbperf.board.key the run's key
  esbperf.pool.model      open: the data log also has the open model's columns (closed steps of
                          such a run log their latency as their response time, lag 0)
  esbperf.board.close.ms  how long a step's threads may take to leave it (a request in flight)
  esbperf.pool.logs       its grinder.logDirectory as the runner gave it (relative): each step's
                          log folder resolves where that one did

and each order also carries esbperf.step.processes, esbperf.step.threads (the step's layout of
users, as a fresh start would have it) and esbperf.step.logs (its log folder, relative to the
worker's working folder).

Data-log columns added to Grinder's own: HTTP status, Request bytes, Response bytes, Response us
(the exchange in integer microseconds); in the open model also Latency us (last byte - due start:
corrected for coordinated omission) and Start lag us (actual start - due start).
"""
from java.io import File
from java.lang import String
from jarray import array
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder
from org.python.core.util import StringUtil
from threading import Lock

from esbperf.client import CannedServer, Expected, KnownAnswers, Order, Requests, Schedule, StepLogs, Steps, User
import contract
import users

properties = grinder.properties
ERRORS_LOGGED = 10   # per worker thread and step: enough to see why, not enough to flood the log
CALIBRATION_TEST = 99
BOARD_URL = properties.getProperty("esbperf.board.url", "")
WARM = bool(BOARD_URL)
IDLE_WAIT_MS = 500   # a thread the step leaves out looks again this often (Grinder's stop needs it back)


def utf8(text):
    return String(text).getBytes("UTF-8")


def java_bytes(body):
    """A generated body (text) as UTF-8, a payload file's bytes as they are."""
    return utf8(body) if isinstance(body, unicode) else StringUtil.toBytes(body)


def fast_check(expected):
    if expected is None:
        return None
    return Expected(expected.backend, expected.body is not None and java_bytes(expected.body) or None,
                    expected.contains is not None and utf8(expected.contains) or None)


def number_of(text, what):
    try:
        value = float(text or "0")
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise RuntimeError("%s must be starts per second (0: the closed model), not %r" % (what, text))
    return value


_tests = {}
_tests_lock = Lock()


def timed_exchange_of(scenario):
    """The Grinder test of a scenario: a function doing the HTTP exchange and nothing else
    (User.exchange never raises), recorded once per scenario and process."""
    with _tests_lock:
        if scenario not in _tests:
            def timed_exchange(user):
                user.exchange()
            if scenario == "calibrate":
                test = Test(CALIBRATION_TEST, "calibrate (the client against an instant server in its own process)")
            else:
                test = Test(contract.test_number(scenario), "%s (%s)" % (scenario, contract.description(scenario)))
            test.record(timed_exchange)
            _tests[scenario] = timed_exchange
        return _tests[scenario]


_canned = {}


class Shared(object):
    """What a step's threads share in one worker process, built once from the step's settings
    (`get(name, default)`: the start message's properties, or a warm worker's order)."""

    def __init__(self, get):
        self.scenario = get("esbperf.scenario", "raw")
        target_kind = get("esbperf.target.kind", "direct")
        size = int(get("esbperf.payload.bytes", "1024"))
        keepalive = get("esbperf.keepalive", "true").lower() == "true"
        self.timeout_ms = int(get("esbperf.timeout.ms", "120000"))
        self.learn = get("esbperf.fastcheck.learn", "true").lower() == "true"
        self.cpu_after_ms = long(get("esbperf.cpu.after.ms", "0"))
        rate = number_of(get("esbperf.rate", "0"), "esbperf.rate")
        arrivals = get("esbperf.arrivals", "uniform")
        if arrivals not in ("uniform", "poisson"):
            raise RuntimeError("esbperf.arrivals must be uniform or poisson, not %r" % arrivals)
        payload_file = get("esbperf.payload.file", "")
        if self.scenario == "calibrate":
            # The raw echo's request, answered by a server in this process with exactly what the echo
            # would send: the normal client path (send, read, fast check, columns) with no back end.
            self.requests = contract.requests_for("raw", "direct", size)
            body = self.requests[0].body
            if size not in _canned:
                _canned[size] = CannedServer.start(CannedServer.answer(
                    array(["Content-Type", contract.SOAP_CONTENT_TYPE, "X-Echo-Backend", "ws1"], String), utf8(body)))
            urls = dict((b, _canned[size].url) for b in contract.BACKENDS)
        else:
            if payload_file:
                self.requests = contract.requests_for_file(self.scenario, target_kind, self.payload(payload_file, size),
                                                           get("esbperf.payload.check", ""))
            else:
                self.requests = contract.requests_for(self.scenario, target_kind, size)
            if target_kind == "esb":
                urls = dict((b, get("esbperf.target.url", "")) for b in contract.BACKENDS)
            else:
                urls = dict((b, get("esbperf.backend." + b, "")) for b in contract.BACKENDS)
        self.prepared = Requests(keepalive)
        for r in self.requests:
            if not urls[r.backend]:
                raise RuntimeError("esbperf.target.url / esbperf.backend.%s not set for %s" % (r.backend, target_kind))
            self.prepared.add(urls[r.backend], r.path, r.content_type, array(r.headers, String),
                              java_bytes(r.data if r.data is not None else r.body), fast_check(r.expected))
        # Each worker process draws its own Poisson sequence from the run's seed.
        seed = long(get("esbperf.seed", "0")) * 1000003 + grinder.agentNumber * 1009 + grinder.processNumber
        self.schedule = Schedule(rate, long(get("esbperf.late.us", "1000")), arrivals == "poisson", seed) \
            if rate > 0 else None
        self.timed = timed_exchange_of(self.scenario)

    @staticmethod
    def payload(path, size):
        """The staged payload file, from the agent's copy of this folder, as its bytes are."""
        path = properties.resolveRelativeFile(File(path)).getPath()
        data = open(path, "rb").read()
        if len(data) != size:   # not this step's file, or not fully distributed
            raise RuntimeError("%s has %d bytes, the step says %d" % (path, len(data), size))
        return data


def fresh_setting(name, default):
    return properties.getProperty(name, default)


grinder.statistics.registerDataLogExpression("HTTP status", "userLong0")
grinder.statistics.registerDataLogExpression("Request bytes", "userLong1")
grinder.statistics.registerDataLogExpression("Response bytes", "userLong2")
grinder.statistics.registerDataLogExpression("Response us", "userLong3")
if WARM:
    STEPS = Steps(BOARD_URL, properties.getProperty("esbperf.board.key", ""), grinder.processName,
                  StepLogs(properties.getProperty("esbperf.pool.logs", ".")),
                  properties.getLong("esbperf.board.close.ms", 150000),
                  properties.getLong("esbperf.board.lost.ms", 60000), lambda line: grinder.logger.info(line))
    OPEN_MODEL = properties.getProperty("esbperf.pool.model", "closed") == "open"
    FRESH = None
else:
    # Built at import: a step whose settings are wrong fails at once, before its threads start.
    FRESH = Shared(fresh_setting)
    OPEN_MODEL = FRESH.schedule is not None
if OPEN_MODEL:
    grinder.statistics.registerDataLogExpression("Latency us", "userLong4")
    # Start lag = Latency - Response (due start -> actual start), exact by construction.
    grinder.statistics.registerDataLogExpression("Start lag us", "(- userLong4 userLong3)")
# The console's mean response time in µs per sample (its own Test time is whole ms): what a
# `warmup_s: auto` warm-up watches (esbperf/run/workers.py, MEAN_US).
grinder.statistics.registerSummaryExpression("Response us mean", "(/ userLong3 (+ (count timedTests) errors))")
AGENT = max(grinder.agentNumber, 0)
PROCESS = grinder.processNumber - grinder.firstProcessNumber
if WARM:
    # After the data log's columns are registered: each step's header lists them.
    STEPS.start(AGENT, PROCESS, properties.getInt("grinder.threads", 1))
# What Grinder read at this worker's start and keeps for its life (a warm worker's every step):
# step.json `report_interval_ms` must say the same (esbperf/run/workers.py).
grinder.logger.info("esbperf: this worker reports to the console every %d ms (grinder.reportToConsole.interval)"
                    % properties.getInt("grinder.reportToConsole.interval", 500))

_shared_lock = Lock()


def shared_of(order):
    """The step's Shared of this process, built by the first of its threads to take part."""
    with _shared_lock:
        shared = order.getShared()
        if shared is None:
            shared = Shared(lambda name, default: order.get(name, default))
            if shared.schedule is not None:
                order.cancelWhenOver(shared.schedule)
            order.setShared(shared)
        return shared


class Part(object):
    """A thread's part in one step: its User (connections, the data-log columns, the fast check)
    and what it tells the worker log when it leaves the step."""

    def __init__(self, shared):
        self.shared = shared
        self.user = User(shared.prepared, shared.timeout_ms, shared.schedule, grinder.statistics)
        self.user.countCpuAfter(shared.cpu_after_ms)
        self.errors = 0
        self.slow_rights = 0   # right answers that missed their fast check: each costs Jython

    def transaction(self):
        user = self.user
        if not user.awaitTurn():
            return   # the step ended while this thread waited for its ticket
        self.shared.timed(user)
        outcome = user.finish()
        if OPEN_MODEL and self.shared.schedule is None:
            # A closed step in a pool that logs the open model's columns: its due start is its start.
            grinder.statistics.forLastTest.setLong("userLong4", user.micros)
        if outcome != User.RIGHT:
            self.judge(outcome)

    def judge(self, outcome):
        """The slow path: an answer the fast check did not accept, or no answer at all."""
        request = self.shared.requests[self.user.index]
        if outcome == User.NO_ANSWER:
            problem = "no answer: %s" % self.user.failure
        else:
            problem = request.check(self.user.answer)
            if problem:
                grinder.statistics.forLastTest.success = False
            else:
                self.slow_rights += 1
                if self.shared.learn:
                    self.user.learn()
        if problem:
            self.errors += 1
            if self.errors <= ERRORS_LOGGED:
                grinder.logger.warn("%s %s: %s" % (self.shared.scenario, request.path, problem))

    def close(self, active=True):
        last_of_pool = self.user.close()
        if active:
            # Learning explains a few misses per thread: each thread may judge a request's first
            # answers before any thread has learned them. More means answers that differ each time.
            misses = self.slow_rights > len(self.shared.requests) * KnownAnswers.VARIANTS
            (grinder.logger.warn if misses else grinder.logger.info)(
                "%d right answers of %d transactions missed their fast check and were judged in Jython"
                % (self.slow_rights, self.user.transactions))
            grinder.logger.info(self.user.cpuSummary)
        if last_of_pool:
            grinder.logger.info(self.shared.schedule.summary())


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1   # so the check can still fail the transaction
        self.order = None    # warm: the step this thread takes part in
        self.part = None
        self.failed = None   # warm: an order whose settings this thread could not use
        if not WARM:
            # Closed model: `users` users over all threads; open model: every thread serves the schedule.
            self.active = FRESH.schedule is not None or users.is_user(grinder)
            self.part = Part(FRESH)

    def __call__(self):
        if WARM:
            self.warm()
        else:
            if not self.active:
                grinder.stopThisWorkerThread()
            self.part.transaction()

    def warm(self):
        """One run of a warm worker's thread: leave a step that is over, take part in the current
        one if it counts this thread, else wait for the next order."""
        order = STEPS.current()
        if self.order is not None and (order is not self.order or self.order.isOver()):
            self.leave()
        if order.isEnd():
            grinder.stopThisWorkerThread()
        if self.order is None:
            if order is self.failed or not order.takes(AGENT, PROCESS, grinder.threadNumber) or not STEPS.enter(order):
                STEPS.awaitOther(order, IDLE_WAIT_MS)
                return
            try:
                self.part = Part(shared_of(order))
            except Exception, e:
                # The runner finds this thread's user missing from the step and sets it aside.
                grinder.logger.error("step %d: this thread cannot take part: %s" % (order.seq, e))
                self.failed = order
                STEPS.begun(order)   # nothing to wait for
                STEPS.leave(order)
                return
            self.order = order
            STEPS.begun(order)   # its first transaction comes next: the step's clock waits for the last
        self.part.transaction()

    def leave(self):
        try:
            self.part.close()
        finally:
            STEPS.leave(self.order)
            self.order = self.part = None

    def __del__(self):   # Grinder's call at the thread's end, and Jython's when it collects us: once
        if WARM:
            if self.order is not None:
                self.leave()
        else:
            part, self.part = self.part, None
            if part is not None:
                part.close(self.active)
