"""Services in the background on this host, each with a pid file: what `esbperf testbed start`
runs on every host (over ssh, or here for a host without ssh). Standard library only, so it runs
on a host that has nothing but Python and the installed esbperf.

    python3 -m esbperf.testbed.background start --state DIR --name NAME [--ready HOST:PORT] [--timeout S] -- ARGV...
    python3 -m esbperf.testbed.background stop  --state DIR [NAME ...]
    python3 -m esbperf.testbed.background restart --state DIR --name NAME [--timeout S]
    python3 -m esbperf.testbed.background list  --state DIR

A service is an esbperf command (`esbperf echo ...`; the word `esbperf` becomes this Python's
`-m esbperf`) started in a session of its own, so it outlives the ssh session that started it,
with ESBPERF_STATE=DIR, its output in DIR/logs/NAME.log and its pid in DIR/run/NAME.pid. The
esbperf command is what is detached, not its JVM: the command stops its JVM when it is told to
stop (SIGTERM), and a JVM that watches its parent dies with it.

Stopping goes by the pid file only, never by a process name. The pid file also holds the
process's start time, so a pid that the kernel has since given to another process is never
signalled. Answers are JSON on stdout; a failure is one line `esbperf: error: ...` on stderr and
exit status 2.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

STOP_GRACE_S = 20.0     # the esbperf command gives its JVM 10 s, then kills it
KILL_WAIT_S = 5.0


class Refused(Exception):
    """A one-line reason why a request could not be done."""


# --- processes ---------------------------------------------------------------------------

def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a process, or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # the command name may hold spaces and parentheses
    return fields[0], int(fields[1]), int(fields[19])


def _alive(pid: int, start_time: int) -> bool:
    """Whether this very process still runs (a zombie has ended; a recycled pid is another process)."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z" and stat[2] == start_time


def _descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start time) of every process below pid: the service's JVM and, for an agent, its workers."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat and stat[0] != "Z":
                children.setdefault(stat[1], []).append((int(entry.name), stat[2]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _signal(pid: int, start_time: int, sig: int) -> None:
    if _alive(pid, start_time):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(processes: list[tuple[int, int]], seconds: float) -> list[tuple[int, int]]:
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in processes if _alive(*p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# --- pid files ---------------------------------------------------------------------------

def _pid_file(state: Path, name: str) -> Path:
    return state / "run" / f"{name}.pid"


def _records(state: Path) -> list[dict]:
    """The services' pid files, the latest started first."""
    records = []
    for path in sorted((state / "run").glob("*.pid")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.get("started_ms", 0), reverse=True)


def _last_line(log: str, since: int = 0) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(since)
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    # The esbperf command's own one-line error, when it gave one; else its output's last line.
    errors = [line for line in lines if line.startswith("esbperf: error:")]
    return (errors or lines or [""])[-1]


def _describe(record: dict) -> dict:
    alive = _alive(record["pid"], record["start_time"])
    return {**record, "alive": alive, "last_line": "" if alive else _last_line(record["log"], record.get("log_from", 0))}


# --- the three requests ------------------------------------------------------------------

def start(state: Path, name: str, argv: list[str], ready: tuple[str, int] | None = None,
          timeout: float = 120.0) -> dict:
    """Start argv detached as service `name`; with `ready`, return once that port answers."""
    state = state.resolve()
    pid_file = _pid_file(state, name)
    if pid_file.exists():
        old = json.loads(pid_file.read_text())
        if _alive(old["pid"], old["start_time"]):
            raise Refused(f"{name} already runs here (pid {old['pid']}); `esbperf testbed stop` stops it")
        pid_file.unlink()
    if ready and _port_open(*ready):
        # Otherwise the waiting below would take the other program's answer for this service's.
        raise Refused(f"{name}: port {ready[1]} on {ready[0]} is already in use by another program")
    for folder in ("run", "logs"):
        (state / folder).mkdir(parents=True, exist_ok=True)
    # `esbperf` as the program is this host's install (this interpreter); the pid file keeps argv
    # as given, so a restart expands it once more, not twice.
    command = [sys.executable, "-m", "esbperf", *argv[1:]] if argv[:1] == ["esbperf"] else argv
    log = state / "logs" / f"{name}.log"
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
        log_from = out.tell()
        env = dict(os.environ, ESBPERF_STATE=str(state), PYTHONUNBUFFERED="1")
        process = subprocess.Popen(command, cwd=state, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    stat = proc_stat(process.pid)
    record = {"name": name, "pid": process.pid, "start_time": stat[2] if stat else 0, "argv": argv,
              "log": str(log), "log_from": log_from, "started_ms": int(time.time() * 1000),
              "ready": f"{ready[0]}:{ready[1]}" if ready else None}
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(pid_file)
    deadline = time.monotonic() + timeout
    while ready:
        if process.poll() is not None:
            pid_file.unlink(missing_ok=True)
            raise Refused(f"{name} exited (status {process.returncode}) on start: "
                          f"{_last_line(str(log), log_from) or 'no output'} (log {log})")
        if _port_open(*ready):
            break
        if time.monotonic() > deadline:
            stop(state, [name])
            raise Refused(f"{name} did not answer at {ready[0]}:{ready[1]} within {timeout:.0f} s "
                          f"({_last_line(str(log), log_from) or 'no output'}; log {log})")
        time.sleep(0.2)
    return record


def stop(state: Path, names: list[str] | None = None) -> list[dict]:
    """Stop the services named (default: every one with a pid file): SIGTERM, then after a grace
    period SIGKILL to what is left of each and of the processes it had started."""
    state = state.resolve()
    records = [r for r in _records(state) if not names or r["name"] in names]
    unknown = sorted(set(names or ()) - {r["name"] for r in records})
    if unknown:
        raise Refused(f"no service {unknown[0]} was started here (no pid file in {state / 'run'})")
    running = [r for r in records if _alive(r["pid"], r["start_time"])]
    trees = {r["name"]: _descendants(r["pid"]) for r in running}
    for r in running:
        _signal(r["pid"], r["start_time"], signal.SIGTERM)
    _wait_gone([(r["pid"], r["start_time"]) for r in running], STOP_GRACE_S)
    killed = set()
    for r in running:
        left = [p for p in [(r["pid"], r["start_time"]), *trees[r["name"]]] if _alive(*p)]
        for p in left:
            _signal(*p, signal.SIGKILL)
        if left:
            killed.add(r["name"])
        if _wait_gone(left, KILL_WAIT_S):
            raise Refused(f"{r['name']} (pid {r['pid']}) survived SIGKILL")
    for r in records:
        _pid_file(state, r["name"]).unlink(missing_ok=True)
    names_running = {r["name"] for r in running}
    return [{"name": r["name"], "pid": r["pid"],
             "was": "killed" if r["name"] in killed else "stopped" if r["name"] in names_running else "not running"}
            for r in records]


def restart(state: Path, name: str, timeout: float = 120.0) -> dict:
    """Stop service `name` and start it again with the same command (a plan's `restart: per-step`)."""
    records = [r for r in _records(state.resolve()) if r["name"] == name]
    if not records:
        raise Refused(f"no service {name} was started here (no pid file in {state / 'run'})")
    record = records[0]
    stop(state, [name])
    ready = _host_port(record["ready"]) if record.get("ready") else None
    return start(state, name, record["argv"], ready, timeout)


def list_services(state: Path) -> list[dict]:
    return [_describe(r) for r in _records(state.resolve())]


# --- the command line --------------------------------------------------------------------

def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m esbperf.testbed.background")
    sub = parser.add_subparsers(dest="request", required=True)
    p_start = sub.add_parser("start")
    p_start.add_argument("--state", type=Path, required=True)
    p_start.add_argument("--name", required=True)
    p_start.add_argument("--ready", type=_host_port)
    p_start.add_argument("--timeout", type=float, default=120.0)
    p_start.add_argument("argv", nargs=argparse.REMAINDER)
    p_stop = sub.add_parser("stop")
    p_stop.add_argument("--state", type=Path, required=True)
    p_stop.add_argument("names", nargs="*")
    p_restart = sub.add_parser("restart")
    p_restart.add_argument("--state", type=Path, required=True)
    p_restart.add_argument("--name", required=True)
    p_restart.add_argument("--timeout", type=float, default=120.0)
    p_list = sub.add_parser("list")
    p_list.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.request == "start":
            command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not command:
                raise Refused("start: give the command after --")
            answer = start(args.state, args.name, command, args.ready, args.timeout)
        elif args.request == "restart":
            answer = restart(args.state, args.name, args.timeout)
        elif args.request == "stop":
            answer = stop(args.state, args.names)
        else:
            answer = list_services(args.state)
    except (Refused, OSError) as e:
        print(f"esbperf: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
