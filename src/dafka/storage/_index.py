"""The sparse offset index of one segment: a few (offset, position) pairs for fast seeks.

Held in memory as two ``array('I')`` columns (relative offsets and positions, both strictly
increasing) so that a lookup is one ``bisect`` and loading an index file is one ``frombytes``
(no per-entry Python work: opening a large partition stays fast). The file is appended in
batches of entries and only trails the log; see :mod:`dafka.storage._format` for the layout.
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from dafka.storage._format import INDEX_ENTRY_SIZE, SEGMENT_HEADER_SIZE


class SparseIndex:
    """Entries of one segment; ``offer`` applies the byte-interval rule shared with recovery."""

    __slots__ = ("base", "flushed", "interval", "last_position", "offsets", "positions")

    def __init__(self, base: int, interval: int) -> None:
        self.base = base
        self.interval = interval
        self.offsets = array("I")
        self.positions = array("I")
        self.last_position = SEGMENT_HEADER_SIZE
        self.flushed = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.offsets)

    def offer(self, offset: int, position: int) -> None:
        if position - self.last_position >= self.interval:
            self.offsets.append(offset - self.base)
            self.positions.append(position)
            self.last_position = position

    def offer_run(self, first_offset: int, starts: Sequence[int]) -> None:
        """``offer(first_offset + i, starts[i])`` for each ``i`` in order (``starts``
        increasing): the same entries, found with one ``bisect`` per entry instead of a
        Python step per record."""
        interval = self.interval
        count = len(starts)
        i = bisect_left(starts, self.last_position + interval)
        while i < count:
            position = starts[i]
            self.offsets.append(first_offset + i - self.base)
            self.positions.append(position)
            self.last_position = position
            i = bisect_left(starts, position + interval, i + 1)

    def floor(self, offset: int) -> tuple[int, int]:
        """The last entry at or before ``offset`` as (absolute offset, position)."""
        i = bisect_right(self.offsets, offset - self.base)
        if i == 0:
            return self.base, SEGMENT_HEADER_SIZE
        return self.base + self.offsets[i - 1], self.positions[i - 1]

    def entry(self, i: int) -> tuple[int, int]:
        return self.base + self.offsets[i], self.positions[i]

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` entries."""
        del self.offsets[count:]
        del self.positions[count:]
        self.last_position = self.positions[-1] if count else SEGMENT_HEADER_SIZE
        self.flushed = min(self.flushed, count)

    def truncate_at(self, position: int) -> None:
        """Drop entries for records at or after ``position`` (the log is cut there)."""
        self.truncate(bisect_right(self.positions, position - 1))

    def pending(self) -> int:
        return len(self.offsets) - self.flushed

    def unflushed_bytes(self) -> bytes:
        pairs = array("I", bytes(8 * self.pending()))
        pairs[0::2] = self.offsets[self.flushed :]
        pairs[1::2] = self.positions[self.flushed :]
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()

    def flush(self, fd: int) -> None:
        """Write the entries not yet in the file at their place (one ``pwrite``)."""
        if self.pending():
            data = self.unflushed_bytes()
            written = 0
            at = self.flushed * INDEX_ENTRY_SIZE
            while written < len(data):
                written += os.pwrite(fd, data[written:], at + written)
            self.flushed = len(self.offsets)

    def load(self, data: bytes, log_size: int) -> int:
        """Adopt the longest sane prefix of an index file's bytes; returns entries dropped.

        Sane means: relative offsets and positions strictly increase and each position leaves
        room for a record header inside the log (the interval is not checked, so that a
        changed ``index_interval_bytes`` does not force a rebuild). Whether an entry really
        points at its record is checked by the caller, from the last entry backwards.
        """
        whole = len(data) - len(data) % INDEX_ENTRY_SIZE
        pairs = array("I")
        pairs.frombytes(data[:whole])
        if sys.byteorder == "little":
            pairs.byteswap()
        offsets = pairs[0::2]
        positions = pairs[1::2]
        good = 0
        last_off = 0  # the implicit entry (0, header): real entries come strictly after it
        last_pos = SEGMENT_HEADER_SIZE
        limit = log_size - 16
        for off, pos in zip(offsets, positions, strict=True):
            if off <= last_off or pos <= last_pos or pos > limit:
                break
            last_off, last_pos = off, pos
            good += 1
        self.offsets = offsets[:good]
        self.positions = positions[:good]
        self.last_position = last_pos
        self.flushed = good
        partial_entry = 1 if len(data) != whole else 0
        return len(offsets) - good + partial_entry


__all__ = ["SparseIndex"]
