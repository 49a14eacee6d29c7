"""The log of one (topic, partition): a run of segments, each a contiguous run of intact records.

Invariant: every segment holds exactly ``[base, next_offset)``, each record intact, and the
segments are in offset order without overlap. Between two segments there may be a *hole*:
offsets that no segment holds (:meth:`PartitionLog.holes`). Holes come from damage: a
corrupt record costs exactly itself (``_segment.salvage`` keeps the intact records after it
as a segment of their own, the damaged bytes go to the quarantine), and a segment file that
is missing leaves its range out. A store fills a hole with what its peers still hold
(:meth:`PartitionLog.fill`) or records one that no peer can fill (:meth:`PartitionLog.append`
with ``after_gap``). Appends continue at ``next_offset``; retention removes whole segments
from the front. A read returns what is held (contiguous runs, never a record that is not
there) and reports every damage it meets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import zlib
from bisect import bisect_left, bisect_right
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
    SCAN_CHUNK,
    SEGMENT_HEADER_SIZE,
    Payload,
    Problem,
    all_zero,
    encode_record,
    encode_run,
    parse_segment_stem,
    pread_all,
    scan,
)
from dafka.storage._index import SparseIndex
from dafka.storage._naming import NAME_FILE, is_long_form, write_name_file
from dafka.storage._quarantine import copy_to_quarantine, move_to_quarantine
from dafka.storage._report import RecoveryReport, Truncation
from dafka.storage._segment import (
    SALVAGE_SUFFIX,
    Loss,
    Segment,
    SegmentRecovery,
    fsync_directory,
    holds_records,
    recover_segment,
    salvage,
    write_all,
)


@dataclasses.dataclass(frozen=True, slots=True)
class ScrubPosition:
    """Where a scrub of a log goes on: byte ``position`` of the segment based at ``base``,
    which holds ``offset``, as of the log's ``generation``."""

    base: int
    position: int
    offset: int
    generation: int = -1


_READ_CHUNK_MIN = 64 * 1024
_READ_CHUNK_MAX = 4 * 1024 * 1024
_SCRUB_READ_MARGIN = 4096
SCRUB_MEMO_STRETCHES = 8192
"""Stretches a :class:`ScrubMemo` keeps at most (~400 bytes each: ~3 MiB, ~850 MB of log at
the default rate's ~100 KB steps; the rest of a larger store is checked record by record)."""

MemoKey = tuple[str, str, int, int]
"""(topic, partition, segment base, byte position)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stretch:
    """Records the scrub found intact: from byte ``position`` (holding ``offset``) of a
    segment to ``end`` (holding ``end_offset``), whose bytes had ``digest``."""

    generation: int
    offset: int
    end: int
    end_offset: int
    digest: int


def stretch_digest(data: bytes | memoryview) -> int:
    """CRC-32C and CRC-32 (IEEE) of ``data``, as one 64-bit number: two CRCs of different
    polynomials, so that bytes changed since are missed with a chance of ~2**-64 (a record's
    own CRC-32C: ~2**-32), and every change of up to 32 bits in a row is seen by each.
    Hardware CRC-32C and zlib's CRC-32: ~20 us per 100 KB."""
    return (crc32c(data) << 32) | zlib.crc32(data)


class ScrubMemo:
    """What the scrub found intact, by the digest of its bytes: a stretch whose bytes are
    unchanged (the same digest, read again) is intact again without a check per record -
    its records' offsets, lengths and CRCs are in those very bytes, and the stretch starts
    where the same offset is expected. Bounded: at most ``capacity`` stretches (more are
    not kept); :meth:`purge` drops those of logs gone or changed."""

    def __init__(self, capacity: int = SCRUB_MEMO_STRETCHES) -> None:
        self.capacity = capacity
        self.stretches: dict[MemoKey, Stretch] = {}
        self.unchanged = 0
        """Bytes found unchanged (intact by their digest) so far."""

    def __len__(self) -> int:
        return len(self.stretches)

    def keep(self, key: MemoKey, stretch: Stretch) -> None:
        if key in self.stretches or len(self.stretches) < self.capacity:
            self.stretches[key] = stretch

    def purge(self, generations: dict[tuple[str, str], int]) -> None:
        """Drop the stretches of logs not in ``generations`` (topic, partition) -> the
        log's :attr:`PartitionLog.generation`, or of another generation (segments removed,
        cut or replaced since)."""
        stale = [
            key
            for key, stretch in self.stretches.items()
            if generations.get(key[:2]) != stretch.generation
        ]
        for key in stale:
            del self.stretches[key]


"""A scrub step reads about its budget (and this much more, for the record that crosses its
end), not ``SCAN_CHUNK``: a step of ~100 KB read (copied, and faulted in) 1 MiB, ~10 % of its
CPU."""


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
        self.generation = 0
        """Bumped whenever segments are removed, replaced or cut (not by appends): a scrub
        position taken before is not trusted after."""

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
        """Recover an existing partition directory; None if it holds no segment at all.

        Each segment is recovered (``_segment.recover_segment``: tails only, unless
        ``verify_on_open``); the intact records found after damage become segments of
        their own. A segment that starts after the previous one ends leaves a hole (kept,
        reported as ``"gap"``) if it holds records; an empty one there, or one that
        overlaps the previous segment, is moved to the quarantine (``"gap"``). An overlap is
        what a crash in the middle of a salvage leaves: the previous segment is then checked
        whole first, which finishes the salvage.
        """
        bases: list[int] = []
        index_bases: set[int] = set()
        log = cls(directory, topic, partition, config)
        for entry in directory.iterdir():
            name = entry.name
            if name.endswith(LOG_SUFFIX + SALVAGE_SUFFIX):
                entry.unlink()  # a salvage interrupted before its rename: redone below
                report.removed.append(entry)
                log.dir_dirty = True
                continue
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
        for base in index_bases.difference(bases):
            orphan = directory / (f"{base:020d}" + INDEX_SUFFIX)
            orphan.unlink()
            report.removed.append(orphan)
            log.dir_dirty = True
        if not bases:
            return None
        full = config.verify_on_open
        interval = config.index_interval_bytes
        max_length = config.max_record_bytes
        rechecked: set[int] = set()
        tail_lost = False  # the last segment recovered lost its tail (reported as such)
        for base in bases:
            if base in log.bases:
                continue  # written again by a salvage finished above
            if log.segments and base < log.next_offset and log.active.base not in rechecked:
                prev = log._remove_last()  # an interrupted salvage: check it whole
                rechecked.add(prev.base)
                report.segments -= 1
                report.records -= prev.records
                tail_lost = log._recover(prev, full=True, report=report)
                if base in log.bases:
                    continue
            if log.segments and base < log.next_offset:
                ends = log.next_offset
                detail = f"segment starts at {base}, inside the previous one (ends {ends})"
                log._drop_segment(base, report, detail)
                continue
            held = log.next_offset if log.segments else base
            seg = Segment(directory, base, interval)
            if base > held and not holds_records(seg.path, base, max_length):
                detail = f"segment starts at {base}, after a gap from {held}, and holds nothing"
                log._drop_segment(base, report, detail)
                continue
            rec = recover_segment(seg, max_length=max_length, full=full)
            if base > held and not tail_lost:
                report.truncations.append(
                    Truncation(
                        topic,
                        partition,
                        seg.path,
                        0,
                        held,
                        "gap",
                        f"no segment holds offsets {held}..{base - 1} (a hole; the "
                        "records after it are kept)",
                        0,
                        base,
                        (),
                        base,
                    )
                )
            tail_lost = log._adopt(seg, rec, report)
        # The active segment's descriptors open on the first write or sync that needs them
        # (``_open_active``): a store with many partitions holds none for the idle ones.
        return log

    def _recover(self, seg: Segment, *, full: bool, report: RecoveryReport) -> bool:
        rec = recover_segment(seg, max_length=self.config.max_record_bytes, full=full)
        return self._adopt(seg, rec, report)

    def _adopt(self, seg: Segment, rec: SegmentRecovery, report: RecoveryReport) -> bool:
        """Add a recovered segment (and what its salvage made) and report what happened;
        whether it lost its tail (records up to an end nothing intact tells)."""
        self._add_segment(seg)
        for made in rec.salvaged:
            self._add_segment(made)
        for added in (seg, *rec.salvaged):
            report.segments += 1
            report.records += added.records
        report.bytes_scanned += rec.scanned
        report.quarantined += rec.quarantined
        if rec.index_rebuilt:
            report.indexes_rebuilt.append(seg.index_path)
        elif rec.index_repaired:
            report.indexes_repaired.append(seg.index_path)
        if rec.header_replaced is not None:
            report.truncations.append(
                Truncation(
                    self.topic,
                    self.partition,
                    seg.path,
                    0,
                    seg.base,
                    "corrupt",
                    "bad segment header (set aside and rewritten; every record checked)",
                    SEGMENT_HEADER_SIZE,
                    seg.base,
                    (rec.header_replaced,),
                    seg.base,
                )
            )
        for loss in rec.losses:
            report.truncations.append(self._truncation(seg, loss, loss.end_offset))
        return bool(rec.losses) and rec.losses[-1].end_offset is None

    def _truncation(self, seg: Segment, loss: Loss, end_offset: int | None) -> Truncation:
        """The report of ``loss`` in ``seg``; ``end_offset``: where the records lost end, if
        known (intact records resume there when the loss has an ``end_offset`` of its own)."""
        return Truncation(
            self.topic,
            self.partition,
            seg.path,
            loss.position,
            loss.offset,
            loss.reason,
            loss.detail,
            loss.end_position - loss.position,
            end_offset,
            (loss.quarantined,) if loss.quarantined is not None else (),
            loss.end_offset,
        )

    def _remove_last(self) -> Segment:
        seg = self.segments.pop()
        self.bases.pop()
        return seg

    def _drop_segment(self, base: int, report: RecoveryReport, detail: str) -> None:
        """The segment file ``base`` cannot be part of the log: move it to the quarantine."""
        seg_path = self.directory / (f"{base:020d}" + LOG_SUFFIX)
        dropped = _file_size(self.directory, base)
        moved = self._quarantine_files([base])
        report.quarantined += moved
        report.truncations.append(
            Truncation(
                self.topic,
                self.partition,
                seg_path,
                0,
                base,
                "gap",
                f"{detail}; the segment was set aside",
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

    def append(
        self, first_offset: int, payloads: Sequence[Payload], *, after_gap: bool = False
    ) -> int:
        """Write ``payloads`` at ``first_offset, first_offset + 1, ...``; one write per segment.

        Refuses (writing nothing) a batch that does not start at :attr:`next_offset`, except
        that an empty log accepts any start when ``config.first_offset`` is None, and that
        ``after_gap`` accepts a later start: the offsets in between are gone (no peer holds
        them) and become a hole (the log continues in a new segment). Payloads are
        ``bytes``-like; anything else raises :class:`InvalidArgumentError` (a batch that
        crossed a segment boundary before the bad payload keeps the part already written).
        """
        count = len(payloads)
        expected = self.next_offset
        rebase = False
        skip = False
        if first_offset != expected:
            if self.head is None and self.config.first_offset is None and first_offset >= 0:
                rebase = True
            elif first_offset > expected and after_gap and count:
                skip = True
            elif first_offset > expected:
                raise GapAppendError(self.topic, self.partition, expected, first_offset)
            else:
                raise OverlapAppendError(self.topic, self.partition, expected, first_offset)
        if count == 0:
            return first_offset - 1
        self._open_active()
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
        elif skip:
            self._skip_to(first_offset)

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

    def _roll(self, base: int | None = None) -> Segment:
        """Close the active segment (synced, unless the policy is "os") and start the next
        (at ``base``: after a hole; default: where the active one ends)."""
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
            start = old.next_offset if base is None else base
            seg = Segment.create(self.directory, start, self.config.index_interval_bytes)
            with contextlib.suppress(OSError):  # a short index is repaired at the next open
                old.close_files()
        except OSError as exc:
            raise StorageIOError(f"rolling {old.path} failed: {exc}") from exc
        self._add_segment(seg)
        self.dir_dirty = True
        return seg

    def _skip_to(self, offset: int) -> None:
        """Continue the log at ``offset``: ``[next_offset, offset)`` becomes a hole."""
        self.generation += 1
        active = self.segments[-1]
        if active.records or len(self.segments) == 1:
            if not active.records:
                self._rebase(offset)  # nothing held: the log simply starts there
                return
            self._roll(offset)
            return
        # an empty active segment after others: replace it by one at ``offset``
        try:
            seg = Segment.create(self.directory, offset, self.config.index_interval_bytes)
            active.delete()
        except OSError as exc:
            raise StorageIOError(f"continuing {self.directory} at {offset} failed: {exc}") from exc
        self._remove_last()
        self._add_segment(seg)
        self.dir_dirty = True

    def _rebase(self, base: int) -> None:
        """Replace the empty log by one empty segment at ``base`` (mid-stream start)."""
        self.generation += 1
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
                seg.open_files()
                os.fdatasync(seg.fd)
            self._sync_directories()
        except OSError as exc:
            raise StorageIOError(f"fsync of {seg.path} failed: {exc}") from exc
        self.unsynced = 0
        self.needs_fsync = False
        self.durable = self.head

    def _open_active(self) -> None:
        """Open the active segment's two descriptors if :meth:`release_files` closed them."""
        seg = self.segments[-1]
        if seg.fd >= 0 and seg.index_fd >= 0:
            return
        try:
            seg.open_files()
        except OSError as exc:
            raise StorageIOError(f"cannot open {seg.path}: {exc}") from exc

    @property
    def holds_files(self) -> bool:
        """Whether the active segment's descriptors are open."""
        return self.segments[-1].is_open

    def release_files(self) -> None:
        """Close the active segment's descriptors: the :class:`Storage` keeps only the most
        recently written partitions open (``StorageConfig.max_open_partitions``), so that a
        store with many partitions does not hold two descriptors per idle one. Written
        records are fsynced first (unless the policy is "os"), as at a roll: a descriptor
        opened later would not be told of a write-back error seen by this one. The next
        append or sync reopens them; reads never needed them."""
        if not self.holds_files:
            return
        if self.needs_fsync and not self.config.fsync.is_os:
            self.sync()
        with contextlib.suppress(OSError):  # a short index is repaired at the next open
            self.segments[-1].close_files()

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

    # ---------------------------------------------------------------- holes

    def supersede(self, first: int) -> list[Path]:
        """End the log before ``first``: a newer run of the partition's producer resumed
        there, so the records from ``first`` on are an older run's, never acknowledged where
        the newer run's belong. They go to the quarantine first - whole segments moved, the
        tail of the segment that holds ``first`` copied and fsynced - then the log is cut;
        nothing is deleted. Returns the quarantine files ([]: nothing held from ``first``)."""
        if first >= self.next_offset:
            return []
        self.generation += 1
        i = max(0, bisect_right(self.bases, first) - 1)
        seg = self.segments[i]
        keep = first > seg.base  # the segment keeps records before ``first``
        later = self.segments[i + 1 :] if keep else self.segments[i:]
        moved: list[Path] = []
        try:
            if keep and first < seg.next_offset:
                off, pos = seg.index.floor(first)
                fd, close = seg.read_fd()
                try:
                    found = scan(
                        fd,
                        pos,
                        seg.size,
                        off,
                        max_length=self.config.max_record_bytes,
                        stop_offset=first,
                    )
                finally:
                    if close:
                        os.close(fd)
                if found.next_offset != first:
                    raise StorageIOError(
                        f"{seg.path}: record {first} not found to cut the log before it "
                        f"({found.problem or 'ends'} at {found.next_offset})"
                    )
                rw = os.open(seg.path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    moved.append(copy_to_quarantine(seg.path, rw, found.position, seg.size))
                finally:
                    os.close(rw)
                seg.truncate(found.position, first)
            for gone in later:
                gone.close_files()
            moved += self._quarantine_files([gone.base for gone in later])
            if later:
                del self.segments[len(self.segments) - len(later) :]
                del self.bases[len(self.bases) - len(later) :]
            if not self.segments:  # nothing before ``first``: the log starts there, empty
                self._add_segment(
                    Segment.create(self.directory, first, self.config.index_interval_bytes)
                )
            self.dir_dirty = True
            self._open_active()
            synced = not self.config.fsync.is_os
            if synced:
                os.fdatasync(self.segments[-1].fd)
                self._sync_directories()
        except OSError as exc:
            raise StorageIOError(f"cutting {self.directory} before {first} failed: {exc}") from exc
        head = self.head
        if synced:
            self.durable = head
            self.unsynced = 0
            self.needs_fsync = False
        elif self.durable is not None and (head is None or self.durable > head):
            self.durable = head
        return moved

    def holes(self) -> list[tuple[int, int]]:
        """Offsets below the head that no segment holds, as ``[first, end)`` ranges."""
        segs = self.segments
        return [
            (segs[i].next_offset, segs[i + 1].base)
            for i in range(len(segs) - 1)
            if segs[i].next_offset < segs[i + 1].base
        ]

    def fill(self, first_offset: int, payloads: Sequence[Payload]) -> int:
        """Write ``payloads`` into the hole that starts at ``first_offset``; the last offset.

        They must start exactly at the hole and not run past it (else
        :class:`InvalidArgumentError`, nothing written). They go at the end of the segment
        before the hole while it has room (``segment_bytes``), then into new segments; each
        segment written is fsynced (unless the policy is "os") before this returns: fills
        are rare, and a filled record is served at once.
        """
        count = len(payloads)
        segs = self.segments
        i = bisect_right(self.bases, first_offset) - 1
        if i < 0 or i + 1 >= len(segs) or segs[i].next_offset != first_offset:
            raise InvalidArgumentError(
                f"{self.topic!r}/{self.partition!r}: no hole starts at offset {first_offset} "
                f"(holes: {self.holes()})"
            )
        end = segs[i + 1].base
        if first_offset + count > end:
            raise InvalidArgumentError(
                f"{self.topic!r}/{self.partition!r}: {count} records at {first_offset} run "
                f"past the hole, which ends at {end}"
            )
        try:
            lengths = list(map(len, payloads))
        except TypeError:
            raise InvalidArgumentError("payloads must be bytes-like objects") from None
        if count and max(lengths) > self.config.max_record_bytes:
            raise InvalidArgumentError(
                f"payload of {max(lengths)} bytes over max_record_bytes "
                f"{self.config.max_record_bytes}"
            )
        if not all(isinstance(p, bytes | bytearray | memoryview) for p in payloads):
            raise InvalidArgumentError("payloads must be bytes-like objects")
        offset = first_offset
        done = 0
        limit = self.config.segment_bytes
        sync = not self.config.fsync.is_os
        try:
            while done < count:
                seg = segs[i]
                take = 1
                size = RECORD_HEADER_SIZE + lengths[done]
                while done + take < count:
                    more = RECORD_HEADER_SIZE + lengths[done + take]
                    if seg.size + size + more > limit:
                        break
                    size += more
                    take += 1
                if seg.size + size > limit and seg.size > SEGMENT_HEADER_SIZE:
                    seg = Segment.create(self.directory, offset, self.config.index_interval_bytes)
                    segs.insert(i + 1, seg)
                    self.generation += 1
                    self.bases.insert(i + 1, offset)
                    self.dir_dirty = True
                    i += 1
                    continue  # measured again against the new segment
                self._fill_segment(seg, offset, payloads[done : done + take], sync)
                offset += take
                done += take
            if sync:
                self._sync_directories()
        except OSError as exc:
            raise StorageIOError(f"filling {self.directory} at {offset} failed: {exc}") from exc
        return offset - 1

    def _fill_segment(
        self, seg: Segment, first_offset: int, payloads: Sequence[Payload], sync: bool
    ) -> None:
        """Append ``payloads`` to ``seg``, a closed segment before a hole (it stays closed)."""
        seg.open_files()
        try:
            parts = []
            pos = seg.size
            for k, payload in enumerate(payloads):
                seg.index.offer(first_offset + k, pos)
                record = encode_record(first_offset + k, payload)
                parts.append(record)
                pos += len(record)
            try:
                write_all(seg.fd, b"".join(parts), seg.size)
                if sync:
                    os.fdatasync(seg.fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(seg.fd, seg.size)
                seg.index.truncate_at(seg.size)
                raise
            seg.size = pos
            seg.next_offset = first_offset + len(payloads)
        finally:
            if seg is not self.segments[-1]:
                with contextlib.suppress(OSError):  # a short index is repaired at open
                    seg.close_files()

    # ---------------------------------------------------------------- read

    def read(self, from_offset: int, count: int) -> list[tuple[int, bytes]]:
        """The records held in ``[from_offset, from_offset + count)``, in order (holes are
        left out: the offsets say where they are)."""
        out: list[tuple[int, bytes]] = []
        self._read(from_offset, count, out, None)
        return out

    def read_contents(self, from_offset: int, count: int) -> tuple[int, list[bytes]]:
        """The first contiguous run of records held in ``[from_offset, from_offset + count)``:
        its first offset and the payloads (it ends at the first hole after it)."""
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
        the offset of the first record read (``from_offset`` if none). ``contents`` stops
        at a hole once it holds something (a run is contiguous); ``out`` steps over holes.
        Damage met on the way is salvaged (:meth:`_repair`) and the read goes on."""
        start = max(from_offset, self.segments[0].base)
        stop = min(from_offset + count, self.next_offset)
        first = -1
        sink: list[bytes] | list[tuple[int, bytes]] = contents if contents is not None else []
        if out is not None:
            sink = out
        max_len = self.config.max_record_bytes
        while start < stop:
            i = bisect_right(self.bases, start) - 1
            seg = self.segments[i]
            if start >= seg.next_offset:  # in the hole after ``seg``
                if first >= 0 and contents is not None:
                    break
                start = self.segments[i + 1].base
                continue
            seg_stop = min(stop, seg.next_offset)
            off, pos = seg.index.floor(start)
            wanted = (seg_stop - off) * seg.average_record()
            chunk = int(min(_READ_CHUNK_MAX, max(_READ_CHUNK_MIN, wanted * 1.1 + 64)))
            held = len(sink)
            try:
                fd, close = seg.read_fd()
                try:
                    res = scan(
                        fd,
                        pos,
                        seg.size,
                        off,
                        max_length=max_len,
                        stop_offset=seg_stop,
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
                            stop_offset=seg_stop,
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
            if first < 0 and len(sink) > held:
                first = start
            if res.problem is not None:
                self.truncations += self._repair(
                    i, res.position, res.next_offset, res.problem, res.detail
                )
                stop = min(stop, self.next_offset)
            start = res.next_offset
        return first if first >= 0 else from_offset

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

    def verify(self, segment_from: int = 0) -> list[Truncation]:
        """CRC-check every record (of the segments from base ``segment_from`` on); damage is
        salvaged as a read would (the list says what was lost)."""
        max_len = self.config.max_record_bytes
        found: list[Truncation] = []
        i = max(0, bisect_right(self.bases, segment_from) - 1)
        while i < len(self.segments):
            seg = self.segments[i]
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
                before = len(self.segments)
                found += self._repair(i, res.position, res.next_offset, res.problem, res.detail)
                i += 1 + len(self.segments) - before  # the runs it made were checked whole
                continue
            i += 1
        return found

    def scrub_step(
        self, at: ScrubPosition | None, budget: int, memo: ScrubMemo | None = None
    ) -> tuple[ScrubPosition | None, int]:
        """Check about ``budget`` bytes of records from ``at`` (None: the log's start) - one
        step of the store's background scrub. Returns where to go on (None: the log is done)
        and the bytes checked. Damage is salvaged as a read would (queued in
        :attr:`truncations`). A position from before a change of the segments
        (:attr:`generation`) is not trusted: its segment is checked again from its start.

        With a ``memo``: a stretch checked before that starts here is read again whole
        (whatever the budget: a stretch was an earlier step's, at most ``SCAN_CHUNK`` and a
        record; the caller's pacing carries the difference) and, if its bytes are unchanged
        (:func:`stretch_digest`), is intact without a check per record; else, and for what
        the memo does not hold, the records are checked one by one and the stretch they
        make is kept in the memo (so a pass checks the stretches of the last one again)."""
        if at is None:
            at = ScrubPosition(self.segments[0].base, SEGMENT_HEADER_SIZE, self.segments[0].base)
        i = bisect_right(self.bases, at.base) - 1
        if i < 0 or self.segments[i].base != at.base or at.generation != self.generation:
            i = max(0, bisect_left(self.bases, at.base) if i < 0 else i)
            if self.segments[i].base < at.base:  # that segment is gone: the next one
                i += 1
            if i >= len(self.segments):
                return None, 0
            seg = self.segments[i]
            at = ScrubPosition(seg.base, SEGMENT_HEADER_SIZE, seg.base)
        seg = self.segments[i]
        if at.position >= seg.size:
            if i + 1 >= len(self.segments):
                return None, 0
            nxt = self.segments[i + 1]
            return ScrubPosition(nxt.base, SEGMENT_HEADER_SIZE, nxt.base, self.generation), 0
        records = max(1, int(budget / max(seg.average_record(), 1.0)))
        chunk = min(SCAN_CHUNK, budget + _SCRUB_READ_MARGIN)
        key = (self.topic, self.partition, seg.base, at.position)
        known = memo.stretches.get(key) if memo is not None else None
        if memo is None or known is None:
            known = None
        elif known.offset != at.offset or known.end > seg.size:
            known = None  # not what is expected here: one by one
        try:
            fd, close = seg.read_fd()
            try:
                if known is not None and memo is not None:
                    data = pread_all(fd, known.end - at.position, at.position)
                    if stretch_digest(data) == known.digest:
                        memo.unchanged += known.end - at.position
                        return (
                            ScrubPosition(seg.base, known.end, known.end_offset, self.generation),
                            known.end - at.position,
                        )
                    data = data[:chunk]  # changed: checked record by record (below)
                else:
                    data = pread_all(fd, min(chunk, seg.size - at.position), at.position)
                res = scan(
                    fd,
                    at.position,
                    seg.size,
                    at.offset,
                    max_length=self.config.max_record_bytes,
                    stop_offset=at.offset + records,
                    chunk=chunk,
                    first=data,
                )
            finally:
                if close:
                    os.close(fd)
        except OSError as exc:
            raise StorageIOError(f"scrub of {seg.path} failed: {exc}") from exc
        checked = res.position - at.position
        if memo is not None and res.problem is None and 0 < checked <= len(data):
            # what scan checked is exactly these bytes (it read on only past their end)
            digest = stretch_digest(memoryview(data)[:checked])
            memo.keep(
                key, Stretch(self.generation, at.offset, res.position, res.next_offset, digest)
            )
        if res.problem is not None:
            before = len(self.segments)
            self.truncations += self._repair(
                i, res.position, res.next_offset, res.problem, res.detail
            )
            nxt_i = i + 1 + len(self.segments) - before  # what the salvage made is checked
            if nxt_i >= len(self.segments):
                return None, checked
            nxt = self.segments[nxt_i]
            return ScrubPosition(nxt.base, SEGMENT_HEADER_SIZE, nxt.base, self.generation), checked
        return ScrubPosition(seg.base, res.position, res.next_offset, self.generation), checked

    def _repair(
        self, i: int, position: int, offset: int, problem: Problem, detail: str
    ) -> list[Truncation]:
        """Segment ``i`` is damaged from ``position`` (which should hold ``offset``): keep
        what precedes it and every intact record after it (``_segment.salvage``); the
        damaged bytes go to the quarantine (fsynced) before anything is cut.

        The lost offsets become a hole, except a lost tail of the last segment: the log
        then ends before it (its head goes back, nothing beyond it is claimed).
        """
        seg = self.segments[i]
        end_offset = seg.next_offset
        last = i == len(self.segments) - 1
        self.generation += 1
        try:
            fd = os.open(seg.path, os.O_RDWR | os.O_CLOEXEC)
            try:
                if all_zero(fd, position, seg.size):
                    detail = "zero-filled tail"
                    losses = [Loss(position, offset, seg.size, None, "torn", detail, None)]
                    made: list[Segment] = []
                    os.ftruncate(fd, position)
                    if not self.config.fsync.is_os:
                        os.fdatasync(fd)
                else:
                    losses, made = salvage(
                        seg,
                        fd,
                        position,
                        offset,
                        problem,
                        detail,
                        seg.size,
                        max_length=self.config.max_record_bytes,
                    )
            finally:
                os.close(fd)
            seg.size = position
            seg.next_offset = offset
            seg.index.truncate_at(position)
            seg.rewrite_index()
            if last and made:
                seg.close_files()
                made[-1].open_files()
        except OSError as exc:
            raise StorageIOError(f"repairing {seg.path} at {position} failed: {exc}") from exc
        for k, added in enumerate(made):
            self.segments.insert(i + 1 + k, added)
            self.bases.insert(i + 1 + k, added.base)
        if made and not self.config.fsync.is_os:
            self.dir_dirty = True
        head = self.head
        if self.durable is not None and (head is None or self.durable > head):
            self.durable = head
        after = i + 1 + len(made)
        follows = self.segments[after].base if after < len(self.segments) else None
        cuts: list[Truncation] = []
        for loss in losses:
            if loss.end_offset is not None:
                cuts.append(self._truncation(seg, loss, loss.end_offset))
            else:  # the rest of the segment's range: the next segment (if any) follows it
                cut = self._truncation(seg, loss, end_offset)
                cuts.append(dataclasses.replace(cut, resumed=follows))
        return cuts

    # ---------------------------------------------------------------- retention

    def drop_front(self, offset: int) -> list[Path]:
        """Delete the closed segments whose records all lie below ``offset`` (a delete's
        cut + 1), oldest first, never the active one."""
        removed: list[Path] = []
        while len(self.segments) > 1 and self.segments[1].base <= offset:
            seg = self.segments[0]
            seg.delete()
            removed.append(seg.path)
            del self.segments[0]
            del self.bases[0]
            self.generation += 1
            self.dir_dirty = True
        return removed

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
            self.generation += 1
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


__all__ = [
    "SCRUB_MEMO_STRETCHES",
    "PartitionLog",
    "ScrubMemo",
    "ScrubPosition",
    "Stretch",
    "fsync_directory",
    "stretch_digest",
]
