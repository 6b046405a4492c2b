"""What a run records about where it ran (run.json): OS, CPU, memory, JVMs, versions, git."""
from __future__ import annotations

import os
import platform
import re
import subprocess
import urllib.request
from pathlib import Path

from esbperf import __version__
from esbperf.core import procs
from esbperf.core.roles import BACKENDS
from esbperf.core.topology import Testbed
from esbperf.services import echo, esb
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


CPUFREQ = Path("/sys/devices/system/cpu")


def cpu_frequency(root: Path = CPUFREQ) -> dict:
    """How the CPUs' frequency is governed: cpufreq's driver, governor and range per distinct setting
    (with the CPUs that have it), or why it cannot be read; and whether the CPU says it runs under a
    hypervisor (a virtual machine's host decides its frequency)."""
    settings: dict[tuple, list[int]] = {}
    for folder in sorted(root.glob("cpu[0-9]*/cpufreq"), key=lambda p: int(p.parent.name[3:])):
        read = (lambda name: _read(str(folder / name)).strip() or None)
        key = (read("scaling_driver"), read("scaling_governor"), read("scaling_min_freq"), read("scaling_max_freq"))
        settings.setdefault(key, []).append(int(folder.parent.name[3:]))
    flags = _first(r"^flags\s*:\s*(.+)$", _read("/proc/cpuinfo")) or ""
    found = {"hypervisor": "hypervisor" in flags.split()}
    if not settings:
        found["policy"] = None
        found["why_not"] = f"no cpufreq under {root} (no frequency driver: " + \
            ("a virtual machine, whose host sets the frequency)" if found["hypervisor"] else "none loaded)")
        return found
    found["policy"] = [{"cpus": cpus, "driver": d, "governor": g,
                        "min_mhz": int(lo) // 1000 if lo and lo.isdigit() else None,
                        "max_mhz": int(hi) // 1000 if hi and hi.isdigit() else None}
                       for (d, g, lo, hi), cpus in settings.items()]
    return found


def engines(names: list[str], addresses: dict[str, tuple[str, int]] | None = None,
            started_with: dict[str, dict] | None = None) -> dict[str, dict]:
    """Each engine's kind, version and settings (esbperf/services/esb.py describe), for run.json; an
    engine that is no folder esbperf knows (a team's own ESB started by hand) is left out. With its
    address, what its account says (engine.yaml `account`: the reference engine's settings and the µs
    of work per request it measured at start, which says how fast its machine is); `started_with`: the
    settings the launcher gave each engine it started."""
    return {name: esb.describe(name, (addresses or {}).get(name), (started_with or {}).get(name))
            for name in dict.fromkeys(names) if name in esb.ENGINES}


def echoes(testbed: Testbed, timeout: float = 3) -> dict:
    """The back ends' runtime as the testbed file sets it, and as each echo says on its answers
    (X-Echo-Runtime on GET /echo?wsdl): None where it does not answer or does not say (an echo
    started by hand from an older esbperf)."""
    answered = {}
    for ws in BACKENDS:
        try:
            with urllib.request.urlopen(testbed.echo_url(ws) + "/echo?wsdl", timeout=timeout) as response:
                answered[ws] = response.headers.get(echo.RUNTIME_HEADER)
        except (OSError, ValueError):
            answered[ws] = None
    return {"configured": testbed.echo_runtime, "answered": answered}


def describe() -> dict:
    """The machine a run ran on: its CPU model and clock, its cores (all, and those this process may
    use), memory, OS, JDK, Python and commit. Under a hypervisor the model name is often generic
    ("Intel(R) Xeon(R) Processor"): the reference engine's account says how fast it is (run.json
    `engines`, esb-projects/README.md)."""
    meminfo = _read("/proc/meminfo")
    total_kb = _first(r"^MemTotal:\s+(\d+)", meminfo)
    cpuinfo = _read("/proc/cpuinfo")
    mhz = _first(r"^cpu MHz\s*:\s*([\d.]+)$", cpuinfo)
    return {
        "esbperf": __version__,
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu": _first(r"^model name\s*:\s*(.+)$", cpuinfo) or platform.processor(),
        "cpu_mhz": round(float(mhz)) if mhz else None,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_frequency": cpu_frequency(),
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
