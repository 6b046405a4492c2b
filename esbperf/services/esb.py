"""The ESBs under test (esb-projects/): starting Apache Camel or Apache Synapse on a given
address with the three echo back ends they route to, and stopping them.

Each ESB keeps its routes and settings in its own folder; what changes from one run to the
next (listen address and port, back-end URLs, back-end timeout) is handed over as
configuration at start, never written into code: system properties for Camel, a copy of
Synapse's conf/ with the @TOKENS@ filled in."""
from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import escape

import click

from esbperf.core import procs, topology
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CAMEL, ROOT, SYNAPSE, Module, ensure_built
from esbperf.core.roles import BACKENDS
from esbperf.services import jvm as gc

SHARED = ROOT / "esb-projects" / "shared"
SYNAPSE_CONF = SYNAPSE.dir / "conf"
HEAP = "1g"
# Defence in depth for every XML parser of the JDK the ESBs use: no external DTDs, entities
# or schemas (both ESBs also refuse DOCTYPEs in the messages they parse).
XML_SAFETY = ["-Djavax.xml.accessExternalDTD=", "-Djavax.xml.accessExternalSchema="]
# A request that gets an answer without calling a back end: header-based routing without the
# header (400).
READY_PATH = "/hbr/echo"
READY_BODY = (b'<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">'
              b"<soapenv:Body><ready/></soapenv:Body></soapenv:Envelope>")


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _check_backends(backends: dict[str, str]) -> dict[str, str]:
    missing = [ws for ws in BACKENDS if ws not in backends]
    unknown = [ws for ws in backends if ws not in BACKENDS]
    if missing or unknown:
        raise EsbperfError(f"back ends must be exactly {', '.join(BACKENDS)}; "
                           + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"))
    checked = {}
    for ws in BACKENDS:
        url = backends[ws].rstrip("/")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
            raise EsbperfError(f"back end {ws} must be an http://HOST:PORT URL, got {backends[ws]!r}")
        try:
            parts.port
        except ValueError:
            raise EsbperfError(f"back end {ws} has a bad port: {backends[ws]!r}") from None
        checked[ws] = url
    return checked


def _camel(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    ensure_built(CAMEL)
    settings = {
        "esb.host": f"[{host}]" if ":" in host else host,   # it goes into http://HOST:PORT URIs
        "esb.port": port,
        **{f"backend.{ws}": url for ws, url in backends.items()},
        "backend.timeout.ms": timeout_ms,
        # Connecting is part of the wait: never longer than the timeout itself.
        "backend.connect-timeout.ms": min(timeout_ms, 10000),
    }
    return ["-D%s=%s" % item for item in settings.items()] + [
        "-cp", CAMEL.classpath(), "org.apache.camel.main.Main"]


def _synapse(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    ensure_built(SYNAPSE)
    tokens = {
        "@ESB_HOST@": host, "@ESB_PORT@": str(port),
        **{f"@{ws.upper()}@": url for ws, url in backends.items()},
        "@BACKEND_TIMEOUT_MS@": str(timeout_ms),
        # Sockets outlive the endpoint timeout so that the client gets the 504, not a reset.
        "@SOCKET_TIMEOUT_MS@": str(timeout_ms + 10000),
        "@XSLT_URL@": (SHARED / "xslt").as_uri(),
    }
    conf = workdir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (workdir / "repository").mkdir(exist_ok=True)
    for source in sorted(SYNAPSE_CONF.iterdir()):
        text = source.read_text()
        for token, value in tokens.items():
            text = text.replace(token, escape(value, {'"': "&quot;"}) if source.suffix == ".xml" else value)
        left = re.search(r"@[A-Z0-9_]+@", text)
        if left:
            raise EsbperfError(f"{source}: no value for {left.group(0)}")
        (conf / source.name).write_text(text)
    return [f"-Dconf.location={conf}",
            # Saxon-HE for XSLT 3.0 (parse-json), not whichever TransformerFactory comes first.
            "-Djavax.xml.transform.TransformerFactory=net.sf.saxon.TransformerFactoryImpl",
            "-cp", SYNAPSE.classpath(), "org.apache.synapse.SynapseServer",
            str(workdir / "repository"), str(conf / "axis2.xml"), str(workdir), str(conf / "synapse.xml"),
            str(workdir)]


# name -> (module, how to make its JVM arguments after the common ones)
ESBS: dict[str, tuple[Module, Callable[..., list[str]]]] = {
    "camel": (CAMEL, _camel),
    "synapse": (SYNAPSE, _synapse),
}


def _shared_newer_than(module: Module) -> bool:
    """The shared stylesheets are packaged into the Camel jar; project.ensure_built only looks
    at the module's own folder."""
    if not module.jar.exists():
        return False
    built = module.jar.stat().st_mtime
    return any(p.is_file() and p.stat().st_mtime > built for p in SHARED.rglob("*"))


def esb_process(name: str, host: str, port: int, backends: dict[str, str], workdir: Path | None = None,
                backend_timeout_s: int = 120, *, heap: str = HEAP) -> procs.Process:
    """An ESB (not started yet) listening on host:port only, routing to the back ends
    {ws1: URL, ws2: URL, ws3: URL}; a back end that takes longer than backend_timeout_s
    gets the client an error answer. It logs its collections to `gc.log` in its workdir."""
    if name not in ESBS:
        raise EsbperfError(f"unknown ESB '{name}' (known: {', '.join(ESBS)})")
    if not 1 <= port <= 65535:
        raise EsbperfError(f"ESB port must be 1-65535, got {port}")
    if isinstance(backend_timeout_s, bool) or not isinstance(backend_timeout_s, int) or not 1 <= backend_timeout_s <= 3600:
        raise EsbperfError(f"back-end timeout must be 1-3600 s, got {backend_timeout_s!r}")
    backends = _check_backends(backends)
    heap_limit = gc.heap_option(heap, "ESB")
    procs.check_port_free(host, port, f"{name} ESB")
    module, arguments = ESBS[name]
    if module is CAMEL and _shared_newer_than(module):
        module.jar.unlink()
    workdir = Path(workdir or state_dir() / "esb" / f"{name}-{port}")
    workdir.mkdir(parents=True, exist_ok=True)
    gc_log = gc.log_path(workdir)
    argv = [procs.java_executable(), heap_limit, "-XX:+ExitOnOutOfMemoryError", *gc.jvm_options(gc_log),
            *XML_SAFETY, *arguments(host, port, backends, workdir, backend_timeout_s * 1000)]
    log = workdir / f"{name}.log"
    if log.exists():
        log.unlink()   # one run per log, so its tail is this run's
    gc.mention(log, gc_log)
    return procs.Process(f"esb {name}", argv, log, cwd=workdir)


def answers(host: str, port: int) -> bool:
    """The ready check: the ESB's mediation answers an HTTP request (any status)."""
    request = urllib.request.Request(_url(host, port) + READY_PATH, data=READY_BODY, method="POST",
                                     headers={"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": '""'})
    try:
        with urllib.request.urlopen(request, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def start_esb(name: str, host: str, port: int, backends: dict[str, str], workdir: Path | None = None,
              backend_timeout_s: int = 120, timeout: float = 90, *, heap: str = HEAP) -> procs.Process:
    """Start an ESB and return once it answers on host:port; stop it if it does not."""
    return esb_process(name, host, port, backends, workdir, backend_timeout_s, heap=heap).start_until(
        lambda: answers(host, port), timeout, f"answering at {_url(host, port)}")


def parse_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise EsbperfError(f"--listen must be HOST:PORT, got {listen!r}")
    return host, int(port)


def parse_backends(text: str) -> dict[str, str]:
    """ws1=URL,ws2=URL,... (any of the three; the others keep the testbed's)."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        ws, sep, url = item.partition("=")
        if not sep or ws not in BACKENDS or not url:
            raise EsbperfError(f"--backends takes ws1=URL,ws2=URL,ws3=URL, got {item!r}")
        out[ws] = url
    return out


@click.command()
@click.argument("name", metavar="camel|synapse")
@click.option("--testbed", "testbed_name", metavar="NAME|FILE",
              help="Testbed description for the defaults (default: local).")
@click.option("--listen", metavar="HOST:PORT", help="Where to listen (default: the testbed's esb host and port).")
@click.option("--backends", metavar="ws1=URL,ws2=URL,ws3=URL",
              help="Echo back ends to route to (default: the testbed's ws1..ws3).")
@click.option("--backend-timeout-s", default=120, show_default=True,
              help="A back end slower than this gets the client an error (504).")
def esb(name: str, testbed_name: str | None, listen: str | None, backends: str | None,
        backend_timeout_s: int) -> None:
    """Start an ESB under test (camel, synapse); Ctrl-C or SIGTERM stops it."""
    if name not in ESBS:
        raise EsbperfError(f"unknown ESB '{name}' (known: {', '.join(ESBS)})")
    testbed = topology.load(testbed_name)
    if listen:
        host, port = parse_listen(listen)
    else:
        esb_host = testbed.hosts["esb"]
        if name not in esb_host.esb_ports:
            raise EsbperfError(f"{testbed.path}: hosts.esb.esb_ports has no port for '{name}'; give --listen")
        host, port = esb_host.address, esb_host.esb_ports[name]
    urls = {ws: testbed.echo_url(ws) for ws in BACKENDS}
    urls.update(parse_backends(backends or ""))
    process = esb_process(name, host, port, urls, backend_timeout_s=backend_timeout_s)

    def banner() -> None:
        process.wait_until(lambda: answers(host, port), 90, "answering")
        click.echo(f"esb {name}: listening at {_url(host, port)} (heap {HEAP}), routing to "
                   + ", ".join(f"{ws} {url}" for ws, url in urls.items()))
        click.echo(f"esb {name}: back-end timeout {backend_timeout_s} s; log {process.log}; "
                   f"GC log {gc.log_path(process.cwd)}; Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
