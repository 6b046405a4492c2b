"""The engines under test (esb-projects/), each started on a given address with the three echo
back ends it routes to, and stopped: the ESBs — Apache Camel, Apache Synapse, Spring Integration —
and the floors, nginx and HAProxy as plain reverse proxies (esbperf/services/floors.py). `ENGINES`
says, once, what each one is: how it is built, how it is started, what tells its process apart
for the monitor, and which scenarios of the contract it serves.

Each engine keeps its routes and settings in its own folder; what changes from one run to the
next (listen address and port, back-end URLs, back-end timeout) is handed over as configuration
at start, never written into code: system properties for Camel and Spring Integration, a copy of
Synapse's conf/ with the @TOKENS@ filled in, a config file of ours in the work folder for the
floors."""
from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import escape

import click

from esbperf.core import procs, topology
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CAMEL, ROOT, SPRING_INTEGRATION, SYNAPSE, Module, ensure_built
from esbperf.core.roles import BACKENDS
from esbperf.services import floors
from esbperf.services import jvm as gc

SHARED = ROOT / "esb-projects" / "shared"
SYNAPSE_CONF = SYNAPSE.dir / "conf"
HEAP = "1g"
# Defence in depth for every XML parser of the JDK the ESBs use: no external DTDs, entities
# or schemas (every ESB also refuses DOCTYPEs in the messages it parses).
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


def _system_properties(host: str, port: int, backends: dict[str, str], timeout_ms: int) -> list[str]:
    """The settings Camel and Spring Integration read as system properties."""
    settings = {
        "esb.host": f"[{host}]" if ":" in host else host,   # it goes into http://HOST:PORT URIs
        "esb.port": port,
        **{f"backend.{ws}": url for ws, url in backends.items()},
        "backend.timeout.ms": timeout_ms,
        "backend.connect-timeout.ms": floors.connect_timeout_ms(timeout_ms),
    }
    return ["-D%s=%s" % item for item in settings.items()]


def _camel(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    return [*_system_properties(host, port, backends, timeout_ms), "-cp", CAMEL.classpath(), CAMEL_MAIN]


def _spring_integration(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    return [*_system_properties(host, port, backends, timeout_ms), "-cp", SPRING_INTEGRATION.classpath(),
            SPRING_INTEGRATION_MAIN]


def _synapse(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
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
            "-cp", SYNAPSE.classpath(), SYNAPSE_MAIN,
            str(workdir / "repository"), str(conf / "axis2.xml"), str(workdir), str(conf / "synapse.xml"),
            str(workdir)]


# The main classes: how each JVM is started, and what tells its process apart.
CAMEL_MAIN = "org.apache.camel.main.Main"
SYNAPSE_MAIN = "org.apache.synapse.SynapseServer"
SPRING_INTEGRATION_MAIN = "esbperf.springintegration.EsbApplication"
# (host, port, back-end URLs, work folder, back-end timeout in ms) -> the arguments of the command
Arguments = Callable[[str, int, dict[str, str], Path, int], list[str]]


@dataclass(frozen=True)
class Engine:
    """What sits between the client and the back ends (a target of kind `esb`): an ESB, or a floor
    — a plain reverse proxy, drawn beside the ESBs to show what the least work there costs."""

    name: str
    kind: str                        # "ESB" or "floor", as messages and docs say it
    match: str                       # text of its process's command line (the monitor's --match)
    arguments: Arguments             # JVM: its arguments after the common ones; floor: its whole command
    module: Module | None = None     # JVM engines: the Maven module that builds it
    program: str | None = None       # floors: the Debian-packaged program it runs
    serves: tuple[str, ...] | None = None   # the contract's scenarios it serves; None: every one
    start_timeout_s: float = 90      # until it answers, on a busy machine
    packages_shared: bool = False    # its jar holds esb-projects/shared (rebuilt when that changes)

    @property
    def what(self) -> str:
        """How a message names it: "ESB camel", "floor nginx"."""
        return f"{self.kind} {self.name}"


ENGINES: dict[str, Engine] = {e.name: e for e in [
    Engine("camel", "ESB", CAMEL_MAIN, _camel, module=CAMEL, packages_shared=True),
    Engine("synapse", "ESB", SYNAPSE_MAIN, _synapse, module=SYNAPSE),
    # Spring Boot, Tomcat and Saxon: 6-8 s on an idle 2-core machine, 20 s and more on a busy one.
    Engine("spring-integration", "ESB", SPRING_INTEGRATION_MAIN, _spring_integration, module=SPRING_INTEGRATION,
           start_timeout_s=120, packages_shared=True),
    # nginx rewrites its processes' titles: "nginx: master process …", "nginx: worker process".
    Engine("nginx", "floor", "nginx:", floors.nginx_command, program="nginx", serves=floors.SCENARIOS,
           start_timeout_s=10),
    Engine("haproxy", "floor", "haproxy -db -f", floors.haproxy_command, program="haproxy",
           serves=floors.SCENARIOS, start_timeout_s=10),
]}
ESBS = [name for name, e in ENGINES.items() if e.kind == "ESB"]
FLOORS = [name for name, e in ENGINES.items() if e.kind == "floor"]
JVM_MODULES = {name: e.module for name, e in ENGINES.items() if e.module}


def known() -> str:
    return f"ESBs: {', '.join(ESBS)}; floors: {', '.join(FLOORS)}"


def engine(name: str) -> Engine:
    """The engine called `name`; a one-line error naming the known ones otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        raise EsbperfError(f"unknown engine '{name}' ({known()})") from None


def unserved(name: str, scenarios: list[str]) -> list[str]:
    """Those of `scenarios` (the contract's names) that engine `name` does not serve. An engine
    esbperf does not start (a team's own ESB in the testbed file) is taken to meet the whole
    contract; `esbperf verify` says whether it does."""
    e = ENGINES.get(name)
    if e is None or e.serves is None:
        return []
    return [s for s in scenarios if s not in e.serves]


def refuse_unserved(target: str, name: str, scenarios: list[str]) -> None:
    """A one-line error when target `target` (engine `name`) is given scenarios it does not serve."""
    missing = unserved(name, scenarios)
    if missing:
        e = ENGINES[name]
        what = f"a {e.kind}" if target == name else e.what
        raise EsbperfError(f"target {target} ({what}) serves only {', '.join(e.serves)}, not {', '.join(missing)}: "
                           "leave those scenarios out (the plan's scenarios, --scenario) or leave out the target")


def _shared_newer_than(module: Module) -> bool:
    """The shared stylesheets are packaged into the Camel and Spring Integration jars;
    project.ensure_built only looks at the module's own folder."""
    if not module.jar.exists():
        return False
    built = module.jar.stat().st_mtime
    return any(p.is_file() and p.stat().st_mtime > built for p in SHARED.rglob("*"))


def esb_process(name: str, host: str, port: int, backends: dict[str, str], workdir: Path | None = None,
                backend_timeout_s: int = 120, *, heap: str = HEAP) -> procs.Process:
    """An engine (not started yet: an ESB or a floor) listening on host:port only, routing to the
    back ends {ws1: URL, ws2: URL, ws3: URL}; a back end that takes longer than
    backend_timeout_s gets the client an error answer. A JVM logs its collections to `gc.log` in
    its workdir (`heap`: its heap limit; a floor has none)."""
    e = engine(name)
    if not 1 <= port <= 65535:
        raise EsbperfError(f"{e.what} port must be 1-65535, got {port}")
    if isinstance(backend_timeout_s, bool) or not isinstance(backend_timeout_s, int) or not 1 <= backend_timeout_s <= 3600:
        raise EsbperfError(f"back-end timeout must be 1-3600 s, got {backend_timeout_s!r}")
    backends = _check_backends(backends)
    heap_limit = gc.heap_option(heap, "ESB") if e.module else None
    if e.program and shutil.which(e.program) is None:
        raise EsbperfError(f"{e.program} is not installed on this host (Debian: apt-get install -y {e.program}); "
                           f"it is a floor: without it, leave {name} out of the testbed's hosts.esb.esb_ports")
    procs.check_port_free(host, port, e.what)
    workdir = Path(workdir or state_dir() / "esb" / f"{name}-{port}")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    if log.exists():
        log.unlink()   # one run per log, so its tail is this run's
    if e.module:
        if e.packages_shared and _shared_newer_than(e.module):
            e.module.jar.unlink()
        ensure_built(e.module)
        gc_log = gc.log_path(workdir)
        argv = [procs.java_executable(), heap_limit, "-XX:+ExitOnOutOfMemoryError", *gc.jvm_options(gc_log),
                *XML_SAFETY, *e.arguments(host, port, backends, workdir, backend_timeout_s * 1000)]
        gc.mention(log, gc_log)
    else:
        argv = e.arguments(host, port, backends, workdir, backend_timeout_s * 1000)
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
              backend_timeout_s: int = 120, timeout: float | None = None, *, heap: str = HEAP) -> procs.Process:
    """Start an engine (ESB or floor) and return once it answers on host:port (within `timeout`,
    default the engine's start timeout); stop it if it does not."""
    return esb_process(name, host, port, backends, workdir, backend_timeout_s, heap=heap).start_until(
        lambda: answers(host, port), timeout or engine(name).start_timeout_s, f"answering at {_url(host, port)}")


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
@click.argument("name", metavar="|".join(ENGINES))
@click.option("--testbed", "testbed_name", metavar="NAME|FILE",
              help="Testbed description for the defaults (default: local).")
@click.option("--listen", metavar="HOST:PORT", help="Where to listen (default: the testbed's esb host and port).")
@click.option("--backends", metavar="ws1=URL,ws2=URL,ws3=URL",
              help="Echo back ends to route to (default: the testbed's ws1..ws3).")
@click.option("--backend-timeout-s", default=120, show_default=True,
              help="A back end slower than this gets the client an error (504).")
def esb(name: str, testbed_name: str | None, listen: str | None, backends: str | None,
        backend_timeout_s: int) -> None:
    """Start what sits between client and back ends on the esb host: an ESB under test (camel,
    synapse, spring-integration) or a floor, a plain reverse proxy (nginx, haproxy); Ctrl-C or
    SIGTERM stops it."""
    e = engine(name)
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
        process.wait_until(lambda: answers(host, port), e.start_timeout_s, "answering")
        runs = f"heap {HEAP}" if e.module else f"{e.program}, serving {', '.join(e.serves)}"
        click.echo(f"esb {name}: {e.what} listening at {_url(host, port)} ({runs}), routing to "
                   + ", ".join(f"{ws} {url}" for ws, url in urls.items()))
        gc_log = f"; GC log {gc.log_path(process.cwd)}" if e.module else ""
        click.echo(f"esb {name}: back-end timeout {backend_timeout_s} s; log {process.log}{gc_log}; Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
