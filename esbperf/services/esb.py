"""The engines under test, each started on a given address with the three echo back ends it routes
to, and stopped: the ESBs (Apache Camel, Apache Synapse, Spring Integration as shipped), the
floors (nginx and HAProxy as plain reverse proxies) and the reference engine (a measuring standard
whose work per request is set). What each engine is — how it is built and
started, what tells its process apart for the monitor, which scenarios it serves — is written in
its own folder, esb-projects/<name>/engine.yaml (esbperf/core/engines.py reads them): nothing here
names an engine.

What changes from one run to the next (listen address and port, back-end URLs, back-end timeout, the
settings an engine declares) is handed over at start, never written into an engine's folder: the
engine's arguments and its config files (copied into its work folder) carry @TOKENS@ that are filled
here."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from xml.sax.saxutils import escape

import click

from esbperf.core import engines, procs, topology
from esbperf.core.config import state_dir
from esbperf.core.engines import Engine
from esbperf.core.errors import EsbperfError
from esbperf.core.project import ensure_built
from esbperf.core.roles import BACKENDS
from esbperf.services import jvm as gc

# Every JVM engine's heap, fixed (-Xms = -Xmx: it is never resized under load): the public rounds'
# (WSO2's and esbperformance.org's gave every ESB 2 GB). esb-projects/README.md, "Sizing".
HEAP = "2g"
# Defence in depth for every XML parser of the JDK the ESBs use: no external DTDs, entities
# or schemas (every ESB also refuses DOCTYPEs in the messages it parses).
XML_SAFETY = ["-Djavax.xml.accessExternalDTD=", "-Djavax.xml.accessExternalSchema="]
# A request that gets an answer without calling a back end: header-based routing without the
# header (400).
READY_PATH = "/hbr/echo"
READY_BODY = (b'<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">'
              b"<soapenv:Body><ready/></soapenv:Body></soapenv:Envelope>")
SHARED = engines.FOLDER / "shared"
MAX_CONNECT_MS = 10000      # connecting to a back end is part of the wait, and never longer than this
SOCKET_SLACK_MS = 10000     # sockets outlive the back-end timeout by this much: the client gets the 504

ENGINES: dict[str, Engine] = engines.load_all()
ESBS = [name for name, e in ENGINES.items() if e.kind == "ESB"]
FLOORS = [name for name, e in ENGINES.items() if e.kind == "floor"]
# Measuring standards: engines whose work per request is known, measured like an ESB, never one.
REFERENCES = [name for name, e in ENGINES.items() if e.kind == "reference"]


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _address(host: str, port: int) -> str:
    """HOST:PORT as nginx and HAProxy write it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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


def connect_timeout_ms(timeout_ms: int) -> int:
    """How long any engine may take to connect to a back end: connecting is part of the wait, never
    longer than the back-end timeout, and at most 10 s."""
    return min(timeout_ms, MAX_CONNECT_MS)


def tokens(e: Engine, host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int,
           settings: dict[str, int | float] | None = None) -> dict[str, str]:
    """The value of every @TOKEN@ an engine's arguments and config files may name (engines.TOKENS, and
    @SETTING_NAME@ of each setting it declares: `settings`, checked, else its default)."""
    values = {
        "@ESB_HOST@": host, "@ESB_URL_HOST@": f"[{host}]" if ":" in host else host, "@ESB_PORT@": str(port),
        "@ESB_ADDRESS@": _address(host, port),
        **{f"@{ws.upper()}@": url for ws, url in backends.items()},
        **{f"@{ws.upper()}_ADDRESS@": _address(urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port or 80)
           for ws, url in backends.items()},
        "@BACKEND_TIMEOUT_MS@": str(timeout_ms), "@CONNECT_TIMEOUT_MS@": str(connect_timeout_ms(timeout_ms)),
        "@SOCKET_TIMEOUT_MS@": str(timeout_ms + SOCKET_SLACK_MS),
        "@WORK@": str(workdir), "@ENGINE@": str(e.folder), "@SHARED_URL@": SHARED.as_uri(),
    }
    assert set(values) == set(engines.TOKENS)
    values.update({engines.setting_token(name): engines.format_setting(value)
                   for name, value in e.setting_values(settings).items()})
    return values


def _fill(text: str, values: dict[str, str], where: Path | str, xml: bool = False) -> str:
    for token, value in values.items():
        text = text.replace(token, escape(value, {'"': "&quot;"}) if xml else value)
    left = engines.TOKEN.search(text)
    if left:
        raise EsbperfError(f"{where}: no value for {left.group(0)} (esbperf fills {', '.join(engines.TOKENS)})")
    return text


def _copy_config(e: Engine, values: dict[str, str], workdir: Path) -> None:
    """The engine's config files and folders, copied into its work folder with their tokens filled."""
    for entry in e.config:
        source = e.folder / entry
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        for f in files:
            target = workdir / f.relative_to(e.folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = f.read_bytes()
            if engines.TOKEN.search(data.decode("utf-8", errors="replace")):
                data = _fill(data.decode("utf-8"), values, f, xml=f.suffix == ".xml").encode("utf-8")
            target.write_bytes(data)
    for folder in e.folders:
        (workdir / folder).mkdir(parents=True, exist_ok=True)


def command(name: str, host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int,
            heap: str = HEAP, settings: dict[str, object] | None = None) -> list[str]:
    """Prepare the engine's work folder (its config copies, its folders) and return the command that
    runs it in the foreground: a JVM engine's java with esbperf's options first, or its program."""
    e = engine(name)
    workdir.mkdir(parents=True, exist_ok=True)
    values = tokens(e, host, port, backends, workdir, timeout_ms, settings)
    _copy_config(e, values, workdir)
    arguments = [_fill(a, values, e.folder / engines.FILE) for a in e.arguments]
    if e.module:
        return [procs.java_executable(), *gc.fixed_heap(heap, e.what), "-XX:+ExitOnOutOfMemoryError",
                *gc.jvm_options(gc.log_path(workdir)), *gc.compiler_priority(), *XML_SAFETY,
                *(_fill(o, values, e.folder / engines.FILE) for o in e.jvm_options),
                "-cp", e.module.classpath(), e.main, *arguments]
    for path in [workdir, *workdir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)   # a program's workers may run unprivileged (nginx as root)
    argv = [e.program, *arguments]
    if e.parent_death_signal != "KILL" and shutil.which("setpriv"):
        # util-linux's setpriv sets the signal, then execs the program (procs.Process would send KILL).
        argv = ["setpriv", "--pdeathsig", e.parent_death_signal, *argv]
    return argv


def known() -> str:
    return f"ESBs: {', '.join(ESBS)}; floors: {', '.join(FLOORS)}" + \
        (f"; reference engines: {', '.join(REFERENCES)}" if REFERENCES else "")


def setting_arguments(values: dict[str, object]) -> list[str]:
    """`--NAME VALUE` for each setting of `values`: how `esbperf esb NAME` is told them."""
    return [part for name, value in values.items()
            for part in (f"--{name}", engines.format_setting(value) if isinstance(value, (int, float)) else str(value))]


def parse_setting_options(name: str, args: list[str]) -> dict[str, int | float]:
    """Engine `name`'s settings from `--NAME VALUE` or `--NAME=VALUE` words (what `esbperf esb NAME`
    did not know as its own options), checked; a one-line error for anything else."""
    e = engine(name)
    declared = [s.name for s in e.settings]
    offered = f"its settings: {', '.join('--' + d for d in declared)}" if declared else f"{e.what} declares no settings"
    given: dict[str, str] = {}
    words = list(args)
    while words:
        word = words.pop(0)
        key, sep, value = word.partition("=")
        if not key.startswith("--") or key[2:] not in declared:
            raise EsbperfError(f"esb {name}: no option {key!r} ({offered}; `esbperf esb --help`)")
        if not sep:
            if not words or words[0].startswith("--"):
                raise EsbperfError(f"esb {name}: {key} needs a value")
            value = words.pop(0)
        if key[2:] in given:
            raise EsbperfError(f"esb {name}: {key} is given twice")
        given[key[2:]] = value
    checked = e.setting_values(given)
    return {k: checked[k] for k in given}


def settings_for(names: list[str], pairs: list[str] | tuple[str, ...]) -> dict[str, dict[str, int | float]]:
    """The settings of the engines `names` from `--esb-setting NAME=VALUE` pairs: each applies to every
    one of them that declares NAME (and must apply to one), checked; by engine, only those given."""
    out: dict[str, dict[str, int | float]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise EsbperfError(f"--esb-setting takes NAME=VALUE (e.g. work=1100), got {pair!r}")
        declaring = [n for n in names if any(s.name == key for s in engine(n).settings)]
        if not declaring:
            offered = "; ".join(f"{n}: {', '.join(s.name for s in engine(n).settings)}"
                                for n in names if engine(n).settings) or "none of them declares any"
            raise EsbperfError(f"--esb-setting {key}: no engine started here has that setting "
                               f"({', '.join(names) or 'no engine'}; {offered})")
        for n in declaring:
            if key in out.get(n, {}):
                raise EsbperfError(f"--esb-setting {key} is given twice")
            out.setdefault(n, {})[key] = engine(n).setting_values({key: value.strip()})[key]
    return out


def read_account(name: str, host: str, port: int, timeout: float = 3) -> dict | None:
    """What a running engine says of itself at its account path (engine.yaml `account`, JSON), or None:
    it declares none, does not answer, or answers something else."""
    e = ENGINES.get(name)
    if e is None or not e.account:
        return None
    try:
        with urllib.request.urlopen(_url(host, port) + e.account, timeout=timeout) as response:
            found = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def engine(name: str) -> Engine:
    """The engine called `name`; a one-line error naming the known ones otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        raise EsbperfError(f"unknown engine '{name}' ({known()}; an engine is a folder with an "
                           f"engine.yaml: esb-projects/README.md)") from None


def require_installed(name: str) -> None:
    """One line when a program engine's program is not on this host's PATH."""
    e = engine(name)
    if e.program and shutil.which(e.program) is None:
        raise EsbperfError(f"{e.program} is not installed on this host (Debian: apt-get install -y {e.program}); "
                           f"without it, leave {name} out of the testbed's hosts.esb.esb_ports")


def describe(name: str, address: tuple[str, int] | None = None, started_with: dict | None = None) -> dict:
    """What a run records of an engine (run.json `engines`): its kind, its version as far as esbperf
    can tell without starting it, and the settings its engine.yaml gives (JVM heap and options, or the
    program and its arguments). An engine with `settings`: their values and where they were read —
    its account (`account` at `address`, when it answers and says), the launcher that started it
    (`started_with`), or, neither known, its defaults. An engine with an `account`: what it said."""
    e = engine(name)
    record: dict = {"kind": e.kind, "version": version(e), "serves": list(e.serves) if e.serves else "all"}
    if e.module:
        record.update(heap=HEAP, heap_options=gc.fixed_heap(HEAP, e.what), jvm_options=list(e.jvm_options),
                      compiler_priority=gc.compiler_priority(),
                      main=e.main, arguments=list(e.arguments))
    else:
        record.update(command=[e.program, *e.arguments])
    account = read_account(name, *address) if address and e.account else None
    if e.settings:
        said = account.get("settings") if account else None
        if isinstance(said, dict) and said:
            record.update(settings=said, settings_from=f"its account (GET {e.account})")
        elif started_with is not None:
            record.update(settings=e.setting_values(started_with), settings_from="the launcher that started it")
        else:
            record.update(settings=e.setting_values(),
                          settings_from="engine.yaml defaults (started elsewhere: the values it runs with are not known here)")
    if e.account:
        record["account"] = account if account is not None else f"no answer at GET {e.account}"
    return record


def version(e: Engine) -> str:
    """A JVM engine: the versions of the jars named after it in its build's lib folder (camel-*.jar:
    the engine's own libraries); a program: the first line `PROGRAM -v` prints (nginx and HAProxy
    say their version so). What cannot be read is said so."""
    if e.module:
        lib = e.module.jar.parent / "lib"
        found = {m.group(1) for jar in lib.glob(f"{e.name}-*.jar")
                 if (m := re.search(r"-(\d[\w.]*?)\.jar$", jar.name))}
        if found:
            return f"{e.name}-*.jar {', '.join(sorted(found))}"
        # An engine of this checkout's own (the reference engine): its jar is the version.
        return f"{e.module.jar.name} of this checkout" if e.module.jar.is_file() else f"unknown (no {e.name}-*.jar in {lib})"
    try:
        out = subprocess.run([e.program, "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({e.program} -v: {err})"
    lines = (out.stdout + out.stderr).strip().splitlines()
    return lines[0].strip() if lines else f"unknown ({e.program} -v printed nothing)"


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
        what = ("an " if e.kind[0] in "AEIOU" else "a ") + e.kind if target == name else e.what
        raise EsbperfError(f"target {target} ({what}) serves only {', '.join(e.serves)}, not {', '.join(missing)}: "
                           "leave those scenarios out (the plan's scenarios, --scenario) or leave out the target")


def esb_process(name: str, host: str, port: int, backends: dict[str, str], workdir: Path | None = None,
                backend_timeout_s: int = 120, *, heap: str = HEAP,
                settings: dict[str, object] | None = None) -> procs.Process:
    """An engine (not started yet: an ESB, a floor or a reference) listening on host:port only,
    routing to the back ends {ws1: URL, ws2: URL, ws3: URL}; a back end that takes longer than
    backend_timeout_s gets the client an error answer. A JVM logs its collections to `gc.log` in
    its workdir (`heap`: its heap limit; a program engine has none). `settings`: values of the
    settings its engine.yaml declares (the others keep their defaults)."""
    e = engine(name)
    e.setting_values(settings)   # a bad setting is refused before anything is prepared
    if not 1 <= port <= 65535:
        raise EsbperfError(f"{e.what} port must be 1-65535, got {port}")
    if isinstance(backend_timeout_s, bool) or not isinstance(backend_timeout_s, int) or not 1 <= backend_timeout_s <= 3600:
        raise EsbperfError(f"back-end timeout must be 1-3600 s, got {backend_timeout_s!r}")
    backends = _check_backends(backends)
    if e.module:
        gc.heap_option(heap, "ESB")   # a bad heap is refused before anything is prepared
    require_installed(name)
    procs.check_port_free(host, port, e.what)
    workdir = Path(workdir or state_dir() / "esb" / f"{name}-{port}")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    if log.exists():
        log.unlink()   # one run per log, so its tail is this run's
    if e.module:
        ensure_built(e.module)
        gc.mention(log, gc.log_path(workdir))
    argv = command(name, host, port, backends, workdir, backend_timeout_s * 1000, heap, settings)
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
              backend_timeout_s: int = 120, timeout: float | None = None, *, heap: str = HEAP,
              settings: dict[str, object] | None = None) -> procs.Process:
    """Start an engine (ESB, floor or reference) and return once it answers on host:port (within
    `timeout`, default the engine's start timeout); stop it if it does not."""
    return esb_process(name, host, port, backends, workdir, backend_timeout_s, heap=heap, settings=settings).start_until(
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


def _settings_help() -> str:
    """The settings each engine declares, for `esbperf esb --help`."""
    lines = [f"  {name} --{st.name} (default {engines.format_setting(st.default)}): {st.help}"
             for name, e in ENGINES.items() for st in e.settings]
    return ("\b\nEngine settings (engine.yaml `settings`), given after the engine's name\n"
            "(`esbperf esb reference --work 1100`):\n" + "\n".join(lines)) if lines else ""


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True}, epilog=_settings_help())
@click.argument("name", metavar="|".join(ENGINES))
@click.option("--testbed", "testbed_name", metavar="NAME|FILE",
              help="Testbed description for the defaults (default: local).")
@click.option("--listen", metavar="HOST:PORT", help="Where to listen (default: the testbed's esb host and port).")
@click.option("--backends", metavar="ws1=URL,ws2=URL,ws3=URL",
              help="Echo back ends to route to (default: the testbed's ws1..ws3).")
@click.option("--backend-timeout-s", default=120, show_default=True,
              help="A back end slower than this gets the client an error (504).")
@click.pass_context
def esb(ctx: click.Context, name: str, testbed_name: str | None, listen: str | None, backends: str | None,
        backend_timeout_s: int) -> None:
    """Start what sits between client and back ends on the esb host: an ESB under test, a floor (a
    plain reverse proxy) or the reference engine (a measuring standard), each a folder of
    esb-projects/ with its engine.yaml; the settings it declares follow its name (below). Ctrl-C or
    SIGTERM stops it."""
    e = engine(name)
    settings = parse_setting_options(name, ctx.args)
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
    process = esb_process(name, host, port, urls, backend_timeout_s=backend_timeout_s, settings=settings)

    def banner() -> None:
        process.wait_until(lambda: answers(host, port), e.start_timeout_s, "answering")
        runs = ", ".join([f"heap {HEAP}" if e.module else e.program]
                         + ([f"serving {', '.join(e.serves)}"] if e.serves else []))
        click.echo(f"esb {name}: {e.what} listening at {_url(host, port)} ({runs}), routing to "
                   + ", ".join(f"{ws} {url}" for ws, url in urls.items()))
        if e.settings:
            click.echo(f"esb {name}: settings " + ", ".join(f"{k} {engines.format_setting(v)}"
                                                            for k, v in e.setting_values(settings).items())
                       + (f"; its account at {_url(host, port)}{e.account}" if e.account else ""))
        # What the engine said for the person starting it: its log's lines that begin with its name.
        for line in process.log.read_text(errors="replace").splitlines():
            if line.startswith(f"{name}: "):
                click.echo(f"esb {line}")
        gc_log = f"; GC log {gc.log_path(process.cwd)}" if e.module else ""
        click.echo(f"esb {name}: back-end timeout {backend_timeout_s} s; log {process.log}{gc_log}; Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
