"""The scenario contract (grinder-scripts/contract.py) for CPython code: the same module the
Grinder workers run under Jython, loaded from the scripts folder so it exists once."""
from __future__ import annotations

import http.client
import importlib.util
import time
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache

from esbperf.core.project import GRINDER_SCRIPTS


@lru_cache(maxsize=1)
def contract():
    spec = importlib.util.spec_from_file_location("esbperf_contract", GRINDER_SCRIPTS / "contract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def names() -> list[str]:
    return list(contract().SCENARIO_NAMES)


@dataclass
class Answer:
    """What contract checks read: status, header(name), text, body, bodyEquals(bytes)."""

    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def bodyEquals(self, other: bytes) -> bool:   # noqa: N802 - the worker's Java Response's name
        return self.body == other


def send(base_url: str, request, timeout: float) -> Answer:
    """POST one contract request to base_url and read the whole answer."""
    url = urllib.parse.urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
    headers = {"Content-Type": request.content_type}
    pairs = request.headers
    headers.update(zip(pairs[0::2], pairs[1::2]))
    try:
        connection.request("POST", request.path, body=request.data if request.data is not None else request.body.encode("utf-8"), headers=headers)
        response = connection.getresponse()
        body = response.read()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
    finally:
        connection.close()


@dataclass
class Outcome:
    scenario: str
    backend: str
    url: str
    ok: bool
    detail: str
    ms: float


def exercise(target, scenario: str, size: int = 1024, timeout: float = 10.0, payload: bytes | None = None,
             check: str = "") -> list[Outcome]:
    """Send each request of `scenario` once to `target` (a topology.Target) and check the answers:
    generated requests of `size` bytes, or payload file bytes `payload` compared as `check` says."""
    outcomes = []
    c = contract()
    requests = (c.requests_for(scenario, target.kind, size) if payload is None
                else c.requests_for_file(scenario, target.kind, payload, check or c.DEFAULT_FILE_CHECK))
    for request in requests:
        base = target.url if target.kind == "esb" else target.backends[request.backend]
        started = time.perf_counter()
        try:
            answer = send(base, request, timeout)
            problem = request.check(answer)
        except OSError as e:
            problem = f"no answer: {e}"
        ms = (time.perf_counter() - started) * 1000
        outcomes.append(Outcome(scenario, request.backend, base + request.path, problem is None,
                                problem or "ok", ms))
    return outcomes
