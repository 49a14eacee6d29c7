"""One segment file of a partition log, its sparse index, and its recovery.

A segment knows the byte range that holds valid records (``size``) and the offset after the
last of them (``next_offset``): everything else in the file (a torn tail) has been cut off.
Only the partition's last (active) segment keeps file descriptors open; closed segments are
opened per read, so a store with thousands of partitions does not run out of descriptors.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from dafka.storage._format import (
    INDEX_ENTRY_SIZE,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_HEADER_SIZE,
    ScanResult,
    all_zero,
    encode_segment_header,
    scan,
    segment_header_ok,
    segment_stem,
)
from dafka.storage._index import SparseIndex
from dafka.storage._quarantine import copy_to_quarantine, move_to_quarantine


def write_all(fd: int, data: bytes, position: int) -> None:
    """``pwrite`` every byte (a write may legally be short)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class Segment:
    """A ``.log`` file and its ``.idx``; see :mod:`dafka.storage._format` for the bytes."""

    __slots__ = ("base", "fd", "index", "index_fd", "index_path", "next_offset", "path", "size")

    def __init__(self, directory: Path, base: int, interval: int) -> None:
        self.base = base
        self.path = directory / (segment_stem(base) + LOG_SUFFIX)
        self.index_path = directory / (segment_stem(base) + INDEX_SUFFIX)
        self.index = SparseIndex(base, interval)
        self.size = SEGMENT_HEADER_SIZE
        self.next_offset = base
        self.fd = -1
        self.index_fd = -1

    @property
    def records(self) -> int:
        return self.next_offset - self.base

    @property
    def is_open(self) -> bool:
        return self.fd >= 0

    @classmethod
    def create(cls, directory: Path, base: int, interval: int) -> Segment:
        """A new, empty segment (the caller fsyncs the directory when durability needs it).

        On failure (a full disk) nothing is left behind, so that the same segment can be
        created again once there is room.
        """
        seg = cls(directory, base, interval)
        seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            write_all(seg.fd, encode_segment_header(base), 0)
            seg.index_fd = os.open(
                seg.index_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644
            )
        except BaseException:
            os.close(seg.fd)
            seg.fd = -1
            for path in (seg.path, seg.index_path):
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        return seg

    def open_files(self) -> None:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        if self.index_fd < 0:
            self.index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def close_files(self) -> None:
        """Write pending index entries and close both descriptors (both, even if the index
        write fails: its error is raised after)."""
        try:
            if self.index_fd >= 0:
                try:
                    self.index.flush(self.index_fd)
                finally:
                    os.close(self.index_fd)
                    self.index_fd = -1
        finally:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1

    def read_fd(self) -> tuple[int, bool]:
        """A descriptor to read from, and whether the caller must close it."""
        if self.fd >= 0:
            return self.fd, False
        return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC), True

    def average_record(self) -> float:
        count = self.next_offset - self.base
        return (self.size - SEGMENT_HEADER_SIZE) / count if count else 128.0

    def truncate(self, position: int, next_offset: int) -> None:
        """Cut the log at ``position`` (which holds ``next_offset``) and its index to match."""
        fd, close = (self.fd, False) if self.fd >= 0 else (os.open(self.path, os.O_RDWR), True)
        try:
            if position < SEGMENT_HEADER_SIZE:
                os.ftruncate(fd, 0)
                write_all(fd, encode_segment_header(self.base), 0)
                position = SEGMENT_HEADER_SIZE
            else:
                os.ftruncate(fd, position)
        finally:
            if close:
                os.close(fd)
        self.size = position
        self.next_offset = next_offset
        self.index.truncate_at(position)
        self.rewrite_index()

    def rewrite_index(self) -> None:
        """Make the index file exactly the in-memory entries."""
        self.index.flushed = 0
        fd = self.index_fd
        if fd < 0:
            fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, 0)
            self.index.flush(fd)
        finally:
            if fd != self.index_fd:
                os.close(fd)

    def delete(self) -> None:
        """Remove both files (the log first: an orphan index is harmless and cleaned later)."""
        self.close_files()
        for path in (self.path, self.index_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


@dataclass(slots=True)
class SegmentRecovery:
    """What recovering one segment found (the partition log turns it into a report)."""

    scanned: int = 0
    problem: ScanResult | None = None
    dropped: int = 0
    index_rebuilt: bool = False
    index_repaired: bool = False
    quarantined: list[Path] = field(default_factory=list)


def recover_segment(seg: Segment, *, max_length: int, full: bool) -> SegmentRecovery:
    """Find the valid end of ``seg``'s log, cut whatever follows it, and repair its index.

    Only the part after the last *verified* index entry is scanned (a record there must sit
    at its position with its offset and a good CRC), unless ``full``: then every record is
    checked and the index is rebuilt from scratch. What it cannot read goes to the
    quarantine (a segment with a bad header is moved there whole, a corrupt record and what
    follows it are copied there before the cut); a torn tail is only cut.
    """
    result = SegmentRecovery()
    fd = os.open(seg.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        file_size = os.fstat(fd).st_size
        header = os.pread(fd, SEGMENT_HEADER_SIZE, 0)
        if not segment_header_ok(header, seg.base):
            expected = encode_segment_header(seg.base)
            torn = file_size < SEGMENT_HEADER_SIZE and expected.startswith(header)
            detail = "segment header cut short" if torn else "bad segment header"
            result.problem = ScanResult(0, seg.base, "torn" if torn else "corrupt", detail)
            result.dropped = file_size
            if torn:
                os.ftruncate(fd, 0)
                write_all(fd, expected, 0)
            else:
                result.quarantined.append(move_to_quarantine(seg.path))
                fresh = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                try:
                    write_all(fresh, expected, 0)
                finally:
                    os.close(fresh)
            seg.size = SEGMENT_HEADER_SIZE
            seg.next_offset = seg.base
            result.index_repaired = _reset_index(seg)
            return result

        had_index = True
        data = b""
        if not full:
            try:
                data = seg.index_path.read_bytes()
            except FileNotFoundError:
                had_index = False
            except OSError:
                had_index = False
        dropped_entries = seg.index.load(data, file_size) if had_index and not full else 0
        start_offset, start_pos = seg.base, SEGMENT_HEADER_SIZE
        while len(seg.index):
            off, pos = seg.index.entry(len(seg.index) - 1)
            probe = scan(fd, pos, file_size, off, max_length=max_length, stop_offset=off + 1)
            if probe.problem is None and probe.next_offset == off + 1:
                start_offset, start_pos = off, pos
                break
            seg.index.truncate(len(seg.index) - 1)
            dropped_entries += 1
        before = len(seg.index)
        if full or not had_index:
            seg.index = SparseIndex(seg.base, seg.index.interval)
            before = -1
        seg.index.last_position = start_pos if len(seg.index) else SEGMENT_HEADER_SIZE
        res = scan(fd, start_pos, file_size, start_offset, max_length=max_length, index=seg.index)
        result.scanned = res.position - start_pos
        if res.problem is not None:
            if all_zero(fd, res.position, file_size):
                res.problem, res.detail = "torn", "zero-filled tail"
            result.problem = res
            result.dropped = file_size - res.position
            if res.problem == "corrupt":
                result.quarantined.append(copy_to_quarantine(seg.path, fd, res.position, file_size))
            os.ftruncate(fd, res.position)
        seg.size = res.position
        seg.next_offset = res.next_offset
        if before == -1:
            result.index_rebuilt = True
            _write_index(seg)
        elif dropped_entries or len(seg.index) != before:
            result.index_repaired = bool(dropped_entries)
            _write_index(seg)
        return result
    finally:
        os.close(fd)


def _reset_index(seg: Segment) -> bool:
    seg.index = SparseIndex(seg.base, seg.index.interval)
    try:
        had_entries = seg.index_path.stat().st_size > 0
    except FileNotFoundError:
        had_entries = True
    _write_index(seg)
    return had_entries


def _write_index(seg: Segment) -> None:
    """Rewrite the index file from memory; on a full disk, leave it for a later flush.

    The in-memory index is what reads use; the file only saves the next open a scan. So a
    store restarted on a full disk still opens (``flushed`` stays 0: the next flush writes
    every entry, and the next open checks whatever the file holds).
    """
    seg.index.flushed = 0
    try:
        fd = os.open(seg.index_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        os.ftruncate(fd, len(seg.index) * INDEX_ENTRY_SIZE)
        seg.index.flush(fd)
    except OSError:
        seg.index.flushed = 0
    finally:
        os.close(fd)


__all__ = ["Segment", "SegmentRecovery", "recover_segment", "write_all"]
