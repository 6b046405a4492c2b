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

from esbperf.client import CannedServer, Expected, KnownAnswers, Requests, Schedule, User
import contract
import users

properties = grinder.properties
SCENARIO = properties.getProperty("esbperf.scenario", "raw")
TARGET_KIND = properties.getProperty("esbperf.target.kind", "direct")
PAYLOAD_BYTES = properties.getInt("esbperf.payload.bytes", 1024)
KEEPALIVE = properties.getBoolean("esbperf.keepalive", True)
TIMEOUT_MS = properties.getInt("esbperf.timeout.ms", 120000)
RATE_TEXT = properties.getProperty("esbperf.rate", "0") or "0"
LATE_US = properties.getLong("esbperf.late.us", 1000)
ARRIVALS = properties.getProperty("esbperf.arrivals", "uniform")
SEED = properties.getLong("esbperf.seed", 0)
ERRORS_LOGGED = 10   # per worker thread: enough to see why, not enough to flood the log
PAYLOAD_FILE = properties.getProperty("esbperf.payload.file", "")
PAYLOAD_CHECK = properties.getProperty("esbperf.payload.check", "")
LEARN = properties.getBoolean("esbperf.fastcheck.learn", True)
CPU_AFTER_MS = properties.getLong("esbperf.cpu.after.ms", 0)
CALIBRATE = SCENARIO == "calibrate"
CALIBRATION_TEST = 99


try:
    RATE = float(RATE_TEXT)
except ValueError:
    RATE = -1
if not 0 <= RATE < float("inf"):
    raise RuntimeError("esbperf.rate must be starts per second (0: closed model), not %r" % RATE_TEXT)


def utf8(text):
    return String(text).getBytes("UTF-8")


def java_bytes(body):
    """A generated body (text) as UTF-8, a payload file's bytes as they are."""
    return utf8(body) if isinstance(body, unicode) else StringUtil.toBytes(body)


def payload_file():
    """The staged payload file, from the agent's copy of this folder, as its bytes are."""
    path = properties.resolveRelativeFile(File(PAYLOAD_FILE)).getPath()
    data = open(path, "rb").read()
    if len(data) != PAYLOAD_BYTES:   # not this step's file, or not fully distributed
        raise RuntimeError("%s has %d bytes, the step says %d" % (path, len(data), PAYLOAD_BYTES))
    return data


if CALIBRATE:
    # The raw echo's request, answered by a server in this process with exactly what the echo
    # would send: the normal client path (send, read, fast check, columns) with no back end.
    REQUESTS = contract.requests_for("raw", "direct", PAYLOAD_BYTES)
    SERVER = CannedServer.start(CannedServer.answer(
        array(["Content-Type", contract.SOAP_CONTENT_TYPE, "X-Echo-Backend", "ws1"], String),
        utf8(REQUESTS[0].body)))
    URLS = dict((b, SERVER.url) for b in contract.BACKENDS)
    TEST = Test(CALIBRATION_TEST, "calibrate (the client against an instant server in its own process)")
else:
    if PAYLOAD_FILE:
        REQUESTS = contract.requests_for_file(SCENARIO, TARGET_KIND, payload_file(), PAYLOAD_CHECK)
    else:
        REQUESTS = contract.requests_for(SCENARIO, TARGET_KIND, PAYLOAD_BYTES)
    if TARGET_KIND == "esb":
        URLS = dict((b, properties.getProperty("esbperf.target.url")) for b in contract.BACKENDS)
    else:
        URLS = dict((b, properties.getProperty("esbperf.backend." + b)) for b in contract.BACKENDS)
    TEST = Test(contract.test_number(SCENARIO), "%s (%s)" % (SCENARIO, contract.description(SCENARIO)))


def fast_check(expected):
    if expected is None:
        return None
    return Expected(expected.backend, expected.body is not None and java_bytes(expected.body) or None,
                    expected.contains is not None and utf8(expected.contains) or None)


# Built once per worker process, shared read-only by its threads.
PREPARED = Requests(KEEPALIVE)
for r in REQUESTS:
    if not URLS[r.backend]:
        raise RuntimeError("esbperf.target.url / esbperf.backend.%s not set for %s" % (r.backend, TARGET_KIND))
    PREPARED.add(URLS[r.backend], r.path, r.content_type, array(r.headers, String),
                 java_bytes(r.data if r.data is not None else r.body),
                 fast_check(r.expected))
if ARRIVALS not in ("uniform", "poisson"):
    raise RuntimeError("esbperf.arrivals must be uniform or poisson, not %r" % ARRIVALS)
# Each worker process draws its own Poisson sequence from the run's seed.
PROCESS_SEED = SEED * 1000003 + grinder.agentNumber * 1009 + grinder.processNumber
SCHEDULE = Schedule(RATE, LATE_US, ARRIVALS == "poisson", PROCESS_SEED) if RATE > 0 else None

grinder.statistics.registerDataLogExpression("HTTP status", "userLong0")
grinder.statistics.registerDataLogExpression("Request bytes", "userLong1")
grinder.statistics.registerDataLogExpression("Response bytes", "userLong2")
grinder.statistics.registerDataLogExpression("Response us", "userLong3")
if SCHEDULE is not None:
    grinder.statistics.registerDataLogExpression("Latency us", "userLong4")
    # Start lag = Latency - Response (due start -> actual start), exact by construction.
    grinder.statistics.registerDataLogExpression("Start lag us", "(- userLong4 userLong3)")
# The console's mean response time in µs per sample (its own Test time is whole ms): what a
# `warmup_s: auto` warm-up watches (esbperf/run/workers.py, MEAN_US).
grinder.statistics.registerSummaryExpression("Response us mean", "(/ userLong3 (+ (count timedTests) errors))")


def timed_exchange(user):
    """The Grinder test: the HTTP exchange and nothing else (User.exchange never raises)."""
    user.exchange()

TEST.record(timed_exchange)


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1   # so the check can still fail the transaction
        # Closed model: `users` users over all threads; open model: every thread serves the schedule.
        self.active = SCHEDULE is not None or users.is_user(grinder)
        self.user = User(PREPARED, TIMEOUT_MS, SCHEDULE, grinder.statistics)
        self.user.countCpuAfter(CPU_AFTER_MS)
        self.errors = 0
        self.slow_rights = 0   # right answers that missed their fast check: each costs Jython

    def __call__(self):
        if not self.active:
            grinder.stopThisWorkerThread()
        user = self.user
        user.awaitTurn()
        timed_exchange(user)
        outcome = user.finish()
        if outcome != User.RIGHT:
            self.judge(outcome)

    def judge(self, outcome):
        """The slow path: an answer the fast check did not accept, or no answer at all."""
        request = REQUESTS[self.user.index]
        if outcome == User.NO_ANSWER:
            problem = "no answer: %s" % self.user.failure
        else:
            problem = request.check(self.user.answer)
            if problem:
                grinder.statistics.forLastTest.success = False
            else:
                self.slow_rights += 1
                if LEARN:
                    self.user.learn()
        if problem:
            self.errors += 1
            if self.errors <= ERRORS_LOGGED:
                grinder.logger.warn("%s %s: %s" % (SCENARIO, request.path, problem))

    def __del__(self):
        last_of_pool = self.user.close()
        if self.active:
            # Learning explains a few misses per thread: each thread may judge a request's first
            # answers before any thread has learned them. More means answers that differ each time.
            log = grinder.logger.warn if self.slow_rights > len(REQUESTS) * KnownAnswers.VARIANTS else grinder.logger.info
            log("%d right answers of %d transactions missed their fast check and were judged in Jython"
                % (self.slow_rights, self.user.transactions))
            grinder.logger.info(self.user.cpuSummary)
        if last_of_pool:
            grinder.logger.info(SCHEDULE.summary())
