"""Response-time histograms in µs: bounded, log-linear, with exact moments.

The bucket rule: a value v (a whole number of µs, >= 0) is counted in the bucket of v truncated
to its 11 most significant bits, `(v >> s) << s` with s = max(0, bit_length(v) - 11):
- below 2048 µs every value has a bucket of its own: exact;
- from 2048 µs on, 1024 buckets per power of two: a bucket [lo, lo + 2^s) holds values whose
  distance from lo is less than 2^s <= lo / 1024, so lo is at most 1/1024 = 0.098 % below any
  value in it. This is HdrHistogram's layout at 3 significant digits.
A histogram of a whole step stays small (at most ~20 000 buckets up to 2^28 µs = 268 s) however
many transactions it counts.

Percentiles are nearest-rank (the smallest value with at least p % of the values at or below
it) over the buckets, and report the bucket's lower bound: never above the exact nearest-rank
value, and at most 0.098 % below it; exact below 2048 µs. Count, sum and sum of squares are kept
exactly (Python integers), and so are min and max: mean, standard deviation, min and max are
those of the raw values. (hdrh, HdrHistogram's Python package, keeps neither the exact sums nor the
exact min and max, and records one value per call: the data logs' rows are bucketed here by polars.)"""
from __future__ import annotations

import bisect
import math
import operator
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import polars as pl

SIGNIFICANT_BITS = 11
EXACT_BELOW = 1 << SIGNIFICANT_BITS                          # 2048 µs
MAX_RELATIVE_ERROR = 1 / (1 << (SIGNIFICANT_BITS - 1))       # 1/1024: a percentile's bound
BUCKETS = (64 - SIGNIFICANT_BITS + 1) << (SIGNIFICANT_BITS - 1)   # bucket numbers of int64 values


def bucket(value: int) -> int:
    """The lower bound of the bucket holding `value`."""
    shift = max(0, value.bit_length() - SIGNIFICANT_BITS)
    return (value >> shift) << shift


def bucket_shifts(values: np.ndarray) -> np.ndarray:
    """`bucket`'s shift for each value of a non-negative int64 array: the bucket of v is
    [(v >> s) << s, ((v >> s) + 1) << s)."""
    bits = np.frexp(values.astype(np.float64))[1].astype(np.int64)
    # From 2^53 on the float may round up to the next power of two: one bit too many then.
    bits -= (values >> np.maximum(bits - 1, 0)) == 0
    return np.maximum(bits - SIGNIFICANT_BITS, 0)


def bucket_index(values: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Each value's bucket as a number in value order, below BUCKETS: the value itself below
    EXACT_BELOW, then EXACT_BELOW / 2 numbers per power of two."""
    return (values >> shifts) + (shifts << (SIGNIFICANT_BITS - 1))


def bucket_low(index: np.ndarray) -> np.ndarray:
    """The lower bound of each bucket number of `bucket_index`."""
    shifts = np.maximum((index >> (SIGNIFICANT_BITS - 1)) - 1, 0)
    return (index - (shifts << (SIGNIFICANT_BITS - 1))) << shifts


def bucket_expr(value: pl.Expr) -> pl.Expr:
    """`bucket` as a polars expression on a non-negative Int64 column."""
    shift = (64 - SIGNIFICANT_BITS - value.bitwise_leading_zeros().cast(pl.Int64)).clip(lower_bound=0)
    return value & -(pl.lit(2, dtype=pl.Int64).pow(shift))


def nearest_rank(p: float, total: int) -> int:
    """The 1-based rank of percentile p among `total` values."""
    return max(1, math.ceil(round(p * total / 100.0, 6)))   # round: 99.9 % of 1000 is 999, not 999.0000001


@dataclass
class Histogram:
    """Counts per bucket lower bound (µs), with the exact count, sum, sum of squares, min, max."""

    counts: dict[int, int] = field(default_factory=dict)
    n: int = 0
    total: int = 0
    total_sq: int = 0
    min: int | None = None
    max: int | None = None
    # items(), kept until the counts change: percentiles and the stall bands read it many times.
    _sorted: tuple[tuple[int, int], ...] | None = field(default=None, repr=False, compare=False)
    _below: tuple[list[int], list[int]] | None = field(default=None, repr=False, compare=False)   # count_between's

    def add(self, lo: int, n: int, offsets: int, offsets_sq: int, low: int, high: int) -> None:
        """Add a bucket's group: n values of lower bound `lo`, the sums of (v - lo) and (v - lo)²."""
        if n:
            self.add_buckets([lo], [n], [offsets], [offsets_sq], low, high)

    def add_buckets(self, lo: Sequence[int], n: Sequence[int], offsets: Sequence[int],
                    offsets_sq: Sequence[int], low: int, high: int) -> None:
        """`add` of several buckets' groups at once (Python ints: the sums stay exact); `low` and
        `high` are the smallest and the largest of their values."""
        for bucket_lo, count in zip(lo, n):
            self.counts[bucket_lo] = self.counts.get(bucket_lo, 0) + count
        self._sorted = self._below = None
        self.n += sum(n)
        self.total += sum(map(operator.mul, n, lo)) + sum(offsets)
        self.total_sq += sum(k * b * b + 2 * b * o + q for k, b, o, q in zip(n, lo, offsets, offsets_sq))
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)

    def merge(self, other: "Histogram") -> "Histogram":
        for lo, n in other.counts.items():
            self.counts[lo] = self.counts.get(lo, 0) + n
        self._sorted = self._below = None
        self.n += other.n
        self.total += other.total
        self.total_sq += other.total_sq
        for name, pick in (("min", min), ("max", max)):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else pick(mine, theirs))
        return self

    @classmethod
    def pooled(cls, histograms: Iterable["Histogram | None"]) -> "Histogram":
        out = cls()
        for h in histograms:
            if h is not None:
                out.merge(h)
        return out

    @classmethod
    def of(cls, values: Iterable[int]) -> "Histogram":
        """A histogram of raw values (tests, small data)."""
        h = cls()
        for v in values:
            lo = bucket(v)
            h.add(lo, 1, v - lo, (v - lo) ** 2, v, v)
        return h

    def scaled(self, factor: int) -> "Histogram":
        """The same values times `factor` (whole ms -> µs); buckets keep their ms bounds."""
        return Histogram({lo * factor: n for lo, n in self.counts.items()}, self.n, self.total * factor,
                         self.total_sq * factor * factor, None if self.min is None else self.min * factor,
                         None if self.max is None else self.max * factor)

    def items(self) -> list[tuple[int, int]]:
        """(bucket lower bound, count), ascending."""
        if self._sorted is None:
            self._sorted = tuple(sorted(self.counts.items()))
        return list(self._sorted)

    def count_between(self, low: float, high: float) -> int:
        """How many values lie in buckets whose lower bound is in [low, high)."""
        if self._sorted is None or self._below is None:
            self.items()
            lows, below = [], [0]
            for lo, n in self._sorted:
                lows.append(lo)
                below.append(below[-1] + n)
            self._below = (lows, below)
        lows, below = self._below
        return below[bisect.bisect_left(lows, high)] - below[bisect.bisect_left(lows, low)]

    def percentile(self, p: float) -> int | None:
        """Nearest-rank percentile p (bucket lower bound, clamped to the exact min)."""
        if not self.n:
            return None
        rank, seen = nearest_rank(p, self.n), 0
        for lo, n in self.items():
            seen += n
            if seen >= rank:
                return max(lo, self.min)
        return self.max

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation (n - 1), exact up to the final division."""
        if self.n < 2:
            return None
        return math.sqrt(max(0, self.n * self.total_sq - self.total * self.total) / (self.n * (self.n - 1)))


EXPORT_SCHEMA = {"run": pl.String, "step_dir": pl.String, "kind": pl.String, "value_us": pl.Int64, "count": pl.Int64}


def export_frame(histograms: dict[tuple[str, str], dict[str, "Histogram | None"]]) -> pl.DataFrame:
    """histograms.csv: one row per non-empty bucket of each step's distributions, keyed by
    (run, step_dir) then kind (response, failed, latency). `value_us` is the bucket's lower
    bound: the values counted are in [value_us, value_us + 2^max(0, bit_length(value_us) - 11))
    (exact below 2048 µs); the counts of a kind add up to its transactions."""
    rows = [(run, step_dir, kind, lo, n)
            for (run, step_dir), kinds in histograms.items()
            for kind, h in kinds.items() if h is not None
            for lo, n in h.items()]
    return pl.DataFrame(rows, schema=EXPORT_SCHEMA, orient="row")
