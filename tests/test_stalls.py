"""The delayed-ACK stall made visible (issue 27.6): The Grinder's stock HTTP plugin — the client the
2012 thesis used — POSTs headers and body in two writes, so on a reused connection each POST waits
for the peer's delayed acknowledgement (~40 ms on Linux). A user's script doing exactly that runs
through `esbperf run --script` against a real echo; the report names the step with the stall
warning, while a step of esbperf's own client on the same echo has none. The rule itself is tested
on hand-made histograms."""
from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest
import yaml

from conftest import ECHO_PORTS, HOST
from esbperf.analysis import stalls
from esbperf.results.histogram import Histogram

# Three POSTs per run: the plugin closes its connections as each run begins, so the second and the
# third go on a reused one (one new connection per run is what the thesis-era scripts did).
STOCK_PLUGIN_SCRIPT = '''\
from net.grinder.script import Test
from net.grinder.script.Grinder import grinder
from net.grinder.plugin.http import HTTPRequest
from HTTPClient import NVPair

URL = "http://%(host)s:%(port)d/echo"
ENVELOPE = ('<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
            'xmlns:ws="http://ws.webservice.korsdrag.datanizze.se/"><soapenv:Header/><soapenv:Body>'
            '<ws:echoMessage><id>1</id><message>%(message)s</message></ws:echoMessage>'
            '</soapenv:Body></soapenv:Envelope>')
HEADERS = (NVPair("Content-Type", "text/xml; charset=UTF-8"), NVPair("SOAPAction", '""'))
request = HTTPRequest()
Test(1, "echoMessage, stock HTTP plugin").record(request)


class TestRunner:
    def __call__(self):
        for _ in range(3):
            request.POST(URL, ENVELOPE, HEADERS)
'''


def test_the_rule_on_hand_made_histograms():
    at_timer = Histogram.of([41_000 + i for i in range(60)] + [900 + i for i in range(40)])   # 60 % at ~41 ms
    assert stalls.share_in_bands(at_timer)[0] == pytest.approx(0.6)
    assert stalls.stalls(at_timer, target_cpu_percent=5.0)
    assert not stalls.stalls(at_timer, target_cpu_percent=95.0), "a busy target is working, not waiting"
    assert stalls.stalls(at_timer, target_cpu_percent=None), "no monitor: the rule goes by the times alone"
    windows = Histogram.of([203_000] * 30 + [1_000] * 70)
    assert stalls.stalls(windows, 3.0) and "Windows" in stalls.share_in_bands(windows)[1]
    spread = Histogram.of(list(range(1_000, 100_000, 100)))   # evenly spread: a slow target, no pile-up
    assert not stalls.stalls(spread, 3.0)


@pytest.mark.slow
def test_the_stock_http_plugins_stall_is_named_in_the_report(grinder, echoes, testbed_file, tmp_path):
    script = tmp_path / "stock_plugin.py"
    script.write_text(STOCK_PLUGIN_SCRIPT % {"host": HOST, "port": ECHO_PORTS["ws1"], "message": "x" * 800})
    plan = tmp_path / "stalled.yaml"
    plan.write_text(yaml.safe_dump({"name": "stalled", "users": [1], "duration_s": 4, "warmup_s": 2}))
    out = subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(plan), "--target", "direct",
                          "--testbed", str(testbed_file), "--script", str(script), "--out", str(tmp_path / "results")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [run_dir] = (tmp_path / "results").iterdir()
    [row] = pl.read_csv(run_dir / "report" / "summary.csv").rows(named=True)
    assert row["stall_share"] > 0.5, row["stall_share"]   # two POSTs of three wait out the timer
    assert row["delayed_ack_stall"]
    html = (run_dir / "report" / "report.html").read_text()
    assert "delayed ACK" in html and "stock_plugin" in html
