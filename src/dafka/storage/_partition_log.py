"""The log of one (topic, partition): a run of segments holding one contiguous offset range.

Invariant: the records held are exactly ``[start_offset, next_offset)``, each intact. Every
repair keeps it: a torn or corrupt record cuts the log there (it and every later offset go,
later segments included; only bytes trailing the last record of a segment that the next
segment continues exactly are trimmed alone), retention removes whole segments from the
front only, and appends must continue at ``next_offset``. So a read never has to skip
anything and can never serve a record past a gap.
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add as _add
from pathlib import Path

from crc32c import crc32c

from dafka.storage._config import RetentionPolicy, StorageConfig
from dafka.storage._errors import (
    GapAppendError,
    InvalidArgumentError,
    OverlapAppendError,
    StorageIOError,
)
from dafka.storage._format import (
    CRC,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_OFFSET,
    OFFSET_LENGTH,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    Payload,
    encode_run,
    parse_segment_stem,
    scan,
)
from dafka.storage._index import SparseIndex
from dafka.storage._naming import NAME_FILE, is_long_form, write_name_file
from dafka.storage._quarantine import copy_to_quarantine, move_to_quarantine
from dafka.storage._report import RecoveryReport, Truncation
from dafka.storage._segment import Segment, recover_segment, write_all

_READ_CHUNK_MIN = 64 * 1024
_READ_CHUNK_MAX = 4 * 1024 * 1024


def fsync_directory(path: Path) -> None:
    """Make a directory's entries (new or removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionLog:
    """Append, read, recover, repair and trim the log of one partition.

    Not thread-safe: the store drives it from one event loop. ``durable`` is the last offset
    known to be on stable storage (None if none is); the owning :class:`Storage` decides when
    to :meth:`sync` according to its fsync policy.
    """

    def __init__(self, directory: Path, topic: str, partition: str, config: StorageConfig) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.durable: int | None = None
        self.unsynced = 0  # records written since the last sync (for the records trigger)
        self.needs_fsync = False  # bytes written since the last fdatasync
        self.unsynced_closed: list[Path] = []  # rolled under the "os" policy, not yet synced
        self.dir_dirty = False  # segment files created or removed since the last sync
        self._new_dirs = False  # the partition (and maybe topic) directory is new too
        self.truncations: list[Truncation] = []  # found by reads, taken by the Storage

    # ---------------------------------------------------------------- state

    @property
    def start_offset(self) -> int:
        return self.segments[0].base

    @property
    def next_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def head(self) -> int | None:
        """The last offset held, or None when the log is empty."""
        nxt = self.segments[-1].next_offset
        return nxt - 1 if nxt > self.segments[0].base else None

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self.segments)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # ---------------------------------------------------------------- open / create

    @classmethod
    def create(
        cls, directory: Path, topic: str, partition: str, config: StorageConfig, base: int
    ) -> PartitionLog:
        """A new partition directory with one empty segment based at ``base``."""
        created = not directory.exists()
        for path, name in ((directory.parent, topic), (directory, partition)):
            path.mkdir(exist_ok=True)
            if is_long_form(path.name) and not (path / NAME_FILE).exists():
                write_name_file(path, name)
        log = cls(directory, topic, partition, config)
        log._add_segment(Segment.create(directory, base, config.index_interval_bytes))
        log.dir_dirty = True
        log._new_dirs = created
        return log

    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: str,
        config: StorageConfig,
        report: RecoveryReport,
    ) -> PartitionLog | None:
        """Recover an existing partition directory; None if it holds no segment at all."""
        bases: list[int] = []
        index_bases: set[int] = set()
        for entry in directory.iterdir():
            name = entry.name
            if name.startswith(".") and not name.startswith(".name"):
                report.skipped.append(entry)
                continue
            if name.startswith(".name"):
                continue
            base = parse_segment_stem(name[: -len(LOG_SUFFIX)]) if len(name) == 24 else None
            if base is not None and name.endswith(LOG_SUFFIX):
                bases.append(base)
            elif base is not None and name.endswith(INDEX_SUFFIX):
                index_bases.add(base)
            else:
                report.skipped.append(entry)
        bases.sort()
        log = cls(directory, topic, partition, config)
        for base in index_bases.difference(bases):
            orphan = directory / (f"{base:020d}" + INDEX_SUFFIX)
            orphan.unlink()
            report.removed.append(orphan)
            log.dir_dirty = True
        if not bases:
            return None
        full = config.verify_on_open
        interval = config.index_interval_bytes
        for i, base in enumerate(bases):
            seg = Segment(directory, base, interval)
            if log.segments and base != log.next_offset:
                detail = f"segment starts at {base}, previous ends before {log.next_offset}"
                log._drop_from(i, bases, report, detail)
                break
            rec = recover_segment(seg, max_length=config.max_record_bytes, full=full)
            log._add_segment(seg)
            report.segments += 1
            report.records += seg.records
            report.bytes_scanned += rec.scanned
            report.quarantined += rec.quarantined
            if rec.index_rebuilt:
                report.indexes_rebuilt.append(seg.index_path)
            elif rec.index_repaired:
                report.indexes_repaired.append(seg.index_path)
            if rec.problem is not None:
                # Later segments survive only if they still continue this one exactly (the
                # cut removed trailing garbage); otherwise the next turn drops them as a gap.
                report.truncations.append(
                    Truncation(
                        topic,
                        partition,
                        seg.path,
                        rec.problem.position,
                        rec.problem.next_offset,
                        rec.problem.problem or "corrupt",
                        rec.problem.detail,
                        rec.dropped,
                        quarantined=tuple(rec.quarantined),
                    )
                )
        log.active.open_files()
        return log

    def _drop_from(self, i: int, bases: list[int], report: RecoveryReport, detail: str) -> None:
        """Segments ``bases[i:]`` do not continue the log: move them to the quarantine."""
        seg_path = self.directory / (f"{bases[i]:020d}" + LOG_SUFFIX)
        dropped = sum(_file_size(self.directory, b) for b in bases[i:])
        moved = self._quarantine_files(bases[i:])
        report.quarantined += moved
        report.truncations.append(
            Truncation(
                self.topic,
                self.partition,
                seg_path,
                0,
                self.next_offset,
                "gap",
                f"{detail}; {len(bases) - i} segment(s) dropped",
                dropped,
                quarantined=tuple(moved),
            )
        )

    def _quarantine_files(self, bases: Sequence[int]) -> list[Path]:
        moved: list[Path] = []
        for base in bases:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
                path = self.directory / (f"{base:020d}" + suffix)
                try:
                    moved.append(move_to_quarantine(path))
                except FileNotFoundError:
                    continue
                self.dir_dirty = True
        return moved

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self.bases.append(seg.base)

    # ---------------------------------------------------------------- append

    def append(self, first_offset: int, payloads: Sequence[Payload]) -> int:
        """Write ``payloads`` at ``first_offset, first_offset + 1, ...``; one write per segment.

        Refuses (writing nothing) a batch that does not start at :attr:`next_offset`, except
        that an empty log accepts any start when ``config.first_offset`` is None. Payloads
        are ``bytes``-like; anything else raises :class:`InvalidArgumentError` (a batch that
        crossed a segment boundary before the bad payload keeps the part already written).
        """
        count = len(payloads)
        expected = self.next_offset
        rebase = False
        if first_offset != expected:
            if self.head is None and self.config.first_offset is None and first_offset >= 0:
                rebase = True
            elif first_offset > expected:
                raise GapAppendError(self.topic, self.partition, expected, first_offset)
            else:
                raise OverlapAppendError(self.topic, self.partition, expected, first_offset)
        if count == 0:
            return first_offset - 1
        if first_offset + count - 1 > MAX_OFFSET:
            raise InvalidArgumentError(f"offsets past 2**64 - 1 ({first_offset} + {count})")
        max_len = self.config.max_record_bytes
        try:
            lengths = list(map(len, payloads))
        except TypeError:
            raise InvalidArgumentError("payloads must be bytes-like objects") from None
        longest = max(lengths)
        if longest > max_len:
            raise InvalidArgumentError(
                f"payload of {longest} bytes over max_record_bytes {max_len}"
            )
        if rebase:
            self._rebase(first_offset)

        limit = self.config.segment_bytes
        seg = self.segments[-1]
        index = seg.index
        pos = seg.size
        # Where each record starts, and (last) where the run ends.
        starts = list(accumulate(map(_add, lengths, repeat(RECORD_HEADER_SIZE)), initial=pos))
        end = starts.pop()
        if end <= limit:  # the whole run fits the segment: one encode_run, one write
            try:
                parts = encode_run(first_offset, payloads, lengths)
            except TypeError:  # a str or other non-buffer payload: nothing is written
                raise InvalidArgumentError("payloads must be bytes-like objects") from None
            index.offer_run(first_offset, starts)
            self._write(seg, parts, end, first_offset + count)
            self._after_append(seg)
            return first_offset + count - 1
        return self._append_across(first_offset, payloads)

    def _append_across(self, first_offset: int, payloads: Sequence[Payload]) -> int:
        """``append`` of a run that crosses a segment boundary, record by record."""
        limit = self.config.segment_bytes
        seg = self.segments[-1]
        index = seg.index
        interval = index.interval
        pos = seg.size
        offset = first_offset
        pack = OFFSET_LENGTH.pack
        pack_crc = CRC.pack
        parts: list[Payload] = []
        add = parts.append
        try:
            for payload in payloads:
                length = len(payload)
                record_size = RECORD_HEADER_SIZE + length
                if pos + record_size > limit and pos > SEGMENT_HEADER_SIZE:
                    self._write(seg, parts, pos, offset)
                    seg = self._roll()
                    index = seg.index
                    pos = seg.size
                    parts = []
                    add = parts.append
                head = pack(offset, length)
                add(head)
                add(pack_crc(crc32c(payload, crc32c(head))))
                add(payload)
                if pos - index.last_position >= interval:
                    index.offer(offset, pos)
                pos += record_size
                offset += 1
        except TypeError:  # a str or other non-buffer payload: nothing of this part is written
            index.truncate_at(seg.size)
            raise InvalidArgumentError("payloads must be bytes-like objects") from None
        self._write(seg, parts, pos, offset)
        self._after_append(seg)
        return offset - 1

    def _after_append(self, seg: Segment) -> None:
        index = seg.index
        if index.pending() >= self.config.index_flush_entries:
            # The records are written: a failing index write (a full disk) must not make
            # the append look failed. The entries stay pending for the next flush, and a
            # short index only makes the next open scan a longer tail.
            with contextlib.suppress(StorageIOError):
                self._flush_index(seg)

    def _write(self, seg: Segment, parts: list[Payload], end: int, next_offset: int) -> None:
        if not parts:
            return
        try:
            write_all(seg.fd, b"".join(parts), seg.size)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(seg.fd, seg.size)
            seg.index.truncate_at(seg.size)
            raise StorageIOError(f"append to {seg.path} failed: {exc}") from exc
        self.unsynced += next_offset - seg.next_offset
        self.needs_fsync = True
        seg.size = end
        seg.next_offset = next_offset

    def _flush_index(self, seg: Segment) -> None:
        try:
            seg.index.flush(seg.index_fd)
        except OSError as exc:  # the index is only an accelerator: rebuilt at next open
            raise StorageIOError(f"index write to {seg.index_path} failed: {exc}") from exc

    def _roll(self) -> Segment:
        """Close the active segment (synced, unless the policy is "os") and start the next."""
        old = self.segments[-1]
        try:
            if not self.config.fsync.is_os and self.needs_fsync:
                os.fdatasync(old.fd)
                self._sync_directories()  # the old segment's own entry may be new too
                self.durable = old.next_offset - 1
                self.unsynced = 0
                self.needs_fsync = False
            elif self.needs_fsync:
                self.unsynced_closed.append(old.path)
            # Create the next segment before closing this one: if the disk is full, the log
            # stays as it was (this segment active, nothing half made) and can roll later.
            seg = Segment.create(self.directory, old.next_offset, self.config.index_interval_bytes)
            with contextlib.suppress(OSError):  # a short index is repaired at the next open
                old.close_files()
        except OSError as exc:
            raise StorageIOError(f"rolling {old.path} failed: {exc}") from exc
        self._add_segment(seg)
        self.dir_dirty = True
        return seg

    def _rebase(self, base: int) -> None:
        """Replace the empty log by one empty segment at ``base`` (mid-stream start)."""
        try:
            for seg in self.segments:
                seg.delete()
            self.segments.clear()
            self.bases.clear()
            seg = Segment.create(self.directory, base, self.config.index_interval_bytes)
        except OSError as exc:
            raise StorageIOError(f"restarting {self.directory} at {base} failed: {exc}") from exc
        self._add_segment(seg)
        self.dir_dirty = True
        self.durable = None

    # ---------------------------------------------------------------- durability

    def sync(self, *, force: bool = False) -> None:
        """fsync the active segment (and the directory if files came or went): all durable.

        ``force`` syncs even with nothing written since the last sync (after recovery: a
        crashed writer's last records may still be only in the page cache).
        """
        seg = self.segments[-1]
        try:
            for path in self.unsynced_closed:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:  # removed by retention or a cut meanwhile
                    continue
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            self.unsynced_closed.clear()
            if self.needs_fsync or force:
                os.fdatasync(seg.fd)
            self._sync_directories()
        except OSError as exc:
            raise StorageIOError(f"fsync of {seg.path} failed: {exc}") from exc
        self.unsynced = 0
        self.needs_fsync = False
        self.durable = self.head

    def _sync_directories(self) -> None:
        if self.dir_dirty:
            fsync_directory(self.directory)
            if self._new_dirs:
                fsync_directory(self.directory.parent)
                fsync_directory(self.directory.parent.parent)
                self._new_dirs = False
            self.dir_dirty = False

    def mark_written_durable(self) -> None:
        """The "os" policy: what ``write`` accepted counts as durable."""
        self.unsynced = 0
        self.durable = self.head

    # ---------------------------------------------------------------- read

    def read(self, from_offset: int, count: int) -> list[tuple[int, bytes]]:
        """The records held in ``[from_offset, from_offset + count)``, in order, contiguous."""
        out: list[tuple[int, bytes]] = []
        self._read(from_offset, count, out, None)
        return out

    def read_contents(self, from_offset: int, count: int) -> tuple[int, list[bytes]]:
        """As :meth:`read`: the offset of the first record held there and the payloads."""
        contents: list[bytes] = []
        first = self._read(from_offset, count, None, contents)
        return first, contents

    def _read(
        self,
        from_offset: int,
        count: int,
        out: list[tuple[int, bytes]] | None,
        contents: list[bytes] | None,
    ) -> int:
        """Scan ``[from_offset, from_offset + count)`` into ``out`` / ``contents``; returns
        the offset of the first record held there (what was appended starts there)."""
        start = first = max(from_offset, self.segments[0].base)
        stop = min(from_offset + count, self.next_offset)
        i = bisect_right(self.bases, start) - 1
        max_len = self.config.max_record_bytes
        while start < stop and i < len(self.segments):
            seg = self.segments[i]
            off, pos = seg.index.floor(start)
            wanted = (min(stop, seg.next_offset) - off) * seg.average_record()
            chunk = int(min(_READ_CHUNK_MAX, max(_READ_CHUNK_MIN, wanted * 1.1 + 64)))
            try:
                fd, close = seg.read_fd()
                try:
                    res = scan(
                        fd,
                        pos,
                        seg.size,
                        off,
                        max_length=max_len,
                        stop_offset=stop,
                        want_from=start,
                        out=out,
                        contents=contents,
                        chunk=chunk,
                    )
                    if (
                        res.problem is not None
                        and res.position == pos
                        and pos > SEGMENT_HEADER_SIZE
                    ):
                        # The index entry may be the bad part: walk from the segment's start.
                        res = scan(
                            fd,
                            SEGMENT_HEADER_SIZE,
                            seg.size,
                            seg.base,
                            max_length=max_len,
                            stop_offset=stop,
                            want_from=start,
                            out=out,
                            contents=contents,
                            chunk=chunk,
                        )
                        if res.problem is None or res.position > pos:
                            self._reindex(seg, fd)
                finally:
                    if close:
                        os.close(fd)
            except OSError as exc:
                raise StorageIOError(f"read of {seg.path} failed: {exc}") from exc
            if res.problem is not None:
                self.truncations.append(
                    self._cut(i, res.position, res.next_offset, res.problem, res.detail)
                )
                break
            start = res.next_offset
            i += 1
        return first

    def _reindex(self, seg: Segment, fd: int) -> None:
        index = SparseIndex(seg.base, seg.index.interval)
        scan(
            fd,
            SEGMENT_HEADER_SIZE,
            seg.size,
            seg.base,
            max_length=self.config.max_record_bytes,
            index=index,
        )
        seg.index = index  # entries stop at a bad record, if any: the caller cuts there
        seg.rewrite_index()

    def verify(self) -> Truncation | None:
        """CRC-check every record; cut the log at the first bad one (returned)."""
        max_len = self.config.max_record_bytes
        for i, seg in enumerate(self.segments):
            try:
                fd, close = seg.read_fd()
                try:
                    res = scan(fd, SEGMENT_HEADER_SIZE, seg.size, seg.base, max_length=max_len)
                finally:
                    if close:
                        os.close(fd)
            except OSError as exc:
                raise StorageIOError(f"verify of {seg.path} failed: {exc}") from exc
            if res.problem is not None:
                return self._cut(i, res.position, res.next_offset, res.problem, res.detail)
        return None

    def _cut(self, i: int, position: int, next_offset: int, reason: str, detail: str) -> Truncation:
        """Keep only what precedes ``position`` of segment ``i``: never serve past a gap.

        What is cut goes to the quarantine first: the later segments are moved there, the
        segment's tail from ``position`` is copied there (fsynced) before the truncation.
        """
        seg = self.segments[i]
        dropped = seg.size - position + sum(s.size for s in self.segments[i + 1 :])
        end_offset = self.next_offset
        moved: list[Path] = []
        try:
            seg.open_files()
            if seg.size > position:
                moved.append(copy_to_quarantine(seg.path, seg.fd, position, seg.size))
            later = self.segments[i + 1 :]
            for other in later:
                other.close_files()
            moved += self._quarantine_files([s.base for s in later])
            del self.segments[i + 1 :]
            del self.bases[i + 1 :]
            seg.truncate(position, next_offset)
            if not self.config.fsync.is_os:
                os.fdatasync(seg.fd)
                fsync_directory(self.directory)
        except OSError as exc:
            raise StorageIOError(f"cutting {seg.path} at {position} failed: {exc}") from exc
        head = self.head
        if self.durable is not None and (head is None or self.durable > head):
            self.durable = head
        return Truncation(
            self.topic,
            self.partition,
            seg.path,
            position,
            next_offset,
            "corrupt" if reason == "corrupt" else "torn",
            detail,
            dropped,
            end_offset,
            tuple(moved),
        )

    # ---------------------------------------------------------------- retention

    def apply_retention(self, policy: RetentionPolicy, now_wall: float) -> list[Path]:
        """Delete whole closed segments from the front while the policy says so."""
        removed: list[Path] = []
        total = self.size_bytes
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_big = policy.max_bytes is not None and total > policy.max_bytes
            too_old = False
            if not too_big and policy.max_age_s is not None:
                try:
                    too_old = seg.path.stat().st_mtime < now_wall - policy.max_age_s
                except FileNotFoundError:
                    too_old = True
            if not (too_big or too_old):
                break
            seg.delete()
            removed.append(seg.path)
            total -= seg.size
            del self.segments[0]
            del self.bases[0]
            self.dir_dirty = True
        return removed

    # ---------------------------------------------------------------- close

    def close(self) -> None:
        """Close every descriptor. A failing index write (a full disk) is not an error:
        the index only speeds reads up, and the next open repairs a short one."""
        for seg in self.segments:
            with contextlib.suppress(OSError):
                seg.close_files()


def _file_size(directory: Path, base: int) -> int:
    try:
        return (directory / (f"{base:020d}" + LOG_SUFFIX)).stat().st_size
    except FileNotFoundError:
        return 0


__all__ = ["PartitionLog", "fsync_directory"]
