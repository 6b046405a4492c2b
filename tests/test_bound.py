"""Issue 42: the engine is what a step measures. Each step's bound (analysis/bottleneck.py: the
engine, the back ends, a link, the client, or none) decided from the monitors' per-process and
per-link figures, and carried by summary.csv, the tables, the graphs and `esbperf compare`; and a
watched process's CPU over a window that never exceeds what its cores allow. Every monitor file is
written here with the figures the expected bound follows from."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest

from esbperf.analysis import synthetic
from esbperf.analysis.monitor import host_stats
from esbperf.analysis.report import build_report
from test_analysis import END, T0, WARMUP_END, data_log, ok_row, write_meta
from test_gate import esbperf
QUIET = dict(cpu_percent=20.0, rx_mbit=5.0, tx_mbit=5.0)
ECHO = dict(QUIET, proc_cpu=(18.0,))
SPLIT = {"client": [0], "esb": [1], "ws1": [1], "ws2": [1], "ws3": [1]}   # cpus: auto on 2 CPUs


def pin(run: Path, cpus: dict[str, list[int]]) -> None:
    """run.json's hosts pinned to these cores (step.json copies run.json's hosts)."""
    info = json.loads((run / "run.json").read_text())
    for role, cores in cpus.items():
        info["hosts"][role]["cpus"] = cores
    (run / "run.json").write_text(json.dumps(info))


def valid_rows(users: int) -> list[tuple]:
    """Each user's thread busy with 10 ms transactions back to back through the 10 s window: Little's
    law holds, every thread is seen, nothing drifts."""
    return sorted((ok_row(WARMUP_END + i * 10 + u % 10, 10, thread=u, us=10_000 + (i % 7) * 10)
                   for u in range(users) for i in range(999)), key=lambda r: r[3])


def step(run: Path, users: int, monitors: dict[str, dict], target: str = "camel", payload=("1KB", 1024)) -> Path:
    """A valid closed-model step and a monitor file per role with these figures
    (synthetic.write_monitor's: cpu_percent, rx_mbit, tx_mbit, proc_cpu); a quiet client's too."""
    label, size = payload
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", label, users, 1), "proxy", target, size, label,
                                  users, 1, warmup_s=30, duration_s=10)
    data_log(folder / "logs" / "client-0-data.log", valid_rows(users))
    hosts = json.loads((run / "run.json").read_text())["hosts"]
    write_meta(folder, hosts=hosts)
    for role, figures in {"client": {}, **monitors}.items():
        synthetic.write_monitor(folder, role, T0, WARMUP_END, END, **{**QUIET, **figures})
    return folder


def steps_of(out: Path) -> dict[int, dict]:
    return {r["users"]: r for r in pl.read_csv(out / "summary.csv").to_dicts()}


def backends(**figures) -> dict[str, dict]:
    return {role: {**ECHO, **figures.get(role, {})} for role in ("ws1", "ws2", "ws3")}


def test_the_bound_of_a_step_on_hosts_with_cores_of_their_own(tmp_path: Path):
    """Each host pinned to a core of its own (synthetic.hosts): every kind of bound, and the
    precedence when several saturate (the testbed first, the client first of all)."""
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    cases = {
        1: ("none", "", {"esb": dict(proc_cpu=(40.0,)), **backends()}),
        2: ("engine", "esb:engine 95% of 1 core", {"esb": dict(cpu_percent=97.0, proc_cpu=(95.0,)), **backends()}),
        # nothing watched on the esb host: its own core is the engine's
        3: ("engine", "esb:cpu 96%", {"esb": dict(cpu_percent=96.0), **backends()}),
        4: ("backends", "ws2:echo 90% of 1 core", {"esb": dict(proc_cpu=(40.0,)),
                                                   **backends(ws2=dict(cpu_percent=93.0, proc_cpu=(90.0,)))}),
        # the echo's process not watched: its host's core is the echo's
        5: ("backends", "ws3:cpu 92%", {"esb": dict(proc_cpu=(40.0,)),
                                        **backends(ws3=dict(cpu_percent=92.0, proc_cpu=()))}),
        6: ("link", "esb:link-rx 94%; esb:link-tx 94%", {"esb": dict(rx_mbit=940.0, tx_mbit=940.0, proc_cpu=(60.0,)),
                                                         **backends()}),
        7: ("client", "client:cpu 93%", {"client": dict(cpu_percent=93.0), "esb": dict(proc_cpu=(40.0,)),
                                         **backends()}),
        # several at once: the testbed before the engine
        8: ("link", "esb:link-tx 91%; esb:engine 95% of 1 core",
            {"esb": dict(cpu_percent=97.0, tx_mbit=910.0, proc_cpu=(95.0,)), **backends()}),
        9: ("backends", "ws1:echo 90% of 1 core; esb:engine 95% of 1 core",
            {"esb": dict(cpu_percent=97.0, proc_cpu=(95.0,)), **backends(ws1=dict(cpu_percent=92.0, proc_cpu=(90.0,)))}),
        10: ("client", "client:cpu 90%; esb:link-tx 91%",
             {"client": dict(cpu_percent=90.0), "esb": dict(tx_mbit=910.0, proc_cpu=(40.0,)), **backends()}),
    }
    for users, (_, _, monitors) in cases.items():
        folder = step(run, users, monitors)
    # A verdict an older runner wrote into step.json is not a second rule: the monitor files decide.
    write_meta(folder.parent.parent / "1" / "iter-1", bottlenecks=[{"role": "ws1", "resource": "cpu", "max_percent": 99}])
    out, analysis = build_report([run], tmp_path / "out")
    rows = steps_of(out)
    assert {u: (r["bound"], r["bound_by"] or "") for u, r in rows.items()} == \
        {u: (kind, by) for u, (kind, by, _) in cases.items()}
    # No bound makes a step invalid, the client's neither: each is what the step measured (the target
    # answers at least its TPS); the client-bound warning still says which steps.
    assert {u for u, r in rows.items() if r["valid"] != "yes"} == set()
    assert {u for u, r in rows.items() if r["client_bound"]} == {7, 10}
    [client] = [w for w in analysis.warnings if w.kind == "client-bound"]
    assert len(client.items) == 2 and "at least" in client
    assert "bottlenecks" not in {w.kind for w in analysis.warnings}
    assert rows[2]["bottlenecks"] == "esb:cpu" and rows[8]["bottlenecks"] == "esb:cpu;esb:link-tx"


def test_the_bound_of_a_step_whose_engine_and_back_ends_share_one_core(tmp_path: Path):
    """cpus: auto on 2 CPUs (Round 1): the esb host and the back ends on core 1. The core full with
    the engine under the threshold is the back ends' doing; the engine alone above it, the engine's."""
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    pin(run, SPLIT)
    full = dict(cpu_percent=100.0)
    step(run, 1, {"esb": dict(full, proc_cpu=(52.0,)), **backends(ws1=dict(full, proc_cpu=(20.0,)),
                                                                   ws2=dict(full, proc_cpu=(14.0,)),
                                                                   ws3=dict(full, proc_cpu=(12.0,)))})
    step(run, 20, {"esb": dict(full, proc_cpu=(90.0,)), **backends(ws1=dict(full, proc_cpu=(3.0,)),
                                                                    ws2=dict(full, proc_cpu=(3.0,)),
                                                                    ws3=dict(full, proc_cpu=(3.0,)))})
    step(run, 40, {"esb": dict(cpu_percent=60.0, proc_cpu=(40.0,)), **backends(ws1=dict(cpu_percent=60.0))})
    rows = steps_of(build_report([run], tmp_path / "out")[0])
    assert rows[1]["bound"] == "backends"
    assert rows[1]["bound_by"] == "esb+ws1+ws2+ws3:shared cpu 100% (engine 52%, echoes 46% of the cores)"
    assert (rows[20]["bound"], rows[20]["bound_by"]) == ("engine", "esb:engine 90% of 1 core")
    assert rows[40]["bound"] == "none"


def test_direct_at_20_users_is_bounded_by_the_client_or_the_back_ends_and_the_report_says_which(tmp_path: Path,
                                                                                               capsys):
    direct = synthetic.write_run(tmp_path / "direct-run", "direct")
    camel = synthetic.write_run(tmp_path / "camel-run", "camel")
    big = ("100KB", 100 * 1024)
    # 1 KB: the client at its limit; 100 KB: an echo's core full. Camel beside it: its core, and then the link.
    step(direct, 20, {"client": dict(cpu_percent=92.0), **backends()}, target="direct")
    step(direct, 20, backends(ws1=dict(cpu_percent=97.0, proc_cpu=(96.0,))), target="direct", payload=big)
    step(camel, 20, {"esb": dict(cpu_percent=97.0, proc_cpu=(95.0,)), **backends()})
    step(camel, 20, {"esb": dict(rx_mbit=930.0, tx_mbit=930.0, proc_cpu=(60.0,)), **backends()}, payload=big)
    code, printed, _ = esbperf(capsys, "compare", direct, camel, "--out", tmp_path / "out")
    assert code == 0
    agg = pl.read_csv(tmp_path / "out" / "aggregate.csv")
    assert {(r["target"], r["payload_label"]): r["bound"] for r in agg.to_dicts()} == {
        ("direct", "1KB"): "client", ("direct", "100KB"): "backends",
        ("camel", "1KB"): "engine", ("camel", "100KB"): "link"}
    html = (tmp_path / "out" / "report.html").read_text()
    assert '<span title="client:cpu 92%">client</span>' in html
    assert '<span title="ws1:echo 96% of 1 core">back ends</span>' in html
    # compare says what each ratio is a figure of: here the testbed, never the engines alone
    lines = [line.strip() for line in printed.splitlines() if " ÷ " in line]
    assert len(lines) == 2, printed
    assert lines[0].startswith("proxy 1KB 20 users: camel ÷ direct TPS ")
    assert lines[0].endswith("— direct bounded by the client")
    assert lines[1].endswith("— camel bounded by the link, direct bounded by the back ends")
    ratios = pl.read_csv(tmp_path / "out" / "ratios.csv")
    assert ratios["bound"].to_list() == ["engine", "link"]
    assert ratios["bound_reference"].to_list() == ["client", "backends"]


def test_a_step_at_a_link_bound_is_drawn_and_tabled_as_bounded_not_invalid(tmp_path: Path, capsys):
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    direct = synthetic.write_run(tmp_path / "direct-run", "direct")
    for r, target in ((run, "camel"), (direct, "direct")):
        step(r, 1, {"esb": dict(proc_cpu=(30.0,)), **backends()}, target=target)
        step(r, 20, {"esb": dict(proc_cpu=(60.0,)), "ws1": dict(ECHO, rx_mbit=950.0, tx_mbit=950.0),
                     **{k: v for k, v in backends().items() if k != "ws1"}}, target=target)
    code, printed, _ = esbperf(capsys, "compare", direct, run, "--out", tmp_path / "out")
    assert code == 0
    rows = pl.read_csv(tmp_path / "out" / "summary.csv").to_dicts()
    assert {(r["target"], r["users"]): (r["bound"], r["valid"]) for r in rows} == {
        ("camel", 1): ("none", "yes"), ("camel", 20): ("link", "yes"),
        ("direct", 1): ("none", "yes"), ("direct", 20): ("link", "yes")}
    [line] = [line.strip() for line in printed.splitlines() if "20 users" in line and " ÷ " in line]
    assert line.startswith("proxy 1KB 20 users: camel ÷ direct TPS 1.00") and line.endswith("— bounded by the link")
    # graphs: a grey mark of the link on the point, which is not hollow (not invalid), nor red
    svg = ET.parse(tmp_path / "out" / "graphs" / "proxy-tps-vs-users.svg")
    ids = {e.get("id") for e in svg.iter() if e.get("id")}
    assert {"bound-link-camel", "bound-link-direct"} <= ids
    assert not {i for i in ids if i.startswith(("invalid-", "bottleneck-"))}
    # the table: a bound column saying link, no italic (invalid) or red row, no warning
    html = (tmp_path / "out" / "report.html").read_text()
    assert '<span title="ws1:link-rx 95%; ws1:link-tx 95%">link</span>' in html
    assert 'class="invalid' not in html and 'class="flagged' not in html
    assert "No validity warning" in html
    assert "link / link: bounded by the link" in html              # the ratio table


# --- a watched process's CPU over a window ----------------------------------------------------------

def proc_file(path: Path, readings: list[tuple[int, str, float | None]], cores: int = 0) -> Path:
    """A monitor file of (time, watch, proc.cpu) readings (None: a reading with proc.rss only, as
    after a restart), each second's cpu.total, and `cores` cpu.core subjects."""
    lines = ["time_ms,phase,metric,subject,value"]
    for t in range(0, 12_001, 1000):
        lines.append(f"{t},measure,cpu.total,,50")
        lines += [f"{t},measure,cpu.core,{c},50" for c in range(cores)]
    for t, watch, value in readings:
        lines.append(f"{t},measure,proc.rss,{watch},1000000")
        if value is not None:
            lines.append(f"{t},measure,proc.cpu,{watch},{value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_short_window_between_readings_gets_the_intervals_around_it_weighted_by_their_time_in_it(tmp_path: Path):
    # Readings every 2 s: each value covers the 2 s before it.
    path = proc_file(tmp_path / "monitor-ws1.csv", [(1000, "echo", 40.0), (3000, "echo", 100.0),
                                                   (5000, "echo", 60.0)])
    # (500, 2500]: 0.5 s of the first interval at 40 %, 1.5 s of the second at 100 %
    h = host_stats(path, "ws1", measure_ms=500, end_ms=2500)
    assert h.proc_cpu_mean == pytest.approx((0.5 * 40 + 1.5 * 100) / 2)
    assert h.proc_samples == [40.0, 100.0] and h.proc_cpu_max == 100.0    # the readings of those intervals
    # (1200, 2800]: no reading stamped inside, but the interval around it
    h = host_stats(path, "ws1", measure_ms=1200, end_ms=2800)
    assert h.proc_cpu_mean == pytest.approx(100.0) and h.proc_samples == [100.0]
    # A restart: the reading at 3000 has no proc.cpu; the one at 5000 covers (3000, 5000] only.
    path = proc_file(tmp_path / "monitor-ws2.csv", [(1000, "echo", 40.0), (3000, "echo", None),
                                                   (5000, "echo", 60.0)])
    h = host_stats(path, "ws2", measure_ms=2000, end_ms=5000)
    assert h.proc_cpu_mean == pytest.approx(60.0) and h.proc_by_watch == {"echo": [(5000, 60.0)]}


def test_a_process_never_reads_above_what_its_cores_allow(tmp_path: Path):
    # Round 1's ws1: an echo pinned to one core read 98, then 192.5 (a reading stamped with its tick
    # while the tick's thread waited on the saturated core), then low.
    readings = [(1000, "echo", 98.0), (3000, "echo", 192.5), (5000, "echo", 98.0), (7000, "echo", 8.0)]
    path = proc_file(tmp_path / "monitor-ws1.csv", readings)
    pinned = host_stats(path, "ws1", measure_ms=1500, end_ms=5000, cores=1)
    assert pinned.cores == 1 and pinned.proc_cpu_max == 100.0
    assert pinned.proc_cpu_mean <= 100.0 and pinned.proc_by_watch["echo"][0] == (3000, 100.0)
    # The cores of a host not pinned: the machine's, as the monitor's cpu.core rows name them.
    path = proc_file(tmp_path / "monitor-ws2.csv", [(1000, "jvm", 300.0), (3000, "jvm", 450.0)], cores=4)
    machine = host_stats(path, "ws2", measure_ms=1500, end_ms=3000)
    assert machine.cores == 4 and machine.proc_cpu_max == 400.0
    # Nothing to cap by: the figure as read.
    path = proc_file(tmp_path / "monitor-ws3.csv", readings)
    assert host_stats(path, "ws3", measure_ms=1500, end_ms=5000).proc_cpu_max == 192.5


# --- a bound is a fact, not a fault ------------------------------------------------------------------

SHIPPED = {"client": [0], "ws1": [0], "ws2": [0], "ws3": [0], "esb": [1]}   # cpus: auto on 2 CPUs, lean echoes


def test_on_a_client_core_the_echoes_share_only_the_workers_name_the_client(tmp_path: Path):
    """The shipped one-machine layout: the client and the lean echoes on core 0. The core full with the
    worker JVMs at their limit is the client's bound; full with the workers at 55 % and the echoes at
    45 % is the shared core's, which names what used it. Neither makes the step invalid: direct
    answered at least its TPS."""
    run = synthetic.write_run(tmp_path / "direct-run", "direct")
    pin(run, SHIPPED)
    full = dict(cpu_percent=100.0)
    step(run, 1, {"client": dict(full, proc_cpu=(95.0,)),
                  **backends(**{ws: dict(full, proc_cpu=(1.0,)) for ws in ("ws1", "ws2", "ws3")})}, target="direct")
    step(run, 20, {"client": dict(full, proc_cpu=(55.0,)),
                   **backends(**{ws: dict(full, proc_cpu=(15.0,)) for ws in ("ws1", "ws2", "ws3")})}, target="direct")
    out, analysis = build_report([run], tmp_path / "out")
    rows = steps_of(out)
    assert (rows[1]["bound"], rows[1]["bound_by"], rows[1]["client_bound"]) == ("client", "client:workers 95%", True)
    assert (rows[20]["bound"], rows[20]["bound_by"], rows[20]["client_bound"]) == (
        "backends", "client+ws1+ws2+ws3:shared cpu 100% (workers 55%, echoes 45% of the cores)", False)
    assert {r["valid"] for r in rows.values()} == {"yes"}


def interval_of(value: float, low: float, high: float, one_fork: bool = False):
    from esbperf.analysis import forks
    return forks.Interval(value, low, high, 3, 3, 4.0, one_fork, se=0.03, log=True)


@pytest.mark.parametrize("figure, found, bounds, said", [
    # direct bounded by the client and faster: the true difference is at least the measured one
    ("tps", (1.5, 1.4, 1.6), ("client", "engine"), "direct is faster than camel by at least 50 % (95 %: at least 40 %)"),
    # its latency at most what it read: lower by at least
    ("p99", (0.5, 0.45, 0.55), ("link", None), "direct's p99 is lower than camel's by at least 50 % (95 %: at least 45 %)"),
    # the bounded side reads slower, or no difference: the bound hides the comparison
    ("tps", (0.7, 0.65, 0.75), ("client", "engine"), "direct vs camel, TPS: not judged (direct bounded by the testbed"),
    ("tps", (1.02, 0.95, 1.1), (None, "backends"), "direct vs camel, TPS: not judged (camel bounded by the testbed"),
    # both bounded: not judged either way
    ("tps", (1.5, 1.4, 1.6), ("client", "link"), "direct vs camel, TPS: not judged (direct and camel bounded by the"),
    # an engine bound is the target's own: judged as ever
    ("tps", (1.5, 1.4, 1.6), ("engine", "none"), "direct is faster than camel by 50 % (95 %: 40–60 %)"),
], ids=["faster and bounded", "lower p99 and bounded", "slower and bounded", "none shown, bounded",
        "both bounded", "engine bounds"])
def test_a_verdict_against_a_bounded_step_says_at_least_or_is_not_judged(figure, found, bounds, said):
    from esbperf.analysis import verdicts
    v = verdicts.verdict("direct", "camel", figure, interval_of(*found), bounds=bounds)
    assert v.sentence.startswith(said), v.sentence
    judged = "not judged" not in said
    assert (v.shown is None) == (not judged) and v.at_least == ("at least" in said)


def test_the_gate_judges_a_bounded_step_only_in_its_targets_favour():
    """A bounded step measured at least its target's TPS: a drop of a bounded NEW, or a TPS under an
    absolute line, is not judged (exit 3, never a pass); a drop from a bounded BASE stands (the true
    drop is larger), and a pass against it is not judged."""
    from types import SimpleNamespace

    from esbperf.analysis import gate

    def step_rows(run: str, values: list[float], bound: str) -> pl.DataFrame:
        return pl.DataFrame([{"run": run, "scenario": "proxy", "target": "camel", "payload_bytes": 1024,
                              "payload_label": "1KB", "users": 20, "model": "closed", "rate": None, "test": 1,
                              "step_tests": 1, "iteration": i + 1, "tps": v, "valid": "yes", "bound": bound,
                              "step_dir": f"it{i}"} for i, v in enumerate(values)])

    base, slow, same = [1000.0, 1010.0, 990.0], [800.0, 805.0, 795.0], [1001.0, 1005.0, 995.0]
    drop = gate.parse_limits({"max_tps_drop": "5%"})
    cases = {("none", "client", tuple(slow)): gate.NOT_JUDGED, ("client", "none", tuple(slow)): gate.FAILED,
             ("client", "none", tuple(same)): gate.NOT_JUDGED, ("none", "client", tuple(same)): gate.PASSED,
             ("link", "backends", tuple(slow)): gate.NOT_JUDGED, ("none", "none", tuple(slow)): gate.FAILED}
    for (base_bound, new_bound, new), outcome in cases.items():
        summary = pl.concat([step_rows("base", base, base_bound), step_rows("new", list(new), new_bound)])
        data = SimpleNamespace(summary=summary, aggregate=summary, histograms={})
        [verdict] = gate.compare_runs(data, "base", "new", drop)
        assert verdict.outcome == outcome, (base_bound, new_bound, verdict.message)
        assert gate.exit_code([verdict]) == {gate.FAILED: 1, gate.NOT_JUDGED: 3, gate.PASSED: 0}[outcome]
    # An absolute line: under it on a bounded step is not judged; over it stands.
    summary = pl.concat([step_rows("r", [700.0], "client"), step_rows("s", [900.0], "client")])
    data = SimpleNamespace(summary=summary, aggregate=summary, histograms={})
    below, above = gate.hold(data, gate.parse_limits({"min_tps": "800"}, gate.ABSOLUTE_OPTIONS))
    assert (below.outcome, above.outcome) == (gate.NOT_JUDGED, gate.PASSED)
    assert "bounded by the client" in below.message
