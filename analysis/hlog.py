"""HdrHistogram interval logs (`.hlog`) of every step: what HdrHistogram's HistogramLogProcessor,
its Python package `hdrh` and the tools around wrk2, k6 and Gatling read.

Per step (and Grinder test), one file per distribution: `-response.hlog` (the successful
transactions' `Response us`, or `Test time` x 1000 in logs without it) and, in the open model,
`-latency.hlog` (`Latency us`, from the due start, of every request due in the window: failed
ones, and those never started at end - due, as summary.csv counts them). Each holds one interval
histogram per second of the measurement window [warmup_end_ms, end_ms), the rows bucketed by
their start time (in the open model, their due start); the last interval is shorter when the
window is not whole seconds, and a second without a transaction is an empty histogram. There is no line for the whole window: HdrHistogram's tools
add a log's intervals up (HistogramLogProcessor's percentile distribution is their sum), so such
a line would count every transaction twice.

Values are in µs (the comments say so in ASCII, `us`), in HdrHistogram's layout at 3 significant
digits, which is esbperf's own (esbperf/results/histogram.py: 11 significant bits), so each
bucket here is exactly one bucket of histograms.csv.

The encoding is HdrHistogram's V2 compressed histogram, written here (not with hdrh, HdrHistogram's
Python package, which records one bucket per call: Round 1's 1.16 M bucket counts took it 4.8 s, this
1.1 s, measured 2026-11-28), and read back with hdrh: a 40-byte header (cookie,
payload length, normalizing index offset, significant digits, lowest discernible and highest
trackable value, integer-to-double ratio), the counts array up to the largest value's bucket as
ZigZag LEB128 words with a run of zeros written as its negated length, deflated (zlib), behind
the compressed cookie and its length, in base64. The words are made for all intervals of a file
at once with numpy: a step has hundreds of thousands of (second, bucket) counts."""
from __future__ import annotations

import base64
import re
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np
import polars as pl

from esbperf import __version__
from esbperf.core.errors import EsbperfError
from esbperf.results import datalog
from esbperf.results.histogram import EXACT_BELOW, SIGNIFICANT_BITS, Histogram, bucket_low
from esbperf.results.layout import data_logs

if TYPE_CHECKING:
    from esbperf.analysis.report import Analysis
    from esbperf.analysis.runs import Run, Step

FOLDER = "hlog"
INTERVAL_MS = 1000
KINDS = {"response": "successful transactions' response time",
         "latency": "latency from the due start of every request due in the window, failed or never started "
                    "included (open model, corrected for coordinated omission)"}

# HdrHistogram's settings that give esbperf's layout: 3 significant digits make 2^ceil(log2(2 x 10^3))
# = 2048 sub-buckets, histogram.py's EXACT_BELOW; half of them per power of two above.
SIGNIFICANT_DIGITS = 3
SUB_BUCKET_HALF = EXACT_BELOW // 2
assert 1 << (2 * 10 ** SIGNIFICANT_DIGITS - 1).bit_length() == EXACT_BELOW, "histogram.py's layout changed"
LOWEST_DISCERNIBLE_US = 1
# An hour in µs (HdrHistogram's own example range); a file holding a larger value is written
# with that value as its highest trackable one instead.
HIGHEST_TRACKABLE_US = 3_600_000_000
# V2 cookies: the low nibble of the word-size byte set says "ZigZag LEB128 counts".
ENCODING_COOKIE = 0x1C849303 | 0x10
COMPRESSED_COOKIE = 0x1C849304 | 0x10
HEADER = struct.Struct(">iiiiqqd")        # cookie, payload bytes, offset, digits, lowest, highest, ratio
COMPRESSED_HEADER = struct.Struct(">ii")  # cookie, deflated bytes
MAX_VALUE = (1 << 63) - 1                 # HdrHistogram's values and counts are Java longs
LOG_FORMAT_VERSION = "1.3"
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'


def counts_index(values: np.ndarray) -> np.ndarray:
    """HdrHistogram's counts-array index of each value (µs, >= 0) at 3 significant digits and
    lowest discernible value 1: the value itself below 2048; above, k x 1024 + (v >> k) with
    k = bit_length(v) - 11 (1024 sub-buckets per power of two)."""
    values = values.astype(np.int64)
    # frexp's exponent is the bit length, but for a value above 2^53 that rounds up to the next
    # power of two: its top 11 bits are then all ones, and k + 1 gives the same index,
    # (k + 1) x 1024 + 1023 = k x 1024 + 2047.
    bits = np.frexp(values.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(bits - SIGNIFICANT_BITS, 0)
    return shift * SUB_BUCKET_HALF + (values >> shift)


def zigzag_leb128(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ZigZag LEB128 of int64 words as HdrHistogram writes them (7 bits a byte, low first, at most
    9 bytes, the 9th holding the last 8 bits whole): the bytes, and each word's byte count."""
    zigzag = ((words << 1) ^ (words >> 63)).view(np.uint64)
    sizes = np.ones(words.shape, dtype=np.int64)
    for j in range(1, 9):
        longer = zigzag >= np.uint64(1 << (7 * j))
        if not longer.any():
            break
        sizes += longer
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    for j in range(int(sizes.max(initial=0))):
        has = sizes > j
        byte = zigzag[has] >> np.uint64(7 * j)
        if j < 8:
            byte = (byte & np.uint64(0x7F)) | (sizes[has] > j + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + j] = byte.astype(np.uint8)
    return out, sizes


def encode_intervals(intervals: int, interval: np.ndarray, values: np.ndarray, counts: np.ndarray,
                     highest: int = HIGHEST_TRACKABLE_US) -> list[str]:
    """The compressed V2 histogram (base64 text) of each interval 0 … intervals - 1, from
    `counts[i]` values `values[i]` (µs; any value of a bucket stands for the bucket) in interval
    `interval[i]`. An interval with no count is an empty histogram."""
    try:
        interval, values, counts = (np.asarray(a, dtype=np.int64).ravel() for a in (interval, values, counts))
    except OverflowError:
        raise EsbperfError(f"hlog: values and counts must be in 0 … {MAX_VALUE} (a Java long)") from None
    if not len(interval) == len(values) == len(counts):
        raise EsbperfError(f"hlog: {len(interval)} intervals, {len(values)} values and {len(counts)} counts; "
                           "need one of each per count")
    if len(values) and (values.min() < 0 or counts.min() < 0):
        raise EsbperfError(f"hlog: values and counts must be in 0 … {MAX_VALUE}, got values "
                           f"{values.min()} … {values.max()} and counts {counts.min()} … {counts.max()}")
    if len(values) and (interval.min() < 0 or interval.max() >= intervals):
        raise EsbperfError(f"hlog: interval numbers must be in 0 … {intervals - 1}, got "
                           f"{interval.min()} … {interval.max()}")
    if len(values) and values.max() > highest:
        raise EsbperfError(f"hlog: value {values.max()} µs is above the highest trackable value {highest}")
    kept = counts > 0
    interval, index, counts = interval[kept], counts_index(values[kept]), counts[kept]
    # One key orders the counts by interval, then index; equal keys (values of one bucket in one
    # interval) become one count.
    width = int(index.max(initial=0)) + 1
    key = interval * width + index
    if len(key) > 1 and not (key[1:] > key[:-1]).all():
        order = np.argsort(key)
        key, counts = key[order], counts[order]
        first = np.ones(len(key), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        starts = np.flatnonzero(first)
        key, counts = key[starts], np.add.reduceat(counts, starts)
    interval, index = np.divmod(key, width)
    # Before each count, the zeros since the previous count of its interval (or since index 0):
    # one zero is the word 0, a run of n > 1 the word -n.
    previous = np.empty_like(index)
    previous[:1] = -1
    previous[1:] = index[:-1]
    previous[1:][interval[1:] != interval[:-1]] = -1
    zeros = index - previous - 1
    gap = zeros > 0
    per_count = 1 + gap
    word_at = np.cumsum(per_count) - per_count
    words = np.empty(int(per_count.sum()), dtype=np.int64)
    words[word_at[gap]] = np.where(zeros[gap] == 1, 0, -zeros[gap])
    words[word_at + gap] = counts
    data, sizes = zigzag_leb128(words)
    byte_at = np.concatenate(([0], np.cumsum(sizes)))
    # Each interval's counts, and so its words and bytes, are contiguous.
    bounds = np.searchsorted(interval, np.arange(intervals + 1))
    byte_bounds = byte_at[np.append(word_at, len(words))[bounds]]
    out = []
    for i in range(intervals):
        payload = data[byte_bounds[i]:byte_bounds[i + 1]].tobytes()
        header = HEADER.pack(ENCODING_COOKIE, len(payload), 0, SIGNIFICANT_DIGITS, LOWEST_DISCERNIBLE_US,
                             highest, 1.0)
        deflated = zlib.compress(header + payload)
        out.append(base64.b64encode(COMPRESSED_HEADER.pack(COMPRESSED_COOKIE, len(deflated)) + deflated)
                   .decode("ascii"))
    return out


def encode(histogram: Histogram | Mapping[int, int], highest: int = HIGHEST_TRACKABLE_US) -> str:
    """One histogram (esbperf's, or {µs: count}) as HdrHistogram's compressed V2 base64 text."""
    counts = histogram.counts if isinstance(histogram, Histogram) else histogram
    return encode_intervals(1, [0] * len(counts), list(counts.keys()), list(counts.values()), highest)[0]


# --- a step's files -------------------------------------------------------------------------------

@dataclass
class StepLog:
    """One .hlog to write: a step's distribution of one kind, of one Grinder test."""

    run: str
    step_dir: str
    test: int | None
    kind: str                     # a key of KINDS
    path: Path


def _flat(name: str) -> str:
    return name.replace("/", "_")


def _interval_lines(intervals: int, window_ms: int, counts: pl.DataFrame, maxima: np.ndarray) -> list[str]:
    """The interval lines of one file from its (interval, lo, n) counts and interval maxima."""
    highest = max(HIGHEST_TRACKABLE_US, int(maxima.max(initial=0)))
    encoded = encode_intervals(intervals, counts["interval"].to_numpy(), counts["lo"].to_numpy(),
                               counts["n"].to_numpy(), highest)
    lines = []
    for i, text in enumerate(encoded):
        length_ms = min(INTERVAL_MS, window_ms - i * INTERVAL_MS)
        # Interval_Max in ms, as HdrHistogram's own logs of ns values print it.
        lines.append(f"{i * INTERVAL_MS / 1000:.3f},{length_ms / 1000:.3f},{maxima[i] / 1000:.3f},{text}")
    return lines


def _ascii(text: str) -> str:
    """A name as one line of ASCII: HdrHistogram's Java reader reads a log in the platform's charset."""
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\n", "\\n").replace("\r", "\\r")


def _header(log: StepLog, start_ms: int, rt_source: str) -> list[str]:
    column = {"response": "Response us" if rt_source != "ms" else "Test time (whole ms) x 1000",
              "latency": "Latency us"}[log.kind]
    test = "" if log.test is None else f", Grinder test {log.test}"
    utc = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start_ms // 1000)) + f".{start_ms % 1000:03d}Z"
    return [f"#[esbperf {__version__}: {KINDS[log.kind]} ({column}) of run {_ascii(log.run)}, "
            f"step {_ascii(log.step_dir)}{test}]",
            f"#[Values in microseconds (us), Interval_Max in milliseconds; one interval per {INTERVAL_MS} ms of "
            "the step's measurement window, timestamps in seconds from its start (BaseTime)]",
            f"#[Histogram log format version {LOG_FORMAT_VERSION}]",
            f"#[StartTime: {start_ms / 1000:.3f} (seconds since epoch), {utc}]",
            f"#[BaseTime: {start_ms / 1000:.3f} (seconds since epoch)]",
            LEGEND]


def write_step_hlogs(run: "Run", step: "Step", tests: Mapping[int | None, bool], rt_source: str,
                     folder: Path) -> list[StepLog]:
    """Write the .hlog files of one step into `folder`: per test in `tests` (Grinder test number
    -> whether it has a latency distribution, i.e. an open-model step with the latency column),
    `<step_dir with / as _>[-test<n>]-response.hlog` and `…-latency.hlog`; the test
    is named only in a step of several tests."""
    step_dir = str(step.dir.relative_to(run.dir))
    start_ms, end_ms = step.meta["warmup_end_ms"], step.meta["end_ms"]
    window_ms = end_ms - start_ms
    intervals = -(-window_ms // INTERVAL_MS)
    base = _flat(step_dir)
    logs = [StepLog(run.name, step_dir, test, kind,
                    folder / f"{base}{'' if len(tests) == 1 else f'-test{test}'}-{kind}.hlog")
            for test, open_model in tests.items() for kind in KINDS if kind == "response" or open_model]
    # The rows as log_stats reads and judges them (datalog.interval_counts): the one place this module
    # reaches into the data logs, so the .hlog files count exactly the transactions summary.csv counts.
    counted = {kind: datalog.interval_counts(data_logs(step.dir), start_ms, end_ms, INTERVAL_MS, value,
                                             datalog.step_process_rate(step.meta))
               for kind, value in (("response", "response_us" if rt_source == "us" else "time"),
                                   ("latency", "latency_us")) if any(log.kind == kind for log in logs)}
    nothing = (pl.DataFrame(schema={"interval": pl.Int64, "lo": pl.Int64, "n": pl.Int64}),
               np.zeros(intervals, dtype=np.int64))
    folder.mkdir(parents=True, exist_ok=True)
    for log in logs:
        # In a step of one test every row is that test's (a step whose logs hold no row has one
        # test, its scenario's, and every interval empty).
        by_test = counted[log.kind]
        mine = by_test.get(log.test, nothing) if len(tests) > 1 else next(iter(by_test.values()), nothing)
        lines = _header(log, start_ms, rt_source) + _interval_lines(intervals, window_ms, *mine)
        log.path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return logs


def write_hlogs(analysis: "Analysis", folder: Path) -> list[StepLog]:
    """Every step's .hlog files in `folder` (the report's hlog/): for one run, named after the step
    folder; with several runs, in a sub-folder per run."""
    rt_sources = {(r["run"], r["step_dir"]): r["rt_source"]
                  for r in analysis.summary.select("run", "step_dir", "rt_source").iter_rows(named=True)}
    tests: dict[tuple[str, str], dict[int | None, bool]] = {}
    for (run, step_dir, test), histograms in analysis.step_histograms.items():
        tests.setdefault((run, step_dir), {})[test] = histograms.latency is not None
    written = []
    for run in analysis.runs:
        target = folder if len(analysis.runs) == 1 else folder / _flat(run.name)
        for step in run.steps:
            key = (run.name, str(step.dir.relative_to(run.dir)))
            written += write_step_hlogs(run, step, tests[key], rt_sources[key], target)
    return written


# --- reading them back (a published round keeps its distributions as these logs only) --------------

def decode(text: str) -> dict[int, int]:
    """A compressed V2 histogram (base64 text, as encode writes it) as {bucket's lowest µs: count}:
    hdrh's decoder (HdrHistogram's Python package), its counts array read with numpy."""
    from hdrh.histogram import HdrHistogram
    try:
        h = HdrHistogram.decode(text)
    except Exception as e:          # hdrh raises its own kinds, and base64's, zlib's, ctypes' errors
        raise EsbperfError(f"hlog: not a compressed V2 histogram ({type(e).__name__}: "
                           f"{' '.join(str(e).split()) or 'unreadable'})") from None
    if (h.significant_figures, h.lowest_trackable_value) != (SIGNIFICANT_DIGITS, LOWEST_DISCERNIBLE_US):
        raise EsbperfError(f"hlog: a histogram of {h.significant_figures} significant digits from "
                           f"{h.lowest_trackable_value}, not esbperf's {SIGNIFICANT_DIGITS} from "
                           f"{LOWEST_DISCERNIBLE_US}")
    counts = np.ctypeslib.as_array(h.counts)[:h.counts_len]
    index = np.flatnonzero(counts)
    return dict(zip(bucket_low(index).tolist(), counts[index].tolist()))


_NAMED = re.compile(r"^#\[esbperf [^:]*: .* of run (?P<run>.*), step (?P<step>[^,\]]*)(?:, Grinder test (?P<test>\d+))?\]$")


def read_log(text: str) -> tuple[str, str, int | None, Histogram]:
    """One .hlog of write_step_hlogs: (run, step folder, Grinder test or None, its intervals added up).
    The histogram keeps the buckets, not the exact sums: its min is its lowest bucket's bound."""
    lines = text.splitlines()
    named = _NAMED.match(lines[0]) if lines else None
    if named is None:
        raise EsbperfError("hlog: not one of esbperf's logs (its first line names no run and step)")
    counts: dict[int, int] = {}
    for line in lines:
        if line and not line.startswith(("#", '"')):
            for lo, n in decode(line.rsplit(",", 1)[1]).items():
                counts[lo] = counts.get(lo, 0) + n
    h = Histogram()
    if counts:
        lows = sorted(counts)
        h.add_buckets(lows, [counts[lo] for lo in lows], [0] * len(lows), [0] * len(lows), lows[0], lows[-1])
    test = named.group("test")
    return named.group("run"), named.group("step"), None if test is None else int(test), h


def read_archive(path: Path) -> dict[tuple[str, str, int | None], Histogram]:
    """Every response-time log of a report's hlog.tar.gz (analysis/round/folder.py packs it), by (run, step
    folder, test): the test is None where the step had one (its only test, which the log does not name)."""
    import tarfile
    out = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith("-response.hlog"):
                run, step, test, h = read_log(tar.extractfile(member).read().decode("ascii"))
                out[(run, step, test)] = h
    return out
