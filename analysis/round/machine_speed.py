"""Where a round ran and how fast that machine is for set work: the CPU and cores, and the reference
engine's µs of CPU a request (`machine`, from the accounts its processes kept), which a rerun elsewhere
is held against (`machine_differences`: another machine is compared by its ratios and verdicts, not its
absolute figures)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from esbperf.analysis import forks
from esbperf.analysis.round.folder import RoundData

# How far the reference engine's work may run from the published round's before a rerun's machine
# counts as another, where neither side's processes give an interval to judge it on.
REFERENCE_SPEED_TOLERANCE = 0.05


@dataclass(frozen=True)
class Machine:
    """Where a round ran: its CPU model, clock and cores (round.json `machine`, else a run's
    environment), and its reference engine's speed there: the µs of CPU its set work takes per request,
    as each of its processes measured it at its start (its account: esb-projects/README.md), over the
    processes as units; and under the round's load (work CPU ÷ work requests, its accounts after each
    warm-up)."""

    cpu: str | None
    cores: int | None
    cpu_mhz: int | None
    reference: str | None
    work: int | None                   # the reference's set work, rounds per request
    work_us: forks.Interval | None     # None: no reference account
    under_load_us: float | None

    def describe(self) -> str:
        """`AMD EPYC …, 2 CPUs at 2450 MHz`."""
        return (f"{self.cpu or 'an unknown CPU'}, {self.cores or '?'} CPUs"
                + (f" at {self.cpu_mhz} MHz" if self.cpu_mhz else ""))


def _accounts(data: RoundData, reference: str | None) -> list[dict]:
    """Every account of the reference engine the round kept, one per process: as the round began
    (round.json `machine`), as each run began (run.json `engines`) and after each fork's warm-up
    (run.json `target_warmup`)."""
    if reference is None:
        return []
    engine = (data.info.get("machine") or {}).get("reference", {}).get("engine")
    found = [(data.info.get("machine") or {}).get("reference", {}).get("account")]
    for record in data.runs.values():
        engine = engine or next((t.get("esb") for t in record.get("targets") or [] if t.get("name") == reference), None)
        found.append(((record.get("engines") or {}).get(engine or reference) or {}).get("account"))
        for entry in record.get("target_warmup") or []:
            found += [t.get("account") for t in (entry.get("targets") or []) if isinstance(t, dict)
                      and t.get("target") == reference]
    processes: dict[tuple, dict] = {}
    for account in found:
        if isinstance(account, dict) and isinstance(account.get("work_us_per_request"), (int, float)):
            key = (account["work_us_per_request"], json.dumps(account.get("work_calibration"), sort_keys=True))
            if key not in processes or (account.get("work_requests") or 0) > (processes[key].get("work_requests") or 0):
                processes[key] = account      # a process's latest reading: the most work done
    return list(processes.values())


def machine(data: RoundData) -> Machine:
    """The machine the round ran on and its reference engine's speed there (Machine)."""
    recorded = data.info.get("machine") or {}
    env = next((r.get("environment") for r in data.runs.values() if r.get("environment")), {}) or {}
    reference = data.reference()
    accounts = _accounts(data, reference)
    work_us = forks.interval(forks.Sample.of_values([a["work_us_per_request"] for a in accounts],
                                                    range(1, len(accounts) + 1), unit="process")) if accounts else None
    loaded = [(a.get("work_cpu_s"), a.get("work_requests")) for a in accounts]
    loaded = [(c, n) for c, n in loaded if isinstance(c, (int, float)) and isinstance(n, int) and n >= 1000]
    works = {(a.get("settings") or {}).get("work") for a in accounts}
    return Machine(recorded.get("cpu") or env.get("cpu"), recorded.get("cores") or env.get("cores"),
                   recorded.get("cpu_mhz") or env.get("cpu_mhz"), reference if accounts else None,
                   works.pop() if len(works) == 1 else None, work_us,
                   1e6 * sum(c for c, _ in loaded) / sum(n for _, n in loaded) if loaded else None)


def machine_differences(new: RoundData, published: RoundData) -> list[str]:
    """How a rerun's machine differs from the published round's, one phrase each ([] when it is the
    same machine as far as a round can tell): another CPU model, other cores, another set work of the
    reference engine, or its work taking another time — the 95 % interval of new ÷ published µs (over
    each side's processes) leaving out 1, or, where neither side has an interval, a move beyond
    REFERENCE_SPEED_TOLERANCE."""
    a, b = machine(published), machine(new)
    out = []
    if a.cpu and b.cpu and a.cpu != b.cpu:
        out.append(f"CPU {a.cpu} → {b.cpu}")
    if a.cores and b.cores and a.cores != b.cores:
        out.append(f"{a.cores} → {b.cores} CPUs")
    if a.work_us is not None and b.work_us is not None and a.work_us.value and b.work_us.value:
        if a.work is not None and b.work is not None and a.work != b.work:
            out.append(f"the reference engine set to {b.work} rounds of work, not {a.work}")
        else:
            ratio = b.work_us.value / a.work_us.value
            agrees, low, high = forks.agreement(a.work_us, b.work_us, log=True)
            if agrees is False or (agrees is None and abs(math.log(ratio)) > math.log(1 + REFERENCE_SPEED_TOLERANCE)):
                out.append(f"the reference engine's work took {ratio:.2f} × the published µs a request "
                           f"({b.work_us.value:.1f} against {a.work_us.value:.1f}"
                           + (f"; 95 %: {low:.2f}–{high:.2f}" if low is not None else "") + ")")
    return out
