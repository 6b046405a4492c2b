# -*- coding: utf-8 -*-
"""Benchmark only: the same raw-echo POST through The Grinder's own HTTP plugin, to compare
with the esbperf client (bench_grinder.py). The plugin closes its connections when each run
begins, so keep-alive here means several requests per run (esbperf.bench.per_run)."""
from net.grinder.plugin.http import HTTPPluginControl, HTTPRequest
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder
from HTTPClient import NVPair

properties = grinder.properties
URL = properties.getProperty("esbperf.backend.ws1") + "/raw"
SIZE = properties.getInt("esbperf.payload.bytes", 1024)
PER_RUN = properties.getInt("esbperf.bench.per_run", 1)
BODY = ("x" * SIZE).encode("ascii")

HTTPPluginControl.getConnectionDefaults().timeout = 10000
request = HTTPRequest(url=URL, headers=[NVPair("Content-Type", "text/xml; charset=UTF-8"),
                                        NVPair("SOAPAction", '"bench"')])
Test(9, "raw echo via the Grinder HTTP plugin").record(request)


class TestRunner:
    def __init__(self):
        grinder.statistics.delayReports = 1

    def __call__(self):
        for _ in range(PER_RUN):
            answer = request.POST(URL, BODY)
            if answer.statusCode != 200 or len(answer.data) != SIZE:
                grinder.statistics.forLastTest.success = False
