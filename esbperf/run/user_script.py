"""A user's own Grinder 3 script in a run (`esbperf run --script FILE [--properties FILE]`).

The script is copied into the run folder (RUN/script/, what `--resume` and a reader of the run
see) and staged in the console's distribution folder under user-scripts/<run>/, which the
console sends to every agent; grinder-scripts/user_script.py runs it in each worker. Its
properties file gives the Grinder settings that shape its load (sleep factors, ramp-up); the
runner sets processes, threads, runs, duration and the log folder per step, and the control
API takes no JVM settings (docs/grinder.md), so those are refused here with the reason."""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from esbperf.core.errors import EsbperfError
from esbperf.core.project import CONTROL_API

WRAPPER = "user_script.py"          # in grinder-scripts/: runs the staged script
STAGING = "user-scripts"            # under the distribution folder
RUN_COPY = "script"                 # under the run folder
# How an agent reaches its console and names itself: the testbed decides them.
AGENT_SETTINGS = {"grinder.consoleHost", "grinder.consolePort", "grinder.useConsole", "grinder.hostID"}
# The control API's list of the worker properties it passes on (and which of them the runner sets
# per step): read from the file the control API itself reads.
WORKER_PROPERTIES = CONTROL_API.dir / "src" / "main" / "resources" / "esbperf" / "console" / "worker-properties.txt"


def allowed_properties() -> tuple[set[str], set[str]]:
    """(the properties the control API passes on, those of them the runner sets per step)."""
    passed, by_runner = set(), set()
    for line in WORKER_PROPERTIES.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            (by_runner if fields[2:] == ["runner"] else passed).add(fields[0])
    return passed, by_runner


_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.py$")


@dataclass(frozen=True)
class UserScript:
    file: Path                 # the run's copy
    properties: dict[str, str]  # passed to every worker of every step
    ignored: list[str]         # set by the runner or the testbed instead

    @property
    def name(self) -> str:
        """The step folders' scenario level."""
        return self.file.stem

    @property
    def takes_steps(self) -> bool:
        """Whether the script says warm workers may run it (TAKES_STEPS)."""
        return takes_steps(self.file.read_text(encoding="utf-8", errors="replace"))

    def record(self) -> dict:
        return {"file": self.file.name, "sha256": hashlib.sha256(self.file.read_bytes()).hexdigest(),
                "properties": self.properties, "ignored": self.ignored, "takes_steps": self.takes_steps}


# A script saying so at its top level runs in warm workers (docs/running.md, "Warm workers"): each
# of its threads builds a new TestRunner for every step it takes part in, after the step's esbperf.*
# settings are in grinder.properties, and the TestRunner's __del__ runs when it leaves the step.
TAKES_STEPS = re.compile(r"^TAKES_STEPS\s*=\s*True\s*(#.*)?$", re.MULTILINE)


def takes_steps(text: str) -> bool:
    return bool(TAKES_STEPS.search(text))


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file's `key = value` / `key: value` lines (comments, blank lines and
    backslash continuations as Java reads them; no unicode escapes: Grinder scripts rarely use them)."""
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as e:
        raise EsbperfError(f"{path}: cannot read the properties file ({e.strerror})") from None
    found: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        line = pending + line.lstrip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        key, value = re.match(r"([^=:\s]+)\s*(?:[=:]\s*)?(.*)$", line).groups()
        found[key] = value.strip()
    return found


def worker_properties(properties: dict[str, str], source: str) -> tuple[dict[str, str], list[str]]:
    """The user's properties that reach the workers, and those ignored (set per step or by the
    testbed); a property the control API would refuse is one line naming it and why."""
    allowed, set_by_runner = allowed_properties()
    passed, ignored = {}, []
    for key, value in properties.items():
        if key in set_by_runner or key in AGENT_SETTINGS:
            ignored.append(key)
        elif key.startswith("grinder.jvm"):
            raise EsbperfError(f"{source}: {key} is not taken: the console may not choose the program or JVM options "
                               "agent hosts run; set them in agents/agent.yaml on each load host (docs/grinder.md)")
        elif key in allowed or key.startswith("esbperf."):
            passed[key] = value
        else:
            raise EsbperfError(f"{source}: {key} is not passed to workers (the control API takes the Grinder settings "
                               f"listed in docs/grinder.md and esbperf.*); a script's own setting can be named "
                               f"esbperf.{key} and read so")
    return passed, sorted(ignored)


def load(script: Path, properties_file: Path | None = None) -> UserScript:
    """Check the script and its properties file (one line naming the file and the problem)."""
    if not script.is_file():
        raise EsbperfError(f"{script}: no such script file")
    if not _NAME.match(script.name):
        raise EsbperfError(f"{script}: a Grinder script is a .py file named with letters, digits, '_', '-' or '.'")
    if b"TestRunner" not in script.read_bytes():
        raise EsbperfError(f"{script}: defines no TestRunner class, so it is not a Grinder 3 script")
    if properties_file is None:
        return UserScript(script, {}, [])
    return UserScript(script, *worker_properties(read_properties(properties_file), str(properties_file)))


def keep(script: UserScript, run_dir: Path, properties_file: Path | None = None) -> UserScript:
    """Copy the script (and its properties file) into the run folder; the copy is what runs."""
    folder = run_dir / RUN_COPY
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(script.file, folder / script.file.name)
    if properties_file:
        shutil.copyfile(properties_file, folder / "grinder.properties")
    return UserScript(folder / script.file.name, script.properties, script.ignored)


def from_record(run_dir: Path, record: dict) -> UserScript:
    """The run's script again, for --resume: its copy in the run folder, checked against run.json."""
    copy = run_dir / RUN_COPY / record["file"]
    if not copy.is_file() or hashlib.sha256(copy.read_bytes()).hexdigest() != record["sha256"]:
        raise EsbperfError(f"{copy}: the run's copy of its script is missing or changed since the run began")
    return UserScript(copy, dict(record.get("properties", {})), list(record.get("ignored", [])))


def stage(script: UserScript, distribution: Path, run_name: str) -> str:
    """Put the script into the distribution folder; returns its path there (for esbperf.user.script)."""
    relative = Path(STAGING) / run_name / script.file.name
    target = distribution / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(script.file, target)
    return relative.as_posix()
