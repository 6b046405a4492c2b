"""Payload files (a user's own request bodies, named by a plan): what a plan accepts and refuses,
how an echo is compared with the file (bytes, envelope, xml), and a run that sends a file through
Synapse's content-based routing with real console, agents and workers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from conftest import ECHO_PORTS, HOST, write_plan
from esbperf.core import plan as plans, scenarios
from esbperf.core.errors import EsbperfError
from esbperf.core.scenarios import Answer

STOCKS_NS = "http://services.samples/xsd"
SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
SYNAPSE_PORT = 16290   # the tests' testbed file (conftest.write_testbed)


def envelope(symbol: str = "IBM", buyer: str = "Zoë") -> str:
    return (f'<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}">\n  <soapenv:Body>\n'
            f'    <m:buyStocks xmlns:m="{STOCKS_NS}"><order><symbol> {symbol} </symbol><buyerID>{buyer} &amp; Co'
            '</buyerID><price>1.50</price><volume>3</volume></order></m:buyStocks>\n  </soapenv:Body>\n'
            '</soapenv:Envelope>')


FILE = ('<?xml version="1.0" encoding="UTF-8"?>\n<!-- an order -->\n' + envelope() + "\n").encode()


# The raw scenarios, the files of a folder as their payloads.
FILES_PLAN = {"scenarios": ["raw", "cbr-raw", "hbr-raw"], "users": [1], "duration_s": 1}


def test_a_plan_sends_a_folders_files_smallest_first_and_records_them_pinned(tmp_path):
    folder = tmp_path / "messages"
    folder.mkdir()
    (folder / "large order.xml").write_bytes(FILE.replace(b"Co<", b"Co" + b"x" * 2000 + b"<"))
    (folder / "small.xml").write_bytes(FILE)
    (folder / "notes.txt").write_text("not a payload")
    (folder / ".hidden.xml").write_text("not a payload either")
    plan = plans.load(write_plan(tmp_path / "files.yaml", FILES_PLAN, payloads=[{"folder": "messages"}, "2KB"]))
    assert [p if isinstance(p, int) else p.label for p in plan.payloads] == ["small", "large_order", 2048]
    assert plan.payload_check == "envelope"   # the default
    steps = plan.steps()
    assert [s.relative_dir().as_posix() for s in steps[:3]] == ["raw/small/1/iter-1", "raw/large_order/1/iter-1",
                                                                 "raw/2KB/1/iter-1"]
    assert steps[0].payload_bytes == len(FILE)
    # run.json keeps each file by path and hash; --resume refuses a file changed meanwhile.
    recorded = plan.to_dict()
    assert recorded["payloads"][0]["sha256"] and recorded["payload_check"] == "envelope"
    assert plans.Plan.from_dict(json.loads(json.dumps(recorded)), "run.json").steps() == steps
    (folder / "small.xml").write_bytes(FILE.replace(b"IBM", b"SUN"))
    with pytest.raises(EsbperfError, match=r"run.json: payloads\[0\]: .*small.xml changed since the run began"):
        plans.Plan.from_dict(recorded, "run.json")


@pytest.mark.parametrize("content, payloads, fields, message", [
    (FILE, [{"file": "missing.xml"}], {}, r"payloads\[0\]: no such file .*missing.xml"),
    (b"", [{"file": "m.xml"}], {}, r"payloads\[0\]: .*m.xml is empty"),
    (b"<a><b></a>", [{"file": "m.xml"}], {}, r"m.xml is refused: it is not well-formed XML"),
    (b'<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>', [{"file": "m.xml"}], {},
     r"m.xml is refused: it has a DOCTYPE"),
    (envelope().replace("buyStocks", "sellStocks").encode(), [{"file": "m.xml"}], {},
     r"m.xml has no buyStocks/order/symbol .*which cbr-raw routes on"),
    (FILE, [{"file": "m.xml"}], {"scenarios": ["raw", "proxy"]},
     r"m.xml cannot be sent in scenario proxy \(scenarios that send payload files: raw, cbr-raw, hbr-raw\)"),
    (FILE, [{"file": "m.xml"}], {"payload_check": "loose"},
     r"field 'payload_check' must be how a payload file's echo is compared: bytes, envelope or xml"),
    (FILE, ["1KB"], {"payload_check": "bytes"}, r"'payload_check' applies only to payload files"),
    (FILE, [{"file": "m.xml", "folder": "."}], {}, r"payloads\[0\]: must be \{file: PATH\} or \{folder: DIR\}"),
    (FILE, [{"folder": "nowhere"}], {}, r"payloads\[0\]: no such folder .*nowhere"),
    (FILE, [{"file": "m.xml"}, len(FILE)], {}, r"payloads\[1\]: .* has the size \d+ bytes of .*m.xml"),
])
def test_a_bad_payload_file_is_one_line_naming_the_plan_and_the_file(tmp_path, content, payloads, fields, message):
    (tmp_path / "m.xml").write_bytes(content)
    with pytest.raises(EsbperfError, match=message) as refused:
        plans.load(write_plan(tmp_path / "files.yaml", FILES_PLAN, payloads=payloads, **fields))
    assert "\n" not in str(refused.value) and "files.yaml" in str(refused.value)


def answer(body: bytes, backend: str = "ws1", status: int = 200) -> Answer:
    return Answer(status, {"x-echo-backend": backend}, body)


def test_each_check_allows_what_it_says_and_nothing_more():
    contract = scenarios.contract()
    root = contract.root_element(FILE)
    assert root == envelope().encode()
    renamed = envelope().replace("soapenv:", "S:").replace("xmlns:soapenv", "xmlns:S").encode()
    variants = {
        "as sent": FILE,
        "envelope alone": root,                                              # what Synapse's /cbr/raw does
        "another declaration": b"<?xml version='1.0' encoding='UTF-8'?>" + root,
        "other prefixes": renamed,
        "a value changed": FILE.replace(b"1.50", b"1.51"),
        "whitespace changed": FILE.replace(b"> IBM <", b">IBM<"),
    }
    allowed = {"bytes": {"as sent"},
               "envelope": {"as sent", "envelope alone", "another declaration"},
               "xml": {"as sent", "envelope alone", "another declaration", "other prefixes"}}
    for how, right in allowed.items():
        [request] = contract.requests_for_file("raw", "esb", FILE, how)
        assert request.path == "/proxy/raw" and request.data == FILE
        verdicts = {name: request.check(answer(body)) for name, body in variants.items()}
        assert {name for name, problem in verdicts.items() if problem is None} == right, (how, verdicts)
        assert request.check(answer(FILE, backend="ws2")) == "answered by ws2, expected ws1"
        # The fast check the workers run in Java accepts only the exact bytes, and only bytes
        # says that a right answer never misses it.
        assert request.expected.body == FILE and request.expected.may_miss == (how != "bytes")
    [request] = contract.requests_for_file("raw", "esb", FILE, "envelope")
    assert request.check(answer(FILE.replace(b"1.50", b"1.51"))) == (
        "the echo differs from the payload file (envelope check: %d bytes answered, %d sent; first difference at "
        "byte %d of the root element)" % (len(FILE), len(FILE), root.index(b"1.50") + 3))


def test_routing_scenarios_send_a_file_where_its_content_or_header_says():
    contract = scenarios.contract()
    to = {s: [(r.backend, r.path, r.headers[2:]) for r in contract.requests_for_file("cbr-raw", "esb", s)]
          for s in (FILE, FILE.replace(b" IBM ", b"MSFT"), FILE.replace(b"IBM", b"ORCL"))}
    assert list(to.values()) == [[("ws1", "/cbr/raw", [])], [("ws2", "/cbr/raw", [])], [("ws3", "/cbr/raw", [])]]
    assert [(r.backend, r.path, r.headers[2:]) for r in contract.requests_for_file("hbr-raw", "direct", FILE)] == [
        ("ws1", "/raw", ["X-Route-To", "ws1"]), ("ws2", "/raw", ["X-Route-To", "ws2"]),
        ("ws3", "/raw", ["X-Route-To", "ws3"])]


@pytest.mark.slow
def test_a_payload_file_runs_through_synapse_routing_and_a_strict_check_refuses_it(grinder, echoes, testbed_file,
                                                                                   tmp_path, request):
    """Real console, agents, workers, Synapse and echoes: the workers send the staged file's bytes,
    Synapse routes it on its first symbol and answers with the envelope alone, the default check
    passes it; with `payload_check: bytes` the run is refused before it starts, naming the byte."""
    from esbperf.services.esb import start_esb

    synapse = start_esb("synapse", HOST, SYNAPSE_PORT,
                        {ws: f"http://{HOST}:{port}" for ws, port in ECHO_PORTS.items()}, workdir=tmp_path / "synapse")
    request.addfinalizer(synapse.stop)
    sent = FILE.replace(b" IBM ", b"MSFT")
    (tmp_path / "order-MSFT.xml").write_bytes(sent)

    def run(check: str) -> subprocess.CompletedProcess:
        plan = tmp_path / f"plan-{check}.yaml"
        plan.write_text(yaml.safe_dump({"name": f"files-{check}", "scenarios": ["cbr-raw"],
                                        "payloads": [{"file": "order-MSFT.xml"}], "payload_check": check,
                                        "users": [2], "duration_s": 3, "warmup_s": 1}))
        return subprocess.run([sys.executable, "-m", "esbperf", "run", "--plan", str(plan), "--target", "synapse",
                               "--testbed", str(testbed_file), "--out", str(tmp_path / "results"), "--no-report"],
                              capture_output=True, text=True, env=dict(os.environ), timeout=300)

    out = run("envelope")
    assert out.returncode == 0, out.stdout + out.stderr
    [run_dir] = (tmp_path / "results").iterdir()
    step = run_dir / "synapse/cbr-raw/order-MSFT/2/iter-1"
    meta = json.loads((step / "step.json").read_text())
    assert meta["payload_label"] == "order-MSFT" and meta["payload_bytes"] == len(sent)
    logs = sorted(step.rglob("*-data.log"))
    assert logs
    data = pl.concat([pl.read_csv(f, separator=",", has_header=True).rename(lambda c: c.strip()) for f in logs])
    assert data.height > 50
    def column(name: str) -> set[int]:
        return {int(v) for v in data[name].to_list()}
    assert column("Request bytes") == {len(sent)}
    assert column("Response bytes") == {len(scenarios.contract().root_element(sent))}   # the envelope alone
    assert column("Errors") == {0}
    assert not list((Path(__file__).parents[1] / "grinder-scripts" / "payload-files").glob("*"))   # unstaged

    refused = run("bytes")
    assert refused.returncode != 0
    assert "target synapse fails verification" in refused.stderr and "bytes check" in refused.stderr
    assert "first difference at byte 1" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
