"""Payload files: a user's own request bodies, named by a plan instead of generated sizes.

A file is sent as its bytes are (no re-encoding, no newline translation). It is checked when the
plan is read (a file, not empty, not too large, well-formed XML without a DOCTYPE, and what each
of the plan's scenarios needs: contract.file_problem) and pinned by its SHA-256: run.json records
it, and `--resume` refuses a file that changed since.

The workers get the file through the console's distribution folder: the runner stages the plan's
files there (payload-files/<run>/, `stage`) before the console distributes, and a step's workers
read it from their agent's copy (grinder-scripts/scenario.py, esbperf.payload.file).
"""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from esbperf.core import scenarios
from esbperf.core.errors import EsbperfError

# What one request may carry: the shipped ESBs take 16 MB, and every worker keeps it in memory.
MAX_FILE_BYTES = 16 * 1024 * 1024
SUFFIX = ".xml"                  # the files a folder contributes
STAGING = "payload-files"        # under the console's distribution folder
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class PayloadFile:
    path: str        # absolute
    size: int        # bytes: the step's payload size
    sha256: str
    label: str       # the step folder's payload part: the file's name without .xml

    def read(self) -> bytes:
        """The file's bytes; an error if it changed since the plan was read."""
        try:
            data = Path(self.path).read_bytes()
        except OSError as e:
            raise EsbperfError(f"payload file {self.path} cannot be read: {e.strerror}") from None
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise EsbperfError(f"payload file {self.path} changed since the plan was read (sha256 was {self.sha256})")
        return data

    def staged_name(self) -> str:
        return f"{self.label}{SUFFIX}"


def load(path: Path, where: str, scenario_names: Iterable[str], sha256: str | None = None) -> PayloadFile:
    """Check one payload file for the plan's scenarios; `where` starts every error line."""
    if not path.is_file():
        raise EsbperfError(f"{where}: no such file {path}")
    size = path.stat().st_size
    if size == 0:
        raise EsbperfError(f"{where}: {path} is empty")
    if size > MAX_FILE_BYTES:
        raise EsbperfError(f"{where}: {path} has {size} bytes, more than a payload file may have "
                           f"({MAX_FILE_BYTES // (1024 * 1024)} MB)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EsbperfError(f"{where}: {path} cannot be read: {e.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and sha256 != digest:
        raise EsbperfError(f"{where}: {path} changed since the run began (sha256 {digest}, the run has {sha256})")
    contract = scenarios.contract()
    for scenario in scenario_names:
        problem = contract.file_problem(data, scenario)
        if problem:
            raise EsbperfError(f"{where}: {path} {problem}")
    label = _UNSAFE.sub("_", path.stem).strip("._") or "payload"
    return PayloadFile(str(path.resolve()), size, digest, label)


def folder_files(folder: Path, where: str) -> list[Path]:
    """A folder's payload files: its *.xml files (not hidden, not in subfolders), smallest first."""
    if not folder.is_dir():
        raise EsbperfError(f"{where}: no such folder {folder}")
    files = sorted((p for p in folder.iterdir() if p.suffix == SUFFIX and not p.name.startswith(".") and p.is_file()),
                   key=lambda p: (p.stat().st_size, p.name))
    if not files:
        raise EsbperfError(f"{where}: folder {folder} has no payload files (*{SUFFIX})")
    return files


def stage(files: Iterable[PayloadFile], distribution: Path, run_name: str) -> str:
    """Put the files into the distribution folder, under payload-files/<run>/ (each checked against
    its hash on the way); returns that folder relative to the distribution folder."""
    files = list(files)
    relative = Path(STAGING) / run_name
    folder = distribution / relative
    if not files:
        return relative.as_posix()
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for f in files:
        (folder / f.staged_name()).write_bytes(f.read())
    return relative.as_posix()


def unstage(distribution: Path, run_name: str) -> None:
    shutil.rmtree(distribution / STAGING / run_name, ignore_errors=True)
