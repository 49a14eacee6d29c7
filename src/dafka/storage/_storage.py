"""The store's view of its disk: every partition log under one data directory."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from dafka.lifecycle import Closing
from dafka.storage._config import StorageConfig
from dafka.storage._errors import (
    GapAppendError,
    InvalidArgumentError,
    OverlapAppendError,
    StorageClosedError,
    StorageIOError,
    StorageLockedError,
)
from dafka.storage._format import MAX_OFFSET, Payload
from dafka.storage._naming import directory_name, name_from_directory
from dafka.storage._partition_log import (
    PartitionLog,
    ScrubMemo,
    ScrubPosition,
    fsync_directory,
)
from dafka.storage._quarantine import QUARANTINE_DIR
from dafka.storage._report import RecoveryReport, ScrubProgress, Truncation

_logger = logging.getLogger(__name__)

Key = tuple[str, str]
"""(topic, partition)"""

LOCK_FILE = ".lock"
SYNC_THREADS = 8
"""Partitions fsynced at once by an interval sync (see ``Storage._sync_dirty``)."""
RUNS_FILE = "runs.json"
"""The producer runs of each partition: ``[[topic, partition, [[epoch, start], ...]], ...]``
(see :meth:`Storage.keep_runs`)."""
DELETED_FILE = "deleted.json"
"""Where a topic delete's cuts are kept: ``[[topic, partition, cut], ...]`` (see
:meth:`Storage.delete_through`)."""


class Storage(Closing):
    """All partition logs of one store. Open with :meth:`open`; not thread-safe.

    Durability follows ``config.fsync`` (see :class:`FsyncPolicy`): :meth:`durable_offset`
    says what may be ACKed, and the advances of durable offsets since the last call are
    returned by :meth:`take_durable_advances` (and by :meth:`sync_due`, which first runs a
    due interval fsync).
    """

    def __init__(self, root: Path, config: StorageConfig, lock_fd: int) -> None:
        self.root = root
        self.config = config
        self.recovery_report = RecoveryReport()
        self._lock_fd = lock_fd
        self._logs: dict[Key, PartitionLog] = {}
        self._open: OrderedDict[Key, PartitionLog] = OrderedDict()
        self._open_limit = config.open_partitions_limit()
        """Partitions that may hold open descriptors, least recently written first (at most
        ``config.max_open_partitions``: :meth:`_touch`)."""
        self._topics: dict[str, dict[str, PartitionLog]] = {}
        self._advances: dict[Key, int] = {}
        self._dirty: dict[Key, PartitionLog] = {}
        self._sync_pool: ThreadPoolExecutor | None = None
        """Threads of :meth:`_sync_dirty`'s concurrent fsyncs (made at the first need)."""
        self._deadline: float | None = None
        self._synced_at = float("-inf")
        """When the last interval sync ran (the clock of ``sync_due``): the next one runs
        at once if that is an interval ago, else an interval after it (:meth:`_arm`)."""
        self._truncations: list[Truncation] = []
        self._closed = False
        self._root_dirty = False
        self.scrub_progress = ScrubProgress()
        """What :meth:`scrub` has checked and found (read it in the store's thread)."""
        self._runs: dict[Key, tuple[tuple[int, int], ...]] = {}
        """Partition -> its producer runs, (epoch, first offset) ascending (:meth:`keep_runs`)."""
        self._deleted: dict[Key, int] = {}
        """Partition -> the last offset deleted (:meth:`delete_through`): nothing at or below
        it is held, served or appended any more."""
        self._scrub_keys: list[Key] = []
        self._scrub_at = 0
        self._scrub_position: ScrubPosition | None = None
        self._scrub_memo = ScrubMemo()

    # ---------------------------------------------------------------- open / close

    @classmethod
    def open(cls, root: Path | str, config: StorageConfig | None = None) -> Storage:
        """Lock ``root`` (created if missing), recover every log, and report in
        :attr:`recovery_report`.

        Recovery scans only each segment's tail after its last verified index entry (all
        records with ``config.verify_on_open``), so opening is fast whatever the log sizes.
        Every recovered log is then fsynced once (unless the policy is "os"), so all it holds
        is durable from the start.
        """
        root = Path(root)
        config = config or StorageConfig()
        started = time.perf_counter()
        try:
            root.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StorageIOError(f"cannot use {root} as a data directory: {exc}") from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StorageLockedError(f"{root} is in use by another Storage") from None
        storage = cls(root, config, lock_fd)
        try:
            storage._recover()
        except OSError as exc:
            storage._abandon()
            raise StorageIOError(f"recovery of {root} failed: {exc}") from exc
        except BaseException:
            storage._abandon()
            raise
        storage.recovery_report.seconds = time.perf_counter() - started
        return storage

    def _recover(self) -> None:
        report = self.recovery_report
        self._deleted = _read_deleted(self.root / DELETED_FILE)
        self._runs = _read_runs(self.root / RUNS_FILE)
        for topic_dir in sorted(self.root.iterdir()):
            if topic_dir.name in (LOCK_FILE, QUARANTINE_DIR, DELETED_FILE, RUNS_FILE):
                continue
            topic = name_from_directory(topic_dir) if topic_dir.is_dir() else None
            if topic is None:
                report.skipped.append(topic_dir)
                continue
            for part_dir in sorted(topic_dir.iterdir()):
                if part_dir.name.startswith(".name"):
                    continue
                partition = name_from_directory(part_dir) if part_dir.is_dir() else None
                if partition is None:
                    report.skipped.append(part_dir)
                    continue
                seen = len(report.truncations)
                plog = PartitionLog.open(part_dir, topic, partition, self.config, report)
                _warn(self.root, report.truncations[seen:], "recovery")
                if plog is None:
                    continue
                report.partitions += 1
                self._register(plog)
                if self.config.fsync.is_os:
                    plog.mark_written_durable()
                else:
                    plog.sync(force=True)
                self._touch(plog)
        for (topic, partition), cut in sorted(self._deleted.items()):
            self._cut_front(topic, partition, cut)  # a crash may have come before

    def _register(self, log: PartitionLog) -> None:
        self._logs[log.topic, log.partition] = log
        self._topics.setdefault(log.topic, {})[log.partition] = log

    def _abandon(self) -> None:
        """Release files and the lock after a failed open, without syncing anything."""
        self._closed = True
        for log in self._logs.values():
            with contextlib.suppress(OSError):
                log.close()
        os.close(self._lock_fd)

    def close(self) -> None:
        """fsync everything (whatever the policy) and release the directory."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._sync_pool is not None:
                self._sync_pool.shutdown(wait=True)
            for log in self._logs.values():
                log.sync()
                log.close()
        finally:
            os.close(self._lock_fd)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosedError(f"storage at {self.root} is closed")

    # ---------------------------------------------------------------- append

    def append(
        self,
        topic: str,
        partition: str,
        first_offset: int,
        payloads: Sequence[Payload],
        *,
        after_gap: bool = False,
    ) -> int:
        """Append ``payloads`` at ``first_offset, first_offset + 1, ...``; the last offset.

        The batch goes to disk in one ``write`` (two if it crosses a segment boundary) and is
        fsynced per the policy; whether it is durable yet is :meth:`durable_offset`'s to say.
        Raises :class:`GapAppendError` or :class:`OverlapAppendError` (both
        :class:`NonContiguousAppendError`, with ``expected``) unless ``first_offset`` is
        :meth:`next_offset`; nothing is written then. A new partition starts at
        ``config.first_offset`` (anywhere if that is None). An empty batch is a no-op.

        ``after_gap``: the caller knows that the records from :meth:`next_offset` to
        ``first_offset`` are gone (no peer holds them): a later start is accepted and the
        offsets in between become a hole (:meth:`holes`; a new partition simply starts at
        ``first_offset``).
        """
        self._check_open()
        if type(first_offset) is not int or not 0 <= first_offset <= MAX_OFFSET:
            raise InvalidArgumentError(f"offset must be a u64, got {first_offset!r}")
        key = (topic, partition)
        log = self._logs.get(key)
        cut = self._deleted.get(key) if self._deleted else None
        if cut is not None and first_offset <= cut:  # deleted already: taken, not kept
            payloads = payloads[cut + 1 - first_offset :]
            first_offset = cut + 1
            if not payloads:
                return cut if log is None or log.head is None else log.head
        if log is None:
            start = self.config.first_offset if cut is None else cut + 1
            if (
                start is not None
                and first_offset != start
                and not (after_gap and first_offset > start)
            ):
                error = GapAppendError if first_offset > start else OverlapAppendError
                raise error(topic, partition, start, first_offset)
            if not payloads:
                return first_offset - 1
            log = self._create(topic, partition, first_offset)
        before = log.durable
        self._touch(log)
        try:
            last = log.append(first_offset, payloads, after_gap=after_gap)
        finally:
            self._after_write(key, log, before)
        return last

    def _touch(self, plog: PartitionLog) -> None:
        """``log`` is about to be written (or was just opened): the most recent of the open
        partitions. Beyond ``config.max_open_partitions`` the least recently written one
        releases its descriptors (fsynced first: its durable offset may advance, reported
        as any other advance)."""
        key = (plog.topic, plog.partition)
        self._open[key] = plog
        self._open.move_to_end(key)
        while len(self._open) > self._open_limit:
            old_key, old = self._open.popitem(last=False)
            before = old.durable
            try:
                old.release_files()
            except StorageIOError as exc:  # its fsync failed: it stays dirty, still open
                _logger.warning("%s: cannot release %s/%s: %s", self.root, *old_key, exc)
                continue
            self._dirty.pop(old_key, None)
            if old.durable != before and old.durable is not None:
                self._advances[old_key] = old.durable

    def fill(
        self, topic: str, partition: str, first_offset: int, payloads: Sequence[Payload]
    ) -> int:
        """Write ``payloads`` into the hole of the partition that starts at ``first_offset``
        (see :meth:`holes`); the last offset written. Durable when it returns (fsynced
        unless the policy is "os"). :class:`InvalidArgumentError` (nothing written) unless
        they start exactly at a hole and stay inside it."""
        self._check_open()
        log = self._logs.get((topic, partition))
        if log is None:
            raise InvalidArgumentError(f"{topic!r}/{partition!r} holds nothing, so no hole")
        self._touch(log)
        return log.fill(first_offset, payloads)

    def holes(self, topic: str, partition: str) -> list[tuple[int, int]]:
        """The offsets below the head that the partition does not hold (damaged records, a
        lost segment file, records no peer had), as ``[first, end)`` ranges in order."""
        log = self._logs.get((topic, partition))
        return [] if log is None else log.holes()

    def _create(self, topic: str, partition: str, base: int) -> PartitionLog:
        directory = (
            self.root / directory_name(topic, "topic") / directory_name(partition, "partition")
        )
        try:
            log = PartitionLog.create(directory, topic, partition, self.config, base)
        except OSError as exc:
            raise StorageIOError(f"cannot create {directory}: {exc}") from exc
        self._register(log)
        return log

    def _after_write(self, key: Key, log: PartitionLog, before: int | None) -> None:
        policy = self.config.fsync
        if log.unsynced:
            if policy.is_os:
                log.mark_written_durable()
            elif policy.every_batch or (
                policy.every_records is not None and log.unsynced >= policy.every_records
            ):
                log.sync()
                self._dirty.pop(key, None)
            elif policy.interval_ms is not None:
                self._dirty[key] = log
                clock = self.config.clock
                if self._deadline is None and clock is not None:
                    self._deadline = self._arm(clock(), policy.interval_ms)
        if log.durable != before and log.durable is not None:
            self._advances[key] = log.durable

    # ---------------------------------------------------------------- durability

    def durable_offset(self, topic: str, partition: str) -> int | None:
        """The last offset on stable storage (may be ACKed), or None if none is."""
        log = self._logs.get((topic, partition))
        return None if log is None else log.durable

    def next_sync_deadline(self) -> float | None:
        """When :meth:`sync_due` next has work (clock seconds), or None (interval policy).

        ``-inf`` when writes wait for a first :meth:`sync_due` to arm their deadline (no
        ``config.clock``): call it now, it returns the armed deadline afterwards.
        """
        if self._deadline is None and self._dirty:
            return float("-inf")
        return self._deadline

    def last_interval_sync(self) -> float | None:
        """When the interval fsync last ran (the clock of :meth:`sync_due`), if the interval
        alone makes records durable; None otherwise (``every_batch``, ``every_records``: an
        append may sync at once; "os": a write is durable at once) and before the first.

        No write made before one interval after it can become durable sooner than at that
        time (:meth:`_arm`): what its owner reads and appends meanwhile is ACKed together.
        """
        policy = self.config.fsync
        if policy.interval_ms is None or policy.every_batch or policy.every_records is not None:
            return None
        synced_at = self._synced_at
        return None if synced_at == float("-inf") else synced_at

    def sync_due(self, now: float) -> dict[Key, int]:
        """Run the interval fsync if ``now`` reached its deadline; return durable advances.

        Meant for the store's event loop timer (``now`` from its injected clock). The result
        also holds advances made by appends under the batch and records triggers since the
        last call, so one call per loop iteration collects everything to ACK.
        """
        self._check_open()
        interval = self.config.fsync.interval_ms
        if self._dirty and self._deadline is None and interval is not None:
            self._deadline = self._arm(now, interval)
        if self._deadline is not None and now >= self._deadline:
            self._deadline = None
            self._synced_at = now
            self._sync_dirty()
        return self.take_durable_advances()

    def _arm(self, now: float, interval_ms: float) -> float:
        """The interval sync's deadline for a first unsynced write at ``now``: at once when
        the last sync ran an interval ago or more (the leading edge: a lone write, such as
        a transaction's INTENT, waits for its fsync only), else an interval after that sync.
        Either way at most one interval sync starts per interval, and a write is synced at
        most an interval after it was written. (It was ``now + interval``: every quiet
        write waited the whole interval, 5 of a commit's ~8 ms per round trip.)"""
        return max(now, self._synced_at + interval_ms / 1000.0)

    def _sync_dirty(self) -> None:
        """fsync every dirty partition: one at a time when one is dirty, else all at once
        on a small pool of threads (``os.fdatasync`` releases the GIL). Why: each fsync on
        its own waits for a journal commit (5-7 ms on this project's VMs), so a store with
        four dirty partitions took 25+ ms per interval, and every ACK of that interval
        waited for it (a transaction's commit waits for two); concurrent fsyncs share the
        journal commits. Each partition's durable offset moves only after its own fsync
        returned; the first failure is raised after the others were recorded."""
        dirty, self._dirty = self._dirty, {}
        logs = list(dirty.items())
        befores = [log.durable for _, log in logs]
        if len(logs) == 1:
            logs[0][1].sync()
        else:
            pool = self._sync_pool
            if pool is None:
                pool = self._sync_pool = ThreadPoolExecutor(
                    max_workers=SYNC_THREADS, thread_name_prefix="store-fsync"
                )
            futures = [pool.submit(log.sync) for _, log in logs]
            wait(futures)
            errors = [f.exception() for f in futures]
            self._record_advances(
                [entry for entry, e in zip(logs, errors, strict=True) if e is None],
                [b for b, e in zip(befores, errors, strict=True) if e is None],
            )
            for error in errors:
                if error is not None:
                    raise error
            return
        self._record_advances(logs, befores)

    def _record_advances(
        self, logs: list[tuple[Key, PartitionLog]], befores: list[int | None]
    ) -> None:
        for (key, log), before in zip(logs, befores, strict=True):
            if log.durable != before and log.durable is not None:
                self._advances[key] = log.durable

    def reports_pending(self, now: float) -> bool:
        """Whether :meth:`take_truncations`, :meth:`take_durable_advances` or
        :meth:`sync_due` at ``now`` would report anything (a sync due is pending too) - a
        look without taking, for a loop that asks after every action it ran (a store's
        runner asks two or three times a turn, and most of them find nothing)."""
        if self._truncations or self._advances:
            return True
        if self._deadline is None:
            return bool(self._dirty)  # (an unarmed write: sync_due arms it)
        return self._deadline <= now

    def take_durable_advances(self) -> dict[Key, int]:
        """Durable offsets that advanced since the last call: (topic, partition) -> offset."""
        advances, self._advances = self._advances, {}
        return advances

    def flush(self) -> None:
        """fsync every partition now, whatever the policy.

        The advances it causes are left for :meth:`sync_due` / :meth:`take_durable_advances`,
        so the loop that calls ``flush`` before shutting down still sends the last ACKs.
        """
        self._check_open()
        self._dirty.clear()
        self._deadline = None
        for key, log in self._logs.items():
            before = log.durable
            log.sync()
            if log.durable != before and log.durable is not None:
                self._advances[key] = log.durable

    # ---------------------------------------------------------------- read

    def read(
        self, topic: str, partition: str, from_offset: int, count: int
    ) -> list[tuple[int, bytes]]:
        """The records held in ``[from_offset, from_offset + count)`` as (offset, payload).

        Fewer at the ends (below the start after retention, above the head), none for an
        unknown partition, none in a hole (:meth:`holes`). A record that fails its CRC is
        salvaged on the way: it becomes a hole, the intact records after it are kept and
        returned (see :meth:`take_truncations`), and the store refetches the hole.
        """
        self._check_open()
        if type(from_offset) is not int or from_offset < 0 or type(count) is not int:
            raise InvalidArgumentError(f"bad read range {from_offset!r}, {count!r}")
        log = self._logs.get((topic, partition))
        if log is None or count <= 0:
            return []
        from_offset, count = self._after_cut(topic, partition, from_offset, count)
        try:
            return log.read(from_offset, count)
        finally:
            self._collect_truncations(log)

    def read_contents(
        self, topic: str, partition: str, from_offset: int, count: int
    ) -> tuple[int, list[bytes]]:
        """:meth:`read` without a tuple per record: the offset of the first record held in
        the range and the payloads from there on, contiguous: the run ends at the first hole
        after it (what a FETCH reply sends; the next call goes on after the hole)."""
        self._check_open()
        if type(from_offset) is not int or from_offset < 0 or type(count) is not int:
            raise InvalidArgumentError(f"bad read range {from_offset!r}, {count!r}")
        log = self._logs.get((topic, partition))
        if log is None or count <= 0:
            return from_offset, []
        from_offset, count = self._after_cut(topic, partition, from_offset, count)
        try:
            return log.read_contents(from_offset, count)
        finally:
            self._collect_truncations(log)

    def _after_cut(self, topic: str, partition: str, first: int, count: int) -> tuple[int, int]:
        """A read range moved past a delete's cut (the segment holding the cut keeps its
        older records on disk until the whole segment is below the cut)."""
        cut = self._deleted.get((topic, partition)) if self._deleted else None
        if cut is None or first > cut:
            return first, count
        return cut + 1, count - (cut + 1 - first)

    # ---------------------------------------------------------------- delete

    def delete_through(self, topic: str, partition: str, cut: int) -> bool:
        """Delete the partition's records up to ``cut`` (a topic delete's tombstone): from
        now on nothing at or below it is held, read or appended (an append that starts at
        or below it keeps only what follows it; an emptied partition starts again at
        ``cut + 1``). Whole segments below the cut are removed, a partition left empty
        entirely; the cut is kept in ``deleted.json`` (written and fsynced before this
        returns) and applied again at every open. False if an equal or later cut was
        already applied (idempotent)."""
        self._check_open()
        if type(cut) is not int or not 0 <= cut <= MAX_OFFSET:
            raise InvalidArgumentError(f"cut must be a u64, got {cut!r}")
        key = (topic, partition)
        if self._deleted.get(key, -1) >= cut:
            return False
        self._deleted[key] = cut
        _write_deleted(self.root / DELETED_FILE, self._deleted)
        self._cut_front(topic, partition, cut)
        self._prune_runs([key])
        return True

    def runs(self, topic: str, partition: str) -> tuple[tuple[int, int], ...]:
        """The producer runs kept of a partition (``dafka.node.RunLog``)."""
        return self._runs.get((topic, partition), ())

    def keep_runs(
        self,
        topic: str,
        partition: str,
        runs: Sequence[tuple[int, int]],
        supersede_from: int | None = None,
    ) -> list[Path]:
        """Keep the partition's producer runs (in ``runs.json``, written and fsynced before
        this returns). With ``supersede_from``, first end the log before that offset: a
        newer producer run resumed there, and what the log holds from there on is an older
        run's, never acknowledged there. Those records go to the quarantine, never deleted
        (:meth:`PartitionLog.supersede`); returns the quarantine files. Runs wholly below
        the partition's start (retention, a delete) are not kept (:func:`runs_from`)."""
        self._check_open()
        key = (topic, partition)
        moved: list[Path] = []
        log = self._logs.get(key)
        if supersede_from is not None and log is not None:
            moved = log.supersede(supersede_from)
        kept = tuple((int(e), int(start)) for e, start in runs)
        self._runs[key] = runs_from(kept, self._first_kept(key))
        _write_runs(self.root / RUNS_FILE, self._runs)
        return moved

    def _first_kept(self, key: Key) -> int:
        """The first offset the partition holds or may take again: retention and deletes
        move it up (0 for a partition the log does not hold)."""
        log = self._logs.get(key)
        start = log.start_offset if log is not None else 0
        return max(start, self._deleted.get(key, -1) + 1)

    def _prune_runs(self, keys: Iterable[Key]) -> None:
        """Drop the runs of ``keys`` that lie wholly below their new start (retention or a
        delete moved it): ``runs.json`` would otherwise grow by one entry per producer
        restart for as long as the store lives."""
        changed = False
        for key in keys:
            runs = self._runs.get(key)
            if not runs:
                continue
            kept = runs_from(runs, self._first_kept(key))
            if kept != runs:
                self._runs[key] = kept
                changed = True
        if changed:
            _write_runs(self.root / RUNS_FILE, self._runs)

    def deleted(self) -> dict[Key, int]:
        """Every partition's delete cut (what :meth:`delete_through` applied)."""
        return dict(self._deleted)

    def _cut_front(self, topic: str, partition: str, cut: int) -> None:
        """Remove what lies wholly at or below ``cut``: the partition if nothing is above
        it, else the segments before the one that holds ``cut + 1``."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            return
        head = log.head
        try:
            if head is None or head <= cut:
                for seg in log.segments:
                    seg.delete()
                del self._logs[key]
                self._open.pop(key, None)
                self._dirty.pop(key, None)
                self._advances.pop(key, None)
                topic_logs = self._topics.get(topic, {})
                topic_logs.pop(partition, None)
                with contextlib.suppress(OSError):
                    for leftover in log.directory.iterdir():
                        leftover.unlink()
                    log.directory.rmdir()
                fsync_directory(log.directory.parent)
                return
            if log.drop_front(cut + 1) and not self.config.fsync.is_os:
                fsync_directory(log.directory)
                log.dir_dirty = False
        except OSError as exc:
            raise StorageIOError(f"deleting {topic}/{partition} up to {cut} failed: {exc}") from exc

    def _collect_truncations(self, plog: PartitionLog, when: str = "read") -> None:
        if plog.truncations:
            _warn(self.root, plog.truncations, when)
            self._truncations.extend(plog.truncations)
            plog.truncations.clear()

    def take_truncations(self) -> list[Truncation]:
        """Damage found since open by a read or :meth:`verify` (recovery's is in the report).

        After one, the partition has a new hole, or its head (and maybe its durable offset)
        went back: the store fetches what it lost again (the store node does, see
        ``dafka.server``). Each was already logged at WARNING when it happened.
        """
        truncations, self._truncations = self._truncations, []
        return truncations

    def verify(self) -> list[Truncation]:
        """CRC-check every record of every partition, salvaging damage (slow; the store's
        background scrub does it at a bounded rate instead)."""
        self._check_open()
        found: list[Truncation] = []
        for plog in self._logs.values():
            found += plog.verify()
        _warn(self.root, found, "verify")
        return found

    def scrub(self, budget: int) -> int:
        """Check about ``budget`` bytes of records (CRC-32C, offsets, lengths): one step of
        the store's background scrub, which finds damage that no read met yet. Partitions
        are checked in turn, each from its first segment to its head, and pass after pass
        (:attr:`scrub_progress`); the next call goes on where this one stopped. Damage found
        is salvaged as a read's is: logged at WARNING (``scrub:``), reported by
        :meth:`take_truncations` (the store fetches what it lost from its peers). A call
        ends where a pass ends. Returns the bytes checked (0: nothing to check).

        A stretch checked record by record is remembered by a digest of its bytes (a
        bounded :class:`ScrubMemo`): a later pass reads it again whole and, if its bytes are
        unchanged, needs no check per record (~20 us per 100 KB instead of ~0.3-0.8 ms);
        changed bytes are checked record by record, which finds the damage."""
        self._check_open()
        progress = self.scrub_progress
        if self._scrub_at >= len(self._scrub_keys):  # a new pass
            self._scrub_keys = sorted(self._logs)
            self._scrub_at = 0
            self._scrub_position = None
            progress.pass_bytes = 0
            progress.pass_total = sum(log.size_bytes for log in self._logs.values())
            self._scrub_memo.purge({key: log.generation for key, log in self._logs.items()})
        checked = 0
        for _ in range(64 + 2 * len(self._scrub_keys)):  # bounded: a turn stays short
            if checked >= budget or self._scrub_at >= len(self._scrub_keys):
                break
            log = self._logs.get(self._scrub_keys[self._scrub_at])
            position: ScrubPosition | None = None
            if log is not None:  # (else gone since the pass began)
                position, done = log.scrub_step(
                    self._scrub_position, budget - checked, self._scrub_memo
                )
                if log.truncations:
                    for cut in log.truncations:
                        progress.damage += 1
                        progress.records_lost += cut.lost or 0
                    self._collect_truncations(log, "scrub")
                checked += done
                progress.pass_bytes += done
            self._scrub_position = position
            if position is None:
                self._scrub_at += 1
                if self._scrub_at >= len(self._scrub_keys):
                    progress.passes += 1  # the next call begins the next pass
        progress.bytes_checked += checked
        progress.bytes_unchanged = self._scrub_memo.unchanged
        return checked

    # ---------------------------------------------------------------- heads

    def head(self, topic: str, partition: str) -> int | None:
        """The last offset held for the partition, or None when it holds nothing."""
        log = self._logs.get((topic, partition))
        return None if log is None else log.head

    def next_offset(self, topic: str, partition: str) -> int | None:
        """The offset the next append must start at, or None for an unknown partition."""
        log = self._logs.get((topic, partition))
        return None if log is None else log.next_offset

    def start_offset(self, topic: str, partition: str) -> int | None:
        """The first offset still held (retention and deletes move it up; the next one after
        a delete's cut when the delete emptied the partition), None for unknown partitions."""
        key = (topic, partition)
        log = self._logs.get(key)
        cut = self._deleted.get(key, -1)
        if log is None:
            return None if cut < 0 else cut + 1
        return max(log.start_offset, cut + 1)

    def heads(self, topic: str) -> dict[str, int]:
        """partition -> head for every non-empty partition of ``topic`` (no disk access)."""
        logs = self._topics.get(topic, {})
        return {p: h for p, log in logs.items() if (h := log.head) is not None}

    def topics(self) -> list[str]:
        """Every topic with at least one partition, sorted."""
        return sorted(t for t, logs in self._topics.items() if logs)

    def partitions(self, topic: str) -> list[str]:
        return sorted(self._topics.get(topic, {}))

    def log(self, topic: str, partition: str) -> PartitionLog | None:
        """The lower-level log of a partition (for tools and tests)."""
        return self._logs.get((topic, partition))

    # ---------------------------------------------------------------- retention

    def apply_retention(self, now_wall: float) -> dict[Key, int]:
        """Apply each topic's retention (wall-clock ``now_wall``, compared with file mtimes).

        Deletes whole closed segments, oldest first, never the active one; returns the new
        start offset of every partition that lost segments.
        """
        self._check_open()
        moved: dict[Key, int] = {}
        for key, log in self._logs.items():
            policy = self.config.retention_for(key[0])
            if policy.max_bytes is None and policy.max_age_s is None:
                continue
            try:
                removed = log.apply_retention(policy, now_wall)
                if removed and not self.config.fsync.is_os:
                    fsync_directory(log.directory)
                    log.dir_dirty = False
            except OSError as exc:
                raise StorageIOError(f"retention of {log.directory} failed: {exc}") from exc
            if removed:
                moved[key] = log.start_offset
        self._prune_runs(moved)
        return moved


def _read_deleted(path: Path) -> dict[Key, int]:
    """``deleted.json`` (missing: no delete yet). Unreadable is an error, not an empty file:
    forgetting a cut would bring deleted records back."""
    try:
        raw = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return {}
    try:
        entries = json.loads(raw)
        return {(str(t), str(p)): int(c) for t, p, c in entries}
    except (ValueError, TypeError) as exc:
        raise StorageIOError(f"{path} is damaged ({exc}); it lists the topic deletes") from exc


def _write_deleted(path: Path, deleted: dict[Key, int]) -> None:
    """Replace ``deleted.json`` atomically and durably."""
    _replace_file(path, json.dumps([[t, p, c] for (t, p), c in sorted(deleted.items())]))


def runs_from(runs: tuple[tuple[int, int], ...], start: int) -> tuple[tuple[int, int], ...]:
    """The runs of a partition without those wholly below ``start`` (its first offset held):
    a run that began below it and whose next run begins at or before it. The run that
    covers ``start`` stays, and so does every later one: an older run's record is still
    fenced from a newer run's start on, and none below ``start`` is taken again."""
    return tuple(
        run
        for index, run in enumerate(runs)
        if not (run[1] < start and index + 1 < len(runs) and runs[index + 1][1] <= start)
    )


def _read_runs(path: Path) -> dict[Key, tuple[tuple[int, int], ...]]:
    """``runs.json`` (missing: no producer named its runs yet). Unreadable is an error:
    forgetting the runs would let an older run's records in again."""
    try:
        raw = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return {}
    try:
        return {
            (str(t), str(p)): tuple((int(e), int(start)) for e, start in runs)
            for t, p, runs in json.loads(raw)
        }
    except (ValueError, TypeError) as exc:
        raise StorageIOError(f"{path} is damaged ({exc}); it lists the producer runs") from exc


def _write_runs(path: Path, runs: dict[Key, tuple[tuple[int, int], ...]]) -> None:
    """Replace ``runs.json`` atomically and durably."""
    _replace_file(
        path, json.dumps([[t, p, [list(r) for r in rs]] for (t, p), rs in sorted(runs.items())])
    )


def _replace_file(path: Path, text: str) -> None:
    """Replace ``path`` atomically and durably (written, fsynced, renamed, the directory
    fsynced)."""
    temporary = path.with_suffix(".tmp")
    data = text.encode("utf-8", "surrogateescape")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except OSError as exc:
        raise StorageIOError(f"cannot write {path}: {exc}") from exc


def _warn(root: Path, truncations: Sequence[Truncation], when: str) -> None:
    """Every cut is logged at WARNING: data left the log (one rule for open, read, verify)."""
    for cut in truncations:
        _logger.warning("storage %s: %s: %s", root, when, cut.describe())


__all__ = ["Storage"]
