"""The echo back ends, end to end: real JVMs on every runtime (JAX-WS RI, CXF and lean) started
through esbperf.echo.start_echo, spoken to over real sockets: the contract each must keep."""
from __future__ import annotations

import asyncio
import http.client
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from esbperf.core import procs, scenarios
from esbperf.core.errors import EsbperfError
from esbperf.services.echo import RUNTIME_NAMES, RUNTIMES, echo_process, start_echo, wsdl_answers

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
PORTS = {"jaxws": 18101, "cxf": 18102, "lean": 18104}
NAMES = {"jaxws": "ws1", "cxf": "ws2", "lean": "ws3"}   # different names, so a mix-up would show
LIMIT_MB = 11                            # above the 10 MB raw echo the issue asks for
NS = "http://ws.webservice.korsdrag.datanizze.se/"
SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"


def thesis_envelope(id_: int, message: str, prolog: str = "") -> bytes:
    """The thesis's own request: unqualified id and message inside ws:echoMessage."""
    return (f'{prolog}<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}" xmlns:ws="{NS}"><soapenv:Header/>'
            f"<soapenv:Body><ws:echoMessage><id>{id_}</id><message>{message}</message></ws:echoMessage>"
            "</soapenv:Body></soapenv:Envelope>").encode()


def buy_stocks(size: int) -> bytes:
    """A public-rounds buyStocks order list of exactly `size` bytes."""
    head = (f'<soapenv:Envelope xmlns:soapenv="{SOAP_ENV}"><soapenv:Body>'
            '<m:buyStocks xmlns:m="http://services.samples/xsd">')
    tail = "</m:buyStocks></soapenv:Body></soapenv:Envelope>"
    orders, length = [], len(head) + len(tail)
    while length < size - 120:
        n = len(orders)
        orders.append(f"<order><symbol>IBM</symbol><buyerID>buyer{n}</buyerID>"
                      f"<price>{140 + n % 10}.5</price><volume>{n}</volume></order>")
        length += len(orders[-1])
    text = head + "".join(orders) + tail
    return (text + " " * (size - len(text))).encode()


def ws_response(body: bytes) -> str:
    """The text of echoMessageResponse/WSResponse (unqualified), refusing any DTD."""
    assert b"<!DOCTYPE" not in body.upper()
    node = ET.fromstring(body).find(f"{{{SOAP_ENV}}}Body/{{{NS}}}echoMessageResponse/WSResponse")
    assert node is not None, body[:500]
    return node.text


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


def post(port: int, path: str, body, headers: dict[str, str] | None = None, timeout: float = 30) -> Answer:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        response = conn.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        conn.close()


def soap(port: int, body: bytes, action: str | None = '"echoMessage"', **kw) -> Answer:
    headers = {"Content-Type": "text/xml; charset=utf-8"}
    if action is not None:
        headers["SOAPAction"] = action
    return post(port, "/echo", body, headers, **kw)


@dataclass
class Backend:
    name: str
    port: int
    runtime: str
    process: procs.Process


@pytest.fixture(scope="module", params=RUNTIMES)
def backend(request, tmp_path_factory):
    runtime = request.param
    process = start_echo(NAMES[runtime], HOST, PORTS[runtime], runtime,
                         workdir=tmp_path_factory.mktemp(f"echo-{runtime}"), max_body_mb=LIMIT_MB)
    yield Backend(NAMES[runtime], PORTS[runtime], runtime, process)
    process.stop()
    # 143 = the JVM ended by SIGTERM through its shutdown hook, not killed after the grace period.
    assert process.popen.returncode == 143, process.tail()


def assert_served_by(answer: Answer, backend: Backend) -> None:
    assert answer.headers["X-Echo-Backend"] == backend.name
    assert answer.headers["X-Echo-Runtime"] == backend.runtime


@pytest.mark.parametrize("action", ['"echoMessage"', "echoMessage", '""', '"urn:any-other"', None])
def test_thesis_envelope_answers_with_the_backend_name(backend, action):
    answer = soap(backend.port, thesis_envelope(7, "hello"), action)
    assert answer.status == 200, answer.body
    assert ws_response(answer.body) == f"7 hello [echoed by {backend.name}]"
    assert answer.headers["Content-Type"].startswith("text/xml")
    assert_served_by(answer, backend)


# What the ESBs send the back ends besides the thesis's own envelope: an XML declaration and
# prefixes of their own (Synapse re-serialises), a default namespace, escapes and any Unicode
# (the /transform/json leg), CR LF and tabs.
ESB_ENVELOPES = {
    "declaration": (f"<?xml version='1.0' encoding='UTF-8'?><soapenv:Envelope xmlns:soapenv=\"{SOAP_ENV}\">"
                    f"<soapenv:Body><ns:echoMessage xmlns:ns=\"{NS}\"><id>2</id><message>hi</message>"
                    "</ns:echoMessage></soapenv:Body></soapenv:Envelope>", 2, "hi"),
    "default-namespace": (f'<Envelope xmlns="{SOAP_ENV}"><Header/><Body><echoMessage xmlns="{NS}"><id xmlns="">3</id>'
                          '<message xmlns="">m</message></echoMessage></Body></Envelope>', 3, "m"),
    "escapes-unicode": (thesis_envelope(4, "&lt;a&gt; &amp; \" ' \\ &#233; é ✓ 😀").decode(), 4,
                        "<a> & \" ' \\ é é ✓ 😀"),
    "whitespace": (thesis_envelope(5, "two\r\nlines\tand  spaces ").decode().replace("<id>", "\n  <id>"), 5,
                   "two\nlines\tand  spaces "),
}


@pytest.mark.parametrize("name", ESB_ENVELOPES)
def test_envelopes_the_esbs_send_are_read_alike(backend, name):
    envelope, id_, message = ESB_ENVELOPES[name]
    answer = soap(backend.port, envelope.encode(), '"urn:whatever"')
    assert answer.status == 200, answer.body
    assert ws_response(answer.body) == f"{id_} {message} [echoed by {backend.name}]"
    assert_served_by(answer, backend)


def test_the_lean_echo_answers_the_ris_bytes(tmp_path):
    """The scenarios' requests (contract.py) at 1 KB and 100 KB get the very bytes the RI answers,
    and the WSDL is the RI's (for the same Host, but for the comment that names who publishes it)."""
    contract = scenarios.contract()
    ri = start_echo("ws1", HOST, 18105, "jaxws", workdir=tmp_path / "ri")
    lean = start_echo("ws1", HOST, 18106, "lean", workdir=tmp_path / "lean")
    try:
        for size in (1024, 102400):
            request = contract.thesis_envelope(1, contract.thesis_message(size, 1)).encode()
            answers = [soap(port, request) for port in (18105, 18106)]
            assert answers[0].status == answers[1].status == 200
            assert answers[1].body == answers[0].body
            assert contract.thesis_response(1, contract.thesis_message(size, 1), "ws1").encode() in answers[1].body
        wsdls = []
        for port in (18105, 18106):
            conn = http.client.HTTPConnection(HOST, port, timeout=10)
            conn.request("GET", "/echo?wsdl", headers={"Host": "echo.test:8080"})
            wsdls.append(re.sub(rb"<!--.*?-->", b"", conn.getresponse().read()))
            conn.close()
        assert b'location="http://echo.test:8080/echo"' in wsdls[1]
        assert wsdls[1] == wsdls[0]
    finally:
        lean.stop()
        ri.stop()


@pytest.mark.parametrize("inner, reason", [
    ("<id>1</id>", "no message"),
    ("<message>m</message>", "no id"),
    ("<id>x</id><message>m</message>", "whole number"),
    ("<id>1</id><message>a<b/></message>", "markup"),
], ids=["no-message", "no-id", "bad-id", "markup"])
def test_the_lean_echo_refuses_what_it_cannot_read_unambiguously(tmp_path, inner, reason):
    """Where the SOAP stacks guess (a missing id is 0, a missing message "null"), lean says no."""
    lean = start_echo("ws1", HOST, 18106, "lean", workdir=tmp_path / "lean")
    try:
        body = thesis_envelope(1, "").replace(b"<id>1</id><message></message>", inner.encode())
        answer = soap(18106, body)
        assert answer.status == 500
        fault = ET.fromstring(answer.body).find(f"{{{SOAP_ENV}}}Body/{{{SOAP_ENV}}}Fault")
        assert fault.findtext("faultcode") == "S:Client" and reason in fault.findtext("faultstring")
    finally:
        lean.stop()


def test_wsdl_describes_the_thesis_operation(backend):
    conn = http.client.HTTPConnection(HOST, backend.port, timeout=10)
    conn.request("GET", "/echo?wsdl")
    response = conn.getresponse()
    wsdl = response.read().decode()
    conn.close()
    assert response.status == 200
    assert f'targetNamespace="{NS}"' in wsdl
    assert 'name="echoMessage"' in wsdl and "echoMessageResponse" in wsdl


@pytest.mark.parametrize("size", [1024, 1024 * 1024, 10 * 1024 * 1024], ids=["1KB", "1MB", "10MB"])
def test_raw_echo_is_byte_identical(backend, size):
    payload = buy_stocks(size)
    content_type = 'text/xml; charset=UTF-8; action="urn:buyStocks"'
    answer = post(backend.port, "/raw", payload, {"Content-Type": content_type, "SOAPAction": "urn:buyStocks"})
    assert answer.status == 200
    assert len(answer.body) == size and answer.body == payload
    assert answer.headers["Content-Type"] == content_type
    assert_served_by(answer, backend)


def chunks(data: bytes, size: int = 65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_chunked_requests_are_accepted(backend):
    answer = soap(backend.port, chunks(thesis_envelope(3, "chunked"), 40))
    assert answer.status == 200, answer.body
    assert ws_response(answer.body) == f"3 chunked [echoed by {backend.name}]"
    payload = buy_stocks(300_000)
    raw = post(backend.port, "/raw", chunks(payload), {"Content-Type": "text/xml"})
    assert raw.status == 200 and raw.body == payload


def test_header_names_in_any_case(backend):
    body = thesis_envelope(5, "cases")
    conn = http.client.HTTPConnection(HOST, backend.port, timeout=10)
    conn.putrequest("POST", "/echo", skip_accept_encoding=True)
    conn.putheader("cOnTeNt-TyPe", "text/xml; charset=utf-8")
    conn.putheader("soapaction", '"echoMessage"')
    conn.putheader("CONTENT-LENGTH", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    text = response.read()
    conn.close()
    assert response.status == 200, text
    assert ws_response(text) == f"5 cases [echoed by {backend.name}]"


@pytest.mark.parametrize("body", [
    b"<soapenv:Envelope xmlns:soapenv='http://schemas.xmlsoap.org/soap/envelope/'><soapenv:Body><ws:echo",
    b"not xml at all",
    thesis_envelope(1, "x").replace(b"echoMessage>", b"buyStocks>"),
], ids=["truncated", "not-xml", "unknown-operation"])
def test_bad_requests_get_a_soap_fault_and_the_service_keeps_serving(backend, body):
    answer = soap(backend.port, body)
    assert answer.status == 500
    fault = ET.fromstring(answer.body).find(f"{{{SOAP_ENV}}}Body/{{{SOAP_ENV}}}Fault")
    assert fault is not None, answer.body
    assert_served_by(answer, backend)
    assert soap(backend.port, thesis_envelope(2, "after")).status == 200


class ConnectionCounter:
    """A loopback listener that only counts who connects to it (an XXE would)."""

    def __init__(self):
        self.sock = socket.create_server((HOST, 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


def test_external_entities_are_not_resolved(backend, tmp_path):
    secret = f"SECRET-{os.getpid()}-{time.time_ns()}"
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    listener = ConnectionCounter()
    try:
        attacks = [
            thesis_envelope(1, "&xxe;", f'<!DOCTYPE d [<!ENTITY xxe SYSTEM "{secret_file.as_uri()}">]>'),
            thesis_envelope(1, "&xxe;", f'<!DOCTYPE d [<!ENTITY xxe SYSTEM "http://{HOST}:{listener.port}/e">]>'),
            thesis_envelope(1, "x", f'<!DOCTYPE d SYSTEM "http://{HOST}:{listener.port}/d.dtd">'),
            thesis_envelope(1, "x", f'<!DOCTYPE d [<!ENTITY % p SYSTEM "http://{HOST}:{listener.port}/p"> %p;]>'),
        ]
        for attack in attacks:
            answer = soap(backend.port, attack)
            assert secret.encode() not in answer.body
            assert answer.status == 500, answer.body
        time.sleep(0.3)
        assert listener.connections == 0
    finally:
        listener.close()


def test_bodies_over_the_limit_get_413(backend):
    # Announced too long: refused from the headers alone, before the body is read.
    with socket.create_connection((HOST, backend.port), timeout=10) as sock:
        sock.sendall(f"POST /raw HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: text/xml\r\n"
                     f"Content-Length: {(LIMIT_MB + 1) * 1024 * 1024}\r\n\r\n".encode() + b"<x>" * 300)
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 413
        assert response.headers["X-Echo-Backend"] == backend.name
    # Chunked, so too long only once read: still a 413, on both paths.
    too_long = b" " * ((LIMIT_MB + 1) * 1024 * 1024)
    for path in ("/echo", "/raw"):
        answer = post(backend.port, path, chunks(too_long), {"Content-Type": "text/xml"})
        assert answer.status == 413
        assert_served_by(answer, backend)
    assert soap(backend.port, thesis_envelope(4, "still here")).status == 200


def test_200_concurrent_requests_all_answered_correctly(backend):
    start = threading.Barrier(200, timeout=30)

    def one(i: int) -> str:
        start.wait()
        answer = soap(backend.port, thesis_envelope(i, f"m{i}"))
        assert answer.status == 200
        assert_served_by(answer, backend)
        return ws_response(answer.body)

    with ThreadPoolExecutor(max_workers=200) as pool:
        answers = list(pool.map(one, range(200)))
    assert answers == [f"{i} m{i} [echoed by {backend.name}]" for i in range(200)]


PUBLIC_ROUNDS_USERS = 2560


def test_the_public_rounds_2560_kept_alive_connections_all_stay_open(backend):
    """Every connection is answered, sits idle while all the others are open too, and carries a
    second request: the JDK server closed idle connections beyond 200 (later 1000) and refused
    part of a burst of connects (backlog)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < PUBLIC_ROUNDS_USERS + 200:
        pytest.skip(f"open-file limit {hard} is below {PUBLIC_ROUNDS_USERS} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, PUBLIC_ROUNDS_USERS + 200), hard))

    async def exchange(reader, writer, body: bytes) -> bytes:
        writer.write(b"POST /raw HTTP/1.1\r\nHost: echo\r\nContent-Type: text/xml\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        return await reader.readexactly(length)

    async def main() -> int:
        opened = asyncio.Barrier(PUBLIC_ROUNDS_USERS)
        idle = asyncio.Barrier(PUBLIC_ROUNDS_USERS)

        async def user(i: int) -> int:
            reader, writer = await asyncio.open_connection(HOST, backend.port)
            try:
                await opened.wait()
                first = buy_stocks(1024).replace(b"buyer0", b"u%05d" % i)
                assert await exchange(reader, writer, first) == first
                await idle.wait()          # every connection open and idle at once
                await asyncio.sleep(1)     # past the server's idle-connection bookkeeping
                second = first.replace(b"u%05d" % i, b"v%05d" % i)
                assert await exchange(reader, writer, second) == second
                return 1
            finally:
                writer.close()

        return sum(await asyncio.wait_for(asyncio.gather(*(user(i) for i in range(PUBLIC_ROUNDS_USERS))), 120))

    assert asyncio.run(main()) == PUBLIC_ROUNDS_USERS
    assert soap(backend.port, thesis_envelope(5, "after the crowd")).status == 200


def test_a_port_in_use_is_a_one_line_error(backend):
    with pytest.raises(EsbperfError, match=rf"cannot listen on {HOST}:{backend.port} .*echo back end") as e:
        echo_process("ws9", HOST, backend.port, backend.runtime)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"backend_id": "ws 1"}, "echo id must be"),
    ({"runtime": "axis2"}, "echo runtime must be one of jaxws, cxf, lean"),
    ({"delay_ms": -1}, "echo delay must be"),
], ids=["id", "runtime", "delay"])
def test_bad_settings_are_one_line_errors(kwargs, message):
    args = {"backend_id": "ws1", "host": HOST, "port": 18109, **kwargs}
    with pytest.raises(EsbperfError, match=message):
        echo_process(**args)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_cli_serves_with_a_delay_and_stops_cleanly_on_sigterm(tmp_path, runtime):
    port = {"jaxws": 18107, "cxf": 18103, "lean": 18108}[runtime]
    command = subprocess.Popen([sys.executable, "-m", "esbperf", "echo", "--id", "ws3", "--listen", f"{HOST}:{port}",
                                "--runtime", runtime, "--delay-ms", "300"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, ESBPERF_STATE=str(tmp_path)))
    try:
        deadline = time.monotonic() + 60
        while not wsdl_answers(HOST, port):
            assert command.poll() is None and time.monotonic() < deadline, command.stdout.read()
            time.sleep(0.2)
        began = time.monotonic()
        answer = soap(port, thesis_envelope(9, "slow"))
        assert time.monotonic() - began >= 0.3
        assert ws_response(answer.body) == "9 slow [echoed by ws3]"
    finally:
        command.send_signal(signal.SIGTERM)
        output, _ = command.communicate(timeout=30)
    assert command.returncode == 0, output
    assert f"echo ws3: {RUNTIME_NAMES[runtime]} at http://{HOST}:{port}/echo" in output
    assert not procs.port_open(HOST, port)
