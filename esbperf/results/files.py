"""Text files that a killed process may have cut short (Grinder data logs, monitor CSVs).

A worker or monitor killed mid-write leaves a last line without its newline. Its fields can
still parse (a response size cut from "1087" to "10"), so such a line is recognised by the
missing newline, not by its content, and is never read."""
from __future__ import annotations

from pathlib import Path

_CHUNK = 1 << 24
_TAIL = 1 << 16


def read_header(path: Path) -> tuple[str | None, bool]:
    """The first line of `path` without its newline, and whether it was complete.

    (None, False) for an empty file."""
    with open(path, "rb") as f:
        first = f.readline()
    if not first:
        return None, False
    complete = first.endswith(b"\n")
    return first.rstrip(b"\r\n").decode("utf-8", "replace"), complete


def ends_with_newline(path: Path) -> bool:
    """Whether the last line is whole: False for an empty file, which holds no line at all."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return False
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def tail(path: Path, size: int = 8192) -> str:
    """The last `size` bytes of a file, as text."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - size))
        return f.read().decode("utf-8", "replace")


def lines_after_header(path: Path) -> tuple[int, int]:
    """The byte range [start, end) of the whole lines after the first one: from the end of the
    header line to the end of the last line that has its newline (a line cut short lies at or
    after `end`, up to the file's size). The header line must be complete (read_header)."""
    with open(path, "rb") as f:
        start = len(f.readline())
        end = f.seek(0, 2)
        while end > start:                  # back from the end, block by block, to a newline
            block = min(_TAIL, end - start)
            f.seek(end - block)
            newline = f.read(block).rfind(b"\n")
            if newline >= 0:
                return start, end - block + newline + 1
            end -= block
    return start, start


def line_blocks(path: Path, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Whole lines [start, end) (lines_after_header) split into byte ranges of about `size`, each
    ending after a newline: parts to read and parse one at a time, however large the file."""
    blocks = []
    with open(path, "rb") as f:
        while end - start > size:
            cut = f.seek(start + size - 1)
            while (newline := (text := f.read(_TAIL)).find(b"\n")) < 0 and text:
                cut += len(text)
            cut = min(cut + newline + 1, end) if text else end
            blocks.append((start, cut))
            start = cut
    if end > start:
        blocks.append((start, end))
    return blocks


def complete_data_lines(path: Path) -> int | None:
    """Number of complete lines after the header when the last line is cut short, else None.

    Only files that end without a newline pay for this count (one pass of bytes.count)."""
    if ends_with_newline(path) or Path(path).stat().st_size == 0:
        return None
    newlines = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            newlines += chunk.count(b"\n")
    return max(newlines - 1, 0)

