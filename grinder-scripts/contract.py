# -*- coding: utf-8 -*-
"""The scenarios of the ESB contract (esb-projects/README.md): for each one, the requests a
client sends and how each answer is checked, for an ESB target or the `direct` baseline.

Written in the common subset of Python 2.7 and 3: Grinder workers run it under Jython 2.7
(grinder-scripts/scenario.py) and `esbperf verify` under CPython, so the contract is coded
once. Answers are checked through a small interface both sides provide:
    answer.status        HTTP status (int)
    answer.header(name)  a header's value, any case of name, or None
    answer.text          the body as text
    answer.body          the body's bytes (a Java byte[] in the worker)
    answer.bodyEquals(b) whether the body is exactly b (as answer.body gives it)

A request's body is generated here (requests_for) or is a user's payload file, sent as its bytes
are (requests_for_file: the raw buyStocks scenarios).
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

# The scenarios that can send a payload file instead of a generated body, and how the echo of a
# file may differ from it (docs/running.md, "Payload files"):
#   bytes     not at all: byte for byte
#   envelope  only outside the root element: the document's XML declaration, comments and
#             processing instructions around the root, and whitespace between them, may be
#             dropped or rewritten (what an ESB that serialises the SOAP envelope it parsed does);
#             the root element itself byte for byte
#   xml       only in what XML does not tell apart (canonical_form): also namespace prefixes,
#             attribute order and quotes, character references, CDATA, comments
FILE_SCENARIOS = ("raw", "cbr-raw", "hbr-raw")
FILE_CHECKS = ("bytes", "envelope", "xml")
DEFAULT_FILE_CHECK = "envelope"

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
    decides and says why. So an answer that meets it must pass `check` (tests/test_timing.py).
    An answer `check` accepted is learned as a second fast check of its request (its status,
    X-Echo-Backend header and body: esbperf.client.KnownAnswers), so every check must read
    nothing else of an answer and decide the same for the same three (tests/test_timing.py)."""

    def __init__(self, backend=None, body=None, contains=None, may_miss=False):
        self.backend = backend
        self.body = body                # text, or bytes (a payload file)
        self.contains = contains
        self.may_miss = may_miss        # True: a right answer may fail it (a payload file's echo
                                        # that the check allows to differ), no sign of a fault


class Request(object):
    """One request of a scenario: where it goes, what it carries, and how its answer is checked.

    backend: for the `direct` target, the echo service it is sent to; for an ESB, the one that
    must have answered. path: on the ESB or, for `direct`, on that back end. expected: an
    Expected, or None when no right answer can be foreseen byte for byte (an ESB's own JSON or
    XML): the workers then learn right answers from `check` (Expected's docstring).
    """

    def __init__(self, backend, path, content_type, headers, body, check, expected=None, data=None):
        self.backend = backend
        self.path = path
        self.content_type = content_type
        self.headers = headers          # [name, value, name, value, ...]
        self.body = body                # text (a generated body), or None
        self.data = data                # bytes (a payload file), or None: body encoded as UTF-8
        self.check = check              # answer -> None if right, else a one-line reason
        self.expected = expected

    def __repr__(self):
        if self.data is not None:
            return "Request(%s %s, %d bytes)" % (self.backend, self.path, len(self.data))
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


# --- payload files ----------------------------------------------------------------------------
# A user's own request body, sent as its bytes are. Under Jython, bytes are `str` and an answer's
# body a Java byte[]; the helpers below take both.

def _bytes_of(body):
    return body.tostring() if hasattr(body, "tostring") else body   # a Java byte[] under Jython


def root_element(data):
    """The bytes of a document's root element: without what comes before it (the XML declaration,
    comments, processing instructions, whitespace) or after it. None if that is not all there is
    around it (a document type declaration, text, or no element)."""
    start = 0
    while True:
        while data[start:start + 1] in (b" ", b"\t", b"\r", b"\n"):
            start += 1
        if data[start:start + 4] == b"<!--":
            close = data.find(b"-->", start + 4)
            start = -1 if close < 0 else close + 3
        elif data[start:start + 2] == b"<?":
            close = data.find(b"?>", start + 2)
            start = -1 if close < 0 else close + 2
        else:
            break
        if start < 0:
            return None
    if data[start:start + 1] != b"<" or data[start + 1:start + 2] in (b"!", b"/", b""):
        return None
    end = len(data)
    while True:
        while end > start and data[end - 1:end] in (b" ", b"\t", b"\r", b"\n"):
            end -= 1
        if data[end - 3:end] == b"-->" and data.rfind(b"<!--", start, end) > start:
            end = data.rfind(b"<!--", start, end)
        elif data[end - 2:end] == b"?>" and data.rfind(b"<?", start, end) > start:
            end = data.rfind(b"<?", start, end)
        else:
            break
    return data[start:end] if data[end - 1:end] == b">" else None


class _Verified(object):
    """Answers a costly check found right, so that the same bytes again are right at the cost of
    a comparison (answer.bodyEquals: in Java in the worker, no copy): an ESB answers the same
    request with the same bytes. Shared by a worker's threads (an append to a list is atomic);
    a few answers at most."""
    KEEP = 4

    def __init__(self):
        self.bodies = []

    def known(self, answer):
        for right in self.bodies:
            if answer.bodyEquals(right):
                return True
        return False

    def add(self, answer):
        if len(self.bodies) < self.KEEP:
            self.bodies.append(answer.body)   # as the answer holds it (a Java byte[] in the worker)


def _first_difference(got, expected):
    n = min(len(got), len(expected))
    for i in range(0, n, 4096):
        if got[i:i + 4096] != expected[i:i + 4096]:
            for j in range(i, min(n, i + 4096)):
                if got[j:j + 1] != expected[j:j + 1]:
                    return j
    return n


def check_file(data, backend, how):
    """The echo of payload file `data` from `backend`, compared as `how` (FILE_CHECKS) says."""
    if how not in FILE_CHECKS:
        raise ValueError("payload check must be one of %s, not %r" % (", ".join(FILE_CHECKS), how))
    root = root_element(data)
    verified = _Verified()
    canonical = []   # the file's canonical form, made at the first answer that needs it

    def same(answer, body):
        if body == data:
            return True
        if how == "envelope":
            ok = root is not None and root_element(body) == root
        elif how == "xml":
            if not canonical:
                canonical.append(canonical_form(parse_xml(data)))
            try:
                ok = canonical_form(parse_xml(body)) == canonical[0]
            except ValueError:
                ok = False
        else:
            ok = False
        if ok:
            verified.add(answer)
        return ok

    def check(answer):
        problem = _status_problem(answer) or _check_backend_header(answer, backend)
        if problem:
            return problem
        if verified.known(answer):
            return None
        body = _bytes_of(answer.body)
        if same(answer, body):
            return None
        got, sent, where = body, data, ""
        if how == "envelope" and root is not None and root_element(body) is not None:
            got, sent, where = root_element(body), root, " of the root element"
        return "the echo differs from the payload file (%s check: %d bytes answered, %d sent; first difference at byte %d%s)" % (
            how, len(body), len(data), _first_difference(got, sent), where)
    return check


def parse_xml(data):
    """The root element of an XML document given as bytes (ElementTree, CPython and Jython
    alike); ValueError if it is not well-formed. A document type declaration is refused before
    parsing, so no DTD, entity or external file is ever read."""
    if b"<!DOCTYPE" in data:
        raise ValueError("it has a DOCTYPE (no DTD or entity is ever read)")
    import xml.etree.ElementTree as ET
    try:
        return ET.fromstring(data)
    except Exception as e:   # ParseError, or the Java parser's own errors under Jython
        raise ValueError("it is not well-formed XML: %s" % ("%s" % e).splitlines()[0][:200])


def canonical_form(element):
    """An element as nested tuples of expanded names, attributes (order ignored), character data
    (whitespace kept) and children in order: what XML tells apart, without prefixes, attribute
    quotes, character references, CDATA sections, comments or processing instructions."""
    return (element.tag, tuple(sorted(element.attrib.items())), element.text or "",
            tuple((canonical_form(child), child.tail or "") for child in element))


def first_symbol(root):
    """What /cbr/raw routes on: the first order's symbol (normalize-space), or None."""
    for stocks in root.iter("{%s}buyStocks" % STOCKS_NS):
        order = stocks.find("order")
        symbol = order.find("symbol") if order is not None else None
        return " ".join((symbol.text or "").split()) if symbol is not None else None
    return None


def file_problem(data, scenario):
    """Why payload file `data` cannot be sent in `scenario`, in words after "the file": None if it can."""
    if scenario not in FILE_SCENARIOS:
        return "cannot be sent in scenario %s (scenarios that send payload files: %s)" % (
            scenario, ", ".join(FILE_SCENARIOS))
    try:
        root = parse_xml(data)
    except ValueError as e:
        return "is refused: %s" % e
    if root_element(data) is None:
        return "is refused: there is something else than a declaration, comments and whitespace around its root element"
    if scenario == "cbr-raw" and first_symbol(root) is None:
        return "has no buyStocks/order/symbol (namespace %s), which cbr-raw routes on" % STOCKS_NS
    return None


def requests_for_file(scenario, target_kind, data, how=DEFAULT_FILE_CHECK):
    """The requests of `scenario` that send payload file `data` (bytes): raw to ws1, cbr-raw to the
    back end the file's first symbol routes to, hbr-raw to each back end in turn."""
    problem = file_problem(data, scenario)
    if problem:
        raise ValueError("the payload file " + problem)
    if scenario == "cbr-raw":
        symbol = first_symbol(parse_xml(data))
        backends = [dict((v, k) for k, v in _SYMBOLS.items()).get(symbol, "ws3")]
    elif scenario == "hbr-raw":
        backends = list(BACKENDS)
    else:
        backends = ["ws1"]
    esb = target_kind == "esb"
    out = []
    for backend in backends:
        headers = _soap_headers("buyStocks")
        if scenario == "hbr-raw":
            headers = headers + ["X-Route-To", backend]
        path = {"raw": "/proxy/raw", "cbr-raw": "/cbr/raw", "hbr-raw": "/hbr/raw"}[scenario] if esb else "/raw"
        out.append(Request(backend, path, SOAP_CONTENT_TYPE, headers, None, check_file(data, backend, how),
                           Expected(backend, body=data, may_miss=how != "bytes"), data))
    return out
