"""The engines under test, each a folder: `esb-projects/<name>/engine.yaml` says what the engine is
and how esbperf starts, recognises and checks it. Adding an ESB is adding a folder (or naming one
outside the checkout in $ESBPERF_ENGINES); nothing in esbperf/ names an engine.

    kind: ESB                   # or floor: a plain reverse proxy drawn beside the ESBs; or reference:
                                #   a measuring standard (a set amount of work per request), not an ESB
    match: org.apache.camel.main.Main   # text of its process's command line (the monitor's --match)
    serves: [proxy, hbr]        # the contract's scenarios it serves; default: every one
    start_timeout_s: 90         # how long it may take to answer once started
    java:                       # a JVM engine, built by the Maven module of its folder ...
      module: esb-camel         #   its artifactId (target/esb-camel.jar, target/lib/*)
      also_packages: [../shared]   # folders outside its own that its jar holds (a change rebuilds it)
      options: [-Desb.port=@ESB_PORT@]   # JVM options after esbperf's own (heap, GC log, XML safety)
      main: org.apache.camel.main.Main
      arguments: []             #   after the main class
    command: [nginx, -c, "@WORK@/nginx.conf"]   # ... or a program on PATH and its arguments
    parent_death_signal: TERM   # the signal it gets when the command that started it dies (default KILL)
    config: [conf]              # files or folders of its folder, copied into its work folder
    folders: [repository]       # empty folders made in its work folder
    settings:                   # what `esbperf esb NAME --work 1100` may set, each filling @SETTING_WORK@
      work: {default: 1300, min: 0, max: 10000000, help: rounds of work per request}
    account: /reference/stats   # a GET path on its listener answering JSON about itself (run.json keeps it)
    extends: reference          # another engine of this folder's parent: its fields, then these over them
                                #   (java field by field); it is built, configured and started from there

A twin (extends) is the same engine a second time under its own name and port, e.g. two reference
engines in one run (esbperf selftest); its `match` must tell its process from the other's.

Its arguments and config files carry @TOKENS@ that esbperf fills at each start (`TOKENS`; values are
XML-escaped in files whose names end in .xml); a token left unfilled is an error naming the file."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from esbperf.core import scenarios
from esbperf.core.config import load_yaml
from esbperf.core.errors import EsbperfError, quoted
from esbperf.core.project import ROOT, Module
from esbperf.core.roles import BACKENDS

FOLDER = ROOT / "esb-projects"
ENV = "ESBPERF_ENGINES"   # further engine folders (or folders of them), separated like PATH
FILE = "engine.yaml"
KINDS = ("ESB", "floor", "reference")
NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
TOKEN = re.compile(r"@[A-Z0-9_]+@")
SIGNALS = ("TERM", "INT", "HUP", "KILL")
# What an engine's arguments and config files may name, filled at each start (esbperf/services/esb.py).
TOKENS = {
    "@ESB_HOST@": "the address to listen on (an IPv6 address without brackets)",
    "@ESB_URL_HOST@": "the same as it goes into a URL (an IPv6 address in brackets)",
    "@ESB_PORT@": "the port to listen on",
    "@ESB_ADDRESS@": "HOST:PORT to listen on ([::1]:PORT for IPv6)",
    **{f"@{ws.upper()}@": f"{ws}'s base URL (http://HOST:PORT)" for ws in BACKENDS},
    **{f"@{ws.upper()}_ADDRESS@": f"{ws}'s HOST:PORT ([::1]:PORT for IPv6)" for ws in BACKENDS},
    "@BACKEND_TIMEOUT_MS@": "how long a back end may take to answer before the client gets a 504",
    "@CONNECT_TIMEOUT_MS@": "how long connecting to a back end may take: the back-end timeout, at most 10 s",
    "@SOCKET_TIMEOUT_MS@": "the back-end timeout + 10 s: sockets outlive it, so the client gets the 504, not a reset",
    "@WORK@": "the engine's work folder (its config copies, its log)",
    "@ENGINE@": "the engine's own folder",
    "@SHARED_URL@": "esb-projects/shared as a file: URL (the contract's stylesheets are in its xslt/)",
}
FIELDS = ("kind", "match", "serves", "start_timeout_s", "java", "command", "parent_death_signal", "config", "folders",
          "settings", "account", "extends")
JAVA_FIELDS = ("module", "also_packages", "options", "main", "arguments")
SETTING_FIELDS = ("default", "min", "max", "help")
SETTING_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
# Options of `esbperf esb` itself, which a setting's --NAME cannot shadow.
RESERVED_SETTINGS = ("testbed", "listen", "backends", "backend-timeout-s", "help", "setting")


@dataclass(frozen=True)
class Setting:
    """A setting an engine declares (engine.yaml `settings`): a number with its default and bounds,
    given at start as `--NAME VALUE` (`esbperf esb`) or NAME=VALUE (`--esb-setting`), and filled into
    the engine's arguments and config files as @SETTING_NAME@."""

    name: str
    default: int | float            # whole numbers when the default is one, else any number
    minimum: int | float | None
    maximum: int | float | None
    help: str

    @property
    def token(self) -> str:
        return setting_token(self.name)

    def parse(self, value: object, engine: str) -> int | float:
        """`value` (text or a number) as this setting's type within its bounds; a one-line error otherwise."""
        whole = isinstance(self.default, int)
        what = "a whole number" if whole else "a number"
        bounds = f" {format_setting(self.minimum)}-{format_setting(self.maximum)}" \
            if self.minimum is not None and self.maximum is not None else \
            f" ≥ {format_setting(self.minimum)}" if self.minimum is not None else \
            f" ≤ {format_setting(self.maximum)}" if self.maximum is not None else ""
        try:
            if isinstance(value, bool):
                raise ValueError
            number = int(value) if whole and not isinstance(value, float) else float(value)
            if not math.isfinite(number) or (whole and isinstance(value, float)):
                raise ValueError
        except (TypeError, ValueError):
            raise EsbperfError(f"setting {self.name} of {engine} must be {what}{bounds}, got {value!r}") from None
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum):
            raise EsbperfError(f"setting {self.name} of {engine} must be {what}{bounds}, got {value!r}")
        return number


def setting_token(name: str) -> str:
    """The token a setting fills: work → @SETTING_WORK@, warmup-factor → @SETTING_WARMUP_FACTOR@."""
    return "@SETTING_" + name.upper().replace("-", "_") + "@"


def format_setting(value: int | float) -> str:
    """A setting's value as it goes on a command line and into files: 1300, 1.25, 0.5 (never 1e-05)."""
    if isinstance(value, int):
        return str(value)
    text = f"{value:.12f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@dataclass(frozen=True)
class Engine:
    """What sits between the client and the back ends (a target of kind `esb`): an ESB, or a floor
    — a plain reverse proxy, drawn beside the ESBs to show what the least work there costs."""

    name: str
    folder: Path
    kind: str                             # "ESB" or "floor", as messages and docs say it
    match: str                            # text of its process's command line (the monitor's --match)
    serves: tuple[str, ...] | None        # the contract's scenarios it serves; None: every one
    start_timeout_s: float                # until it answers, on a busy machine
    module: Module | None                 # a JVM engine: the Maven module that builds it
    jvm_options: tuple[str, ...]
    main: str | None
    arguments: tuple[str, ...]            # a JVM engine: after the main class; else the program's
    program: str | None                   # a program engine: what runs (on PATH)
    parent_death_signal: str
    config: tuple[str, ...]
    folders: tuple[str, ...]
    settings: tuple[Setting, ...] = ()    # what may be set at each start (engine.yaml `settings`)
    account: str | None = None            # a GET path on its listener answering JSON about itself

    @property
    def what(self) -> str:
        """How a message names it: "ESB camel", "floor nginx"; an engine named as its kind once ("reference")."""
        return self.name if self.name == self.kind else f"{self.kind} {self.name}"

    def setting_values(self, given: dict[str, object] | None = None) -> dict[str, int | float]:
        """Every setting's value: those `given` (by name, text or number) checked, the others their
        defaults; a one-line error for a setting it does not declare or a bad value."""
        declared = {s.name: s for s in self.settings}
        for name in given or {}:
            if name not in declared:
                offered = f"its settings: {', '.join(declared)}" if declared else "it declares none"
                raise EsbperfError(f"{self.what} has no setting '{name}' ({offered}; engine.yaml `settings`)")
        return {name: s.parse(given[name], self.name) if given and name in given else s.default
                for name, s in declared.items()}


def _strings(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        raise EsbperfError(f"{where} must be a list of strings, got {value!r}")
    return tuple(str(v) for v in value)


def _tokens_known(values: tuple[str, ...], where: str, settings: tuple[Setting, ...] = ()) -> None:
    known = [*TOKENS, *(s.token for s in settings)]
    unknown = sorted({t for v in values for t in TOKEN.findall(v)} - set(known))
    if unknown:
        raise EsbperfError(f"{where} names {', '.join(unknown)}, which esbperf does not fill "
                           f"(it fills {', '.join(known)})")


def _settings(data: object, path: Path) -> tuple[Setting, ...]:
    """engine.yaml's `settings`: {name: {default, min, max, help}}, numbers only."""
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise EsbperfError(f"{path}: settings must be a mapping of names to {{default, min, max, help}}")
    found = []
    for name, spec in data.items():
        where = f"{path}: settings.{name}"
        if not isinstance(name, str) or not SETTING_NAME.match(name) or name in RESERVED_SETTINGS:
            raise EsbperfError(f"{path}: a setting's name is lowercase words joined by '-' and not one of esbperf esb's "
                               f"own options ({', '.join(RESERVED_SETTINGS)}), got {name!r}")
        if not isinstance(spec, dict) or "default" not in spec:
            raise EsbperfError(f"{where} must be a mapping with a default (and min, max, help)")
        unknown = [k for k in spec if k not in SETTING_FIELDS]
        if unknown:
            raise EsbperfError(f"{where}: unknown field {quoted(unknown[0])} (allowed: {', '.join(SETTING_FIELDS)})")
        numbers = {k: spec.get(k) for k in ("default", "min", "max")}
        for key, value in numbers.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise EsbperfError(f"{where}.{key} must be a number, got {value!r}")
        text = spec.get("help", "")
        if not isinstance(text, str):
            raise EsbperfError(f"{where}.help must be a text, got {text!r}")
        default, low, high = numbers["default"], numbers["min"], numbers["max"]
        if default is None or (low is not None and default < low) or (high is not None and default > high):
            raise EsbperfError(f"{where}.default must be a number within its min and max, got {default!r}")
        found.append(Setting(name, default, low, high, text.strip()))
    return tuple(found)


def _inside(folder: Path, relative: str, where: str) -> str:
    """`relative`, a file or folder of the engine's folder (no absolute path, nothing above it)."""
    path = Path(relative)
    if path.is_absolute() or ".." in path.parts or not (folder / path).exists():
        raise EsbperfError(f"{where}: {relative!r} is not a file or folder of {folder}")
    return relative


def read(folder: Path) -> Engine:
    """The engine described by `folder`/engine.yaml; a one-line error naming the file and the field."""
    path = folder / FILE
    data = load_yaml(path)
    name = folder.name
    if not NAME.match(name):
        raise EsbperfError(f"{path}: an engine's folder name is its name: lowercase letters, digits and '-', "
                           f"starting with a letter, got {name!r}")
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        raise EsbperfError(f"{path}: unknown field {quoted(unknown[0])} (allowed: {', '.join(FIELDS)})")
    if "extends" in data:
        folder, data = _extended(folder, data, path)
    kind = data.get("kind")
    if kind not in KINDS:
        raise EsbperfError(f"{path}: kind must be {', '.join(KINDS[:-1])} or {KINDS[-1]}, got {kind!r}")
    match = data.get("match")
    if not isinstance(match, str) or not match.strip():
        raise EsbperfError(f"{path}: match must be a text of the engine's process command line, got {match!r}")
    serves = data.get("serves")
    if serves is not None:
        serves = _strings(serves, f"{path}: serves")
        known = scenarios.names()
        wrong = [s for s in serves if s not in known]
        if wrong or not serves:
            raise EsbperfError(f"{path}: serves names {wrong[0] if wrong else 'nothing'}; "
                               f"the contract's scenarios are {', '.join(known)}")
    timeout = data.get("start_timeout_s", 90)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise EsbperfError(f"{path}: start_timeout_s must be seconds (0-3600), got {timeout!r}")
    signal = data.get("parent_death_signal", "KILL")
    if signal not in SIGNALS:
        raise EsbperfError(f"{path}: parent_death_signal must be one of {', '.join(SIGNALS)}, got {signal!r}")
    settings = _settings(data.get("settings"), path)
    account = data.get("account")
    if account is not None and (not isinstance(account, str) or not re.fullmatch(r"/[\w./-]*", account)):
        raise EsbperfError(f"{path}: account must be a path on the engine's listener (/like/this), got {account!r}")
    config = tuple(_inside(folder, c, f"{path}: config") for c in _strings(data.get("config", []), f"{path}: config"))
    folders = _strings(data.get("folders", []), f"{path}: folders")
    if any(Path(f).is_absolute() or ".." in Path(f).parts for f in folders):
        raise EsbperfError(f"{path}: folders are made inside the work folder: no absolute path, no '..'")
    java, command = data.get("java"), data.get("command")
    if (java is None) == (command is None):
        raise EsbperfError(f"{path}: give either java (a JVM engine built by its Maven module) or command "
                           "(a program and its arguments)")
    module, options, main, arguments, program = None, (), None, (), None
    if java is not None:
        if not isinstance(java, dict):
            raise EsbperfError(f"{path}: java must be a mapping ({', '.join(JAVA_FIELDS)})")
        unknown = [k for k in java if k not in JAVA_FIELDS]
        if unknown:
            raise EsbperfError(f"{path}: unknown field {quoted(f'java.{unknown[0]}')} (allowed: {', '.join(JAVA_FIELDS)})")
        artifact, main = java.get("module"), java.get("main")
        if not isinstance(artifact, str) or not NAME.match(artifact) or not (folder / "pom.xml").is_file():
            raise EsbperfError(f"{path}: java.module must be the artifactId of the Maven module in {folder} "
                               f"(its pom.xml), got {artifact!r}")
        if not isinstance(main, str) or not re.fullmatch(r"[\w$.]+", main):
            raise EsbperfError(f"{path}: java.main must be the main class, got {main!r}")
        try:
            relative = folder.resolve().relative_to(ROOT)
        except ValueError:
            raise EsbperfError(f"{path}: a JVM engine is built by the checkout's Maven reactor, so its folder must "
                               f"be in {ROOT} (and a module of its pom.xml)") from None
        also = []
        for entry in _strings(java.get("also_packages", []), f"{path}: java.also_packages"):
            target = (folder / entry).resolve()
            if not target.exists() or not target.is_relative_to(ROOT):
                raise EsbperfError(f"{path}: java.also_packages: {entry} is not a folder of the checkout")
            also.append(target.relative_to(ROOT).as_posix())
        module = Module(relative.as_posix(), artifact, tuple(also))
        options = _strings(java.get("options", []), f"{path}: java.options")
        arguments = _strings(java.get("arguments", []), f"{path}: java.arguments")
        _tokens_known(options + arguments, f"{path}: java", settings)
    else:
        command = _strings(command, f"{path}: command")
        if not command or not re.fullmatch(r"[\w.+-]+", command[0]):
            raise EsbperfError(f"{path}: command must start with a program on PATH (a name, not a path), "
                               f"got {command[:1]!r}")
        program, arguments = command[0], command[1:]
        _tokens_known(arguments, f"{path}: command", settings)
    return Engine(name, folder, kind, match, serves, float(timeout), module, options, main, arguments, program,
                  signal, config, folders, settings, account)


def _extended(folder: Path, data: dict, path: Path) -> tuple[Path, dict]:
    """An engine.yaml that `extends` another engine of its parent folder: the other's folder (which
    builds and configures it) and its fields with these over them (`java` field by field)."""
    base_name = data["extends"]
    base = folder.parent / str(base_name)
    if not isinstance(base_name, str) or not NAME.match(base_name) or not (base / FILE).is_file():
        raise EsbperfError(f"{path}: extends must name an engine folder beside it, got {base_name!r}")
    base_data = load_yaml(base / FILE)
    if "extends" in base_data:
        raise EsbperfError(f"{path}: extends {base_name}, which extends another: one level only")
    mine, theirs = str(data.get("match") or ""), str(base_data.get("match") or "")
    if not mine or mine in theirs or theirs in mine:
        raise EsbperfError(f"{path}: an engine that extends {base_name} needs a match of its own, "
                           "or the monitor could not tell their processes apart")
    merged = {**base_data, **{k: v for k, v in data.items() if k != "extends"}}
    if isinstance(base_data.get("java"), dict) and isinstance(data.get("java"), dict):
        merged["java"] = {**base_data["java"], **data["java"]}
    return base, merged


def folders() -> list[Path]:
    """Every engine folder: esb-projects/*/ holding an engine.yaml, then those $ESBPERF_ENGINES names
    (each an engine folder, or a folder of them)."""
    found = [p.parent for p in sorted(FOLDER.glob(f"*/{FILE}"))]
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        place = Path(entry).expanduser().resolve()
        if (place / FILE).is_file():
            found.append(place)
        elif place.is_dir():
            found += [p.parent for p in sorted(place.glob(f"*/{FILE}"))]
        else:
            raise EsbperfError(f"${ENV}: {entry} is not a folder")
    return found


def load_all() -> dict[str, Engine]:
    """Every engine by name, the ESBs first, then the floors, each in name order; a name given by two
    folders is a one-line error naming both."""
    return _load_all(os.environ.get(ENV, ""))


def warmup_kind(target_kind: str, esb: str | None) -> str:
    """How a plan's per-kind target warm-up (plan.WARMUP_KINDS) names a target of the testbed (its
    `kind` and `esb`): direct, floor, or esb (an ESB, a reference engine — a JVM whose work is set and
    which may be told to warm up like one — or an engine esbperf does not know)."""
    if target_kind == "direct":
        return "direct"
    engine = load_all().get(esb or "")
    return "floor" if engine is not None and engine.kind == "floor" else "esb"


@lru_cache(maxsize=4)
def _load_all(_env: str) -> dict[str, Engine]:
    engines: dict[str, Engine] = {}
    for folder in folders():
        engine = read(folder)
        if engine.name in engines:
            raise EsbperfError(f"two engines are called '{engine.name}': {engines[engine.name].folder} and {folder}")
        engines[engine.name] = engine
    return {e.name: e for e in sorted(engines.values(), key=lambda e: (KINDS.index(e.kind), e.name))}


def modules() -> list[Module]:
    """The Maven modules of the JVM engines."""
    return [e.module for e in load_all().values() if e.module]
