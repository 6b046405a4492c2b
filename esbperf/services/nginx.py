"""nginx as the benchmarks' reference (fixed answers, or a plain reverse proxy): its own config
and folders under a work folder, on the address it is given, started and stopped like our JVMs."""
from __future__ import annotations

import shutil
from pathlib import Path

from esbperf.core import procs
from esbperf.core.errors import EsbperfError

_CONF = """daemon off;
worker_processes auto;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
    listen {host}:{port};
{server}
  }}
}}
"""


def start(workdir: Path, host: str, port: int, server: str, what: str = "nginx") -> procs.Process:
    """Start nginx serving `server` (the directives of its server block) on host:port."""
    if shutil.which("nginx") is None:
        raise EsbperfError("nginx is not installed (Debian: apt-get install -y nginx)")
    procs.check_port_free(host, port, what)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "nginx.conf").write_text(_CONF.format(d=workdir, host=host, port=port, server=server))
    for path in [workdir, *workdir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)   # its workers run unprivileged when started by root
    process = procs.Process(what, ["nginx", "-p", str(workdir), "-c", str(workdir / "nginx.conf")],
                            workdir / "nginx.out").start()
    process.wait_until(lambda: procs.port_open(host, port), 10, "listening")
    return process
