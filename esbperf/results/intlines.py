"""Lines of comma-separated integers (Grinder data logs of esbperf's columns), parsed natively.

A data log of a step holds millions of lines like `3, 17, 1, 1795239161376, 0, 0, 200, 1024, 1086,
412`. polars' CSV reader takes about 0.45 µs a line on one core; this parser, compiled by numba,
about 0.06 µs, and it releases Python's lock, so the blocks of a step are parsed on every core
at once (esbperf/results/datalog.py).

A field is read as polars reads an Int64 field, so that a log reads the same whichever parser
reads it (tests/test_analysis.py compares them on garbled logs): spaces and tabs before the number
are skipped, one `+` or `-` may lead, then one or more digits and nothing else; one `\\r` at the end
of a field is dropped (a line ended by CRLF); a number outside int64 is not a number. A line is
malformed when one of its first `columns` fields is not a number, a field that must not be
negative (a time) is, or a field follows them that is not empty (the line has too many fields).
A line with fewer fields, an empty line among them, is malformed too."""
from __future__ import annotations

import numpy as np
from numba import njit

_INT64_MIN = np.iinfo(np.int64).min
_CEIL_MIN_10 = -(-_INT64_MIN // 10)      # the least acc whose acc * 10 stays in int64 ...
_MIN_LAST = _CEIL_MIN_10 * 10 - _INT64_MIN   # ... and the largest digit then taken from it


@njit(nogil=True, cache=True)
def _parse(text, columns, slot, nonnegative, out, bad):  # pragma: no cover - compiled
    """Parse whole lines of `text` (uint8): field k < columns goes to out[slot[k], row] when
    slot[k] >= 0; bad[row] = 1 for a malformed line. Returns the number of lines. One pass: a
    field is read as it is scanned."""
    size = text.shape[0]
    i = 0
    row = 0
    while i < size:
        ok = True
        field = 0
        while True:                                    # one field, up to "," or the line's end
            if field < columns:
                while i < size and (text[i] == 32 or text[i] == 9):
                    i += 1
                negative = False
                if i < size and (text[i] == 43 or text[i] == 45):
                    negative = text[i] == 45
                    i += 1
                # The magnitude is gathered below zero, where int64 reaches one further (-2^63);
                # only a number of 19 digits or more can leave int64, and is checked on the way.
                acc = 0
                first = i
                while i < size:
                    c = text[i]
                    if c < 48 or c > 57:
                        break
                    acc = acc * 10 - (np.int64(c) - 48)
                    i += 1
                digits = i - first
                if digits >= 19:
                    acc = 0
                    for j in range(first, i):
                        digit = np.int64(text[j]) - 48
                        if acc < _CEIL_MIN_10 or (acc == _CEIL_MIN_10 and digit > _MIN_LAST):
                            ok = False
                            break
                        acc = acc * 10 - digit
                if i < size and text[i] == 13 and (i + 1 == size or text[i + 1] == 44 or text[i + 1] == 10):
                    i += 1                             # one "\r" at the end of a field is dropped
                if digits == 0 or (not negative and acc == _INT64_MIN):
                    ok = False
                value = acc if negative else -acc
                if nonnegative[field] and value < 0:
                    ok = False
                if i < size and text[i] != 44 and text[i] != 10:
                    ok = False                         # something else follows the number
                    while i < size and text[i] != 44 and text[i] != 10:
                        i += 1
                if ok and slot[field] >= 0:
                    out[slot[field], row] = value
            else:
                start = i
                while i < size and text[i] != 44 and text[i] != 10:
                    i += 1
                if field == columns and i - start > (1 if text[i - 1] == 13 else 0):
                    ok = False                         # a field beyond the header's: too many
            field += 1
            if i >= size or text[i] == 10:
                i += 1
                break
            i += 1                                     # the ","
        if field < columns:
            ok = False
        bad[row] = 0 if ok else 1
        row += 1
    return row


@njit(nogil=True, cache=True)
def _lines(text):  # pragma: no cover - compiled
    """The number of lines of `text` (uint8), a last one without its newline included."""
    count = 0
    for c in text:
        if c == 10:
            count += 1
    return count + (1 if text.shape[0] and text[-1] != 10 else 0)


def parse(text: np.ndarray, columns: int, wanted: dict[int, str], nonnegative: set[int]) -> tuple[int, dict[str, np.ndarray]]:
    """Parse whole lines of `text` (uint8: bytes of a file, e.g. mapped) of `columns` integer
    fields: the number of malformed lines, and the well-formed lines' fields `wanted` (field index
    -> name) as int64 arrays of their own."""
    lines = _lines(text)
    slot = np.full(columns, -1, dtype=np.int64)
    for k, index in enumerate(wanted):
        slot[index] = k
    must = np.zeros(columns, dtype=np.uint8)
    must[list(nonnegative)] = 1
    out = np.empty((len(wanted), lines), dtype=np.int64)
    bad = np.empty(lines, dtype=np.uint8)
    rows = _parse(text, columns, slot, must, out, bad)
    bad = bad[:rows].view(bool)
    malformed = int(np.count_nonzero(bad))
    fields = out[:, :rows] if not malformed else out[:, :rows][:, ~bad]
    return malformed, {name: fields[k] for k, name in enumerate(wanted.values())}
