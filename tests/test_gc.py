"""Issue 17 point 1: the GC of the ESB and echo JVMs, per step.

The JVM options are checked by real JVMs (the JDK this project runs on); windows are cut from
files written here and from a real JVM's rotated logs; the parser reads real lines captured from
Camel, G1, Parallel and Serial runs (tests/data/gc/); and one end-to-end case puts a real Camel
with a small heap under a few seconds of load and reads its GC columns back from summary.csv."""
from __future__ import annotations

import csv
import http.client
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from esbperf.core import procs
from esbperf.results import gclog, layout
from esbperf.services import esb, jvm

from esbperf.analysis import synthetic
from esbperf.analysis.gc import GC_FIGURES, gc_stats
from esbperf.analysis.report import analyse, build_report
from esbperf.core.errors import EsbperfError
from esbperf.run import verify
from esbperf.services.echo import start_echo

DATA = Path(__file__).parent / "data" / "gc"
HOST = "127.0.0.1"
ECHO_PORT, ESB_PORT = 19481, 19480
T0 = synthetic.BASE_MS


def java(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([procs.java_executable(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def line(t: int, message: str) -> str:
    return synthetic.gc_line(t, message)


# --- the JVM options ---------------------------------------------------------------------------

def test_the_jdk_accepts_the_options_and_logs_wall_clock_lines(tmp_path: Path):
    log = jvm.log_path(tmp_path / "state: with a colon, a space")    # -Xlog syntax characters in the path
    log.parent.mkdir()
    assert log.name == "gc.log" and log.is_absolute()
    before = int(time.time() * 1000)
    # Pinned to one CPU, JDK 17 would choose Serial by itself: the options name G1.
    pinned = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    assert pinned, "taskset (util-linux) is needed to check the collector on one CPU"
    result = subprocess.run([*pinned, procs.java_executable(), jvm.heap_option("64m", "test"), *jvm.jvm_options(log),
                             "-version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    after = int(time.time() * 1000)
    assert result.returncode == 0, result.stderr
    [first] = log.read_text().splitlines()
    assert first.endswith("[info][gc] Using G1"), first
    assert before <= gclog.line_time_ms(first.encode()) <= after
    assert gclog.window(log, before, after + 1) == first + "\n"


def test_bad_paths_and_heaps_are_refused_in_one_line(tmp_path: Path):
    for bad in ("gc%p.log", 'g"c.log'):
        with pytest.raises(EsbperfError, match="GC log path cannot hold"):
            jvm.jvm_options(tmp_path / bad)
    with pytest.raises(EsbperfError, match="ESB heap must look like 512m or 2g, got '12'"):
        esb.esb_process("camel", HOST, ESB_PORT, {ws: "http://127.0.0.1:1" for ws in ("ws1", "ws2", "ws3")}, heap="12")
    with pytest.raises(EsbperfError, match="no GC log there"):
        gclog.window(tmp_path / "gc.log", 0, 1)
    assert gclog.save_window(tmp_path / "gc.log", 0, 1, tmp_path / "gc-esb.log") is False
    assert not (tmp_path / "gc-esb.log").exists()


# --- cutting a step's window -------------------------------------------------------------------

def test_window_keeps_the_lines_inside_from_every_rotated_file(tmp_path: Path):
    start, end = T0 + 10_000, T0 + 20_000
    log = tmp_path / "gc.log"
    (tmp_path / "gc.log.3").write_text(line(T0, "GC(0) Pause Young (Normal) (G1 Evacuation Pause) 9M->2M(64M) 1.000ms")
                                       + line(start - 1, "GC(1) just before"))
    (tmp_path / "gc.log.4").write_text(line(start, "GC(2) the first inside") + line(start + 1, "GC(3) inside"))
    (tmp_path / "gc.log.other").write_text(line(start + 2, "not an archived GC log"))
    log.write_text(line(end - 1, "GC(5) the last inside") + "a line of no decorators\n"
                   + line(start + 3, "GC(4) inside, logged a little late") + line(end, "GC(6) at the end: outside")
                   + line(end - 2, "GC(7) being written")[:-1])             # no newline yet: cut short
    for name, last_write_ms in (("gc.log.3", start - 1), ("gc.log.4", start + 1), ("gc.log", end + 10)):
        os.utime(tmp_path / name, ns=(last_write_ms * 1_000_000,) * 2)
    assert [p.name for p in gclog.log_files(log)] == ["gc.log.3", "gc.log.4", "gc.log"]

    cut = gclog.window(log, start, end)
    assert [text.split("] ", 1)[1] for text in cut.splitlines()] == [
        "GC(2) the first inside", "GC(3) inside", "GC(4) inside, logged a little late", "GC(5) the last inside"]
    # The step folder's copy, and the same window from another host's shell (python -m esbperf.results.gclog).
    assert gclog.save_window(log, start, end, tmp_path / "step" / "gc-esb.log")
    assert (tmp_path / "step" / "gc-esb.log").read_text() == cut == layout.gc_file(tmp_path / "step", "esb").read_text()
    printed = subprocess.run([sys.executable, "-m", "esbperf.results.gclog", str(log), str(start), str(end)],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout == cut, printed.stderr
    empty = tmp_path / "quiet" / "gc-ws1.log"
    assert gclog.save_window(log, end + 10, end + 20, empty) and empty.read_text() == ""   # logged, no collection


ALLOCATE = """public class Allocate {
    public static void main(String[] args) {
        long end = System.currentTimeMillis() + Long.parseLong(args[0]);
        java.util.List<byte[]> kept = new java.util.ArrayList<>();
        while (System.currentTimeMillis() < end) {
            kept.add(new byte[10_000]);
            if (kept.size() > 500) kept.clear();
        }
    }
}
"""


def test_window_of_a_real_jvm_whose_log_rotated(tmp_path: Path):
    (tmp_path / "Allocate.java").write_text(ALLOCATE)
    log = jvm.log_path(tmp_path)
    started = int(time.time() * 1000)
    result = java("-Xmx16m", *jvm.jvm_options(log, file_count=3, file_size="8k"), "Allocate.java", "800", cwd=tmp_path)
    ended = int(time.time() * 1000)
    assert result.returncode == 0, result.stderr
    files = gclog.log_files(log)
    assert [p.name for p in files][-1] == "gc.log" and len(files) == 4      # bounded: 3 archived + the current
    assert all(p.stat().st_size <= 8 * 1024 + 512 for p in files)
    every = sorted(text for p in files for text in p.read_text().splitlines())
    whole = gclog.window(log, started, ended + 1).splitlines()
    times = [gclog.line_time_ms(text.encode()) for text in whole]
    assert sorted(whole) == every and times == sorted(times) and len(whole) > 50
    middle = times[len(times) // 2]
    assert gclog.window(log, middle, ended + 1).splitlines() == [t for t in whole if gclog.line_time_ms(t.encode()) >= middle]


# --- parsing real lines ------------------------------------------------------------------------

def test_real_g1_lines_from_camel(tmp_path: Path):
    path = DATA / "g1-camel.log"
    every = gc_stats(path, "esb", 0, 2 ** 62)
    # 16 lines: "Using G1", 12 pauses (young, concurrent start, prepare mixed, mixed, remark, cleanup)
    # and three concurrent-cycle lines, which are not pauses.
    assert [p.ms for p in every.pauses] == [1.211, 1.488, 2.890, 4.597, 5.239, 1.903, 0.016, 4.065, 3.174,
                                            4.483, 3.762, 5.196]
    assert [p.kind for p in every.pauses][5:8] == ["Remark", "Cleanup",
                                                   "Young (Prepare Mixed) (G1 Preventive Collection)"]
    assert [p.heap_after_mb for p in every.pauses] == [2, 2, 3, 6, 8, 9, 9, 9, 10, 17, 17, 18]
    # A one-second window from the first pause line on: GC(0) … GC(5) Pause Cleanup.
    second = gc_stats(path, "esb", 1795353755356, 1795353756356)
    assert len(second.pauses) == 7 and second.window_ms == 1000
    total = 1.211 + 1.488 + 2.890 + 4.597 + 5.239 + 1.903 + 0.016
    assert second.pause_total_ms == pytest.approx(total)
    assert second.throughput_percent == pytest.approx(100 * (1 - total / 1000))
    assert second.pause_max_ms == 5.239 and second.heap_after_max_mb == 9
    assert second.heap_after_mean_mb == pytest.approx((2 + 2 + 3 + 6 + 8 + 9 + 9) / 7)


@pytest.mark.parametrize("name, pauses, heaps", [
    ("g1-full.log", [0.288, 4.597], [21, 20]),                   # G1 with to-space exhausted, System.gc()
    ("parallel.log", [2.615, 4.918, 6.568, 3.536], [2, 4, 19, 3]),
    ("serial.log", [5.905, 4.892, 5.935, 3.825], [2, 4, 21, 21]),
])
def test_real_full_parallel_and_serial_lines(name: str, pauses: list[float], heaps: list[int]):
    stats = gc_stats(DATA / name, "esb", 0, 2 ** 62)
    assert [p.ms for p in stats.pauses] == pauses and [p.heap_after_mb for p in stats.pauses] == heaps
    assert any(p.kind.startswith("Full") for p in stats.pauses)


def test_heap_units_and_pauses_without_heap_figures(tmp_path: Path):
    path = tmp_path / "gc-esb.log"
    path.write_text(line(T0, "GC(0) Pause Young (Normal) (G1 Evacuation Pause) 2G->512K(4G) 10.5ms")
                    + line(T0 + 1, "GC(1) Pause Init Mark 0.250ms")              # Shenandoah: no heap in the line
                    + line(T0 + 2, "GC(2) Pause Young (Normal) 3M->1M(8M)"))     # no length: not read
    stats = gc_stats(path, "esb", T0, T0 + 1000)
    assert [(p.ms, p.heap_after_mb) for p in stats.pauses] == [(10.5, 0.5), (0.25, None)]
    assert stats.heap_after_mean_mb == 0.5


# --- summary.csv, graph, report ----------------------------------------------------------------

def test_gc_columns_of_a_step_over_the_measurement_window(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", "1KB", 1, 1), "proxy", "camel", 1024, "1KB", 1, 1,
                                  warmup_s=30, duration_s=10)
    warmup_end, end = T0 + 30_000, T0 + 40_000
    # esb: a warm-up pause (not counted), four in the window (10, 20, 30, 40 ms), one after it.
    synthetic.write_gc_log(folder, "esb", [(warmup_end - 1, 500.0, 90), (warmup_end, 10.0, 100),
                                           (warmup_end + 3000, 20.0, 120), (end - 5000, 30.0, 110),
                                           (end - 1, 40.0, 130), (end, 700.0, 200)])
    (folder / "gc-ws1.log").write_text("")                    # GC logged, no collection in the window
    row = analyse([run]).summary.to_dicts()[0]
    assert row["esb_gc_pauses"] == 4
    assert row["esb_gc_throughput_percent"] == pytest.approx(100 * (1 - 100 / 10_000))
    assert row["esb_gc_pause_p99_ms"] == 40.0 and row["esb_gc_pause_max_ms"] == 40.0
    assert row["esb_heap_after_gc_mb"] == pytest.approx(115.0) and row["esb_heap_after_gc_max_mb"] == 130
    assert (row["ws1_gc_pauses"], row["ws1_gc_throughput_percent"], row["ws1_gc_pause_p99_ms"]) == (0, 100.0, None)
    assert all(row[f"{role}_{figure}"] is None for role in ("ws2", "ws3") for figure in GC_FIGURES)
    out, _ = build_report([run], tmp_path / "out")
    # The csv module, not split(","): a cell may hold a comma (a test's description, quoted).
    cells = next(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    assert cells["ws2_gc_pauses"] == "" and cells["ws2_gc_throughput_percent"] == ""   # empty, not zero
    assert cells["esb_gc_throughput_percent"] == "99.0000"


def test_report_draws_and_tabulates_the_esb_gc(tmp_path: Path):
    camel = synthetic.thesis_run(tmp_path / "camel-run", "camel", rows_per_step=200, duration_s=10, warmup_s=2,
                                 sweeps="users", gc=True)
    direct = synthetic.thesis_run(tmp_path / "direct-run", "direct", rows_per_step=200, duration_s=10, warmup_s=2,
                                  sweeps="users", gc=True)
    out, analysis = build_report([direct, camel], tmp_path / "out")
    graphs = {g.name: g for g in analysis.graphs}
    graph = graphs["proxy-esb-gc-vs-users"]
    [series] = graph.panels[0].series                              # no ESB in the baseline
    # A pause a second of 2 + users / 40 ms, over a 10-second window.
    assert series.label == "camel" and series.x == [1, 20, 40, 80, 160, 320]
    assert series.y == pytest.approx([100 * (1 - (2 + u / 40) / 1000) for u in series.x])
    assert graph.ymax == 100 and graph.ymin is None and (out / "graphs" / "proxy-esb-gc-vs-users.svg").exists()
    html = (out / "report.html").read_text()
    assert "ESB GC throughput %" in html and "ESB GC p99 pause ms" in html and "99.40" in html
    agg = pl.read_csv(out / "aggregate.csv")
    assert {"esb_gc_throughput_percent", "esb_gc_throughput_percent_ci95", "ws3_gc_pause_p99_ms"} <= set(agg.columns)


# --- end to end: a real Camel under load -------------------------------------------------------

@pytest.mark.slow
def test_a_real_camel_under_load_gives_plausible_gc_columns(tmp_path: Path):
    heap_mb = 48
    echo = start_echo("ws1", HOST, ECHO_PORT, workdir=tmp_path / "ws1", heap="64m")
    try:
        url = f"http://{HOST}:{ECHO_PORT}"
        camel = esb.start_esb("camel", HOST, ESB_PORT, {"ws1": url, "ws2": url, "ws3": url},
                              workdir=tmp_path / "camel", heap=f"{heap_mb}m")
        try:
            assert f"esbperf: GC log {jvm.log_path(tmp_path / 'camel')}" in camel.log.read_text()
            body = verify.scenarios.contract().buy_stocks(100 * 1024, "IBM").encode()
            connection = http.client.HTTPConnection(HOST, ESB_PORT, timeout=10)
            rows, start_ms = [], int(time.time() * 1000)
            deadline = time.monotonic() + 3.0                  # a bounded loop: three seconds of requests
            while time.monotonic() < deadline:
                sent = time.time()
                connection.request("POST", "/proxy/raw", body, {"Content-Type": "text/xml; charset=UTF-8",
                                                                "SOAPAction": '"buyStocks"'})
                response = connection.getresponse()
                answer = response.read()
                assert response.status == 200 and answer == body
                rows.append((0, len(rows), 1, int(sent * 1000), int((time.time() - sent) * 1000), 0, 200,
                             len(body), len(answer)))
            connection.close()
            end_ms = int(time.time() * 1000)
        finally:
            camel.stop()
    finally:
        echo.stop()

    run = synthetic.write_run(tmp_path / "camel-run", "camel")
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", "100KB", 1, 1), "proxy", "camel", 100 * 1024,
                                  "100KB", 1, 1)
    meta = json.loads((folder / "step.json").read_text())
    meta.update(start_ms=start_ms, first_report_ms=start_ms, warmup_end_ms=start_ms + 500, end_ms=end_ms)
    (folder / "step.json").write_text(json.dumps(meta))
    (folder / "logs" / "client-0-data.log").write_text(
        synthetic.DATA_LOG_HEADER + "\n" + "".join(", ".join(map(str, r)) + "\n" for r in rows))
    # What the runner does after a step: each service's window into the step folder.
    for role, workdir in (("esb", tmp_path / "camel"), ("ws1", tmp_path / "ws1")):
        assert gclog.save_window(jvm.log_path(workdir), start_ms, end_ms, layout.gc_file(folder, role))

    row = analyse([run]).summary.to_dicts()[0]
    assert row["transactions"] > 100
    assert row["esb_gc_pauses"] > 0, (folder / "gc-esb.log").read_text()
    assert 0 < row["esb_gc_throughput_percent"] <= 100
    assert 0 < row["esb_gc_pause_p99_ms"] <= row["esb_gc_pause_max_ms"] < 1000
    assert 0 < row["esb_heap_after_gc_mb"] <= row["esb_heap_after_gc_max_mb"] <= heap_mb
    assert row["ws1_gc_pauses"] is not None and 0 < row["ws1_gc_throughput_percent"] <= 100
    assert row["ws2_gc_pauses"] is None


def test_the_current_log_comes_last_when_a_rotated_file_shares_its_time(tmp_path: Path):
    # File times tick coarser than the JVM writes: the file just rotated away and the new current
    # one often carry the same time (CI, 2026-11-29: "gc.log" sorted before "gc.log.0").
    log = tmp_path / "gc.log"
    for name in ("gc.log.1", "gc.log.0", "gc.log"):
        (tmp_path / name).write_text(line(T0, name))
    os.utime(tmp_path / "gc.log.1", ns=((T0 - 5) * 1_000_000,) * 2)
    for name in ("gc.log.0", "gc.log"):
        os.utime(tmp_path / name, ns=(T0 * 1_000_000,) * 2)
    assert [p.name for p in gclog.log_files(log)] == ["gc.log.1", "gc.log.0", "gc.log"]
