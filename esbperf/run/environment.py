"""What a run records about where it ran (run.json): OS, CPU, memory, JVMs, versions, git."""
from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from esbperf import __version__
from esbperf.core import procs
from esbperf.core.project import ROOT


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1).strip() if m else None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def git_revision() -> dict:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


def java_version() -> str | None:
    try:
        out = subprocess.run([procs.java_executable(), "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _first(r'version "([^"]+)"', out.stderr) or out.stderr.strip().splitlines()[0]


def describe() -> dict:
    meminfo = _read("/proc/meminfo")
    total_kb = _first(r"^MemTotal:\s+(\d+)", meminfo)
    return {
        "esbperf": __version__,
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu": _first(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo")) or platform.processor(),
        "cores": os.cpu_count(),
        "memory_bytes": int(total_kb) * 1024 if total_kb else None,
        "python": platform.python_version(),
        "java": java_version(),
        "git": git_revision(),
    }


def worker_versions(log_dir: Path) -> dict:
    """JDK and Jython versions as a worker logged them (first worker log of a step)."""
    for log in sorted(log_dir.glob("*.log")):
        if log.name.endswith("-data.log"):
            continue
        text = log.read_text(errors="replace")[:20000]
        return {
            "worker_jvm": _first(r"INFO\s+\S+\s*:\s*(OpenJDK.+?|Java.+?)\s+on\s", text),
            "jython": _first(r"using Jython ([\d.]+\w*)", text),
            "grinder": _first(r"The Grinder version ([\d.]+)", text),
        }
    return {}
