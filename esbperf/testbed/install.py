"""`esbperf testbed install`: the same esbperf on every host with `ssh:`, in that host's install
folder (`dir:`), runnable there with nothing fetched from the network.

What is sent: the project as it is here, built first (sources, the Java modules' jars and runtime
libraries, the Grinder home), never .venv, results, the state folder, .git or build
intermediates; the light Python dependencies the host's commands need (click, PyYAML: echo, esb,
monitor, agent and console import nothing heavier; polars and matplotlib only ever run on the
client) in `pylib/`; `bin/esbperf`, which runs the host's python3 on them; and a marker file that
says the folder is esbperf's (install refuses a folder that is neither empty nor marked, as it
deletes there what the project no longer has). rsync sends only what changed: a second install
sends nothing but the file list, and each host's line says how many files and bytes went.

Each host is checked first: java 17+, python 3.11+ and rsync must be there; one line names the
host and what is missing.
"""
from __future__ import annotations

import re
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.project import ROOT, all_modules, ensure_built
from esbperf.core.topology import Testbed
from esbperf.testbed.ssh import PYLIB, PYTHON, STATE, Ssh, last_line, rsync

MARKER = ".esbperf-install"
MIN_JAVA, MIN_PYTHON = 17, (3, 11)
PYTHON_DEPS = ("click", "yaml")   # import names (yaml brings its C binding when the host can load it)
# Never sent: the local environment, results, state, history, and what Maven leaves beside the jars.
EXCLUDES = ["/.venv/", "/results/", "/.esbperf/", "/.git", f"/{STATE}/", "__pycache__/", "*.pyc", ".pytest_cache/",
            ".hypothesis/", "target/classes/", "target/test-classes/", "target/maven-status/",
            "target/maven-archiver/", "target/generated-sources/", "target/generated-test-sources/",
            "target/surefire-reports/", "target/dependency-maven-plugin-markers/"]

LAUNCHER = """#!/bin/sh
# esbperf as `esbperf testbed install` put it here: this folder's sources, the light Python
# dependencies in pylib/, and the host's own python3.
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$here/pylib:$here" exec python3 -m esbperf "$@"
"""

PROBE = r"""
echo "home=$HOME"
if command -v java >/dev/null 2>&1; then
  echo "java=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)"
fi
if command -v {python} >/dev/null 2>&1; then
  echo "python=$({python} -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
fi
if command -v rsync >/dev/null 2>&1; then echo "rsync=yes"; fi
if [ ! -e {dir} ]; then echo "dir=none"
elif [ -f {dir}/{marker} ]; then echo "dir=esbperf"
elif [ -d {dir} ] && [ -z "$(ls -A {dir})" ]; then echo "dir=empty"
else echo "dir=other"; fi
"""


@dataclass
class Installed:
    role: str
    line: str


def _java_major(version: str) -> int:
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(re.match(r"\d+", parts[0]).group())
    return major


def _check_host(s: Ssh) -> dict[str, str]:
    """The host's java, python and rsync, and what its install folder holds; one line if lacking."""
    probe = PROBE.format(python=PYTHON, dir=shlex.quote(s.dir), marker=MARKER)
    found = dict(line.split("=", 1) for line in s.run(probe, timeout=30).stdout.splitlines() if "=" in line)
    missing = []
    java = found.get("java", "")
    if not java or _java_major(java) < MIN_JAVA:
        missing.append(f"java {MIN_JAVA}+ (found {java or 'none'})")
    python = found.get("python", "")
    if not python or tuple(map(int, python.split(".")[:2])) < MIN_PYTHON:
        missing.append(f"{PYTHON} {'.'.join(map(str, MIN_PYTHON))}+ (found {python or 'none'})")
    if "rsync" not in found:
        missing.append("rsync")
    if missing:
        raise EsbperfError(f"{s}: missing {', '.join(missing)}; install it there (Debian: "
                           "apt-get install openjdk-17-jre-headless python3 rsync)")
    if found.get("dir") == "other":
        raise EsbperfError(f"{s}: {s.dir} is not empty and not an esbperf install folder (no {MARKER}); "
                           "give the host another dir: in the testbed file")
    return found


def bundle() -> Path:
    """What is sent besides the project: pylib/ (click, PyYAML as installed here), bin/esbperf and
    the marker. Files are rewritten only when they change, so rsync finds nothing new next time."""
    folder = state_dir() / "install-bundle"
    for name in PYTHON_DEPS:
        try:
            module = __import__(name)
        except ImportError:
            continue
        source = Path(module.__file__).parent
        target = folder / PYLIB / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, copy_function=shutil.copy2,   # copy2 keeps the times rsync compares
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path, text, mode in ((folder / "bin" / "esbperf", LAUNCHER, 0o755),
                             (folder / MARKER, "an esbperf install folder: `esbperf testbed install` keeps it "
                                               "like the client's project (and deletes what that no longer has)\n",
                              0o644)):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        path.chmod(mode)
    return folder


def _excludes() -> list[str]:
    excludes = list(EXCLUDES)
    try:   # the state folder, wherever $ESBPERF_STATE puts it inside the project
        excludes.append(f"/{state_dir().relative_to(ROOT)}/")
    except ValueError:
        pass
    return excludes


def _stat(stats: str, label: str) -> int:
    match = re.search(rf"^{label}: ([\d,.]+)", stats, re.MULTILINE)
    return int(match.group(1).replace(",", "").replace(".", "")) if match else 0


def _size(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def install_host(testbed: Testbed, role: str, extra: Path) -> str:
    """Install on one host; a line saying what was sent."""
    s = Ssh(testbed, role)
    found = _check_host(s)
    s.run(f"mkdir -p {shlex.quote(s.dir)}", timeout=30)
    argv = ["-a", "--delete", "--stats", "-e", s.rsh(), *[f"--exclude={x}" for x in _excludes()],
            f"{ROOT}/", f"{extra}/", f"{s.dest}:{s.dir}/"]
    sent = rsync(argv, str(s))
    if sent.returncode != 0:
        raise EsbperfError(f"{s}: rsync to {s.dir} failed: {last_line(sent.stderr)}")
    files = _stat(sent.stdout, "Number of regular files transferred")
    bytes_sent = _stat(sent.stdout, "Total bytes sent")
    # Runnable there: the host's python3 imports the installed esbperf and its CLI.
    version = s.run(s.esbperf_python(["-m", "esbperf", "--version"]), timeout=60).stdout.strip()
    what = "up to date" if files == 0 else f"{files} files"
    return (f"{role:8} {s.dest}:{s.dir}  java {found['java']}, python {found['python']}, {version}; "
            f"{what}, {_size(bytes_sent)} sent")


def install(testbed: Testbed, echo: Callable[[str], None] = print) -> list[str]:
    """Install on every ssh host at once; print a line per host. A host that fails gets one line
    naming it and the cause; the others are installed all the same, then it raises."""
    roles = [role for role, host in testbed.hosts.items() if host.ssh]
    if not roles:
        raise EsbperfError(f"{testbed.path}: no host has ssh:, so there is nothing to install "
                           "(the hosts without ssh run this machine's esbperf)")
    ensure_built(*all_modules())
    extra = bundle()

    def one(role: str) -> str | EsbperfError:
        try:
            return install_host(testbed, role, extra)
        except EsbperfError as e:
            return e
    with ThreadPoolExecutor(max_workers=len(roles)) as pool:
        outcomes = list(pool.map(one, roles))
    lines, failures = [], []
    for outcome in outcomes:
        if isinstance(outcome, EsbperfError):
            failures.append(str(outcome))
        else:
            lines.append(outcome)
            echo(outcome)
    if failures:
        raise EsbperfError(f"install failed on {len(failures)} host(s): " + "; ".join(failures))
    return lines
