"""The results layout, the runner's and the analysis's one definition of it: RUN/run.json, and one
folder per step, RUN/<target>/<scenario>/<payload>/<users>/[rate-<r>/]iter-<n>/ holding step.json,
console.json, logs/ (the workers' data logs and logs), monitor-<role>.csv (a host's samples, in
MONITOR_HEADER's columns) and gc-<role>.log (a service JVM's GC window, esbperf/results/gclog.py).

A step is written into a hidden `.tmp-iter-<n>` folder beside its final place and renamed
when complete, so a folder named iter-<n> is always whole. Nothing is ever overwritten: an
interrupted step's folder is kept as `.aborted-iter-<n>-<time>`, a step whose target stopped
answering as `.failed-iter-<n>-<time>`, and a new run never reuses an existing run folder."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from esbperf.core.errors import EsbperfError
from esbperf.core.plan import Step

RUN_FILE = "run.json"
STEP_FILE = "step.json"
CONSOLE_FILE = "console.json"
LOGS = "logs"
MONITOR_HEADER = ["time_ms", "phase", "metric", "subject", "value"]
# Hidden step folders: one being written, one interrupted, one kept aside; never counted.
UNFINISHED_PREFIXES = (".tmp-", ".aborted-", ".failed-")


def monitor_file(step_dir: Path, role: str) -> Path:
    """A host's samples over the step (the run's window of its monitor)."""
    return Path(step_dir) / f"monitor-{role}.csv"


def monitor_roles(step_dir: Path) -> set[str]:
    """The roles whose monitor file a step holds."""
    return {p.name[len("monitor-"):-len(".csv")] for p in Path(step_dir).glob("monitor-*.csv")}


def gc_file(step_dir: Path, role: str) -> Path:
    """A service's GC window of the step (role esb, ws1, ws2, ws3)."""
    return Path(step_dir) / f"gc-{role}.log"


def data_logs(step_dir: Path) -> list[Path]:
    """The workers' data logs of a step."""
    return sorted((Path(step_dir) / LOGS).glob("*-data.log"))


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object (run.json, step.json); a one-line error when it is missing or not one."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise EsbperfError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise EsbperfError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise EsbperfError(f"{path}: expected a JSON object")
    return data


def new_run_dir(out: Path, name: str) -> Path:
    """A new, empty run folder out/name (or name-2, name-3… if taken)."""
    out.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = out / (name if n == 1 else f"{name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise EsbperfError(f"could not find a free run folder name for {name} in {out}")


def step_dir(run: Path, step: Step) -> Path:
    return run / step.relative_dir()


def is_finished(run: Path, step: Step) -> bool:
    return (step_dir(run, step) / STEP_FILE).is_file()


def begin_step(run: Path, step: Step) -> Path:
    """The temporary folder a step is written into; a leftover one from an interrupted run is kept aside."""
    final = step_dir(run, step)
    tmp = final.with_name(f".tmp-{final.name}")
    if tmp.exists():
        tmp.rename(final.with_name(f".aborted-{final.name}-{time.strftime('%Y%m%d-%H%M%S')}"))
    (tmp / LOGS).mkdir(parents=True)
    return tmp


def set_aside(tmp: Path, step_record: dict) -> Path:
    """Keep a step that must not count (its target failed during it) as `.failed-iter-<n>-<time>`,
    step.json included: the data stays for the post-mortem, and --resume runs the step again."""
    write_json(tmp / STEP_FILE, step_record)
    aside = tmp.with_name(f".failed-{tmp.name[len('.tmp-'):]}-{time.strftime('%Y%m%d-%H%M%S')}")
    os.rename(tmp, aside)
    return aside


def finish_step(tmp: Path, step_record: dict) -> Path:
    """Write step.json (last) and move the folder to its final name."""
    final = tmp.with_name(tmp.name[len(".tmp-"):])
    if final.exists():
        raise EsbperfError(f"{final} already exists; not overwriting it (the step's data stays in {tmp})")
    write_json(tmp / STEP_FILE, step_record)
    os.rename(tmp, final)
    return final
