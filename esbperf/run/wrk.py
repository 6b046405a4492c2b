"""wrk, the HTTP load generator the benchmarks put beside Grinder, echo and ESBs: POST one body
for a while and read back an exact summary (its Lua done() hook, not its rounded text)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable

from esbperf.core.errors import EsbperfError

_SCRIPT = """
local f = assert(io.open(os.getenv("ESBPERF_WRK_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
{headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %.0f %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    summary.bytes, latency.mean, latency:percentile(50), latency:percentile(99), e.status,
    e.connect, e.read, e.write, e.timeout))
end
"""


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


def run(url: str, body: bytes, connections: int, seconds: int, threads: int = 1,
        headers: dict[str, str] | None = None, keepalive: bool = True, timeout_s: int = 10,
        wrap: Callable[[list[str]], list[str]] = lambda argv: argv) -> Result:
    """POST `body` to `url` on `connections` connections for `seconds`; `wrap` may place wrk
    elsewhere (e.g. in a network namespace). keepalive=False: a new connection per request."""
    require()
    headers = dict(headers or {})
    if not keepalive:
        headers["Connection"] = "close"
    # Lua long strings ([[...]]) take any header value as it is, quotes included.
    lua = "\n".join(f"wrk.headers[ [[{name}]] ] = [[{value}]]" for name, value in headers.items())
    with tempfile.TemporaryDirectory(prefix="esbperf-wrk-") as tmp:
        script, body_file = os.path.join(tmp, "post.lua"), os.path.join(tmp, "body")
        with open(script, "w") as f:
            f.write(_SCRIPT.format(headers=lua))
        with open(body_file, "wb") as f:
            f.write(body)
        argv = wrap(["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", f"{timeout_s}s",
                     "-s", script, url])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60,
                             env=dict(os.environ, ESBPERF_WRK_BODY=body_file))
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise EsbperfError(f"wrk printed no result: {(out.stderr or out.stdout).strip()[:300]}")
    requests, micros, read, mean, p50, p99, bad, connect, reads, writes, timeouts = map(int, line.split()[1:])
    return Result(requests, micros / 1e6, read, mean / 1000, p50 / 1000, p99 / 1000, bad, connect, reads,
                  writes, timeouts, keepalive)
