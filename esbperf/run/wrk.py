"""wrk, the HTTP load generator esbperf puts beside its own client (`esbperf run --cross-check wrk`,
and the benchmarks): POST one request, or several in turn as the workers send them, on N
connections for a while, and read back an exact summary (its Lua done() hook, not its rounded text).
wrk is closed-model only and does not check answers."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable

from esbperf.core.errors import EsbperfError

# Each request is built once per wrk thread with wrk.format (Host from the URL, Content-Length from
# the body) and sent in turn; done() prints the exact figures.
_SCRIPT = """
local specs = {{ {specs} }}
local built = {{}}
local next_one = 0
local function read(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end
init = function(args)
  for i, spec in ipairs(specs) do
    built[i] = wrk.format("POST", spec.path, spec.headers, read(spec.body))
  end
end
request = function()
  next_one = next_one % #built + 1
  return built[next_one]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %.0f %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    summary.bytes, latency.mean, latency:percentile(50), latency:percentile(99), e.status,
    e.connect, e.read, e.write, e.timeout))
end
"""


@dataclass(frozen=True)
class Request:
    path: str                     # on the target's base URL
    headers: dict[str, str]
    body: bytes


@dataclass
class Result:
    requests: int
    seconds: float
    bytes_read: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    connect_errors: int
    read_errors: int
    write_errors: int
    timeouts: int
    keepalive: bool

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def errors(self) -> int:
        """Failed requests. With a new connection per request wrk counts the server's close after
        each answer as a read error, so read errors count only on kept-alive connections."""
        reads = self.read_errors if self.keepalive else 0
        return self.non_2xx + self.connect_errors + reads + self.write_errors + self.timeouts


def require() -> None:
    if shutil.which("wrk") is None:
        raise EsbperfError("wrk is not installed (Debian: apt-get install -y wrk)")


def _lua_string(text: str) -> str:
    """A Lua long string: takes any text as it is (quotes, backslashes) unless it holds `]==]`."""
    if "]==]" in text or "\n" in text:
        raise EsbperfError(f"cannot pass {text!r} to wrk's script")
    return f"[==[{text}]==]"


def run_requests(base_url: str, requests: list[Request], connections: int, seconds: float, threads: int = 1,
                 keepalive: bool = True, timeout_s: float = 10,
                 wrap: Callable[[list[str]], list[str]] = lambda argv: argv) -> Result:
    """POST `requests` in turn to `base_url` on `connections` connections for `seconds`; `wrap` may
    place wrk elsewhere (e.g. in a network namespace). keepalive=False: a new connection per request."""
    require()
    if not requests:
        raise EsbperfError("wrk needs at least one request")
    threads = max(1, min(threads, connections))
    with tempfile.TemporaryDirectory(prefix="esbperf-wrk-") as tmp:
        specs = []
        for i, r in enumerate(requests):
            body_file = os.path.join(tmp, f"body-{i}")
            with open(body_file, "wb") as f:
                f.write(r.body)
            headers = {**r.headers, **({} if keepalive else {"Connection": "close"})}
            lua_headers = ", ".join(f"[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in headers.items())
            specs.append(f"{{path = {_lua_string(r.path)}, headers = {{ {lua_headers} }}, "
                         f"body = {_lua_string(body_file)}}}")
        script = os.path.join(tmp, "post.lua")
        with open(script, "w") as f:
            f.write(_SCRIPT.format(specs=", ".join(specs)))
        argv = wrap(["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                     "--timeout", f"{max(1, round(timeout_s))}s", "-s", script, base_url])
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + timeout_s + 60)
        except subprocess.TimeoutExpired:
            raise EsbperfError(f"wrk did not end within {seconds + timeout_s + 60:.0f} s") from None
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise EsbperfError(f"wrk printed no result: {(out.stderr or out.stdout).strip()[:300]}")
    requests_done, micros, read, mean, p50, p99, bad, connect, reads, writes, timeouts = map(int, line.split()[1:])
    return Result(requests_done, micros / 1e6, read, mean / 1000, p50 / 1000, p99 / 1000, bad, connect, reads,
                  writes, timeouts, keepalive)


def run(url: str, body: bytes, connections: int, seconds: int, threads: int = 1,
        headers: dict[str, str] | None = None, keepalive: bool = True, timeout_s: int = 10,
        wrap: Callable[[list[str]], list[str]] = lambda argv: argv) -> Result:
    """POST `body` to `url` (one request, over and over): run_requests for the benchmarks."""
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return run_requests(f"{scheme}://{host}", [Request("/" + path if slash else "/", dict(headers or {}), body)],
                        connections, seconds, threads, keepalive, timeout_s, wrap)
