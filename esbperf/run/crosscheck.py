"""The independent client beside esbperf's own (`esbperf run --cross-check wrk`): just before and
just after each closed-model step, wrk sends the step's requests (the same target, paths, headers,
bodies and keep-alive mode, in the same turn) on as many connections as the step has users, for
the step's measured duration, from the client host (inside its namespace on an emulated testbed).

Two runs bracket the step: a target still moving (a JVM compiling its path, a heap growing) reads
differently before and after, and the step, measured between them, is judged against both rather
than blamed for the move (the analysis's `target-drift`). Their figures go into step.json `xcheck`
(the bracket's mean, and each run under `before` and `after`); the analysis sets them beside
esbperf's (summary.csv `xcheck_*`) and warns where the two disagree. wrk checks no answers, so only
steps whose answers esbperf found all correct are cross-checked."""
from __future__ import annotations

import os
import time

from esbperf.core import plan as plans, scenarios
from esbperf.core.errors import EsbperfError
from esbperf.core.roles import CLIENT
from esbperf.core.topology import Target, Testbed
from esbperf.run import wrk

TOOLS = ("wrk",)
MAX_THREADS = 2   # wrk's threads: epoll serves many connections per thread; more would take the target's CPU


def require(tool: str | None) -> None:
    """One line when the cross-check cannot run here."""
    if tool is None:
        return
    if tool not in TOOLS:
        raise EsbperfError(f"--cross-check {tool}: unknown tool (known: {', '.join(TOOLS)})")
    try:
        wrk.require()
    except EsbperfError as e:
        raise EsbperfError(f"--cross-check wrk: {e}") from None


def step_requests(target: Target, step: plans.Step, payload: bytes | None, check: str) -> tuple[str, list[wrk.Request]]:
    """The base URL and the requests a step's workers send, in their turn; EsbperfError when they
    do not all go to one host (wrk drives one)."""
    contract = scenarios.contract()
    requests = (contract.requests_for(step.scenario, target.kind, step.payload_bytes) if payload is None
                else contract.requests_for_file(step.scenario, target.kind, payload, check))
    bases = {target.url if target.kind == "esb" else target.backends[r.backend] for r in requests}
    if len(bases) != 1:
        raise EsbperfError(f"its requests go to {len(bases)} hosts ({', '.join(sorted(bases))}); wrk drives one")
    return bases.pop(), [wrk.Request(r.path, {"Content-Type": r.content_type, **dict(zip(r.headers[::2], r.headers[1::2]))},
                                     r.data if r.data is not None else r.body.encode("utf-8"))
                         for r in requests]


def skip_reason(step: plans.Step, errors: int, script: bool) -> str | None:
    """Why a step is not cross-checked, or None."""
    if script:
        return "a user's own script: wrk cannot send its requests"
    if step.model != "closed":
        return "an open-model step (fixed arrival rate): wrk has no rate, so it cannot measure the same load"
    if errors:
        return f"the step had {errors} failed transaction(s), and wrk does not check answers"
    return None


def cross_check(testbed: Testbed, target: Target, step: plans.Step, plan: plans.Plan, errors: int,
                script: bool, payload: bytes | None = None) -> dict:
    """step.json's `xcheck`: wrk's figures for the step, or why there are none."""
    reason = skip_reason(step, errors, script)
    if reason:
        return {"skipped": reason}
    try:
        base, requests = step_requests(target, step, payload, plan.payload_check)
    except EsbperfError as e:
        return {"skipped": str(e)}
    threads = min(step.users, MAX_THREADS, os.cpu_count() or 1)
    started = int(time.time() * 1000)
    try:
        result = wrk.run_requests(base, requests, step.users, plan.duration_s, threads=threads,
                                  keepalive=plan.keepalive, timeout_s=plan.timeout_s,
                                  wrap=lambda argv: testbed.command(CLIENT, argv))
    except EsbperfError as e:
        return {"skipped": f"wrk failed: {e}"}
    return {"tool": "wrk", "url": base + requests[0].path, "requests_in_turn": len(requests),
            "connections": step.users, "threads": threads, "seconds": round(result.seconds, 3),
            "keepalive": plan.keepalive, "requests": result.requests, "errors": result.errors,
            "tps": result.rps, "mean_ms": result.mean_ms, "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
            "started_ms": started, "ended_ms": int(time.time() * 1000)}


# The figures of one wrk run that the bracket averages.
BRACKETED = ("tps", "mean_ms", "p50_ms", "p99_ms")


def bracket(before: dict, after: dict) -> dict:
    """step.json `xcheck` from the runs before and after the step: the mean of their figures
    (what the step is judged against), each run as it was, and `drift` — the change from before
    to after as a share of their mean (the analysis weighs it against the step's own noise). A
    step whose answers were not all right has no `after` run and is not cross-checked; a run that
    failed leaves the other one alone (`bracketed`: false)."""
    if "skipped" in after:
        return {"skipped": after["skipped"]}
    if "skipped" in before or before.get("errors") or after.get("errors"):
        return {**after, "bracketed": False, **({"before": before} if "skipped" not in before else
                                                {"before_skipped": before["skipped"]})}
    mean = {k: (before[k] + after[k]) / 2 if before.get(k) is not None and after.get(k) is not None else after.get(k)
            for k in BRACKETED}
    drift = (after["tps"] - before["tps"]) / mean["tps"] if mean["tps"] else None
    return {**after, **mean, "bracketed": True, "drift": drift, "requests": before["requests"] + after["requests"],
            "seconds": round(before["seconds"] + after["seconds"], 3), "started_ms": before["started_ms"],
            "before": before, "after": after}
