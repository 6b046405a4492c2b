"""The emulated testbed's ssh mode: an OpenSSH server (Debian's openssh-server) in the namespace
of every emulated host with `ssh:`, so that `testbed install|start|stop` and the runner reach
those hosts exactly as they reach real ones, through ssh, each with its own install folder.

Each server listens on its host's address only (port 22), with its own config, host key,
authorized keys and pid file in this testbed's folder of the state folder
(`<state>/sshd/<prefix>/<role>/`); nothing of the machine's own ssh set-up (/etc/ssh, a running
sshd) is read or changed. One client key, made for the testbed, logs in (as the user on the
`ssh:` line; root here); the hosts' keys are written to a known_hosts file of the testbed, so
ssh checks them strictly. `testbed up` starts the servers, `testbed down` stops them by their pid
files (and then ends whatever is left in the namespaces).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from esbperf.core.config import state_dir
from esbperf.core.errors import EsbperfError
from esbperf.core.topology import Testbed
from esbperf.testbed.background import proc_stat

SSHD = "/usr/sbin/sshd"
PORT = 22
PRIVSEP_DIR = Path("/run/sshd")   # sshd's privilege-separation folder; Debian's service unit makes it
START_WAIT_S = 10.0


def folder(testbed: Testbed) -> Path:
    return state_dir() / "sshd" / testbed.prefix.rstrip("-")


def ssh_roles(testbed: Testbed) -> list[str]:
    return [role for role, host in testbed.hosts.items() if host.ssh] if testbed.emulated else []


def client_key(testbed: Testbed) -> Path:
    return folder(testbed) / "id_ed25519"


def known_hosts(testbed: Testbed) -> Path:
    return folder(testbed) / "known_hosts"


def client_options(testbed: Testbed) -> list[str]:
    """ssh's options to log in to the emulated hosts: the testbed's key, its known_hosts, checked
    strictly; no other config file unless the testbed names one (ssh_config)."""
    options = [] if testbed.ssh_config else ["-F", "none"]
    return options + ["-i", str(client_key(testbed)), "-o", "IdentitiesOnly=yes",
                      "-o", f"UserKnownHostsFile={known_hosts(testbed)}", "-o", "GlobalKnownHostsFile=/dev/null",
                      "-o", "StrictHostKeyChecking=yes"]


def _keygen(path: Path, comment: str) -> None:
    if not path.exists():
        result = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise EsbperfError(f"ssh-keygen failed for {path}: {result.stderr.strip()}")


def _config(host_dir: Path, address: str) -> str:
    return "\n".join([
        f"ListenAddress {address}:{PORT}",      # the host's address only, never all interfaces
        f"HostKey {host_dir / 'host_key'}",
        f"PidFile {host_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {host_dir / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",                      # the key files live under the state folder
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "PrintMotd no",
        "",
    ])


def _running(host_dir: Path) -> int | None:
    """The pid of this host's sshd if it runs (checked against its command line, not trusted blindly)."""
    try:
        pid = int((host_dir / "sshd.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    return pid if str(host_dir / "sshd_config").encode() in cmdline else None


def _answers(address: str) -> bool:
    import socket

    try:
        with socket.create_connection((address, PORT), timeout=0.5) as s:
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def up(testbed: Testbed) -> list[str]:
    """Start an sshd in the namespace of every host with `ssh:` (the testbed's namespaces exist)."""
    roles = ssh_roles(testbed)
    if not roles:
        return []
    if not Path(SSHD).is_file() or shutil.which("ssh-keygen") is None:
        raise EsbperfError(f"{testbed.path}: hosts with ssh: on an emulated testbed need OpenSSH's server "
                           f"({SSHD}; Debian: apt-get install openssh-server)")
    base = folder(testbed)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o700)
    _keygen(client_key(testbed), f"esbperf testbed {testbed.name}")
    client_public = client_key(testbed).with_suffix(".pub").read_text()
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    done, known = [], []
    for role in roles:
        host = testbed.hosts[role]
        host_dir = base / role
        host_dir.mkdir(exist_ok=True)
        _keygen(host_dir / "host_key", f"esbperf {testbed.prefix}{role}")
        (host_dir / "authorized_keys").write_text(client_public)
        (host_dir / "sshd_config").write_text(_config(host_dir, host.address))
        key_type, key = (host_dir / "host_key.pub").read_text().split()[:2]
        known.append(f"{host.address} {key_type} {key}")
        if _running(host_dir):
            continue
        started = subprocess.run(testbed.command(role, [SSHD, "-f", str(host_dir / "sshd_config")]),
                                 capture_output=True, text=True)
        if started.returncode != 0:
            raise EsbperfError(f"{role}: sshd did not start in {testbed.netns(role)}: "
                               f"{started.stderr.strip().splitlines()[-1:] or started.returncode}")
        deadline = time.monotonic() + START_WAIT_S
        while not _answers(host.address):
            if time.monotonic() > deadline:
                raise EsbperfError(f"{role}: sshd in {testbed.netns(role)} does not answer on {host.address}:{PORT}")
            time.sleep(0.1)
        done.append(f"started sshd in {testbed.netns(role)} on {host.address}:{PORT}")
    known_hosts(testbed).write_text("\n".join(known) + "\n")
    return done


def down(testbed: Testbed) -> list[str]:
    """Stop the testbed's sshds by their pid files."""
    done = []
    for role in ssh_roles(testbed):
        host_dir = folder(testbed) / role
        pid = _running(host_dir)
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while proc_stat(pid) and proc_stat(pid)[0] != "Z" and time.monotonic() < deadline:   # a zombie has ended
            time.sleep(0.05)
        (host_dir / "sshd.pid").unlink(missing_ok=True)
        done.append(f"stopped sshd in {testbed.netns(role)}")
    return done
