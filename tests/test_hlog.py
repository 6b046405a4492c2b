"""HdrHistogram interval logs (.hlog) of every step, read back with HdrHistogram's own Python package
(`hdrh`: the oracle of esbperf's encoder, which the analysis also reads its published logs with).

The encoder is checked on hand-made histograms (exact counts back), the report's files on
synthetic runs (the same count, min, max and percentiles as summary.csv, to the bucket)."""
from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from esbperf.analysis import hlog, synthetic
from esbperf.analysis.report import build_report
from esbperf.core.errors import EsbperfError
from esbperf.results import datalog
from esbperf.results.histogram import Histogram, bucket

WARMUP_S, DURATION_S = 2, 10
ROWS = 20_000          # p x ROWS / 100 is whole for p in 50, 90, 99, 99.9: hdrh's rank is then esbperf's
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99_9": 99.9}


def decoded_items(text: str) -> tuple[HdrHistogram, list[tuple[int, int]]]:
    """hdrh's histogram of an encoded one, and its (bucket lower bound, count) pairs."""
    h = HdrHistogram.decode(text)
    return h, [(h.get_lowest_equivalent_value(v.value_iterated_to), v.count_at_value_iterated_to)
               for v in h.get_recorded_iterator()]


HAND_MADE = {
    "empty": [],
    "zeros": [0, 0, 0],
    "one zero between counts": [0, 2],
    "every value below 2048": list(range(2048)) + [5, 5, 2047],
    "bucket edges above 2048": [2048, 2049, 2050, 4095, 4096, 4097, 8191, 8192, 1_000_000, 1_000_999],
    "up to an hour": [1, 999_999, 60_000_000, hlog.HIGHEST_TRACKABLE_US - 1, hlog.HIGHEST_TRACKABLE_US],
}


@pytest.mark.parametrize("values", HAND_MADE.values(), ids=HAND_MADE.keys())
def test_hand_made_histograms_round_trip_exactly(values):
    ours = Histogram.of(values)
    h, items = decoded_items(hlog.encode(ours))
    assert h.get_total_count() == len(values)
    assert items == ours.items()                      # every bucket, and its count, exactly
    if values:
        assert h.get_min_value() == bucket(min(values))
        assert h.values_are_equivalent(h.get_max_value(), max(values))
    assert (h.significant_figures, h.lowest_trackable_value, h.highest_trackable_value) == (
        3, 1, hlog.HIGHEST_TRACKABLE_US)


def test_zigzag_leb128_words_are_hdrhistograms():
    """ZigZag, then 7 bits a byte, low first, the top bit saying more follows; the 9th byte of a
    64-bit word holds its last 8 bits whole (a Java long count; hdrh's own decoder drops the top
    one, so this is checked byte for byte)."""
    words = np.array([0, -1, 1, 63, 64, -65, 2 ** 63 - 1])
    data, sizes = hlog.zigzag_leb128(words)
    assert sizes.tolist() == [1, 1, 1, 1, 2, 2, 9]
    assert data.tobytes() == bytes([0x00, 0x01, 0x02, 0x7E, 0x80, 0x01, 0x81, 0x01, 0xFE] + [0xFF] * 8)


def test_large_counts_and_values_above_an_hour_round_trip():
    """Counts needing 9 bytes of a LEB128 word, and a value above the default highest trackable
    one when the caller raises it."""
    counts = {0: 1, 7: 2 ** 62 - 1, 3000: 2 ** 57}
    assert decoded_items(hlog.encode(counts))[1] == sorted(counts.items())
    big = 2 ** 40 + 12345
    h, items = decoded_items(hlog.encode({big: 3}, highest=2 ** 41))
    assert items == [(bucket(big), 3)] and h.highest_trackable_value == 2 ** 41


@pytest.mark.parametrize("call, message", [
    (lambda: hlog.encode({-1: 1}), "values and counts must be in 0"),
    (lambda: hlog.encode({5: -2}), "values and counts must be in 0"),
    (lambda: hlog.encode({5: 2 ** 63}), "values and counts must be in 0"),
    (lambda: hlog.encode({hlog.HIGHEST_TRACKABLE_US + 1: 1}), "above the highest trackable value"),
    (lambda: hlog.encode_intervals(2, [2], [5], [1]), "interval numbers must be in 0 … 1"),
    (lambda: hlog.encode_intervals(2, [0, 1], [5], [1]), "need one of each per count"),
], ids=["negative value", "negative count", "count above a long", "above highest", "interval out of range", "ragged"])
def test_bad_input_is_a_one_line_error(call, message):
    with pytest.raises(EsbperfError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


def test_intervals_are_encoded_apart_in_any_order():
    """Counts given out of order and split over several entries of one bucket land in their own
    interval's histogram; an interval without a count is an empty histogram."""
    interval = [2, 0, 2, 0, 2]
    values = [3000, 7, 3001, 7, 10]       # 3000 and 3001 share a bucket (width 2 above 2048)
    counts = [1, 2, 4, 1, 1]
    texts = hlog.encode_intervals(4, interval, values, counts)
    assert [decoded_items(t)[1] for t in texts] == [[(7, 3)], [], [(10, 1), (3000, 5)], []]


def test_counts_index_is_hdrhistograms():
    # 2^60 - 1 and 2^63 - 1 are above 2^53: as floats they round up to the next power of two.
    values = np.array([0, 1, 2047, 2048, 2049, 4096, 10 ** 6, 2 ** 53 - 1, 2 ** 53, 2 ** 60 - 1, 2 ** 60 + 1,
                       2 ** 63 - 1])
    reference = HdrHistogram(1, 2 ** 63 - 1, 3)
    assert hlog.counts_index(values).tolist() == [reference.get_counts_array_index(int(v)) for v in values]


# --- the report's files ---------------------------------------------------------------------------

def add_rows_outside_the_window(folder: Path, meta: dict, header: str, failed: int = 1) -> None:
    """A worker log of rows the response .hlog must not count, all slower than anything in the
    window: one in the warm-up, one at the window's end, `failed` failed ones in the window (the
    open model's latency counts them), and a malformed line. Their starts were not late: an
    open-model row belongs to the window by its due start."""
    slow = [0, 0, 1, 0, 99_000, 0, 500, 1024, 1100, 99_000_000, 99_000_000, 0][:len(header.split(", "))]
    rows = [(meta["warmup_end_ms"] - 1, 0), (meta["end_ms"], 0)] + [(meta["warmup_end_ms"] + 5, 1)] * failed
    lines = [header] + [", ".join(map(str, slow[:3] + [start] + slow[4:5] + [errors] + slow[6:]))
                        for start, errors in rows] + ["0, 0, 1, oops"]
    (folder / "logs" / "client-9-data.log").write_text("\n".join(lines) + "\n")


def synthetic_step(run: Path, users: int, rate: float | None = None, mean_ms: float = 20.0,
                   micros: bool = True, failed: int = 1) -> Path:
    """A step of ROWS transactions, all in its window (plus add_rows_outside_the_window's); with
    `rate`, an open-model step (its rows start from 50 ms into the window: due in it, whatever
    their lag); without `micros`, logs of whole ms only (`Test time`)."""
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", "1KB", users, 1), "proxy", "camel", 1024, "1KB",
                                  users, 1, warmup_s=WARMUP_S, duration_s=DURATION_S, rate=rate)
    meta = json.loads((folder / "step.json").read_text())
    synthetic.write_random_logs(folder, ROWS, 2, meta["warmup_end_ms"] + (0 if rate is None else 50), meta["end_ms"],
                                mean_ms=mean_ms, seed=users, micros=micros, lag_us=None if rate is None else 3000.0)
    header = (synthetic.DATA_LOG_HEADER if not micros else synthetic.US_DATA_LOG_HEADER if rate is None
              else synthetic.OPEN_DATA_LOG_HEADER)
    add_rows_outside_the_window(folder, meta, header, failed)
    return folder


def read_log(path: Path) -> tuple[HdrHistogram, list[HdrHistogram], float]:
    """hdrh's reading of a .hlog: the sum of its intervals, each interval, and its start time (s)."""
    total = HdrHistogram(hlog.LOWEST_DISCERNIBLE_US, hlog.HIGHEST_TRACKABLE_US, hlog.SIGNIFICANT_DIGITS)
    intervals = []
    reader = HistogramLogReader(str(path), total)
    try:
        while (interval := reader.get_next_interval_histogram()) is not None:
            intervals.append(interval)
            if interval.get_total_count():     # hdrh takes an empty histogram's min for 0 when adding it
                total.add(interval)
        return total, intervals, reader.get_start_time_sec()
    finally:
        reader.close()


def hdrh_figure(h: HdrHistogram, name: str) -> int:
    if name == "min":
        return h.get_min_value()
    if name == "max":
        return h.get_max_value()
    return h.get_value_at_percentile(PERCENTILES[name])


def assert_agrees(h: HdrHistogram, row: dict, prefix: str, figures=("min", "max", *PERCENTILES),
                  count: int | None = None) -> None:
    """hdrh's figures are those of summary.csv, to the bucket (hdrh gives a bucket's highest value,
    esbperf its lowest, clamped to the exact min); it counts `count` values (default: the
    transactions)."""
    assert h.get_total_count() == (row["transactions"] if count is None else count)
    for name in figures:
        ms, got = row[f"{prefix}_{name}_ms"], hdrh_figure(h, name)
        assert h.values_are_equivalent(got, round(ms * 1000)), f"{prefix}_{name}: hdrh {got} µs, summary {ms} ms"


def test_a_closed_model_steps_hlog_gives_summarys_figures(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "closed", "camel")
    for users in (1, 20, 40):
        synthetic_step(run, users, mean_ms=2.0 + users, micros=users != 40)
    out, _ = build_report([run], tmp_path / "out")
    summary = pl.read_csv(out / "summary.csv")
    assert summary["rt_source"].to_list() == ["us", "us", "ms"]             # 40 users: whole ms x 1000
    assert sorted(p.name for p in (out / hlog.FOLDER).iterdir()) == [        # no latency: closed model
        f"proxy_1KB_{users}_iter-1-response.hlog" for users in (1, 20, 40)]
    for row in summary.iter_rows(named=True):
        assert (row["transactions"], row["errors"], row["warmup_rows"], row["late_rows"]) == (ROWS, 1, 1, 1)
        path = out / hlog.FOLDER / f"{row['step_dir'].replace('/', '_')}-response.hlog"
        total, intervals, start_s = read_log(path)
        assert_agrees(total, row, "rt")
        assert len(intervals) == DURATION_S and start_s == pytest.approx(row_window_start(run, row) / 1000)
        assert [i.get_start_time_stamp() - 1000 * start_s for i in intervals] == pytest.approx(
            [1000.0 * k for k in range(DURATION_S)])
    assert 'href="hlog/"' in (out / "report.html").read_text()


def row_window_start(run: Path, row: dict) -> int:
    return json.loads((run / row["step_dir"] / "step.json").read_text())["warmup_end_ms"]


def test_an_open_model_steps_latency_and_response_hlogs_give_summarys_figures(tmp_path: Path):
    run = synthetic.write_run(tmp_path / "open", "camel")
    # 1000 failed requests: the latency counts 21,000, the response time 20,000 (whole ranks for hdrh).
    synthetic_step(run, 20, rate=2000.0, failed=1000)
    out, _ = build_report([run], tmp_path / "out")
    [row] = pl.read_csv(out / "summary.csv").to_dicts()
    assert (row["transactions"], row["errors"]) == (ROWS, 1000)
    base = out / hlog.FOLDER / row["step_dir"].replace("/", "_")
    latency, _, _ = read_log(Path(f"{base}-latency.hlog"))
    response, _, _ = read_log(Path(f"{base}-response.hlog"))
    assert_agrees(latency, row, "lat", figures=("max", *PERCENTILES),       # summary.csv has no lat_min_ms
                  count=row["transactions"] + row["errors"] + row["never_started"])
    assert row["lat_max_ms"] == 99_000                                       # a failed request's latency
    assert_agrees(response, row, "rt")
    assert latency.get_value_at_percentile(50.0) > response.get_value_at_percentile(50.0)   # the start lag


def test_an_hour_long_steps_intervals_are_counted_in_memory_that_follows_its_rows(tmp_path: Path):
    """One data-log block of a slow hour-long step: 36,000 rows over 3,600 one-second intervals,
    answers from 1 µs to 10 s. Counted densely over the block's span of intervals × buckets, that
    was 3,600 × ~14,500 cells (over 400 MB) per test; only the cells present are counted now."""
    rng = np.random.default_rng(7)
    values = np.exp(rng.uniform(0, np.log(10_000_000), 36_000)).astype(np.int64)
    start = synthetic.BASE_MS
    log = tmp_path / "client-0-data.log"
    log.write_text(synthetic.US_DATA_LOG_HEADER + "\n" + "".join(
        f"0, {i}, 1, {start + 100 * i}, {v // 1000}, 0, 200, 1024, 1100, {v}\n" for i, v in enumerate(values)))
    tracemalloc.start()
    try:
        [(counts, maxima)] = datalog.interval_counts([log], start, start + 3_600_000, 1000, "response_us").values()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MB"
    assert counts["n"].sum() == 36_000 and len(maxima) == 3600
    assert maxima.tolist() == values.reshape(3600, 10).max(axis=1).tolist()
    second = counts.filter(pl.col("interval") == 1)
    assert sorted(zip(second["lo"], second["n"])) == sorted(Histogram.of(values[10:20].tolist()).counts.items())


def test_each_interval_holds_the_transactions_started_in_its_second(tmp_path: Path):
    """Rows bucketed by start time: a second's first and last ms in it, the next second's first
    ms not; a window of 2.5 s ends with a half-second interval; an idle second is empty."""
    run = synthetic.write_run(tmp_path / "r", "camel")
    folder = synthetic.write_step(synthetic.step_dir(run, "proxy", "1KB", 1, 1), "proxy", "camel", 1024, "1KB", 1, 1,
                                  warmup_s=1, duration_s=3)
    meta = json.loads((folder / "step.json").read_text())
    w0 = meta["warmup_end_ms"]
    meta["end_ms"] = w0 + 2500
    (folder / "step.json").write_text(json.dumps(meta))
    starts = {w0: 100, w0 + 999: 3000, w0 + 2000: 7, w0 + 2499: 8}       # start -> Response us; second 1 idle
    rows = [f"0, {k}, 1, {start}, {us // 1000}, 0, 200, 1024, 1100, {us}"
            for k, (start, us) in enumerate(starts.items())]
    (folder / "logs" / "client-0-data.log").write_text(synthetic.US_DATA_LOG_HEADER + "\n" + "\n".join(rows) + "\n")
    out, _ = build_report([run], tmp_path / "out")
    path = out / hlog.FOLDER / "proxy_1KB_1_iter-1-response.hlog"
    _, intervals, start_s = read_log(path)
    assert start_s == w0 / 1000
    assert [i.get_total_count() for i in intervals] == [2, 0, 2]
    assert [i.get_end_time_stamp() - i.get_start_time_stamp() for i in intervals] == pytest.approx([1000, 1000, 500])
    lines = [line for line in path.read_text().splitlines() if not line.startswith(("#", '"'))]
    assert [line.split(",")[2] for line in lines] == ["3.000", "0.000", "0.008"]     # Interval_Max, ms
    assert "microseconds" in path.read_text() and "#[BaseTime: " in path.read_text()


def test_several_runs_and_several_tests_get_files_of_their_own(tmp_path: Path):
    """Two runs of one plan share step folders: each run's files are in a folder of its own (a
    name beyond ASCII escaped in the logs' comments). A step of two Grinder tests has a file per
    test, each holding that test's transactions."""
    runs = []
    for name in ("a", "bü"):
        run = synthetic.write_run(tmp_path / name, "camel")
        folder = synthetic_step(run, 1)
        log = folder / "logs" / "client-0-data.log"
        header, *lines = log.read_text().splitlines()
        fields = [line.split(", ") for line in lines]
        for row in fields[:100]:          # test 2: the first 100 rows of this log
            row[2] = "2"
        log.write_text("\n".join([header] + [", ".join(row) for row in fields]) + "\n")
        runs.append(run)
    out, _ = build_report(runs, tmp_path / "out")
    summary = pl.read_csv(out / "summary.csv")
    assert sorted(p.relative_to(out / hlog.FOLDER).as_posix() for p in (out / hlog.FOLDER).rglob("*.hlog")) == [
        f"{run}/proxy_1KB_1_iter-1-test{test}-response.hlog" for run in ("a", "bü") for test in (1, 2)]
    for row in summary.iter_rows(named=True):
        path = out / hlog.FOLDER / row["run"] / f"proxy_1KB_1_iter-1-test{row['test']}-response.hlog"
        assert path.read_bytes().isascii() and f"Grinder test {row['test']}]" in path.read_text()
        total, _, _ = read_log(path)
        assert total.get_total_count() == row["transactions"] == (100 if row["test"] == 2 else ROWS - 100)
        assert_agrees(total, row, "rt", figures=("min", "max"))


# --- read back by esbperf itself (a published round keeps its distributions as these logs) ---------

@pytest.mark.parametrize("values", HAND_MADE.values(), ids=HAND_MADE.keys())
def test_esbperfs_decoder_reads_back_every_bucket(values):
    ours = Histogram.of(values)
    assert hlog.decode(hlog.encode(ours)) == ours.counts


def test_a_reports_archived_logs_read_back_as_its_step_histograms(tmp_path: Path):
    """analysis/round/folder.py reads a published round's percentiles' data from hlog.tar.gz: each step's
    intervals added up are its response-time histogram, bucket for bucket."""
    from esbperf.analysis import round as pages
    run = synthetic.write_run(tmp_path / "closed", "camel")
    for users in (1, 20):
        synthetic_step(run, users, mean_ms=2.0 + users)
    out, analysis = build_report([run], tmp_path / "out")
    archive = pages.pack_hlogs(out)
    first = archive.read_bytes()
    for f in (out / hlog.FOLDER).rglob("*"):
        os.utime(f, (1, 1))                        # the same logs, touched: packed again, the same bytes
    assert pages.pack_hlogs(out).read_bytes() == first
    found = hlog.read_archive(archive)
    assert len(found) == len(analysis.step_histograms)
    for (run_name, step_dir, test), histograms in analysis.step_histograms.items():
        h = found.get((run_name, step_dir, test)) or found[(run_name, step_dir, None)]
        assert h.counts == histograms.response.counts and h.n == histograms.response.n
        assert h.percentile(99) == histograms.response.percentile(99)


@pytest.mark.parametrize("text", ["not base64 at all!", "HISTFAAAAB94nJNpmSzMwMDAxAABMJoRTM6fvQ",
                                  hlog.encode({5: 3})[:-12], ""],
                         ids=["garbage", "cut inside the deflated bytes", "cut short", "empty"])
def test_an_unreadable_interval_is_refused_in_one_line(text):
    """A published round's log whose interval line was damaged: one EsbperfError line, not base64's,
    zlib's or struct's exception."""
    with pytest.raises(EsbperfError, match=r"^hlog: ") as error:
        hlog.decode(text)
    assert "\n" not in str(error.value)


def test_a_histogram_of_another_layout_is_refused_not_misread():
    """hdrh's histogram of 2 significant digits has other buckets than esbperf's 3: read as esbperf's
    its counts would land on wrong values."""
    other = HdrHistogram(1, hlog.HIGHEST_TRACKABLE_US, 2)
    other.record_value(5000, 3)
    with pytest.raises(EsbperfError, match="2 significant digits"):
        hlog.decode(other.encode().decode("ascii"))
