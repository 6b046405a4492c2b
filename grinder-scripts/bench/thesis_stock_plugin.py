# -*- coding: utf-8 -*-
"""Benchmark only (docs/thesis.md): the 2012 thesis's client — The Grinder's stock HTTP plugin
POSTing the thesis envelope — run by `esbperf run --script`, through the ESB's proxy or straight
at ws1, so its figures sit beside esbperf's own client on the same steps.

`esbperf.per_run` POSTs per run: the plugin closes its connections as each run begins, so 1 opens
a new connection per request (the thesis's scripts) and 3 sends the second and third on a reused
one, as an ESB's own HTTP client does towards its back end."""
from net.grinder.plugin.http import HTTPPluginControl, HTTPRequest
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder
from HTTPClient import NVPair

from contract import thesis_envelope, thesis_message, thesis_response

properties = grinder.properties
TARGET = properties.getProperty("esbperf.target.url")
URL = TARGET + "/proxy/echo" if TARGET else properties.getProperty("esbperf.backend.ws1") + "/echo"
SIZE = properties.getInt("esbperf.payload.bytes", 1024)
PER_RUN = properties.getInt("esbperf.per_run", 1)
MESSAGE = thesis_message(SIZE, 1)
ENVELOPE = thesis_envelope(1, MESSAGE)
EXPECTED = thesis_response(1, MESSAGE, "ws1")
HEADERS = (NVPair("Content-Type", "text/xml; charset=UTF-8"), NVPair("SOAPAction", '""'))

HTTPPluginControl.getConnectionDefaults().timeout = 10000
request = HTTPRequest()
Test(1, "echoMessage, stock HTTP plugin").record(request)


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1

    def __call__(self):
        for _ in range(PER_RUN):
            answer = request.POST(URL, ENVELOPE, HEADERS)
            if answer.statusCode != 200 or answer.getText().find(EXPECTED) < 0:
                grinder.statistics.forLastTest.success = 0
            grinder.statistics.report()
