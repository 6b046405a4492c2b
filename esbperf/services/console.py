"""The Grinder console: starting it headless with our control API, and talking to that API.

The console reads its settings from ~/.grinder_console; we give it a home of its own
(-Duser.home) holding a file written from console-config/console.yaml, so nothing of the
user's is read or changed.

The control API is the runner's alone: at each start the console gets a new secret token, in a
file only its owner can read (`control-api.token` in the console's state folder; the JVM is told
the file's path, never the token, which would show in `ps`). A client on the same machine reads
it from there; a runner elsewhere is given it (ESBPERF_CONSOLE_TOKEN, or --token-file). The API
also refuses requests whose Host is not its own address and POSTs that are not JSON, and passes
on to the agents only the worker properties of its allow-list (docs/grinder.md)."""
from __future__ import annotations

import json
import os
import secrets
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import click

from esbperf.core import procs
from esbperf.core import topology
from esbperf.core.config import ConsoleConfig, state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API, GRINDER_HOME, ensure_built
from esbperf.core.topology import Testbed, testbed_option


def _console_properties(testbed: Testbed, cfg: ConsoleConfig) -> str:
    dist = cfg.distribution_directory
    lines = {
        "grinder.console.consoleHost": testbed.client.address,
        "grinder.console.consolePort": testbed.console_port,
        "grinder.console.httpHost": testbed.api_host,
        "grinder.console.httpPort": testbed.api_port,
        "grinder.console.scriptDistributionDirectory": dist,
        # Agents resolve the script relative to this file inside their file cache.
        "grinder.console.propertiesFile": dist / "grinder.properties",
        "grinder.console.sampleInterval": cfg.sample_interval_ms,
        # Keep build output and Jython's compiled classes out of the agents' caches.
        "grinder.console.distributionFileFilterExpression":
            r"^CVS/$|^\.svn/$|^.*~$|^\..*$|^target/$|^http-client/$|^__pycache__/$|^.*\$py\.class$|^.*\.pyc$",
    }
    return "".join(f"{k}={str(v).replace(chr(92), chr(92) * 2)}\n" for k, v in lines.items())


TOKEN_FILE = "control-api.token"
TOKEN_ENV = "ESBPERF_CONSOLE_TOKEN"
# How long after a start signal a worker JVM may still be starting up unseen by the console
# (measured: 3.6 s on this 2-core machine under the test suite's load; a killed runner's worker that
# slipped past settle() was once taken for the next run's own).
WORKER_LAUNCH_S = 10


def token_file(workdir: Path | None = None) -> Path:
    """Where the console of `workdir` (default: this state folder's console) keeps its token."""
    return (workdir or state_dir() / "console") / TOKEN_FILE


def _new_token(path: Path) -> None:
    """A new random token, in a file created readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")


def read_token(path: Path | None = None) -> str | None:
    """The token to send: ESBPERF_CONSOLE_TOKEN, else the file `path` (default: this state
    folder's console's); None when neither exists."""
    if path is None and os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV].strip()
    try:
        return (path or token_file()).read_text().strip() or None
    except OSError:
        if path is not None:
            raise EsbperfError(f"{path}: the console's token file cannot be read") from None
        return None


def control_client(testbed: Testbed, token: Path | None = None, timeout: float = 5.0) -> "ControlClient":
    """A client of the testbed's console, with the token (from the file `token`, or as read_token finds it)."""
    return ControlClient(testbed.api_url, read_token(token), timeout,
                         where=str(token) if token else f"${TOKEN_ENV} or {token_file()}")


def console_process(testbed: Testbed, cfg: ConsoleConfig | None = None,
                    workdir: Path | None = None) -> procs.Process:
    """A console process (not started yet) on the testbed's client host."""
    cfg = cfg or ConsoleConfig.load()
    if not (cfg.distribution_directory / "grinder.properties").is_file():
        raise EsbperfError(f"distribution directory {cfg.distribution_directory} has no grinder.properties")
    ensure_built(GRINDER_HOME, CONTROL_API)
    procs.check_port_free(testbed.client.address, testbed.console_port, "console (agents connect here)")
    procs.check_port_free(testbed.api_host, testbed.api_port, "console control API")
    procs.check_port_free(testbed.client.address, testbed.board_port, "console step board (warm workers poll it)")
    workdir = workdir or state_dir() / "console"
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / ".grinder_console").write_text(_console_properties(testbed, cfg))
    _new_token(token_file(workdir))
    classpath = os.pathsep.join([str(GRINDER_HOME.grinder_jar), CONTROL_API.classpath()])
    argv = [procs.java_executable(), *cfg.jvm_args, f"-Duser.home={home}",
            f"-Desbperf.controlApi.tokenFile={token_file(workdir)}", f"-Desbperf.board.port={testbed.board_port}",
            "-cp", classpath,
            "net.grinder.Console", "-headless"]
    return procs.Process("console", argv, workdir / "console.log", cwd=workdir)


def start_console(testbed: Testbed, cfg: ConsoleConfig | None = None, workdir: Path | None = None,
                  timeout: float = 30) -> procs.Process:
    """Start the console and return once its control API answers."""
    return console_process(testbed, cfg, workdir).start_until(
        lambda: control_client(testbed, token_file(workdir)).answers(), timeout,
        "its control API answering at " + testbed.api_url)


class ConsoleUnreachable(EsbperfError):
    """The control API does not answer at all (as opposed to answering with an error)."""


class ControlClient:
    """A client of the console's control API (JSON over HTTP)."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 5.0, where: str = "the console's token file"):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.where = where    # where the token was looked for, for the message when it is refused

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read()).get("error", e.reason)
            except (ValueError, AttributeError):
                message = e.reason
            if e.code == 401:
                found = "no token was found" if not self.token else "the token was refused (a console restarted since?)"
                raise EsbperfError(f"the console's control API at {self.url} wants its token and {found} "
                                   f"(looked in {self.where}); give it with --token-file or ${TOKEN_ENV}") from None
            raise EsbperfError(f"console {method} {path}: {message}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConsoleUnreachable(f"the console's control API at {self.url} does not answer ({reason}); "
                                     "is `esbperf console` running?") from None

    def answers(self) -> bool:
        try:
            self._call("GET", "/version")
            return True
        except EsbperfError:
            return False

    def version(self) -> str:
        return self._call("GET", "/version")

    def agents(self) -> list[dict]:
        return self._call("GET", "/agents/status")

    def start_workers(self, properties: dict[str, Any] | None = None) -> None:
        self._note_launch(time.time())
        self._call("POST", "/agents/start-workers", properties or {})

    # A start signal launches worker JVMs that the console lists only once they have started up
    # (seconds on a busy host). A runner killed just after sending one leaves workers that no
    # stop signal can reach yet and that the next run would take for its own; so each start is
    # noted in a file on this machine until the workers it launched are seen finished, and
    # settle() waits out a noted start's launch time.
    def _launch_note(self) -> Path:
        where = self.url.split("://", 1)[-1].replace(":", "-").replace("/", "")
        return state_dir() / "console-launches" / where

    def _note_launch(self, at: float | None) -> None:
        note = self._launch_note()
        try:
            if at is None:
                note.unlink(missing_ok=True)
            else:
                note.parent.mkdir(parents=True, exist_ok=True)
                note.write_text(f"{at:.3f}\n")
        except OSError:
            pass   # a read-only state folder: only the guard against a killed runner's workers is lost

    def _noted_launch(self) -> float | None:
        try:
            return float(self._launch_note().read_text())
        except (OSError, ValueError):
            return None

    def stop_workers(self) -> None:
        self._call("POST", "/agents/stop-workers")

    def stop_agents(self) -> None:
        self._call("POST", "/agents/stop")

    def distribute(self, timeout: float = 60) -> dict:
        """Send the distribution directory to every agent's cache; wait until done."""
        started = self._call("POST", "/files/distribute")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = self._call("GET", "/files/status").get("last-distribution") or {}
            if last.get("id") == started["id"]:
                if last.get("state") == "finished":
                    return last
                if last.get("state") == "error":
                    raise EsbperfError(f"file distribution failed: {last.get('error')}")
            time.sleep(0.2)
        raise EsbperfError(f"file distribution did not finish within {timeout:.0f} s")

    def board_order(self, order: dict) -> None:
        """Post the step board's next order (esbperf/run/pool.py)."""
        self._call("POST", "/board/order", order)

    def board_lease(self, key: str, lease_s: float) -> None:
        self._call("POST", "/board/lease", {"key": key, "lease_s": lease_s})

    def board_status(self) -> dict:
        """The board's order and what each worker last said of it; {} from a console without a board."""
        try:
            return self._call("GET", "/board/status")
        except ConsoleUnreachable:
            raise
        except EsbperfError:
            return {}

    def recording(self, action: str) -> dict:
        return self._call("POST", f"/recording/{action}")

    def data(self, latest: bool = False) -> dict:
        return self._call("GET", "/recording/data-latest" if latest else "/recording/data")

    def wait_for_agents(self, count: int, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            agents = self.agents()
            if len(agents) >= count:
                return agents
            if time.monotonic() > deadline:
                raise EsbperfError(f"{len(agents)} agent(s) connected to the console, {count} wanted, "
                                   f"after {timeout:.0f} s; start them with `esbperf agent`")
            time.sleep(0.2)

    def worker_ids(self) -> set[str]:
        return {w["id"] for a in self.agents() for w in a.get("workers", [])}

    def wait_workers_started(self, before: set[str], count: int, timeout: float = 60) -> set[str]:
        """Wait until `count` workers not in `before` (ids known before the start) report."""
        deadline = time.monotonic() + timeout
        while True:
            new = self.worker_ids() - before
            if len(new) >= count:
                return new
            if time.monotonic() > deadline:
                raise EsbperfError(f"{len(new)} of {count} worker processes started within {timeout:.0f} s; "
                                   "see the agents' logs")
            time.sleep(0.1)

    def running_workers(self) -> set[str]:
        return {w["id"] for a in self.agents() for w in a.get("workers", [])
                if w["state"] in ("STARTED", "RUNNING")}

    def settle(self, quiet_s: float = 2.5, timeout: float = 60) -> None:
        """Stop every worker and return once none has run for `quiet_s`: a worker launched just
        before (say by a runner that was killed) takes a moment to report, and must not be
        mistaken for one of ours."""
        self.stop_workers()
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        launched = self._noted_launch()
        launch_over = time.monotonic() + (launched + WORKER_LAUNCH_S - time.time() if launched else 0)
        while time.monotonic() - quiet_since < quiet_s or time.monotonic() < launch_over:
            if self.running_workers():
                self.stop_workers()
                quiet_since = time.monotonic()
            if time.monotonic() > deadline:
                raise EsbperfError(f"workers are still running {timeout:.0f} s after a stop signal; see the agents' logs")
            time.sleep(0.2)
        self._note_launch(None)

    def start_workers_and_wait(self, properties: dict[str, Any], count: int, timeout: float = 60) -> set[str]:
        """Start workers on every agent and return the ids of the `count` new ones.

        An agent drops a start signal that reaches it while it is still winding down from a
        stop (Grinder discards pending starts after its workers end), so the signal is sent
        again when no new worker shows up within a few seconds; an agent whose workers are
        already running ignores the repeat."""
        before = self.worker_ids()
        deadline = time.monotonic() + timeout
        while True:
            self.start_workers(properties)
            try:
                return self.wait_workers_started(before, count, min(3.0, max(0.1, deadline - time.monotonic())))
            except EsbperfError:
                if time.monotonic() >= deadline:
                    raise

    def wait_workers_finished(self, workers: set[str], timeout: float) -> bool:
        """Wait until none of `workers` is running (finished, or gone); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = [w for a in self.agents() for w in a.get("workers", [])
                       if w["id"] in workers and w["state"] in ("STARTED", "RUNNING")]
            if not running:
                self._note_launch(None)
                return True
            time.sleep(0.05)   # this wait is every step's stop: keep it short
        return False


def statistics(data: dict) -> dict[str, Any]:
    """The totals of a /recording/data answer as {column: value}."""
    return dict(zip(data["columns"], data["totals"]))



@click.command()
@testbed_option
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Console settings (default: console-config/console.yaml).")
def console(testbed_name: str | None, config_file: Path | None) -> None:
    """Start the headless Grinder console with the esbperf control API; Ctrl-C stops it."""
    testbed = topology.load(testbed_name)
    cfg = ConsoleConfig.load(config_file) if config_file else ConsoleConfig.load()
    process = console_process(testbed, cfg)

    def banner() -> None:
        process.wait_until(lambda: control_client(testbed, token_file()).answers(), 30, "its control API answering")
        click.echo(f"console: agents connect to {testbed.client.address}:{testbed.console_port} "
                   "(no authentication on that port: keep it on the isolated test network)")
        click.echo(f"console: warm workers poll the step board at {testbed.board_url} (a run's key in each poll)")
        click.echo(f"console: control API at {testbed.api_url}/, for the holder of the token in {token_file()} "
                   f"(a runner on another machine: ${TOKEN_ENV} or --token-file)")
        click.echo(f"console: distributing {cfg.distribution_directory}; log {process.log}")
        click.echo("console: Ctrl-C to stop")

    raise SystemExit(procs.run_foreground(process, banner))
