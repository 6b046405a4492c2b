"""The floors: nginx and HAProxy as plain reverse proxies in the ESB's place, for the scenarios
that need no more than a proxy (proxy, hbr and their raw routes). Drawn beside the ESBs and the
direct baseline, they show what the least work between client and back ends costs on the same
host, so a report reads direct ≤ floor ≤ ESB.

Each floor gets a config of ours, written into its work folder from the listen address, the
back-end URLs and the back-end timeout, and runs in the foreground as the engine's own process
(esbperf/services/esb.py starts it): listening on that address only, keep-alive to the client
and a pool of keep-alive connections to each back end, bodies passed through as they are, the
back end's answer and its X-Echo-Backend header passed on, and the contract's error answers
(esb-projects/README.md): 400 for a missing or unknown X-Route-To, 502 at once when a back end
cannot be reached, 504 when it does not answer within the timeout, both with a SOAP fault."""
from __future__ import annotations

import urllib.parse
from pathlib import Path

from esbperf.core.roles import BACKENDS
from esbperf.services import nginx

# The contract's scenarios a plain reverse proxy serves (no parsing, no transformation).
SCENARIOS = ("proxy", "hbr", "raw", "hbr-raw")
PROXY_BACKEND = BACKENDS[0]
ROUTE_HEADER = "X-Route-To"
# Path on the floor -> (back end, path on it); None: the back end named by X-Route-To.
ROUTES = {"/proxy/echo": (PROXY_BACKEND, "/echo"), "/proxy/raw": (PROXY_BACKEND, "/raw"),
          "/hbr/echo": (None, "/echo"), "/hbr/raw": (None, "/raw")}
MAX_BODY = "16m"                    # as the ESBs take (the sweeps go to 1 MB)
IDLE_BACKEND_S = 10                 # idle back-end connections closed before the echo's own 30 s limit
KEEPALIVE_CLIENT_S = 60
POOL = 4096                         # idle keep-alive connections kept per back end (nginx: per worker)
NO_ROUTE = f"{ROUTE_HEADER} must be one of {', '.join(BACKENDS)}"
NOT_SERVED = "this floor serves only " + ", ".join(ROUTES)


def fault(status: int, text: str) -> str:
    """The SOAP 1.1 fault a floor answers with when it, not the back end, fails the request."""
    return ('<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>'
            f"<soapenv:Fault><faultcode>soapenv:Server</faultcode><faultstring>{status} {text}</faultstring>"
            "</soapenv:Fault></soapenv:Body></soapenv:Envelope>")


UNREACHABLE = (502, "Bad Gateway", "the back end cannot be reached")
TIMED_OUT = (504, "Gateway Timeout", "the back end did not answer within the back-end timeout")


def _host_port(url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(url)
    return parts.hostname, parts.port or 80


def connect_timeout_ms(timeout_ms: int) -> int:
    """How long any engine may take to connect to a back end (the ESBs too): connecting is part
    of the wait, never longer than the back-end timeout, and at most 10 s."""
    return min(timeout_ms, 10000)


# --- nginx -----------------------------------------------------------------------------------

def nginx_command(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    """Write the nginx floor's config into workdir; the command that runs it in the foreground."""
    routed = "\n".join(f'    "~^{ws}$" {ws};' for ws in BACKENDS)
    upstreams = "\n".join(
        f"  upstream {ws} {{ server {nginx.listen_address(*_host_port(url))}; keepalive {POOL}; keepalive_timeout {IDLE_BACKEND_S}s; "
        f"keepalive_requests 1000000000; }}" for ws, url in backends.items())
    http = f"""  server_tokens off;
  # Keep-alive to the client without a cap on requests per connection (nginx closes every 1000th).
  keepalive_timeout {KEEPALIVE_CLIENT_S}s;
  keepalive_requests 1000000000;
  # hbr: the back end named by {ROUTE_HEADER}, exactly; empty for anything else.
  map $http_{ROUTE_HEADER.lower().replace('-', '_')} $routed {{
    default "";
{routed}
  }}
{upstreams}"""
    locations = []
    for path, (ws, target) in ROUTES.items():
        if ws:
            locations.append(f"    location = {path} {{ proxy_pass http://{ws}{target}; }}")
        else:
            locations.append(f'    location = {path} {{\n      if ($routed = "") {{ return 400 "{NO_ROUTE}\\n"; }}\n'
                             f"      proxy_pass http://$routed{target};\n    }}")
    errors = []
    for status, name, text in (UNREACHABLE, TIMED_OUT):
        errors.append(f"    error_page {status} @{status};\n    location @{status} {{\n"
                      f'      default_type "text/xml; charset=UTF-8";\n'
                      f"      return {status} '{fault(status, text)}';\n    }}")
    server = f"""    # Bodies whole in memory (never spooled to a file), up to the ESBs' limit.
    client_max_body_size {MAX_BODY};
    client_body_buffer_size {MAX_BODY};
    # Answers through memory buffers only: a slow client holds the back end, nothing is spooled.
    proxy_buffer_size 16k;
    proxy_buffers 64 16k;
    proxy_max_temp_file_size 0;
    # Keep-alive to the back ends; one try per request, as the contract wants (no retries).
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_next_upstream off;
    proxy_connect_timeout {connect_timeout_ms(timeout_ms)}ms;
    proxy_send_timeout {timeout_ms}ms;
    proxy_read_timeout {timeout_ms}ms;
{chr(10).join(locations)}
    location / {{ return 404 "{NOT_SERVED}\\n"; }}
{chr(10).join(errors)}"""
    return nginx.command(workdir, host, port, server, http)


# --- HAProxy ---------------------------------------------------------------------------------

HAPROXY_CONF = "haproxy.cfg"
_HAPROXY = """# The HAProxy floor of esbperf, written at each start (esbperf/services/floors.py).
global
  # One line per failed request, on stderr (the floor's log); no stats socket, no master CLI.
  log stderr format raw local0

defaults
  mode http
  log global
  option httplog
  option dontlog-normal
  option http-keep-alive
  # Idle back-end connections are shared by every client (a pool per back end); one try per
  # request, as the contract wants (no retries, no redispatch).
  http-reuse always
  retries 0
  maxconn 8192
  timeout connect {connect_ms}ms
  timeout server {timeout_ms}ms
  # The client waits for the server's timeout: the 504 must reach it, not a reset.
  timeout client {client_ms}ms
  timeout http-keep-alive {keepalive_s}s
  # HAProxy's own answer to a back end it cannot connect to is a 503; the contract's is a 502.
  errorfile 502 {d}/unreachable.http
  errorfile 503 {d}/unreachable.http
  errorfile 504 {d}/timed-out.http

frontend floor
  bind {listen}
  acl proxy path {proxy_paths}
  acl hbr path {hbr_paths}
  acl routed req.fhdr({header}) -m str {backends}
  http-request return status 400 content-type "text/plain; charset=UTF-8" string "{no_route}" if hbr !routed
  http-request return status 404 content-type "text/plain; charset=UTF-8" string "{not_served}" if !proxy !hbr
  # The back end is chosen before the path is rewritten (the ACLs read the path when used).
  http-request set-var(txn.backend) str({proxy_backend}) if proxy
  http-request set-var(txn.backend) req.fhdr({header}) if hbr
  # /proxy/echo -> /echo: every route of ROUTES is /GROUP/NAME.
  http-request set-path %[path,regsub(^/[a-z]+/,/)]
  use_backend %[var(txn.backend)]
{backend_sections}"""


def _haproxy_address(host: str, port: int) -> str:
    return f"ipv6@{host}:{port}" if ":" in host else f"{host}:{port}"


def _error_file(status: int, reason: str, text: str) -> str:
    body = fault(status, text)
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/xml; charset=UTF-8\r\n"
            f"Content-Length: {len(body.encode())}\r\nCache-Control: no-cache\r\n\r\n{body}")


def haproxy_command(host: str, port: int, backends: dict[str, str], workdir: Path, timeout_ms: int) -> list[str]:
    """Write the HAProxy floor's config into workdir; the command that runs it in the foreground."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "unreachable.http").write_text(_error_file(*UNREACHABLE))
    (workdir / "timed-out.http").write_text(_error_file(*TIMED_OUT))
    sections = "\n".join(f"backend {ws}\n  server {ws} {_haproxy_address(*_host_port(url))}\n"
                         for ws, url in backends.items())
    conf = workdir / HAPROXY_CONF
    conf.write_text(_HAPROXY.format(
        d=workdir, listen=_haproxy_address(host, port), connect_ms=connect_timeout_ms(timeout_ms), timeout_ms=timeout_ms,
        client_ms=timeout_ms + 10000, keepalive_s=KEEPALIVE_CLIENT_S, header=ROUTE_HEADER,
        proxy_paths=" ".join(p for p, (ws, _) in ROUTES.items() if ws),
        hbr_paths=" ".join(p for p, (ws, _) in ROUTES.items() if not ws),
        backends=" ".join(BACKENDS), proxy_backend=PROXY_BACKEND, no_route=NO_ROUTE, not_served=NOT_SERVED,
        backend_sections=sections))
    return ["haproxy", "-db", "-f", str(conf)]
