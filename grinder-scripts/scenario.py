# -*- coding: utf-8 -*-
"""The Grinder script of every esbperf step: one scenario of the ESB contract, as one Grinder
test, against an ESB or the direct baseline. The runner sets the step through properties:

  esbperf.scenario        proxy | cbr | hbr | json | xslt | raw | cbr-raw | hbr-raw
  esbperf.target.kind     esb | direct
  esbperf.target.url      the ESB's http://host:port (kind esb)
  esbperf.backend.wsN     each echo service's http://host:port (kind direct)
  esbperf.payload.bytes   request size
  esbperf.keepalive       true: one connection per thread and server; false: one per request
  esbperf.timeout.ms      connect and read timeout
  esbperf.users           concurrent users of the step over all agents; every agent runs the
                          same processes x threads, and threads beyond the users stop at once

Only the HTTP exchange is timed; the answer is checked afterwards and a wrong answer (status,
content or back end) marks the transaction failed, so it counts as an error, never as TPS.
"""
from java.lang import String
from jarray import array
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder

from esbperf.client import HttpClient
import contract

properties = grinder.properties
SCENARIO = properties.getProperty("esbperf.scenario", "raw")
TARGET_KIND = properties.getProperty("esbperf.target.kind", "direct")
PAYLOAD_BYTES = properties.getInt("esbperf.payload.bytes", 1024)
KEEPALIVE = properties.getBoolean("esbperf.keepalive", True)
TIMEOUT_MS = properties.getInt("esbperf.timeout.ms", 120000)
USERS = properties.getInt("esbperf.users", 0)   # 0: every thread is a user
PROCESSES = properties.getInt("grinder.processes", 1)
THREADS = properties.getInt("grinder.threads", 1)
ERRORS_LOGGED = 10   # per worker thread: enough to see why, not enough to flood the log

if TARGET_KIND == "esb":
    URLS = dict((b, properties.getProperty("esbperf.target.url")) for b in contract.BACKENDS)
else:
    URLS = dict((b, properties.getProperty("esbperf.backend." + b)) for b in contract.BACKENDS)

# Built once per worker process, shared read-only by its threads.
REQUESTS = contract.requests_for(SCENARIO, TARGET_KIND, PAYLOAD_BYTES)
BODIES = [String(r.body).getBytes("UTF-8") for r in REQUESTS]
HEADERS = [array(r.headers, String) for r in REQUESTS]

grinder.statistics.registerDataLogExpression("HTTP status", "userLong0")
grinder.statistics.registerDataLogExpression("Request bytes", "userLong1")
grinder.statistics.registerDataLogExpression("Response bytes", "userLong2")

TEST = Test(contract.test_number(SCENARIO), "%s (%s)" % (SCENARIO, contract.description(SCENARIO)))


def exchange(client, i):
    """The timed part: send request i and read the whole answer (None if the exchange failed)."""
    try:
        return client.post(REQUESTS[i].path, REQUESTS[i].content_type, HEADERS[i], BODIES[i])
    except Exception, e:   # IOException: refused, reset, timeout, malformed answer
        return e

TEST.record(exchange)


def user_index():
    """This thread's place among all threads of all agents and processes of the step."""
    process = grinder.processNumber - grinder.firstProcessNumber
    return (max(grinder.agentNumber, 0) * PROCESSES + process) * THREADS + grinder.threadNumber


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1   # so the check can still fail the transaction
        self.active = USERS <= 0 or user_index() < USERS
        self.clients = {}
        for url in set(URLS.values()):
            if not url:
                raise RuntimeError("esbperf.target.url / esbperf.backend.* not set for %s" % TARGET_KIND)
            self.clients[url] = HttpClient(url, TIMEOUT_MS, KEEPALIVE)
        self.errors = 0

    def __call__(self):
        if not self.active:
            grinder.stopThisWorkerThread()
        i = grinder.runNumber % len(REQUESTS)
        request = REQUESTS[i]
        answer = exchange(self.clients[URLS[request.backend]], i)
        statistics = grinder.statistics.forLastTest
        statistics.setLong("userLong1", len(BODIES[i]))
        if isinstance(answer, Exception):
            problem = "no answer: %s" % answer
        else:
            statistics.setLong("userLong0", answer.status)
            statistics.setLong("userLong2", answer.length)
            problem = request.check(answer)
        if problem:
            statistics.success = False
            self.errors += 1
            if self.errors <= ERRORS_LOGGED:
                grinder.logger.warn("%s %s: %s" % (SCENARIO, request.path, problem))

    def __del__(self):
        for client in self.clients.values():
            client.close()
