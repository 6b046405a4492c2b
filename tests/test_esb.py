"""The engines under test, end to end: real Camel, Synapse and Spring Integration JVMs and the
nginx and HAProxy floors (esbperf.services.esb.start_esb) in front of three real echo back ends,
checked with `esbperf verify`'s own code, then pushed to the failure cases of the contract: dead
and silent back ends, XXE payloads (the ESBs: the floors parse nothing), where they listen. Each
engine starts once for the module (twice: a second instance with failing back ends). Last, one
run through the real console and agents draws an ESB, both floors and the baseline side by side."""
from __future__ import annotations

import http.client
import http.server
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import pytest
import yaml
from conftest import ECHO_PORTS as RUN_ECHO_PORTS, child_pids, soap_post, write_testbed

from esbperf.core import plan as plans, procs, topology
from esbperf.services import esb

from esbperf.core.errors import EsbperfError
from esbperf.run import runner, verify
from esbperf.services.echo import start_echo

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
ECHO_PORTS = {"ws1": 19181, "ws2": 19182, "ws3": 19183}
# Every engine of the registry, the ESBs first (their parameter indexes are the same in the tests
# of every engine and in those of the ESBs alone, so each engine still starts once).
ENGINE_PORTS = {"camel": 19280, "synapse": 19290, "spring-integration": 19300, "nginx": 19310, "haproxy": 19320}
FAILING_PORTS = {name: port + 1 for name, port in ENGINE_PORTS.items()}   # instances whose ws2/ws3 are broken
RUN_PORTS = {name: port + 2 for name, port in ENGINE_PORTS.items()}            # in front of conftest's echoes
ENGINES = list(ENGINE_PORTS)
ESBS = [name for name in ENGINES if esb.engine(name).serves is None]
every_engine = pytest.mark.parametrize("esb_name", ENGINES, indirect=True)
esbs_only = pytest.mark.parametrize("esb_name", ESBS, indirect=True)
DEAD_PORT, SILENT_PORT, DTD_PORT = 19197, 19198, 19199
SHORT_TIMEOUT_S = 3   # a back end's timeout given to the failing instances (the engines' default: 120 s)
SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
THESIS_NS = "http://ws.webservice.korsdrag.datanizze.se/"
STOCKS_NS = "http://services.samples/xsd"


# This file's requests name an action of their own.
post = partial(soap_post, soap_action='"test"')


def thesis(id_: int, message: str, prolog: str = "") -> bytes:
    return (f'{prolog}<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}" xmlns:ws="{THESIS_NS}"><soapenv:Body>'
            f"<ws:echoMessage><id>{id_}</id><message>{message}</message></ws:echoMessage>"
            "</soapenv:Body></soapenv:Envelope>").encode()


def stocks(symbol: str, prolog: str = "") -> bytes:
    return (f'{prolog}<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}"><soapenv:Body><m:buyStocks xmlns:m="{STOCKS_NS}">'
            f"<order><symbol>{symbol}</symbol><buyerID>b1</buyerID><price>1.5</price><volume>3</volume></order>"
            "</m:buyStocks></soapenv:Body></soapenv:Envelope>").encode()


def esb_testbed(folder) -> topology.Testbed:
    """A testbed file naming this module's ESBs and echoes, loaded."""
    path = folder / "esb-tests.yaml"
    path.write_text(yaml.safe_dump({
        "name": "esb-tests",
        "hosts": {"client": {"address": HOST}, "esb": {"address": HOST, "esb_ports": ENGINE_PORTS},
                  **{ws: {"address": HOST, "echo_port": port} for ws, port in ECHO_PORTS.items()}},
        "targets": {name: {"kind": "esb", "esb": name} for name in ENGINE_PORTS},
    }))
    return topology.load(path)


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    """ws1, ws2, ws3: real JAX-WS echo services."""
    work = tmp_path_factory.mktemp("esb-echoes")
    started = []
    try:
        for ws, port in ECHO_PORTS.items():
            started.append(start_echo(ws, HOST, port, workdir=work / ws))
        yield {ws: f"http://{HOST}:{port}" for ws, port in ECHO_PORTS.items()}
    finally:
        for process in reversed(started):
            process.stop()


@pytest.fixture(scope="module")
def esb_name(request):
    """The engine under test: each test says which (every_engine, esbs_only)."""
    return request.param


def serves(name: str, scenario: str) -> bool:
    return not esb.unserved(name, [scenario])


@pytest.fixture(scope="module")
def running(esb_name, backends, tmp_path_factory):
    """The engine on its test port with the three real back ends."""
    process = esb.start_esb(esb_name, HOST, ENGINE_PORTS[esb_name], backends,
                            workdir=tmp_path_factory.mktemp(f"{esb_name}-esb"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def failing(esb_name, backends, silent_backend, tmp_path_factory):
    """The engine with a short back-end timeout: ws2 is a port where nothing listens, ws3 never answers."""
    assert not procs.port_open(HOST, DEAD_PORT)
    process = esb.start_esb(esb_name, HOST, FAILING_PORTS[esb_name],
                            {"ws1": backends["ws1"], "ws2": f"http://{HOST}:{DEAD_PORT}", "ws3": silent_backend},
                            workdir=tmp_path_factory.mktemp(f"{esb_name}-failing"),
                            backend_timeout_s=SHORT_TIMEOUT_S)
    # One request through first: a cold JVM on a busy machine is not what the timings are about.
    assert post(FAILING_PORTS[esb_name], "/proxy/echo", thesis(1, "warm-up"))[0] == 200
    yield FAILING_PORTS[esb_name]
    process.stop()


@every_engine
def test_verify_passes_on_every_scenario_it_serves(esb_name, running, tmp_path):
    testbed = esb_testbed(tmp_path)
    expected = [n for n in verify.scenarios.names() if serves(esb_name, n)]
    assert len(expected) == (8 if esb_name in ESBS else 4)
    for size in (1024, 100 * 1024, 1024 * 1024):
        outcomes = verify.verify_target(testbed, esb_name, size=size, timeout=30)
        assert {o.scenario for o in outcomes} == set(expected)
        failed = [f"{o.scenario} {o.backend}: {o.detail}" for o in outcomes if not o.ok]
        assert not failed, f"{esb_name} at {size} bytes"


@every_engine
def test_the_verify_command_says_what_a_floor_skips(esb_name, running, tmp_path):
    testbed = esb_testbed(tmp_path)
    result = subprocess.run([sys.executable, "-m", "esbperf", "verify", "--target", esb_name, "--testbed",
                             str(testbed.path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    served = 8 if esb_name in ESBS else 4
    assert re.fullmatch(rf"verify {esb_name}: all \d+ checks passed \({served} scenarios\)",
                        result.stdout.splitlines()[-1]), result.stdout   # the verdict, last
    skipped = [line for line in result.stdout.splitlines() if line.startswith(f"verify {esb_name}: skipped")]
    if esb_name in ESBS:
        assert not skipped
    else:
        assert skipped == [f"verify {esb_name}: skipped cbr, json, xslt, cbr-raw (floor {esb_name} serves only "
                           "proxy, hbr, raw, hbr-raw)"]


@every_engine
def test_the_shipped_payload_files_pass_verify_and_synapse_keeps_only_the_envelope(esb_name, running, tmp_path):
    """The public rounds' messages as people write them (declaration, comment, indentation,
    non-ASCII): the envelope comes back byte for byte through every engine (the default check).
    Camel, Spring Integration and the floors forward the file whole; Synapse, which parses
    /cbr/raw's message to route it, drops what is around the envelope, and the strict `bytes`
    check says so (docs/running.md)."""
    testbed = esb_testbed(tmp_path)
    files = plans.load("public-rounds-files").payload_files()
    assert [f.size for f in files] == [512, 1024, 5120, 10240, 102400]
    for f in files:
        data = f.read()
        assert data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>') and b"<!--" in data and "Groß".encode() in data
    raw = [n for n in ("raw", "cbr-raw", "hbr-raw") if serves(esb_name, n)]
    outcomes = verify.verify_target(testbed, esb_name, raw, timeout=30, files=files, check="envelope")
    # Generated 1 KB: raw, cbr-raw × 3 symbols, hbr-raw × 3 back ends; each file: raw, cbr-raw, hbr-raw × 3.
    assert len(outcomes) == (7 + len(files) * 5 if "cbr-raw" in raw else 4 + len(files) * 4)
    assert not [f"{o.scenario} {o.backend}: {o.detail}" for o in outcomes if not o.ok]
    strict = [o for o in verify.verify_target(testbed, esb_name, raw, timeout=30, files=files[:1], check="bytes")
              if not o.ok]
    if esb_name != "synapse":
        assert not strict
    else:
        [failed] = strict
        assert failed.scenario == "cbr-raw"
        assert re.search(r"bytes check: 419 bytes answered, 512 sent; first difference at byte 1\)", failed.detail), failed


@every_engine
def test_routing_errors_are_error_answers(esb_name, running):
    port = ENGINE_PORTS[esb_name]
    if serves(esb_name, "cbr"):
        status, _, body = post(port, "/cbr/echo", thesis(7, "no such back end"))
        assert status == 500 and b"Fault" in body
    for path in ("/hbr/echo", "/hbr/raw"):
        for headers in ({}, {"X-Route-To": "ws9"}, {"X-Route-To": "ws1,ws2"}):
            status, _, _ = post(port, path, thesis(1, "x"), headers)
            assert status == 400, (path, headers)


@every_engine
def test_back_end_errors_stay_errors(esb_name, running):
    """A SOAP fault from the echo (an operation it does not have) must reach the client as one."""
    unknown_operation = (f'<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}"><soapenv:Body>'
                         f'<ws:noSuchOperation xmlns:ws="{THESIS_NS}"/></soapenv:Body></soapenv:Envelope>').encode()
    for path, headers, backend in (("/proxy/echo", {}, "ws1"), ("/hbr/echo", {"X-Route-To": "ws2"}, "ws2")):
        status, answer_headers, body = post(ENGINE_PORTS[esb_name], path, unknown_operation, headers)
        assert status >= 500 and b"noSuchOperation" in body, path
        assert answer_headers.get("x-echo-backend") == backend


@every_engine
def test_large_answers_one_after_another_on_a_kept_alive_connection(esb_name, running):
    """Synapse 3.0.1's own sender could leave a back-end connection unreadable after a large
    answer, and the next request on it hung (esb-projects/README.md): requests in a row, on one
    client connection, must all come back."""
    connection = http.client.HTTPConnection(HOST, ENGINE_PORTS[esb_name], timeout=10)
    try:
        for size in (16 * 1024, 1024 * 1024):
            body = verify.scenarios.contract().buy_stocks(size, "IBM").encode()
            for attempt in range(6):
                connection.request("POST", "/proxy/raw", body, {"Content-Type": "text/xml; charset=UTF-8",
                                                                "SOAPAction": '"buyStocks"'})
                response = connection.getresponse()
                assert response.status == 200 and response.read() == body, f"{size} bytes, request {attempt + 1}"
    finally:
        connection.close()


@every_engine
def test_dead_and_silent_back_ends_give_errors_within_the_timeout(esb_name, failing):
    for attempt in range(2):   # the second try is as quick: a failure is not remembered
        started = time.monotonic()
        status, headers, body = post(failing, "/hbr/echo", thesis(2, "x"), {"X-Route-To": "ws2"})
        elapsed = time.monotonic() - started
        assert status == 502 and b"Fault" in body, body[:200]
        assert elapsed < SHORT_TIMEOUT_S, f"the dead back end's error came after {elapsed:.1f} s"
        assert "x-echo-backend" not in headers
    # A route that parses the body where the engine can (cbr-raw), else one that does not (hbr-raw).
    routed = ("/cbr/raw", stocks("SUN"), None) if serves(esb_name, "cbr-raw") else ("/hbr/raw", stocks("SUN"), "ws3")
    for path, body, route in (("/hbr/echo", thesis(3, "x"), "ws3"), routed):
        started = time.monotonic()
        status, _, answer = post(failing, path, body, {"X-Route-To": route} if route else {})
        elapsed = time.monotonic() - started
        assert status == 504 and b"Fault" in answer, answer[:200]
        assert SHORT_TIMEOUT_S - 0.5 < elapsed < SHORT_TIMEOUT_S + 2.5, f"{path} answered after {elapsed:.1f} s"
    # ws1 is fine, and still reachable through the same instance
    status, headers, _ = post(failing, "/proxy/echo", thesis(1, "still here"))
    assert status == 200 and headers.get("x-echo-backend") == "ws1"


class _DtdServer(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []
    entity = ""

    def do_GET(self):
        type(self).requests.append(self.path)
        body = self.entity.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml-dtd")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def dtd_server(tmp_path):
    """A local HTTP server offering a DTD that would read a secret file; records every fetch."""
    secret = f"secret-{uuid.uuid4().hex}"
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    _DtdServer.requests = []
    _DtdServer.entity = f'<!ENTITY xxe SYSTEM "{secret_file.as_uri()}">'
    class Server(http.server.ThreadingHTTPServer):
        allow_reuse_address = False   # a stale listener on the port would take some fetches

    server = Server((HOST, DTD_PORT), _DtdServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield secret, secret_file.as_uri(), f"http://{HOST}:{DTD_PORT}/evil.dtd"
    server.shutdown()
    server.server_close()


@esbs_only
def test_xxe_reads_nothing_through_cbr_and_xslt(esb_name, running, dtd_server):
    secret, secret_uri, dtd_url = dtd_server
    prologs = [
        f'<?xml version="1.0"?><!DOCTYPE soapenv:Envelope [<!ENTITY xxe SYSTEM "{secret_uri}">]>',
        f'<?xml version="1.0"?><!DOCTYPE soapenv:Envelope SYSTEM "{dtd_url}">',
        f'<?xml version="1.0"?><!DOCTYPE soapenv:Envelope [<!ENTITY % remote SYSTEM "{dtd_url}"> %remote;]>',
    ]
    port = ENGINE_PORTS[esb_name]
    for prolog in prologs:
        for path, body in (("/cbr/echo", thesis(1, "&xxe;", prolog)), ("/cbr/raw", stocks("&xxe;", prolog)),
                           ("/transform/xslt", stocks("&xxe;", prolog))):
            status, _, answer = post(port, path, body)
            assert secret.encode() not in answer, f"{path} leaked the file with {prolog}"
            if path.startswith("/cbr"):
                assert status >= 400, f"{path} routed a request with a DTD"
    assert _DtdServer.requests == [], "a DTD was fetched"


@every_engine
def test_listens_only_where_told_and_its_monitor_finds_it(esb_name, running):
    port = ENGINE_PORTS[esb_name]
    assert procs.port_open(HOST, port)
    # Every address of 127/8 reaches this host: only a bind to all interfaces answers here.
    assert not procs.port_open("127.0.0.2", port)
    ours = {running.pid, *child_pids(running.pid)}   # nginx: its master and its workers
    if shutil.which("ss"):
        listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        addresses = [line.split()[3] for line in listening.splitlines()
                     if any(f"pid={pid}," in line for pid in ours)]
        # e.g. [::ffff:127.0.0.1]:19290 (a Java socket bound to an IPv4 address)
        bound = {address.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:") + ":" + address.rsplit(":", 1)[1]
                 for address in addresses}
        assert bound == {f"{HOST}:{port}"}, addresses
    # The esb host's monitor (--match) finds the engine's processes by their command lines.
    match = esb.engine(esb_name).match
    for pid in ours:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        assert match in b" ".join(args).decode(errors="replace"), (pid, args)


def test_bad_input_is_refused_in_one_line(backends):
    with pytest.raises(EsbperfError, match=r"unknown engine 'mule' \(ESBs: camel, spring-integration, synapse; "
                                           r"floors: haproxy, nginx; "):
        esb.esb_process("mule", HOST, 19289, backends)
    with pytest.raises(EsbperfError, match="ESB spring-integration port must be 1-65535"):
        esb.esb_process("spring-integration", HOST, 0, backends)
    with pytest.raises(EsbperfError, match="ws3"):
        esb.esb_process("nginx", HOST, 19289, {"ws1": backends["ws1"], "ws2": backends["ws2"]})
    with pytest.raises(EsbperfError, match="ws3"):
        esb.esb_process("camel", HOST, 19289, {"ws1": backends["ws1"], "ws2": backends["ws2"]})
    with pytest.raises(EsbperfError, match="http://HOST:PORT"):
        esb.esb_process("camel", HOST, 19289, {**backends, "ws1": "ftp://x"})
    with pytest.raises(EsbperfError, match="in use"):
        with socket.socket() as taken:
            taken.bind((HOST, 19289))
            taken.listen(1)
            esb.esb_process("synapse", HOST, 19289, backends)


def test_one_run_draws_an_esb_both_floors_and_the_baseline(grinder, echoes, tmp_path):
    """The issue's acceptance run: `--target spring-integration --target haproxy --target nginx
    --target direct` on the proxy scenario, through the real console and agents, makes one report
    whose every throughput and response-time graph has the four curves."""
    targets = ["spring-integration", "haproxy", "nginx"]
    echo_urls = {ws: f"http://{HOST}:{port}" for ws, port in RUN_ECHO_PORTS.items()}
    started = []
    try:
        for name in targets:
            started.append(esb.start_esb(name, HOST, RUN_PORTS[name], echo_urls, workdir=tmp_path / name))
        path = write_testbed(tmp_path / "four.yaml", RUN_ECHO_PORTS)
        data = yaml.safe_load(path.read_text())
        data["hosts"]["esb"]["esb_ports"] = {name: RUN_PORTS[name] for name in targets}
        data["targets"] = {"direct": {"kind": "direct"}, **{name: {"kind": "esb", "esb": name} for name in targets}}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        plan_file = tmp_path / "four-curves.yaml"
        plan_file.write_text(yaml.safe_dump({"name": "four-curves", "scenarios": ["proxy"], "payloads": ["1KB"],
                                             "users": [1, 3], "duration_s": 2, "warmup_s": 2, "timeout_s": 10}))
        run_dir = runner.start(plans.load(plan_file), [*targets, "direct"], topology.load(path), tmp_path / "results")
    finally:
        for process in reversed(started):
            process.stop()
    from esbperf.analysis.report import write_report

    record = yaml.safe_load((run_dir / "run.json").read_text())
    assert [t["name"] for t in record["targets"]] == [*targets, "direct"]
    # (A step the busy machine's workers were too slow to start is kept aside, not lost: the
    # curves stay, with a point fewer.)
    report = write_report([run_dir], tmp_path / "report")
    drawn = sorted(p for p in (report / "graphs").glob("proxy-*.svg") if "tps" in p.name or "response-time" in p.name)
    assert len(drawn) >= 2, sorted(p.name for p in (report / "graphs").iterdir())
    for svg in drawn:
        ids = {e.get("id") for e in ET.parse(svg).iter() if e.get("id")}
        assert {f"series-{t}" for t in [*targets, "direct"]} <= ids, svg.name
