"""The results layout: RUN/run.json, and one folder per step,
RUN/<scenario>/<payload>/<users>/iter-<n>/ (step.json, console.json, logs/, monitor-*.csv).

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

from esbperf.errors import EsbperfError
from esbperf.plan import Step

RUN_FILE = "run.json"
STEP_FILE = "step.json"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise EsbperfError(f"{path}: no such file") from None
    except ValueError as e:
        raise EsbperfError(f"{path}: not valid JSON ({e})") from None


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
    (tmp / "logs").mkdir(parents=True)
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
