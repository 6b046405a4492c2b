# -*- coding: utf-8 -*-
"""The scenarios of the ESB contract (esb-projects/README.md): for each one, the requests a
client sends and how each answer is checked, for an ESB target or the `direct` baseline.

Written in the common subset of Python 2.7 and 3: Grinder workers run it under Jython 2.7
(grinder-scripts/scenario.py) and `esbperf verify` under CPython, so the contract is coded
once. Answers are checked through a small interface both sides provide:
    answer.status        HTTP status (int)
    answer.header(name)  a header's value, any case of name, or None
    answer.text          the body as text
"""
# Unicode text under Jython too: the answer's text is unicode, and comparing it with a byte
# string would decode the whole request again for every transaction.
from __future__ import unicode_literals

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
THESIS_NS = "http://ws.webservice.korsdrag.datanizze.se/"
STOCKS_NS = "http://services.samples/xsd"
BACKENDS = ("ws1", "ws2", "ws3")
SOAP_CONTENT_TYPE = "text/xml; charset=UTF-8"
JSON_CONTENT_TYPE = "application/json"

# Grinder test number and description of each scenario (one test per scenario).
SCENARIOS = [
    ("proxy", 1, "direct proxy, thesis envelope -> ws1"),
    ("cbr", 2, "content-based routing on id 1/2/3 -> ws1/ws2/ws3"),
    ("hbr", 3, "header-based routing (X-Route-To) -> ws1/ws2/ws3"),
    ("json", 4, "transformation: JSON request -> SOAP call -> JSON answer"),
    ("xslt", 5, "transformation: XSLT on request and answer, buyStocks"),
    ("raw", 6, "direct proxy, raw buyStocks payload -> ws1"),
    ("cbr-raw", 7, "content-based routing on the first order's symbol"),
    ("hbr-raw", 8, "header-based routing of a raw buyStocks payload"),
]
SCENARIO_NAMES = [s[0] for s in SCENARIOS]

_FILLER = "esbperf thesis payload "
_SYMBOLS = {"ws1": "IBM", "ws2": "MSFT", "ws3": "SUN"}


def test_number(scenario):
    for name, number, _ in SCENARIOS:
        if name == scenario:
            return number
    raise ValueError("unknown scenario %r (known: %s)" % (scenario, ", ".join(SCENARIO_NAMES)))


def description(scenario):
    for name, _, text in SCENARIOS:
        if name == scenario:
            return text
    raise ValueError("unknown scenario %r" % scenario)


def _filler(n):
    if n <= 0:
        return ""
    return (_FILLER * (n // len(_FILLER) + 1))[:n]


def thesis_envelope(ident, message):
    return ('<soapenv:Envelope xmlns:soapenv="%s" xmlns:ws="%s"><soapenv:Header/><soapenv:Body>'
            '<ws:echoMessage><id>%d</id><message>%s</message></ws:echoMessage>'
            '</soapenv:Body></soapenv:Envelope>' % (SOAP_ENV, THESIS_NS, ident, message))


def thesis_message(size, ident):
    """The message that makes the thesis envelope `size` bytes long (ASCII, so bytes = chars)."""
    return _filler(size - len(thesis_envelope(ident, "")))


def json_request(ident, message):
    # Written by hand so both Pythons produce the same bytes; message is plain ASCII filler.
    return '{"id": %d, "message": "%s"}' % (ident, message)


def buy_stocks(size, first_symbol):
    """A public-rounds buyStocks envelope of about `size` bytes (never more, at least one order)."""
    head = ('<soapenv:Envelope xmlns:soapenv="%s"><soapenv:Header/><soapenv:Body>'
            '<m:buyStocks xmlns:m="%s">' % (SOAP_ENV, STOCKS_NS))
    tail = '</m:buyStocks></soapenv:Body></soapenv:Envelope>'
    def order(i, pad=0):
        symbol = first_symbol if i == 0 else ("SYM%d" % (i % 1000))
        return ('<order><symbol>%s</symbol><buyerID>buyer-%d%s</buyerID><price>%d.%02d</price>'
                '<volume>%d</volume></order>' % (symbol, i, _filler(pad), 100 + i % 900, i % 100, 1000 + i))
    orders = []
    length = len(head) + len(tail)
    while not orders or length + len(order(len(orders))) <= size:
        orders.append(order(len(orders)))
        length += len(orders[-1])
    # Pad the last buyer's ID so the envelope is exactly `size` bytes when it can be.
    if size > length:
        orders[-1] = order(len(orders) - 1, size - length)
    return head + "".join(orders) + tail


class Expected(object):
    """A sufficient condition for a right answer, cheap enough for every transaction: HTTP 200,
    the X-Echo-Backend header equal to `backend` (unless None), the body equal to `body` (unless
    None) and holding `contains` (unless None). The workers test it in Java on the raw bytes
    (esbperf.client.Expected); an answer that fails it goes to the request's `check`, which
    decides and says why. So an answer that meets it must pass `check` (tests/test_timing.py)."""

    def __init__(self, backend=None, body=None, contains=None):
        self.backend = backend
        self.body = body
        self.contains = contains


class Request(object):
    """One request of a scenario: where it goes, what it carries, and how its answer is checked.

    backend: for the `direct` target, the echo service it is sent to; for an ESB, the one that
    must have answered. path: on the ESB or, for `direct`, on that back end. expected: an
    Expected, or None when only `check` can tell a right answer.
    """

    def __init__(self, backend, path, content_type, headers, body, check, expected=None):
        self.backend = backend
        self.path = path
        self.content_type = content_type
        self.headers = headers          # [name, value, name, value, ...]
        self.body = body                # text
        self.check = check              # answer -> None if right, else a one-line reason
        self.expected = expected

    def __repr__(self):
        return "Request(%s %s, %d chars)" % (self.backend, self.path, len(self.body))


def _soap_headers(action):
    return ["SOAPAction", '"%s"' % action]


def _status_problem(answer):
    if answer.status != 200:
        return "HTTP %d: %s" % (answer.status, answer.text[:200].replace("\n", " "))
    return None


def _check_backend_header(answer, backend):
    got = answer.header("X-Echo-Backend")
    if got != backend:
        return "answered by %s, expected %s" % (got, backend)
    return None


def thesis_response(ident, message, backend):
    """What the echo's answer to the thesis envelope must hold."""
    return "<WSResponse>%d %s [echoed by %s]</WSResponse>" % (ident, message, backend)


def check_thesis(ident, message, backend):
    expected = thesis_response(ident, message, backend)

    def check(answer):
        problem = _status_problem(answer)
        if problem:
            return problem
        text = answer.text
        if expected in text:
            return None
        marker = text.find("[echoed by ")
        if marker >= 0:
            who = text[marker + 11:text.find("]", marker)]
            if who != backend:
                return "answered by %s, expected %s" % (who, backend)
        return "WSResponse is not the echo of the request (%d chars answered)" % len(text)
    return check


def check_json(ident, message, backend):
    expected = "%d %s [echoed by %s]" % (ident, message, backend)

    def check(answer):
        problem = _status_problem(answer)
        if problem:
            return problem
        import json
        try:
            doc = json.loads(answer.text)
        except ValueError:
            return "answer is not JSON: %s" % answer.text[:100]
        got = doc.get("WSResponse") if isinstance(doc, dict) else None
        if got == expected:
            return None
        if isinstance(got, type(expected)) and "[echoed by " in got and not got.endswith("[echoed by %s]" % backend):
            return "answered by %s, expected %s" % (got[got.rfind("[echoed by ") + 11:-1], backend)
        return "JSON WSResponse is not the echo of the request"
    return check


def check_raw(body, backend):
    def check(answer):
        problem = _status_problem(answer) or _check_backend_header(answer, backend)
        if problem:
            return problem
        if answer.text != body:
            return "the echoed envelope differs from the request (%d vs %d chars)" % (len(answer.text), len(body))
        return None
    return check


def check_stocks(body, backend):
    """XSLT round trip: the answer is a buyStocks with the same orders (serialisation may differ)."""
    orders = body.count("<symbol>")
    first = body[body.find("<symbol>") + 8:body.find("</symbol>")]

    def check(answer):
        problem = _status_problem(answer) or _check_backend_header(answer, backend)
        if problem:
            return problem
        text = answer.text
        if STOCKS_NS not in text or "buyStocks" not in text:
            return "answer is not a buyStocks document"
        if text.count("<symbol>") != orders:
            return "answer has %d orders, expected %d" % (text.count("<symbol>"), orders)
        if "<symbol>%s</symbol>" % first not in text:
            return "first order's symbol %s is missing from the answer" % first
        return None
    return check


def requests_for(scenario, target_kind, size):
    """The requests a worker cycles through for `scenario` at payload `size` bytes.

    target_kind is "esb" (paths on the ESB) or "direct" (the no-ESB baseline: the same
    payloads straight to the back end the ESB would have chosen; the script does the routing).
    """
    if target_kind not in ("esb", "direct"):
        raise ValueError("target kind must be 'esb' or 'direct', not %r" % target_kind)
    esb = target_kind == "esb"
    out = []
    if scenario in ("proxy", "cbr", "hbr"):
        for n, backend in enumerate(BACKENDS):
            ident = n + 1
            if scenario == "proxy":
                ident, backend = 1, "ws1"
            message = thesis_message(size, ident)
            headers = _soap_headers("echoMessage")
            if scenario == "hbr":
                headers = headers + ["X-Route-To", backend]
            path = "/%s/echo" % scenario if esb else "/echo"
            out.append(Request(backend, path, SOAP_CONTENT_TYPE, headers, thesis_envelope(ident, message),
                               check_thesis(ident, message, backend),
                               Expected(contains=thesis_response(ident, message, backend))))
            if scenario == "proxy":
                break
    elif scenario == "json":
        message = _filler(size - len(json_request(1, "")))
        if esb:
            out.append(Request("ws1", "/transform/json", JSON_CONTENT_TYPE, [], json_request(1, message),
                               check_json(1, message, "ws1")))
        else:
            out.append(Request("ws1", "/echo", SOAP_CONTENT_TYPE, _soap_headers("echoMessage"),
                               thesis_envelope(1, message), check_thesis(1, message, "ws1"),
                               Expected(contains=thesis_response(1, message, "ws1"))))
    elif scenario in ("raw", "xslt"):
        body = buy_stocks(size, "IBM")
        path = ("/proxy/raw" if scenario == "raw" else "/transform/xslt") if esb else "/raw"
        if scenario == "raw" or not esb:
            check, expected = check_raw(body, "ws1"), Expected("ws1", body=body)
        else:
            check, expected = check_stocks(body, "ws1"), None
        out.append(Request("ws1", path, SOAP_CONTENT_TYPE, _soap_headers("buyStocks"), body, check, expected))
    elif scenario in ("cbr-raw", "hbr-raw"):
        for backend in BACKENDS:
            body = buy_stocks(size, _SYMBOLS[backend])
            headers = _soap_headers("buyStocks")
            if scenario == "hbr-raw":
                headers = headers + ["X-Route-To", backend]
            path = ("/%s/raw" % scenario[:3]) if esb else "/raw"
            out.append(Request(backend, path, SOAP_CONTENT_TYPE, headers, body, check_raw(body, backend),
                               Expected(backend, body=body)))
    else:
        raise ValueError("unknown scenario %r (known: %s)" % (scenario, ", ".join(SCENARIO_NAMES)))
    return out
