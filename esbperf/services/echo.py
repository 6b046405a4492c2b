"""The echo back ends (ws1, ws2, ws3): one JVM each from jaxws-echo/, serving the thesis SOAP
echo at /echo (WSDL at /echo?wsdl) and a byte-for-byte raw echo at /raw, on the JAX-WS RI
(JDK HttpServer), on Apache CXF (Jetty), or lean: the same contract on Netty without a SOAP stack,
cheap enough to share a core with the ESB. Every answer carries X-Echo-Backend: <id> and
X-Echo-Runtime: <runtime>."""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import click

from esbperf.core import procs
from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import JAXWS_ECHO, ensure_built
from esbperf.core.topology import ECHO_RUNTIMES
from esbperf.services import jvm as gc

RUNTIMES = ECHO_RUNTIMES   # a testbed file's `echo:` names one of them
RUNTIME_NAMES = {"jaxws": "JAX-WS RI on the JDK HttpServer", "cxf": "Apache CXF on Jetty",
                 "lean": "Netty, no SOAP stack (lean)"}
RUNTIME_HEADER = "X-Echo-Runtime"   # on every answer: which runtime answered
MAIN_CLASS = "esbperf.echo.EchoMain"
# The id ends up in an HTTP header and in every SOAP answer: keep it plain.
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def wsdl_answers(host: str, port: int) -> bool:
    """The ready check: GET /echo?wsdl answers 200."""
    try:
        with urllib.request.urlopen(base_url(host, port) + "/echo?wsdl", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def echo_process(backend_id: str, host: str, port: int, runtime: str = "jaxws", delay_ms: int = 0,
                 workdir: Path | None = None, *, max_body_mb: int = 16, heap: str = "512m",
                 threads: int = 400) -> procs.Process:
    """An echo back end (not started yet). Checks its settings and that the port is free."""
    if not _ID.fullmatch(backend_id or ""):
        raise EsbperfError(f"echo id must be 1-64 letters, digits, '.', '_' or '-', got {backend_id!r}")
    if runtime not in RUNTIMES:
        raise EsbperfError(f"echo runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if not 1 <= port <= 65535:
        raise EsbperfError(f"echo port must be 1-65535, got {port}")
    if delay_ms < 0:
        raise EsbperfError(f"echo delay must be 0 ms or more, got {delay_ms}")
    if not 1 <= max_body_mb <= 1024:
        raise EsbperfError(f"echo body limit must be 1-1024 MB, got {max_body_mb}")
    heap_limit = gc.heap_option(heap, "echo")
    if threads < 1:
        raise EsbperfError(f"echo threads must be at least 1, got {threads}")
    ensure_built(JAXWS_ECHO)
    procs.check_port_free(host, port, f"echo back end {backend_id}")
    workdir = workdir or state_dir() / "echo" / f"{backend_id}-{port}"
    gc_log = gc.log_path(workdir)
    argv = [procs.java_executable(), heap_limit, "-XX:+ExitOnOutOfMemoryError", *gc.jvm_options(gc_log),
            "-Dsun.net.httpserver.nodelay=true",  # EchoMain sets it too; here it shows in `ps`
            # lean scans a message with the JDK's Vector API (an incubator module; the JVM logs a line saying so)
            *(["--add-modules", "jdk.incubator.vector"] if runtime == "lean" else []),
            "-cp", JAXWS_ECHO.classpath(), MAIN_CLASS,
            "--id", backend_id, "--host", host, "--port", str(port), "--runtime", runtime,
            "--delay-ms", str(delay_ms), "--max-body-mb", str(max_body_mb), "--threads", str(threads)]
    gc.mention(workdir / "echo.log", gc_log)
    return procs.Process(f"echo {backend_id}", argv, workdir / "echo.log", cwd=workdir)


def start_echo(backend_id: str, host: str, port: int, runtime: str = "jaxws", delay_ms: int = 0,
               workdir: Path | None = None, timeout: float = 60, **options) -> procs.Process:
    """Start an echo back end and return once its WSDL answers; stop it if it does not."""
    return echo_process(backend_id, host, port, runtime, delay_ms, workdir, **options).start_until(
        lambda: wsdl_answers(host, port), timeout, f"its WSDL answering at {base_url(host, port)}/echo?wsdl")


def parse_listen(listen: str) -> tuple[str, int]:
    """`[HOST:]PORT` (IPv6 as [::1]:PORT); the host defaults to loopback."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        raise EsbperfError(f"--listen must be [HOST:]PORT, got {listen!r}")
    return host, int(port)


@click.command()
@click.option("--id", "backend_id", required=True,
              help="Back-end name (ws1, ws2, ws3): appended to every SOAP answer and sent as X-Echo-Backend.")
@click.option("--listen", required=True, metavar="[HOST:]PORT",
              help="Where to serve; HOST defaults to 127.0.0.1 (loopback).")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="jaxws", show_default=True,
              help="jaxws: JAX-WS RI on the JDK HttpServer; cxf: Apache CXF on Jetty; "
                   "lean: Netty without a SOAP stack (cheapest).")
@click.option("--delay-ms", default=0, show_default=True, help="Wait this long before each answer (a slow back end).")
@click.option("--max-body-mb", default=16, show_default=True, help="Larger request bodies get 413.")
@click.option("--heap", default="512m", show_default=True, help="JVM heap limit (-Xmx).")
@click.option("--threads", default=400, show_default=True,
              help="Worker threads (one per concurrent request); lean: at most one event loop per core.")
def echo(backend_id: str, listen: str, runtime: str, delay_ms: int, max_body_mb: int, heap: str,
         threads: int) -> None:
    """Start an echo back end (thesis SOAP echo and raw echo); Ctrl-C or SIGTERM stops it."""
    host, port = parse_listen(listen)
    process = echo_process(backend_id, host, port, runtime, delay_ms, max_body_mb=max_body_mb,
                           heap=heap, threads=threads)
    url = base_url(host, port)

    def banner() -> None:
        process.wait_until(lambda: wsdl_answers(host, port), 60, "its WSDL answering")
        click.echo(f"echo {backend_id}: {RUNTIME_NAMES[runtime]} at {url}/echo (WSDL {url}/echo?wsdl), "
                   f"raw echo at {url}/raw")
        click.echo(f"echo {backend_id}: log {process.log}; GC log {gc.log_path(process.cwd)}; Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
