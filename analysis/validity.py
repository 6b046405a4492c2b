"""Validity warnings: what makes figures of a report doubtful, each said once in plain words."""
from __future__ import annotations

import polars as pl

from esbperf.analysis.results import BASELINE_TARGET, Run
from esbperf.analysis.stats import ROLES

LISTED = 8   # steps named per warning; the rest are counted
CONSOLE_TOLERANCE = 0.10   # data logs and the console's count may differ at the window's edges


def _console_disagrees(row: dict) -> bool:
    if row["console_tests"] is None:
        return False
    console = row["console_tests"] + (row["console_errors"] or 0)
    logs = row["transactions"] + row["errors"]
    return abs(logs - console) > max(10, CONSOLE_TOLERANCE * console)


def _step_name(row: dict) -> str:
    return f"{row['run']} {row['scenario']} {row['payload_label']} {row['users']}u it{row['iteration']}"


def _listing(rows: list[dict], detail) -> str:
    shown = [f"{_step_name(r)} ({detail(r)})" for r in rows[:LISTED]]
    more = f"; and {len(rows) - LISTED} more" if len(rows) > LISTED else ""
    return "; ".join(shown) + more


def sharing_cpus(run: Run) -> list[str]:
    """The roles of a run whose hosts share CPUs with another role's: the same address (one
    machine), or one emulated machine without disjoint `cpus` pinning."""
    hosts = {role: h for role, h in (run.info.get("hosts") or {}).items() if role in ROLES and isinstance(h, dict)}
    testbed = run.info.get("testbed")
    emulated = isinstance(testbed, dict) and bool(testbed.get("emulated"))

    def share(a: dict, b: dict) -> bool:
        if a.get("address") and a.get("address") == b.get("address"):
            return True
        if not emulated:
            return False
        cpus_a, cpus_b = set(a.get("cpus") or []), set(b.get("cpus") or [])
        return not cpus_a or not cpus_b or bool(cpus_a & cpus_b)

    return [role for role in ROLES if role in hosts
            and any(share(hosts[role], hosts[other]) for other in hosts if other != role)]


def validity_warnings(plans: dict[str, list[Run]], summary: pl.DataFrame) -> list[str]:
    out = []
    runs = [r for members in plans.values() for r in members]
    for plan, members in plans.items():
        if not any(r.is_baseline for r in members):
            which = f" of plan {plan!r}" if len(plans) > 1 else ""
            out.append(f"No no-ESB baseline{which}: no run has target '{BASELINE_TARGET}', so the ESB curves "
                       "stand alone. Run the same plan against the direct target and report both runs together.")
    if len({r.testbed for r in runs}) > 1:
        out.append("The runs were made on different testbeds ("
                   + ", ".join(f"{r.name}: {r.testbed or '?'}" for r in runs) + ").")
    shared = {r.name: sharing_cpus(r) for r in runs if sharing_cpus(r)}
    if shared:
        alike = len(shared) == len(runs) > 1 and len({tuple(roles) for roles in shared.values()}) == 1
        where = (f"every run: {', '.join(next(iter(shared.values())))}" if alike else
                 "; ".join(f"{name}: {', '.join(roles)}" for name, roles in shared.items()))
        out.append(f"Hosts share CPUs (one machine, no disjoint `cpus` pinning) in {where}. Their host CPU "
                   "is the machine's, so a CPU bottleneck named on one of them is on all; the watched processes' "
                   "CPU (ESB and echo JVMs, % of one core: `<role>_proc_cpu_mean`) tells them apart.")
    rows = summary.to_dicts()
    flagged = [r for r in rows if r["bottleneck"]]
    if flagged:
        out.append(f"{len(flagged)} step(s) ran with a host's CPU or link saturated, so they are not an ESB "
                   "measurement (circled in red on the graphs): "
                   + _listing(flagged, lambda r: r["bottlenecks"]))
    failed = [r for r in rows if r["errors"]]
    if failed:
        out.append(f"{len(failed)} step(s) had failed transactions (counted as errors, not in TPS): "
                   + _listing(failed, lambda r: f"{r['errors']} errors, {r['error_percent']:.2f} %, "
                                                f"status:count {r['error_statuses']}"))
    empty = [r for r in rows if not r["transactions"]]
    if empty:
        out.append(f"{len(empty)} step(s) have no successful transaction in their measurement window: "
                   + _listing(empty, lambda r: f"{r['log_files']} data log(s)"))
    broken = [r for r in rows if r["malformed_lines"]]
    if broken:
        total = sum(r["malformed_lines"] for r in broken)
        out.append(f"{total} malformed or cut-short data log line(s) skipped in {len(broken)} step(s): "
                   + _listing(broken, lambda r: f"{r['step_dir']}/logs: "
                                                + ", ".join(r["malformed_by_file"].split(";"))))
    disagree = [r for r in rows if _console_disagrees(r)]
    if disagree:
        out.append(f"{len(disagree)} step(s) whose data logs and the console's statistics disagree by more than "
                   f"{CONSOLE_TOLERANCE:.0%} (a worker's data log may be missing, e.g. an agent on another "
                   "machine): " + _listing(disagree, lambda r: f"logs {r['transactions'] + r['errors']}, console "
                                                                 f"{r['console_tests'] + (r['console_errors'] or 0)}"))
    bad_monitor = [r for r in rows if r["monitor_malformed_lines"]]
    if bad_monitor:
        out.append(f"Malformed monitor lines skipped in {len(bad_monitor)} step(s): "
                   + _listing(bad_monitor, lambda r: f"{r['monitor_malformed_lines']} lines"))
    gaps = [r for r in rows if any(r[f"{role}_gap_s"] for role in ROLES)]
    if gaps:
        out.append(f"A monitor was unreachable during the measurement of {len(gaps)} step(s), so CPU and "
                   "network there miss samples: "
                   + _listing(gaps, lambda r: ", ".join(f"{role} {r[f'{role}_gap_s']:.1f} s"
                                                        for role in ROLES if r[f"{role}_gap_s"])))
    for run in runs:
        if not run.finished:
            out.append(f"{run.name}: the run has not finished (run.json has no end time): it is still "
                       "going or was stopped; only its finished steps are shown.")
        if run.unfinished_steps:
            out.append(f"{run.name}: {run.unfinished_steps} unfinished, aborted or failed step folder(s) "
                       "(.tmp-*, .aborted-*, .failed-*) skipped.")
        mine = [r for r in rows if r["run"] == run.name]
        expected = [role for role in ROLES if not (role == "esb" and run.is_baseline)]
        never = [role for role in expected if all(role in r["monitor_missing"].split(";") for r in mine)]
        if never:
            out.append(f"{run.name}: no monitor file for {', '.join(never)}; their CPU and network are "
                       "unknown, so a bottleneck there cannot be seen.")
    return out
