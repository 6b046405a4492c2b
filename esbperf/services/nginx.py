"""nginx with a configuration of ours, the benchmarks' reference (fixed answers, or a plain reverse
proxy; the nginx floor is an engine folder, esb-projects/nginx/). Its own config and folders under a
work folder, in the foreground, on the one address it is given, started and stopped like our JVMs."""
from __future__ import annotations

import shutil
from pathlib import Path

from esbperf.core import procs
from esbperf.core.errors import EsbperfError

CONF = "nginx.conf"
_CONF = """daemon off;
worker_processes auto;
pid {d}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
{http}
  server {{
    listen {listen};
{server}
  }}
}}
"""


def listen_address(host: str, port: int) -> str:
    """host:port as nginx's `listen` and `server` take it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def command(workdir: Path, host: str, port: int, server: str, http: str = "") -> list[str]:
    """Write the config of an nginx serving `server` (the directives of its server block; `http`:
    more directives of its http block) on host:port only into `workdir`; the command that runs it."""
    if shutil.which("nginx") is None:
        raise EsbperfError("nginx is not installed (Debian: apt-get install -y nginx)")
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / CONF
    conf.write_text(_CONF.format(d=workdir, listen=listen_address(host, port), http=http, server=server))
    for path in [workdir, *workdir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)   # its workers run unprivileged when started by root
    # -e: its errors on stderr (the process's log) from the first line on, before the config is read.
    argv = ["nginx", "-e", "stderr", "-p", str(workdir), "-c", str(conf)]
    # Killed with whatever started it, nginx's master would die at once and leave its workers
    # serving: SIGTERM instead (util-linux's setpriv, then exec), and the master stops them first.
    return ["setpriv", "--pdeathsig", "TERM", *argv] if shutil.which("setpriv") else argv


def process(workdir: Path, host: str, port: int, server: str, what: str = "nginx", http: str = "") -> procs.Process:
    """nginx (not started) serving `server` on host:port only, its config and folders in `workdir`."""
    procs.check_port_free(host, port, what)
    return procs.Process(what, command(workdir, host, port, server, http), workdir / "nginx.out", cwd=workdir)


def start(workdir: Path, host: str, port: int, server: str, what: str = "nginx") -> procs.Process:
    """Start nginx serving `server` (the directives of its server block) on host:port."""
    return process(workdir, host, port, server, what).start_until(lambda: procs.port_open(host, port), 10, "listening")
