"""Bad results at volume (issues 13 and 14): data logs and monitor files cut short or garbled,
thousands of them, fed to the analysis loaders. Each either loads (its counts consistent) or is
refused with ONE line naming the file — never a traceback. tests/test_bad_input.py does the same
for plans; this file keeps its style (Hypothesis: a cut, then bytes inserted, replaced or dropped)."""
from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import check_one_line, mutate
from esbperf.analysis import synthetic
from esbperf.analysis.monitor import host_stats
from esbperf.analysis.report import analyse
from esbperf.core.errors import EsbperfError
from esbperf.results import datalog
from esbperf.results.datalog import log_stats

SCRATCH = Path(tempfile.mkdtemp(prefix="esbperf-bad-results-"))
FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
T0 = synthetic.BASE_MS
WARMUP_END, END = T0 + 2_000, T0 + 12_000

# An open-model data log (every esbperf column): 40 rows over warm-up, window and after it.
DATA_LOG = (synthetic.OPEN_DATA_LOG_HEADER + "\n" + "".join(
    f"{i % 4}, {i // 4}, 1, {T0 + i * 300}, {1 + i % 7}, {int(i % 9 == 0)}, {500 if i % 9 == 0 else 200}, "
    f"1024, 1100, {1000 + 37 * i}, {1200 + 37 * i}, {i * 3}\n" for i in range(40))).encode()


def monitor_text() -> bytes:
    path = synthetic.write_monitor(SCRATCH, "esb", T0, WARMUP_END, END, cpu_percent=50.0, rx_mbit=100.0,
                                   tx_mbit=20.0, interfaces=("eth0", "br0"), gaps_ms=(300,), proc_cpu=(80.0, 5.0))
    return path.read_bytes()


MONITOR = monitor_text()
PIECES = [b",", b", ", b"-", b"-1", b"\n", b"\r\n", b"\xff\xfe", b"\x00", b"nan", b" ", b"9" * 25, b"1e309",
          b"Thread", b"measure", b"cpu.total", b"net.rx_bytes", b"eth0", b"\"", b"'", b"Response us"]


def mutations(length: int):
    return st.tuples(st.integers(min_value=0, max_value=length),
                     st.lists(st.tuples(st.integers(min_value=0, max_value=length),
                                        st.sampled_from(["insert", "replace", "delete"]),
                                        st.binary(min_size=1, max_size=4) | st.sampled_from(PIECES)),
                              max_size=5))


def body_lines(data: bytes) -> int:
    """The lines of a file after its header line: a last one without its newline counts (cut short);
    a header cut short is one line, and a file without any, none."""
    if b"\n" not in data:
        return int(bool(data))
    body = data[data.index(b"\n") + 1:]
    return body.count(b"\n") + int(bool(body) and not body.endswith(b"\n"))


@FUZZ
@given(mutation=mutations(len(DATA_LOG)))
@example(mutation=(DATA_LOG.index(b"\n") + 1, []))   # the header alone
def test_data_logs_cut_short_or_garbled_load_or_fail_in_one_line(mutation):
    path = SCRATCH / "logs" / "client-0-data.log"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(mutate(DATA_LOG, mutation))
    stats = check_one_line(path, lambda p: log_stats([p], WARMUP_END, END))
    if stats is not None:
        # Every line after the header is one row of one kind, or malformed: none lost, none twice.
        assert stats.transactions + stats.errors + stats.warmup_rows + stats.late_rows + stats.malformed_lines == \
            body_lines(path.read_bytes())
        assert stats.response.n == stats.transactions and stats.failed_response.n == stats.errors
        # The open model's latency holds every request of the window (no process rate given: none unstarted).
        assert stats.latency is None or stats.latency.n == stats.transactions + stats.errors
        assert stats.response.n == 0 or stats.response.min <= stats.response.percentile(99) <= stats.response.max
        # A garbled Test column makes more tests: each counted apart, together the step's rows.
        assert sum(t.transactions for t in stats.tests.values()) == stats.transactions
        assert sum(t.errors + t.warmup_rows + t.late_rows for t in stats.tests.values()) == \
            stats.errors + stats.warmup_rows + stats.late_rows


@FUZZ
@given(mutation=mutations(len(DATA_LOG)))
@example(mutation=(len(DATA_LOG), [(DATA_LOG.index(b"\n", 200), "insert", b"\r")]))
@example(mutation=(len(DATA_LOG), [(300, "insert", b"9" * 25), (100, "replace", b", , ")]))
def test_the_native_parser_reads_a_garbled_log_as_polars_does(mutation):
    # Logs of esbperf's integer columns are parsed by esbperf/results/intlines.py, others by polars:
    # one definition of a malformed line needs both to read every log alike.
    path = SCRATCH / "logs-native" / "client-0-data.log"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(mutate(DATA_LOG, mutation))
    native = check_one_line(path, lambda p: log_stats([p], WARMUP_END, END))
    with mock.patch.object(datalog._Log, "integers", property(lambda self: False)):
        by_polars = check_one_line(path, lambda p: log_stats([p], WARMUP_END, END))
    assert native == by_polars

@FUZZ
@given(mutation=mutations(len(MONITOR)))
@example(mutation=(MONITOR.index(b"\n") + 1, []))     # the header alone (polars: "empty CSV")
@example(mutation=(len(MONITOR), []))                 # untouched
def test_monitor_files_cut_short_or_garbled_load_or_fail_in_one_line(mutation):
    path = SCRATCH / "monitor-esb.csv"
    path.write_bytes(mutate(MONITOR, mutation))
    stats = check_one_line(path, lambda p: host_stats(p, "esb", 1000, WARMUP_END))
    if stats is not None:
        assert stats.malformed_lines <= body_lines(path.read_bytes())
        if path.read_bytes() == MONITOR:                   # untouched: every line read, the figures as written
            assert stats.malformed_lines == 0 and stats.cpu_mean == 50.0
        for figure in (stats.cpu_mean, stats.rx_mbit, stats.tx_mbit):
            assert figure is None or figure == figure      # never NaN


RUN = SCRATCH / "run"


def fresh_run() -> Path:
    if not RUN.exists():
        synthetic.write_run(RUN, "camel")
        folder = synthetic.write_step(synthetic.step_dir(RUN, "proxy", "1KB", 4, 1), "proxy", "camel", 1024, "1KB",
                                      4, 1, start_ms=T0, warmup_s=2, duration_s=10)
        (folder / "logs" / "client-0-data.log").write_bytes(DATA_LOG)
        (folder / "monitor-esb.csv").write_bytes(MONITOR)
    return synthetic.step_dir(RUN, "proxy", "1KB", 4, 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(log=mutations(len(DATA_LOG)), monitor=mutations(len(MONITOR)))
def test_a_whole_analysis_of_garbled_files_works_or_names_the_file(log, monitor):
    folder = fresh_run()
    (folder / "logs" / "client-0-data.log").write_bytes(mutate(DATA_LOG, log))
    (folder / "monitor-esb.csv").write_bytes(mutate(MONITOR, monitor))
    try:
        analysis = analyse([RUN])
    except EsbperfError as e:
        message = str(e)
        assert "\n" not in message and str(folder) in message, message
        return
    rows = analysis.summary.to_dicts()      # one per test: a garbled Test column may make several
    assert rows and all(r["step_tests"] == len(rows) for r in rows)
    assert sum(r["transactions"] + r["errors"] + r["warmup_rows"] + r["late_rows"] for r in rows) + \
        rows[0]["malformed_lines"] == body_lines((folder / "logs" / "client-0-data.log").read_bytes())
    assert isinstance(analysis.warnings, list)
