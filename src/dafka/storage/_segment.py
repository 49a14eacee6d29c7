"""One segment file of a partition log, its sparse index, its recovery and its salvage.

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
    Problem,
    ScanResult,
    all_zero,
    encode_segment_header,
    record_intact,
    resync,
    scan,
    segment_header_ok,
    segment_stem,
)
from dafka.storage._index import SparseIndex
from dafka.storage._quarantine import copy_range, copy_to_quarantine, move_to_quarantine


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


SALVAGE_SUFFIX = ".salvage"
"""A segment being written by :func:`salvage` (renamed into place when complete; a leftover
from a crash is removed at open)."""


@dataclass(frozen=True, slots=True)
class Loss:
    """Bytes ``[position, end_position)`` of a segment held no intact record: offsets
    ``[offset, end_offset)`` are lost (``end_offset`` None: up to wherever the segment
    ended, which nothing intact says). ``quarantined`` is where a copy of the bytes went
    (None for a torn tail: an interrupted write, only cut)."""

    position: int
    offset: int
    end_position: int
    end_offset: int | None
    reason: Problem
    detail: str
    quarantined: Path | None


class _Shifted:
    """Feeds a new segment's index the positions of records copied from ``shift`` bytes
    further into another file."""

    __slots__ = ("index", "shift")

    def __init__(self, index: SparseIndex, shift: int) -> None:
        self.index = index
        self.shift = shift

    def offer(self, offset: int, position: int) -> None:
        self.index.offer(offset, position - self.shift)


def salvage(
    seg: Segment,
    fd: int,
    position: int,
    offset: int,
    problem: Problem,
    detail: str,
    end: int,
    *,
    max_length: int,
) -> tuple[list[Loss], list[Segment]]:
    """Keep every intact record of ``seg`` after the bad one at ``position`` (``offset``).

    From the bad record on, the file is a series of damaged stretches and runs of intact
    records (:func:`~dafka.storage._format.resync` finds where each run starts). Each run
    becomes a segment file of its own, named by its first offset (records carry their
    offsets, not their positions, so their bytes are copied as they are); each damaged
    stretch is copied to the quarantine; then ``seg`` is cut at ``position``. The offsets
    between the runs are *holes* of the partition log: exactly the damaged records.

    Crash safety: every copy is fsynced before the cut, and a run's file is written under
    a temporary name and renamed into place once complete, so that at every moment each
    byte is in the log or in the quarantine. A crash before the cut leaves the runs' files
    overlapping ``seg``: recovery checks ``seg`` whole and salvages it again (the renames
    replace the files with the same bytes).

    Returns the losses (the last one's ``end_offset`` is None when nothing intact follows
    it) and the new segments, in order; ``seg`` itself is left for the caller to update
    (its size is ``position``, its next offset ``offset``).
    """
    losses: list[Loss] = []
    runs: list[tuple[int, int, ScanResult, SparseIndex]] = []
    pos, off = position, offset
    first_problem, first_detail = problem, detail
    while True:
        found = resync(fd, pos, end, off, max_length=max_length)
        if found is None:
            torn = (first_problem == "torn" and not runs) or all_zero(fd, pos, end)
            losses.append(
                Loss(
                    pos,
                    off,
                    end,
                    None,
                    "torn" if torn else "corrupt",
                    "zero-filled tail" if torn and first_problem != "torn" else first_detail,
                    None,
                )
            )
            break
        resume, resume_offset = found
        losses.append(Loss(pos, off, resume, resume_offset, "corrupt", first_detail, None))
        index = SparseIndex(resume_offset, seg.index.interval)
        shift = resume - SEGMENT_HEADER_SIZE
        res = scan(
            fd, resume, end, resume_offset, max_length=max_length, index=_Shifted(index, shift)
        )
        runs.append((resume, resume_offset, res, index))
        if res.problem is None:
            break
        pos, off = res.position, res.next_offset
        first_problem, first_detail = res.problem, res.detail
    kept: list[Loss] = []
    for loss in losses:
        copy = None
        if loss.reason == "corrupt" and loss.end_position > loss.position:
            copy = copy_to_quarantine(seg.path, fd, loss.position, loss.end_position)
        kept.append(
            Loss(
                loss.position,
                loss.offset,
                loss.end_position,
                loss.end_offset,
                loss.reason,
                loss.detail,
                copy,
            )
        )
    made: list[Segment] = []
    directory = seg.path.parent
    for resume, resume_offset, res, index in runs:
        made.append(_write_run(directory, fd, resume, resume_offset, res, index))
    if made:
        fsync_directory(directory)
    os.ftruncate(fd, position)
    os.fsync(fd)
    return kept, made


def _write_run(
    directory: Path, src: int, start: int, base: int, res: ScanResult, index: SparseIndex
) -> Segment:
    """The segment holding bytes ``[start, res.position)`` of ``src`` (records from
    ``base``), written under a temporary name, fsynced and renamed into place."""
    seg = Segment(directory, base, index.interval)
    tmp = seg.path.with_name(seg.path.name + SALVAGE_SUFFIX)
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        write_all(out, encode_segment_header(base), 0)
        copy_range(src, start, res.position, out, SEGMENT_HEADER_SIZE)
        os.fsync(out)
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(out)
    if seg.path.exists():  # a crash before the cut left an earlier copy of it: set it aside
        move_to_quarantine(seg.path)
    os.rename(tmp, seg.path)
    seg.size = SEGMENT_HEADER_SIZE + res.position - start
    seg.next_offset = res.next_offset
    seg.index = index
    _write_index(seg)
    return seg


@dataclass(slots=True)
class SegmentRecovery:
    """What recovering one segment found (the partition log turns it into a report)."""

    scanned: int = 0
    losses: list[Loss] = field(default_factory=list)
    salvaged: list[Segment] = field(default_factory=list)
    """Segments made of the intact records found after damage (see :func:`salvage`)."""
    header_replaced: Path | None = None
    """Where the quarantined copy of a bad segment header went (the records were kept)."""
    dropped: int = 0
    index_rebuilt: bool = False
    index_repaired: bool = False
    quarantined: list[Path] = field(default_factory=list)


def holds_records(path: Path, base: int, max_length: int) -> bool:
    """Whether the segment file holds at least one intact record at or after ``base``
    (read only: a file that holds none is set aside whole, not taken apart)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        end = os.fstat(fd).st_size
        start = SEGMENT_HEADER_SIZE
        if record_intact(fd, start, end, base, max_length):
            return True
        return end > start and resync(fd, start, end, base, max_length=max_length) is not None
    finally:
        os.close(fd)


def recover_segment(seg: Segment, *, max_length: int, full: bool) -> SegmentRecovery:
    """Find the valid records of ``seg``'s log, set aside what is damaged, repair its index.

    Only the part after the last *verified* index entry is scanned (a record there must sit
    at its position with its offset and a good CRC), unless ``full``: then every record is
    checked and the index is rebuilt from scratch. A torn tail (an interrupted write) is
    cut. A corrupt record does not cost the intact records after it: :func:`salvage` keeps
    them as segments of their own, the damaged bytes go to the quarantine. A bad segment
    header is copied to the quarantine and rewritten, and the records are checked one by
    one (they carry their own offsets and CRCs).
    """
    result = SegmentRecovery()
    fd = os.open(seg.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        file_size = os.fstat(fd).st_size
        header = os.pread(fd, SEGMENT_HEADER_SIZE, 0)
        if not segment_header_ok(header, seg.base):
            expected = encode_segment_header(seg.base)
            if file_size < SEGMENT_HEADER_SIZE and expected.startswith(header):
                result.losses.append(
                    Loss(0, seg.base, file_size, None, "torn", "segment header cut short", None)
                )
                result.dropped = file_size
                os.ftruncate(fd, 0)
                write_all(fd, expected, 0)
                seg.size = SEGMENT_HEADER_SIZE
                seg.next_offset = seg.base
                result.index_repaired = _reset_index(seg)
                return result
            copy = copy_to_quarantine(seg.path, fd, 0, min(file_size, SEGMENT_HEADER_SIZE))
            result.header_replaced = copy
            result.quarantined.append(copy)
            if file_size < SEGMENT_HEADER_SIZE:
                os.ftruncate(fd, 0)
                file_size = SEGMENT_HEADER_SIZE
            write_all(fd, expected, 0)
            full = True

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
            if record_intact(fd, pos, file_size, off, max_length):
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
            result.dropped = file_size - res.position
            if all_zero(fd, res.position, file_size):
                result.losses.append(
                    Loss(
                        res.position,
                        res.next_offset,
                        file_size,
                        None,
                        "torn",
                        "zero-filled tail",
                        None,
                    )
                )
                os.ftruncate(fd, res.position)
            else:
                losses, made = salvage(
                    seg,
                    fd,
                    res.position,
                    res.next_offset,
                    res.problem,
                    res.detail,
                    file_size,
                    max_length=max_length,
                )
                result.losses += losses
                result.salvaged = made
                result.quarantined += [x.quarantined for x in losses if x.quarantined]
                result.dropped = sum(x.end_position - x.position for x in losses)
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


def fsync_directory(path: Path) -> None:
    """Make a directory's entries (new or removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "SALVAGE_SUFFIX",
    "Loss",
    "Segment",
    "SegmentRecovery",
    "fsync_directory",
    "holds_records",
    "recover_segment",
    "salvage",
    "write_all",
]
