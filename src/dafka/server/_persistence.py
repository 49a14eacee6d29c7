"""A store's persistence, as its runner drives it (``dafka.transport.runner.Persistence``).

The store machine asks for writes (``Persist``); this appends them to the storage engine,
runs the fsync clock, and tells the machine what became durable (``on_durable``) so that
its ACKs cover only durable records. It lives with the store, not in the transport: the
runner only calls it at fixed points of its turn, in its own thread.

Storage faults heal here, without a restart (``dafka.node._store`` has the machine's side):

* A failed append (a full disk, any ``StorageIOError``) is reported to the machine with
  what the log really holds (``on_append_failed``): the partition stops taking records,
  ACKs nothing new, and retries by re-fetching after a backoff. The first failure is logged
  at ERROR with the data directory and its free space, later ones only counted, and the
  first append that works again is logged with the count of failures.
* Damage found by a read (or the scrub: ``Storage.take_truncations``, logged at WARNING by
  the storage) costs exactly the damaged records: they become a hole of the log, reported
  to the machine (``on_holes``), which fetches it from the other stores and the producer
  and fills it (``Persist(placement="fill")`` -> ``Storage.fill``). When the damage was at
  the end of the log, the log ends before it: the machine goes back to the true head
  (``on_truncated``) and fetches the rest as any gap.
* A ``Persist`` taken before a cut of its partition was reported is dropped (the machine
  fetches those records again); an append that does not continue the log for any other
  reason is reported like a cut: the machine goes back to the log's head. A fill that does
  not fit a hole any more (another fill or a cut came first) is dropped: the machine is told
  the holes as they are.

A RECORD larger than the store's limit (``StoreConfig.max_message_bytes``, and never more
than the log holds: ``StorageConfig.max_record_bytes``) - only a foreign producer sends one,
ours refuse such a message at the call - is stored as its *drop notice*
(``dafka.records.drop_notice``, 28 bytes naming its size) in its place: counted
(``oversized_dropped``), logged at WARNING (at most every ``DROP_LOG_INTERVAL`` seconds, with
the count since), and ACKed like any record. The partition goes on. Before, the log refused
the run, the machine fetched it again, and the partition was stuck there for good while
consumers that had the RECORD live delivered it (issue 18). Consumers skip the notice and,
with the same limit, the RECORD itself when they get it live: every reader agrees.
"""

from __future__ import annotations

import errno
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dafka.errors import DafkaError
from dafka.node import LatencyHistogram, LatencySnapshot, StoreMachine
from dafka.node.actions import KeepRuns, Persist
from dafka.records import DELETE_TOPIC, decode_delete, drop_notice
from dafka.server._log_every import LogEvery
from dafka.storage import NonContiguousAppendError, Storage, StorageIOError, Truncation

log = logging.getLogger(__name__)

HOLD_SECONDS = 0.005
"""How long after an fsync the runner leaves the writer's records unread at most
(``hold_until``): they wait in ZeroMQ's queue meanwhile (its receive watermark, 20,000 RECORDs
per peer by default, holds 5 ms at 4M RECORDs/s); with a longer fsync interval the records
after it are read as they come, as before."""

DROP_LOG_INTERVAL = 5.0
"""Seconds between two WARNING lines about RECORDs dropped for their size."""


@dataclass
class PersistenceStats:
    """Counters of a store's persistence (``StorePersistence.statistics()``)."""

    persisted_records: int = 0
    persist_errors: int = 0
    """Appends that failed (disk errors and appends that did not continue the log)."""
    truncations: int = 0
    """Damage found by reads and the scrub (each lost range refetched)."""
    records_lost: int = 0
    """Records that damage cost (the holes and cut tails above; refetched when a peer has
    them)."""
    fills: int = 0
    """Writes into holes (records a peer still held)."""
    oversized_dropped: int = 0
    """RECORDs over the store's ``max_message_bytes`` kept as drop notices."""
    deletes_applied: int = 0
    """Partitions cut by topic deletes (tombstones of ``DELETE_TOPIC``, applied when stored)."""
    bad_tombstones: int = 0
    """RECORDs of ``DELETE_TOPIC`` that are no tombstone (logged, kept, not applied)."""
    superseded_cuts: int = 0
    """Logs ended where a newer producer run resumed (the older run's records set aside)."""


@dataclass
class _Latencies:
    append_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)
    """How long each append took (with ``fsync=batch`` it includes the fsync)."""
    sync_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)
    """How long each timed fsync round (``ms:T``, ``records:N``) took."""
    durable_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)
    """From a partition's first write not yet durable to the turn it became durable (its
    ACK leaves in that turn): the store's share of a producer's ACK latency."""


class StorePersistence:
    """``storage`` under ``machine``: appends, durability reports, the shutdown flush."""

    def __init__(
        self,
        storage: Storage,
        machine: StoreMachine,
        name: str = "store",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` must be the runner's (the machine's backoff deadlines use it)."""
        self._storage = storage
        self._machine = machine
        self._name = name
        self._clock = clock
        self._stats = PersistenceStats()
        self._failing = 0
        """Appends failed in a row by the disk (0: writes work)."""
        self._waiting: dict[tuple[str, str], float] = {}
        self._latencies = _Latencies()
        self._max_bytes = min(machine.config.max_message_bytes, storage.config.max_record_bytes)
        """The largest content kept as it is (the store's limit, within what the log holds)."""
        self._drop_log = LogEvery(DROP_LOG_INTERVAL)

    def persist(self, action: Persist) -> None:
        now = self._clock()
        topic, producer = action.topic, action.producer
        if (topic, producer) in self._take_truncations(now)[0] and action.placement != "fill":
            # Taken before the cut was known: the machine went back to the log's head and
            # fetches everything after it, these records included.
            self._stats.persist_errors += 1
            return
        contents = action.contents
        if max(map(len, contents), default=0) > self._max_bytes:
            contents = self._notices(topic, producer, action.first_sequence, contents)
        if action.placement == "fill":
            self._fill(action, contents, now)
            return
        started = time.monotonic()
        try:
            self._storage.append(
                topic,
                producer,
                action.first_sequence,
                contents,
                after_gap=action.placement == "after_gap",
            )
        except NonContiguousAppendError as exc:
            self._stats.persist_errors += 1
            log.info("%s: %s; going back to the log's head", self._name, exc)
            self._machine.on_truncated(topic, producer, self._stored(topic, producer), now)
            return
        except StorageIOError as exc:
            self._stats.persist_errors += 1
            self._disk_failed(exc)
            self._machine.on_append_failed(topic, producer, self._stored(topic, producer), now)
            return
        except DafkaError as exc:  # a record the log refuses (not its size: see _notices)
            self._stats.persist_errors += 1
            log.error("%s: persist failed: %s", self._name, exc)
            return
        if self._failing:
            log.warning(
                "%s: writes to %s resume after %d failed append(s) (%s free)",
                self._name,
                self._storage.root,
                self._failing,
                self._free(),
            )
            self._failing = 0
        self._stats.persisted_records += len(action.contents)
        if topic == DELETE_TOPIC:
            self.apply_deletes(contents, now)
        self._latencies.append_seconds.observe(time.monotonic() - started)
        self._waiting.setdefault((action.topic, action.producer), started)
        if action.placement == "after_gap":
            holes = self._storage.holes(topic, producer)
            gap = f"{holes[-1][0]}..{holes[-1][1] - 1}" if holes else "before it"
            log.warning(
                "%s: %s/%s: records %s are gone (no peer holds them): kept as a hole, "
                "the log goes on from %d",
                self._name,
                topic,
                producer,
                gap,
                action.first_sequence,
            )
            self._machine.on_holes(topic, producer, holes, now)

    def keep_runs(self, action: KeepRuns) -> None:
        """Keep a partition's producer runs; with ``supersede_from``, first set the older
        run's records from there on aside (``Storage.keep_runs``: to the quarantine, never
        deleted) and say so at WARNING. A failure is logged at ERROR and the machine goes
        back to what the log really holds."""
        topic, producer, first = action.topic, action.producer, action.supersede_from
        head = self._storage.head(topic, producer)
        try:
            moved = self._storage.keep_runs(topic, producer, action.runs, first)
        except DafkaError as exc:
            log.error(
                "%s: %s/%s: keeping the producer runs failed: %s", self._name, topic, producer, exc
            )
            if first is not None:
                self._machine.on_truncated(
                    topic, producer, self._stored(topic, producer), self._clock()
                )
            return
        if first is not None and head is not None and head >= first:
            self._stats.superseded_cuts += 1
            epoch, start = action.runs[-1]
            log.warning(
                "%s: %s/%s: records %d..%d were an older run's, never acknowledged where run "
                "%d of the producer resumed at %d: set aside in %s, that run's taken instead",
                self._name,
                topic,
                producer,
                first,
                head,
                epoch,
                start,
                ", ".join(map(str, moved)) or "the quarantine",
            )

    def apply_deletes(self, contents: tuple[bytes, ...] | list[bytes], now: float) -> None:
        """Apply the tombstones in ``contents`` (RECORDs of ``DELETE_TOPIC`` just stored, or
        read back at start): each partition's records up to its cut are deleted from the
        log and the machine moves past them (``on_deleted``), before the tombstone's ACK
        leaves. Applying one again changes nothing. A disk error leaves the tombstone in
        the log: it is applied again at the next start."""
        for content in contents:
            delete = decode_delete(content)
            if delete is None:
                self._stats.bad_tombstones += 1
                log.warning(
                    "%s: a RECORD of %s is no tombstone: kept, not applied",
                    self._name,
                    DELETE_TOPIC,
                )
                continue
            for partition, cut in sorted(delete.cuts.items()):
                try:
                    applied = self._storage.delete_through(delete.topic, partition, cut)
                except StorageIOError as exc:
                    log.error(
                        "%s: deleting %s/%s up to %d failed: %s (applied again at the next start)",
                        self._name,
                        delete.topic,
                        partition,
                        cut,
                        exc,
                    )
                    continue
                except DafkaError as exc:  # a name the log cannot hold: nothing of it is here
                    log.warning(
                        "%s: tombstone of %s/%s refused: %s",
                        self._name,
                        delete.topic,
                        partition,
                        exc,
                    )
                    continue
                self._machine.on_deleted(delete.topic, partition, cut, now)
                if applied:
                    self._stats.deletes_applied += 1
                    log.info("%s: deleted %s/%s up to %d", self._name, delete.topic, partition, cut)

    def _fill(self, action: Persist, contents: tuple[bytes, ...], now: float) -> None:
        """Write records a peer still held into a hole; tell the machine the holes left."""
        topic, producer = action.topic, action.producer
        try:
            self._storage.fill(topic, producer, action.first_sequence, contents)
        except StorageIOError as exc:
            self._stats.persist_errors += 1
            self._disk_failed(exc)
        except DafkaError as exc:  # the hole changed meanwhile: the machine is told below
            self._stats.persist_errors += 1
            log.info("%s: fill dropped: %s", self._name, exc)
        else:
            self._stats.fills += 1
            self._stats.persisted_records += len(action.contents)
            log.info(
                "%s: %s/%s: records %d..%d filled from a peer",
                self._name,
                topic,
                producer,
                action.first_sequence,
                action.first_sequence + len(action.contents) - 1,
            )
            if topic == DELETE_TOPIC:  # a tombstone lost to damage, filled from a peer
                self.apply_deletes(contents, now)
        self._machine.on_holes(topic, producer, self._storage.holes(topic, producer), now)

    def _notices(
        self, topic: str, producer: str, first: int, contents: tuple[bytes, ...]
    ) -> tuple[bytes, ...]:
        """``contents`` with each one over the limit replaced by its drop notice."""
        limit = self._max_bytes
        out = []
        for offset, content in enumerate(contents):
            if len(content) <= limit:
                out.append(content)
                continue
            out.append(drop_notice(len(content)))
            self._stats.oversized_dropped += 1
            dropped = self._drop_log.take(self._stats.oversized_dropped, self._clock())
            if not dropped:
                continue
            more = dropped - 1  # this one is named, the others counted
            log.warning(
                "%s: dropped RECORD %s/%s@%d: %d bytes, over max_message_bytes=%d; a drop "
                "notice takes its place%s",
                self._name,
                topic,
                producer,
                first + offset,
                len(content),
                limit,
                f" ({more} more since the last report)" if more else "",
            )
        return tuple(out)

    def _stored(self, topic: str, producer: str) -> int:
        head = self._storage.head(topic, producer)
        return -1 if head is None else head

    def _free(self) -> str:
        try:
            return f"{shutil.disk_usage(self._storage.root).free} bytes"
        except OSError as exc:
            return f"unknown: {exc}"

    def _disk_failed(self, exc: StorageIOError) -> None:
        """Log the first failure of a run (ENOSPC says so), count the others."""
        self._failing += 1
        if self._failing > 1:
            return
        what = "disk full (ENOSPC)" if exc.errno == errno.ENOSPC else "append failed"
        log.error(
            "%s: %s in %s (%s free): %s; the partition stops ACKing and retries with backoff",
            self._name,
            what,
            self._storage.root,
            self._free(),
            exc,
        )

    def _take_truncations(self, now: float) -> tuple[set[tuple[str, str]], bool]:
        """Tell the machine of every damage found since the last call (each was logged at
        WARNING by the storage); the partitions whose log now ends earlier, and whether
        there was any damage (the machine then has FETCHes to send)."""
        cut: set[tuple[str, str]] = set()
        changed: set[tuple[str, str]] = set()
        for truncation in self._storage.take_truncations():
            self.note_damage(truncation)
            key = (truncation.topic, truncation.partition)
            changed.add(key)
            if truncation.resumed is None:  # the log now ends before it
                cut.add(key)
                self._machine.on_truncated(*key, self._stored(*key), now)
        for key in changed:
            self._machine.on_holes(*key, self._storage.holes(*key), now)
        return cut, bool(changed)

    def note_damage(self, truncation: Truncation) -> None:
        """Count one damage report (found by a read, a verify or the scrub)."""
        self._stats.truncations += 1
        self._stats.records_lost += truncation.lost or 0

    def report_durable(self, now: float) -> bool:
        storage = self._storage
        if not storage.reports_pending(now):  # (the runner asks after each action it ran)
            return False
        _, damaged = self._take_truncations(now)  # the machine then has FETCHes to send
        durable = storage.take_durable_advances()
        due = storage.next_sync_deadline()
        if due is not None and due <= now:
            started = time.monotonic()
            durable.update(storage.sync_due(now))
            if durable:
                self._latencies.sync_seconds.observe(time.monotonic() - started)
        on_durable = self._machine.on_durable
        if durable:
            done = time.monotonic()
            waiting = self._waiting
            observe = self._latencies.durable_seconds.observe
            for key in durable:
                since = waiting.pop(key, None)
                if since is not None:
                    observe(done - since)
        for (topic, partition), sequence in durable.items():
            on_durable(topic, partition, sequence, now)
        return bool(durable) or damaged

    def next_deadline(self) -> float | None:
        return self._storage.next_sync_deadline()

    def hold_until(self) -> float | None:
        """One interval after the last interval fsync, at most ``HOLD_SECONDS``: a record
        appended before then is synced then at the earliest (``Storage._arm``), so the runner
        reads the records of that time in one turn there, and they are synced and ACKed as
        they would have been - instead of a wake-up, a turn and an append per record (at
        1,000 records/s, ~5 turns per fsync). Under the interval policy alone only."""
        synced_at = self._storage.last_interval_sync()
        if synced_at is None:
            return None
        interval = self._storage.config.fsync.interval_ms or 0.0
        return synced_at + min(interval / 1000.0, HOLD_SECONDS)

    def flush(self) -> None:
        self._storage.flush()

    def statistics(self) -> PersistenceStats:
        """A copy of the counters (written by the runner thread)."""
        return PersistenceStats(**vars(self._stats))

    def latencies(self) -> dict[str, LatencySnapshot]:
        """``append_seconds``, ``sync_seconds`` (fsync rounds), ``durable_seconds`` (first
        write not yet durable -> durable and ACKed); take it in the runner thread."""
        return {name: h.snapshot() for name, h in vars(self._latencies).items()}


__all__ = ["HOLD_SECONDS", "PersistenceStats", "StorePersistence"]
