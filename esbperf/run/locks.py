"""One run per console, one writer per run folder.

A second `esbperf run` against a console that a run is using would settle the console (stop
every worker: the first run's too), and two `--resume` of one folder would rename each other's
step folders. So a run holds two locks for as long as it runs: the console's (in the console's
state folder, beside its token file, or this machine's state folder when the token comes from
the environment) and the run folder's. Each is an exclusive `flock` on a file that says who holds
it; the kernel drops the lock when its process dies, so a dead run's lock is simply taken over."""
from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError

CONSOLE_LOCK = "console-run.lock"
RUN_LOCK = ".esbperf-run.lock"


class Lock:
    """An exclusive lock on `path`, naming its holder (pid, what) in the file."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self, what: str, busy: str) -> None:
        """Take the lock, or raise `busy` (formatted with the holder's pid and what) in one line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip().split("\n", 1)
            os.close(fd)
            pid, held = (holder + ["?"])[:2] if holder and holder[0] else ("?", "?")
            raise EsbperfError(busy.format(pid=pid, what=held)) from None
        self.fd = fd
        self.note(what)

    def note(self, what: str) -> None:
        """Say what the holder is doing (for the message another process gets)."""
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n{what}\n".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)   # closing drops the flock
            self.fd = None


def console_lock_path(api_url: str, token_file: Path | None) -> Path:
    """Where the lock of the console at `api_url` is: its own state folder when its token file
    says where that is, else this machine's state folder, by address."""
    if token_file is not None:
        return Path(token_file).resolve().parent / CONSOLE_LOCK
    return state_dir() / "console-locks" / (re.sub(r"[^A-Za-z0-9.-]+", "-", api_url.split("://", 1)[-1]) + ".lock")


@contextmanager
def console_held(api_url: str, token_file: Path | None) -> Iterator[Lock]:
    """Hold the lock of the console at `api_url` while the block runs (which may `note` its run folder)."""
    lock = Lock(console_lock_path(api_url, token_file))
    lock.acquire(f"started in {os.getcwd()}",
                 f"another esbperf run (pid {{pid}}, {{what}}) is using the console at {api_url}; wait for it to "
                 "end or stop it (a second run would stop its workers)")
    try:
        yield lock
    finally:
        lock.release()


@contextmanager
def run_dir_held(run_dir: Path) -> Iterator[None]:
    """Hold the lock of a run folder while the block runs."""
    lock = Lock(Path(run_dir) / RUN_LOCK)
    lock.acquire(f"run folder {run_dir}",
                 f"another esbperf (pid {{pid}}, {{what}}) is writing to {run_dir}; wait for it to end or stop it")
    try:
        yield
    finally:
        lock.release()
