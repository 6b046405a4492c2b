"""Validity warnings: what makes figures of a report doubtful, each said once in plain words."""
from __future__ import annotations

import polars as pl

from esbperf.results.datalog import LATE_START_US
from esbperf.analysis.runs import BASELINE_TARGET, Run
from esbperf.analysis.stats import (CONSOLE_TOLERANCE, LAG_GROWTH_SHARE, LITTLE_TOLERANCE, MIN_SAMPLES_PER_STEP,
                                    ROLES, SCHEDULE_SHORTFALL, console_disagrees, little, little_disagrees)

LISTED = 8   # steps named per warning; the rest are counted


def _step_name(row: dict) -> str:
    load = f"{row['users']}u" if row["model"] == "closed" else f"{row['rate']:g}/s ({row['users']} threads)"
    return f"{row['run']} {row['target']} {row['scenario']} {row['payload_label']} {load} it{row['iteration']}"


def _listing(rows: list[dict], detail) -> str:
    shown = [f"{_step_name(r)} ({detail(r)})" for r in rows[:LISTED]]
    more = f"; and {len(rows) - LISTED} more" if len(rows) > LISTED else ""
    return "; ".join(shown) + more


def sharing_cpus(run: Run, roles: list[str] | tuple[str, ...] = ROLES) -> list[str]:
    """The roles of a run whose hosts share CPUs with another role's: the same address (one
    machine), or one emulated machine without disjoint `cpus` pinning."""
    hosts = {role: h for role, h in (run.info.get("hosts") or {}).items() if role in roles and isinstance(h, dict)}
    testbed = run.info.get("testbed")
    emulated = isinstance(testbed, dict) and bool(testbed.get("emulated"))

    def share(a: dict, b: dict) -> bool:
        if a.get("address") and a.get("address") == b.get("address"):
            return True
        if not emulated:
            return False
        cpus_a, cpus_b = set(a.get("cpus") or []), set(b.get("cpus") or [])
        return not cpus_a or not cpus_b or bool(cpus_a & cpus_b)

    return [role for role in roles if role in hosts
            and any(share(hosts[role], hosts[other]) for other in hosts if other != role)]


def validity_warnings(plans: dict[str, list[Run]], summary: pl.DataFrame,
                      roles: list[str] | tuple[str, ...] = ROLES) -> list[str]:
    out = []
    runs = [r for members in plans.values() for r in members]
    for plan, members in plans.items():
        if not any(r.has_baseline for r in members):
            which = f" of plan {plan!r}" if len(plans) > 1 else ""
            out.append(f"No no-ESB baseline{which}: no step has target '{BASELINE_TARGET}', so the ESB curves "
                       "stand alone. Run the same plan against the direct target (or interleave it: "
                       "--target ESB --target direct) and report both together.")
    if len({r.testbed for r in runs}) > 1:
        out.append("The runs were made on different testbeds ("
                   + ", ".join(f"{r.name}: {r.testbed or '?'}" for r in runs) + ").")
    shared = {r.name: sharing_cpus(r, roles) for r in runs if sharing_cpus(r, roles)}
    if shared:
        alike = len(shared) == len(runs) > 1 and len({tuple(roles) for roles in shared.values()}) == 1
        where = (f"every run: {', '.join(next(iter(shared.values())))}" if alike else
                 "; ".join(f"{name}: {', '.join(roles)}" for name, roles in shared.items()))
        out.append(f"Hosts share CPUs (one machine, no disjoint `cpus` pinning) in {where}. Their host CPU "
                   "is the machine's, so a CPU bottleneck named on one of them is on all; the watched processes' "
                   "CPU (ESB and echo JVMs, % of one core: `<role>_proc_cpu_mean`) tells them apart.")
    no_warmup = [r.name for r in runs if not (r.plan.get("warmup_s") or 0) or
                 any(not (s.meta.get("warmup_s", r.plan.get("warmup_s")) or 0) for s in r.steps)]
    if no_warmup:
        out.append(f"{', '.join(no_warmup)}: the plan has no warm-up (warmup_s 0 or missing), so each step is "
                   "measured from the workers' first report: JIT compilation, connection pools and caches "
                   "filling up count in its figures. Give the plan a warmup_s.")
    rows = summary.to_dicts()
    interval = {r.name: r.console_sample_interval_ms for r in runs}
    short = [r for r in rows if r["window_s"] * 1000 < MIN_SAMPLES_PER_STEP * interval[r["run"]]]
    if short:
        out.append(f"{len(short)} step(s) measured for less than {MIN_SAMPLES_PER_STEP} console sample intervals, "
                   "so the console's own statistics hold few samples and their figures are coarse: "
                   + _listing(short, lambda r: f"{r['window_s']:g} s, interval {interval[r['run']]:g} ms"))
    faulty = [r for r in rows if r["network_faults"]]
    if faulty:
        out.append(f"{len(faulty)} step(s) ran while a network fault was emulated on a link (`esbperf testbed "
                   "fault`: loss, delay), so they measure the fault, not the ESB: "
                   + _listing(faulty, lambda r: r["network_faults"]))
    flagged = [r for r in rows if r["bottleneck"]]
    if flagged:
        out.append(f"{len(flagged)} step(s) ran with a host's CPU or link saturated, so they are not an ESB "
                   "measurement (circled in red on the graphs): "
                   + _listing(flagged, lambda r: r["bottlenecks"]))
    failed = [r for r in rows if r["errors"]]
    if failed:
        out.append(f"{len(failed)} step(s) had failed transactions (counted as errors, not in TPS; response times "
                   "and percentiles are those of the successful ones, so they can look better exactly when "
                   "requests fail; marked with an orange x on the graphs): "
                   + _listing(failed, lambda r: f"{r['errors']} errors, {r['error_percent']:.2f} %, failed mean "
                                                f"{_ms(r['failed_rt_mean_ms'])} p99 {_ms(r['failed_rt_p99_ms'])}, "
                                                f"status:count {r['error_statuses']}"))
    empty = [r for r in rows if not r["transactions"]]
    if empty:
        out.append(f"{len(empty)} step(s) have no successful transaction in their measurement window: "
                   + _listing(empty, lambda r: f"{r['log_files']} data log(s)"))
    idle = [r for r in rows if r["log_files"] and r["threads_seen"] < r["users"]]
    if idle:
        out.append(f"{len(idle)} step(s) where fewer threads than users started a transaction in the window, so "
                   "the target had less load than the step claims: "
                   + _listing(idle, lambda r: f"{r['threads_seen']} of {r['users']} threads; {r['threads_by_file']}"))
    unaccounted = [r for r in rows if little_disagrees(r)]
    if unaccounted:
        out.append(f"{len(unaccounted)} closed-model step(s) where Little's law does not hold within "
                   f"{LITTLE_TOLERANCE:.0%}: users ≠ (starts / window) × (mean time per transaction + time "
                   "outside the clock + think time), so some threads were not loading the target all the time "
                   "(idle, starting late, blocked in the client): "
                   + _listing(unaccounted, lambda r: f"{r['users']} users, Little's law gives "
                                                     f"{little(r)[0] * r['users']:.1f}"))
    behind = [r for r in rows if r["behind_schedule"]]
    if behind:
        out.append(f"{len(behind)} open-model step(s) whose thread pool could not keep the schedule (starts short "
                   f"of the offered rate by more than {SCHEDULE_SHORTFALL:.0%}, or a start lag growing by more than "
                   f"{LAG_GROWTH_SHARE:.0%} of the window): the load was not the one offered; the latency counts "
                   "from each request's due start, so it shows the wait (marked ▽ on the graphs). Give the step "
                   "more threads, or take it as the rate that cannot be served: "
                   + _listing(behind, lambda r: f"offered {r['rate']:g}/s, started {r['start_rate']:.1f}/s, "
                                                f"{_number(r['late_starts'])} starts late by > {LATE_START_US} µs, "
                                                f"max lag {_ms(r['max_lag_ms'])}, lag growth "
                                                f"{_ms(r['lag_growth_ms'])}"))
    open_without = [r for r in rows if r["model"] == "open" and r["transactions"] and r["lat_p50_ms"] is None]
    if open_without:
        out.append(f"{len(open_without)} open-model step(s) whose data logs lack `Latency us` or `Start lag us`: "
                   "no corrected latency, and the schedule cannot be checked: "
                   + _listing(open_without, lambda r: r["step_dir"]))
    broken = [r for r in rows if r["malformed_lines"]]
    if broken:
        total = sum(r["malformed_lines"] for r in broken)
        out.append(f"{total} malformed or cut-short data log line(s) skipped in {len(broken)} step(s): "
                   + _listing(broken, lambda r: f"{r['step_dir']}/logs: "
                                                + ", ".join(r["malformed_by_file"].split(";"))))
    disagree = [r for r in rows if console_disagrees(r, interval[r["run"]])]
    if disagree:
        out.append(f"{len(disagree)} step(s) whose data logs and the console's statistics disagree by more than "
                   f"{CONSOLE_TOLERANCE:.0%} plus the window's edges (a worker's data log may be missing, e.g. of an "
                   "agent on another machine): "
                   + _listing(disagree, lambda r: f"logs {r['starts']}, console "
                                                  f"{r['console_tests'] + (r['console_errors'] or 0)}"))
    bad_monitor = [r for r in rows if r["monitor_malformed_lines"]]
    if bad_monitor:
        out.append(f"Malformed monitor lines skipped in {len(bad_monitor)} step(s): "
                   + _listing(bad_monitor, lambda r: f"{r['monitor_malformed_lines']} lines"))
    gaps = [r for r in rows if any(r[f"{role}_gap_s"] for role in roles)]
    if gaps:
        out.append(f"A monitor was unreachable during the measurement of {len(gaps)} step(s), so CPU and "
                   "network there miss samples: "
                   + _listing(gaps, lambda r: ", ".join(f"{role} {r[f'{role}_gap_s']:.1f} s"
                                                        for role in roles if r[f"{role}_gap_s"])))
    for run in runs:
        if not run.finished:
            out.append(f"{run.name}: the run has not finished (run.json has no end time): it is still "
                       "going or was stopped; only its finished steps are shown.")
        if run.unfinished_steps:
            out.append(f"{run.name}: {run.unfinished_steps} unfinished, aborted or failed step folder(s) "
                       "(.tmp-*, .aborted-*, .failed-*) skipped.")
        mine = [r for r in rows if r["run"] == run.name]
        # The ESB host is not expected to be monitored while the direct target runs.
        never = [role for role in run.roles
                 if all(role in r["monitor_missing"].split(";") for r in mine
                        if not (role == "esb" and r["target"] == BASELINE_TARGET))
                 and any(not (role == "esb" and r["target"] == BASELINE_TARGET) for r in mine)]
        if never:
            out.append(f"{run.name}: no monitor file for {', '.join(never)}; their CPU and network are "
                       "unknown, so a bottleneck there cannot be seen.")
    return out


def _ms(value) -> str:
    return "–" if value is None else f"{value:.3f} ms"


def _number(value) -> str:
    return "–" if value is None else str(value)
