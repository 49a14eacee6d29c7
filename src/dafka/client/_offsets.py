"""A group's committed offsets, kept in the cluster: written as commit records, read back.

The format and the fold are pure (``dafka.records``, ``_offsets.py``); this module does the
I/O (docs/groups.md, "Committed offsets"):

* :class:`CommitReader` - what the stores hold: a :class:`HeadWatcher` on
  :data:`OFFSETS_TOPIC` lists every committer's partition and its head; the last RECORD of
  each partition of a group is read with a bounded :class:`Consumer` (and kept, by head, so
  a partition is read again only when it grew); a transaction's commit counts once its
  INTENT is found in the transaction log (read the same way, at the one offset named);
* :class:`GroupOffsets` - one committer of one group: its own partition of
  :data:`OFFSETS_TOPIC` (a producer named ``f"{group}~{nonce}"``, fresh per instance:
  nothing to resume), the snapshot of what it committed, and the versions seen so that a
  commit of a partition taken over from another member always ranks above it; a group
  member's commits carry the tenure under which it owns each partition (its member gives
  them at the ownership check), others the highest tenure this committer saw.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future

from dafka.client._errors import DeliveryError
from dafka.client._heads import HeadWatcher
from dafka.client._producer import Producer
from dafka.client._settings import ConsumerSettings, ProducerSettings, common_fields
from dafka.errors import ConfigError, DafkaError
from dafka.lifecycle import Closing
from dafka.records import (
    OFFSETS_TOPIC,
    TXN_TOPIC,
    CommitRecord,
    CommittedOffset,
    CorruptCommitError,
    CorruptLogError,
    IntentRecord,
    RecordMetadata,
    TxnRef,
    commit_group,
    commit_partition,
    decode_commit,
    decode_record,
    encode_commit,
    fenced_decisions,
    fold_commits,
    next_version,
    undecided_logs,
)
from dafka.transport.sockets import ZmqContext

log = logging.getLogger(__name__)

Key = tuple[str, str]
Position = int | tuple[int, int] | CommittedOffset
"""What a commit takes per partition: a RECORD offset, ``(offset, index)`` (the first
``index`` messages of that RECORD were handed out), or a :class:`CommittedOffset`."""

_FIRST_SILENCE = 1.0
"""Seconds of silence after asking again before a first read concludes that no group
committed anything (a consumer of a new group pays it once, at its start)."""

_MAX_GROUP_BYTES = 200
"""A group names partitions ``f"{group}~{nonce}.0"`` (at most 255 bytes on the wire)."""


class CommitError(DafkaError):
    """Offsets could not be committed (not stored within ``commit_timeout``) or read (no
    store answered)."""


class CommitFailedError(CommitError):
    """A group member's commit of partitions it no longer owns was refused (Kafka's
    ``CommitFailedError``): it lost them - it was counted dead, e.g. its process was paused
    for longer than ``session_timeout`` - and another member may read and commit them
    already, so its commit would move the group's position under the new owner. Nothing was
    committed; the records it handed out of them since its last commit are read again by
    their new owner. A transaction that sent those offsets is aborted. The message names
    the partitions."""


_CLAIMED: dict[str, int] = {}
"""Transaction logs claimed by a live :class:`TransactionalProducer` of this process (a
count per log): a member of this process never fences them (``spare``)."""
_CLAIMED_LOCK = threading.Lock()


def claim_log(log: str) -> None:
    """A transactional producer of this process claimed ``log`` (its own)."""
    with _CLAIMED_LOCK:
        _CLAIMED[log] = _CLAIMED.get(log, 0) + 1


def release_log(log: str) -> None:
    """The producer that claimed ``log`` closed."""
    with _CLAIMED_LOCK:
        left = _CLAIMED.get(log, 0) - 1
        if left > 0:
            _CLAIMED[log] = left
        else:
            _CLAIMED.pop(log, None)


def claimed_here(log: str) -> bool:
    """A live transactional producer of this process claimed ``log``."""
    with _CLAIMED_LOCK:
        return log in _CLAIMED


def check_group(group: object) -> str:
    """A group id: a non-empty ``str`` short enough to name its commit partitions."""
    if not isinstance(group, str) or not group.strip():
        raise ConfigError(f"group_id must be a non-empty str, got {group!r}")
    if len(group.encode("utf-8", "surrogateescape")) > _MAX_GROUP_BYTES:
        raise ConfigError(f"group_id is longer than {_MAX_GROUP_BYTES} bytes: {group!r}")
    return group


def as_committed(key: Key, position: Position, metadata: str = "") -> CommittedOffset:
    """One partition's commit request as a :class:`CommittedOffset` (version 0: set by the
    committer), checked."""
    if isinstance(position, CommittedOffset):
        offset, index, metadata = position.offset, position.index, position.metadata
    elif isinstance(position, tuple):
        offset, index = position
    else:
        offset, index = position, 0
    for what, value in (("offset", offset), ("index", index)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"commit of {key}: {what} must be an int >= 0, got {value!r}")
    return CommittedOffset(offset, index, 0, metadata)


def _reader_settings(settings: ConsumerSettings) -> ConsumerSettings:
    return ConsumerSettings(
        **common_fields(settings),
        offset_reset="earliest",
        latest_settle=0.0,
        fail_on_data_loss=True,
        enable_auto_commit=False,
    )


class CommitReader(Closing):
    """The committed offsets of groups, read from the stores (see the module docstring).

    ``settle``: seconds without a new head after asking the stores before the heads count
    as answered when a store does not say "that is all" (a C store; ours end their answers
    with HEADS-END, and then no silence is waited: ``HeadWatcher.refresh``)."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        context: ZmqContext | None = None,
        settle: float = 0.1,
    ) -> None:
        self._settings = _reader_settings(settings)
        self._context = context
        self._settle = settle
        self._lock = threading.Lock()
        self._watcher: HeadWatcher | None = None
        self._records: dict[str, tuple[int, CommitRecord | None]] = {}
        """Partition of OFFSETS_TOPIC -> (head read, its record; None: corrupt)."""
        self._decided: dict[TxnRef, bool] = {}
        """Transactions whose INTENT was found (True) or whose slot holds something else."""
        self.corrupt = 0
        """Commit records that did not decode (skipped, logged)."""
        self._greeted = False

    def heads(self, timeout: float) -> dict[Key, int]:
        """Every partition of the offsets topic (and of the transaction log once asked) with
        its head, fresh: asked from the stores now, answered within the settle window."""
        watcher = self._watcher
        if watcher is None:
            watcher = self._watcher = HeadWatcher(
                [OFFSETS_TOPIC],
                self._settings.transport(),
                refresh=1.0,
                context=self._context,
                ready_timeout=self._settings.ready_timeout,
            )
        if not self._greeted:
            # until a store greeted the watcher, its silence says nothing: a call after one
            # that found no store asks again (it read "nothing committed" before, and a
            # group member then started at offset_reset)
            watcher.wait_quiet(0.0, timeout, min_stores=1)
            if watcher.stores < 1:
                raise CommitError(
                    f"no dafka store answered within {timeout}s: committed offsets are kept "
                    "by the stores (start them, or check the towers)"
                )
            self._greeted = True
            heads = watcher.refresh(max(0.3, self._settle), timeout)
            if not watcher.last_refresh_answered and not any(
                topic == OFFSETS_TOPIC for topic, _ in heads
            ):
                # A store greeted us but no head came and no "that is all" (a C store): no
                # group ever committed, or its answers are late (a loaded host). Ask again
                # and give the answers longer: its silence cannot be told from a late answer.
                heads = watcher.refresh(_FIRST_SILENCE, timeout)
            return heads
        return watcher.refresh(self._settle, timeout)

    @property
    def refreshes_settled(self) -> int:
        """How many of this reader's asks for the heads ended on the settle window of
        silence rather than on the stores' "that is all" (``HeadWatcher.refreshes_settled``;
        with our stores, none)."""
        watcher = self._watcher
        return 0 if watcher is None else watcher.refreshes_settled

    def groups(self, timeout: float) -> list[str]:
        """The groups that have committed something."""
        found = {commit_group(p) for t, p in self.heads(timeout) if t == OFFSETS_TOPIC}
        return sorted(g for g in found if g is not None)

    def read(
        self, groups: Iterable[str] | None, timeout: float
    ) -> dict[str, dict[Key, CommittedOffset]]:
        """The committed offsets of ``groups`` (None: every group), each folded from the
        last record of each of its partitions."""
        with self._lock:
            heads = self.heads(timeout)
            wanted = None if groups is None else set(groups)
            latest: dict[str, int] = {}
            for (topic, partition), head in heads.items():
                group = commit_group(partition) if topic == OFFSETS_TOPIC else None
                if group is None or head < 0 or (wanted is not None and group not in wanted):
                    continue
                latest[partition] = head
            stale = {
                (OFFSETS_TOPIC, p): h
                for p, h in latest.items()
                if self._records.get(p, (-1, None))[0] != h
            }
            for (_, partition), content in self._read_at(stale, timeout).items():
                try:
                    record: CommitRecord | None = decode_commit(content)
                except CorruptCommitError as exc:
                    self.corrupt += 1
                    log.warning("offsets: skipped %s/%s: %s", OFFSETS_TOPIC, partition, exc)
                    record = None
                self._records[partition] = (stale[(OFFSETS_TOPIC, partition)], record)
            records = [self._records[p][1] for p in latest if p in self._records]
            present = [r for r in records if r is not None]
            self._decide([r.txn for r in present if r.txn is not None], timeout)
            by_group: dict[str, list[CommitRecord]] = {}
            for record in present:
                by_group.setdefault(record.group, []).append(record)
            decided = self._decided
            return {
                group: fold_commits(found, lambda ref: decided.get(ref, False))
                for group, found in by_group.items()
            }

    def undecided(
        self, group: str, keys: Iterable[Key], spare: Callable[[str], bool]
    ) -> dict[str, list[TxnRef]]:
        """Per transaction log: the transactions of ``group``'s last read commit records
        that commit one of ``keys`` and whose INTENT slot is not in the log yet
        (``dafka.records.undecided_logs``)."""
        with self._lock:
            records = [r for _, r in self._records.values() if r is not None and r.group == group]
            return undecided_logs(records, keys, self._decided.get, spare)

    def fenced(self, log_name: str, refs: list[TxnRef], head: int, timeout: float) -> None:
        """``log_name`` was fenced at ``head`` (a fencing claim's highest answer): decide
        ``refs`` for good - past ``head`` aborted, at or below it by the record stored
        there, read now (:class:`CommitError` if it cannot be: a decision must not be
        guessed)."""
        aborted, to_read = fenced_decisions(refs, head)
        with self._lock:
            self._decided.update(aborted)
            for ref in to_read:
                if ref in self._decided:
                    continue
                content = self._read_at({(TXN_TOPIC, log_name): ref.at}, timeout).get(
                    (TXN_TOPIC, log_name)
                )
                if content is None:
                    raise CommitError(
                        f"transaction log {log_name}: record {ref.at} is stored (the fence "
                        f"answered head {head}) but could not be read within {timeout}s"
                    )
                try:
                    record = decode_record(content)
                except CorruptLogError:
                    record = None
                self._decided[ref] = isinstance(record, IntentRecord) and record.txn == ref.txn

    def _decide(self, refs: list[TxnRef], timeout: float) -> None:
        """Learn whether each transaction's INTENT is in its log (at the offset named)."""
        open_refs = [r for r in refs if not self._decided.get(r, False) and r not in self._decided]
        if not open_refs:
            return
        watcher = self._watcher
        assert watcher is not None
        if TXN_TOPIC not in watcher.topics:
            watcher.subscribe(TXN_TOPIC)
        heads = watcher.refresh(max(0.3, self._settle), timeout)
        # Several open transactions may name one log (instances of one transactional id
        # each commit through a committer of their own): each is judged by its own slot,
        # read one slot per log per round - never by another's (a transaction 0 of each).
        left = sorted(
            {(r.log, r.at) for r in open_refs if heads.get((TXN_TOPIC, r.log), -1) >= r.at}
        )
        slots: dict[tuple[str, int], bytes] = {}
        while left:
            wanted: dict[Key, int] = {}
            later: list[tuple[str, int]] = []
            for log_name, at in left:
                if (TXN_TOPIC, log_name) in wanted:
                    later.append((log_name, at))
                else:
                    wanted[(TXN_TOPIC, log_name)] = at
            for (_, log_name), stored in self._read_at(wanted, timeout).items():
                slots[(log_name, wanted[(TXN_TOPIC, log_name)])] = stored
            left = later
        for ref in open_refs:
            content = slots.get((ref.log, ref.at))
            if content is None:
                continue  # not written yet: not committed (yet)
            try:
                record = decode_record(content)
            except CorruptLogError:
                record = None
            self._decided[ref] = isinstance(record, IntentRecord) and record.txn == ref.txn

    def _read_at(self, offsets: Mapping[Key, int], timeout: float) -> dict[Key, bytes]:
        """The RECORD at ``offsets[key]`` of each partition (a bounded read)."""
        if not offsets:
            return {}
        from dafka.client._consumer import Consumer

        out: dict[Key, bytes] = {}
        with Consumer(
            assign=dict(offsets),
            end_offsets={k: o + 1 for k, o in offsets.items()},
            settings=self._settings,
            context=self._context,
        ) as reader:
            try:
                for columns in reader.read_to_end(timeout):
                    for topic, partition, offset, value in zip(
                        columns.topics,
                        columns.partitions,
                        columns.offsets,
                        columns.values,
                        strict=True,
                    ):
                        if offsets.get((topic, partition)) == offset:
                            out[(topic, partition)] = bytes(value)
            except DafkaError as exc:
                raise CommitError(f"committed offsets could not be read: {exc}") from exc
        return out

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()


class GroupOffsets(Closing):
    """One committer of ``group``: :meth:`commit` writes its snapshot, :meth:`committed`
    reads the group's (see the module docstring). ``writer``: who commits (logged in each
    record; ties of equal versions are broken by it)."""

    def __init__(
        self,
        group: str,
        settings: ConsumerSettings,
        *,
        writer: str,
        context: ZmqContext | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.group = check_group(group)
        self.writer = writer
        self._settings = settings
        self._context = context
        self._clock = clock
        self.nonce = f"{time.time_ns():016x}{os.urandom(4).hex()}"
        self.partition = commit_partition(group, self.nonce)
        self._lock = threading.Lock()
        self._own: dict[Key, CommittedOffset] = {}
        self._seen: dict[Key, int] = {}
        self._tenures: dict[Key, int] = {}
        """The highest tenure seen per partition (read or committed): what a commit made
        without a member's tenure carries (it ranks among that owner's commits by version)."""
        self._pending: dict[Key, CommittedOffset] = {}
        """Offsets sent in the open transaction (``commit_async(txn=)``), not decided yet."""
        self._last: Future[None] | None = None
        self._producer: Producer | None = None
        self._starting: Future[Producer] | None = None
        self._reader: CommitReader | None = None
        self._closed = False
        self.logs_fenced: list[str] = []
        """Transaction logs this committer's member fenced before a take
        (:meth:`committed_for_take`)."""
        self.fences_failed = 0
        """Fences that got no store's answer in time (the take went on unfenced, logged
        at ERROR)."""
        self._unfenceable: set[str] = set()
        """Logs whose fence failed: not tried again (each try waits for the stores)."""

    def start_writer(self) -> None:
        """Start the commit producer in the background (a group consumer does at once, so
        that its first commit - maybe an auto-commit inside an asyncio poll - waits for
        no node start)."""
        with self._lock:
            if self._starting is not None or self._producer is not None:
                return
            starting: Future[Producer] = Future()
            self._starting = starting

        def run() -> None:
            try:
                starting.set_result(self._new_writer())
            except BaseException as exc:
                starting.set_exception(exc)

        threading.Thread(target=run, name=f"offsets-{self.group}", daemon=True).start()

    # -- writing ----------------------------------------------------------------------------

    def commit_async(
        self,
        offsets: Mapping[Key, Position],
        metadata: str = "",
        *,
        txn: TxnRef | None = None,
        tenures: Mapping[Key, int] | None = None,
    ) -> Future[None]:
        """Commit ``offsets``; the future resolves once the stores hold the record (fails
        with :class:`CommitError`). Unchanged offsets keep their version; nothing changed
        and something committed before: the last commit's future.

        ``txn``: the offsets are sent in that transaction (they count once its INTENT is
        in the log; :meth:`transaction_decided` / :meth:`transaction_aborted` then tell
        this committer which way it went). ``tenures``: the tenure under which a group
        member owns each partition (``Membership.refuse_lost``); a partition without one
        carries the highest tenure this committer saw of it."""
        requested = {key: as_committed(key, pos, metadata) for key, pos in offsets.items()}
        with self._lock:
            if self._closed:
                raise CommitError(f"commit on a closed committer of group {self.group!r}")
            now_us = int(self._clock() * 1_000_000)
            into = self._own if txn is None else self._pending
            changed = txn is not None
            for key, want in requested.items():
                if tenures is not None and key in tenures:
                    tenure = tenures[key]
                else:
                    tenure = self._tenures.get(key, 0)
                held = into.get(key) or self._own.get(key)
                if held is not None and (
                    held.offset,
                    held.index,
                    held.metadata,
                    held.tenure,
                ) == (want.offset, want.index, want.metadata, tenure):
                    into[key] = held
                    continue
                seen = max(self._seen.get(key, 0), held.version if held else 0)
                version = next_version(now_us, seen)
                into[key] = CommittedOffset(want.offset, want.index, version, want.metadata, tenure)
                self._seen[key] = version
                if tenure > self._tenures.get(key, 0):
                    self._tenures[key] = tenure
                changed = True
            if not changed and self._last is not None:
                return self._last
            if txn is None:
                record = CommitRecord(self.group, self.writer, dict(self._own))
            else:
                record = CommitRecord(
                    self.group, self.writer, dict(self._pending), txn, dict(self._own)
                )
            stored = self._writer().send(encode_commit(record))
            done: Future[None] = Future()
            group = self.group

            def resolved(f: Future[RecordMetadata]) -> None:
                error = f.exception()
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(CommitError(f"commit of group {group!r} failed: {error}"))

            stored.add_done_callback(resolved)
            self._last = done
            return done

    def transaction_decided(self) -> None:
        """The transaction the pending offsets were sent in reached its commit point."""
        with self._lock:
            self._own.update(self._pending)
            self._pending = {}

    def transaction_aborted(self) -> None:
        """The transaction the pending offsets were sent in was rolled back."""
        with self._lock:
            self._pending = {}

    def own(self) -> dict[Key, int]:
        """The offsets this committer committed (its snapshot), by partition."""
        with self._lock:
            return {key: c.offset for key, c in self._own.items()}

    @property
    def pending(self) -> bool:
        """Offsets were sent in the open transaction."""
        return bool(self._pending)

    def seen(self, versions: Mapping[Key, int]) -> None:
        """Versions another committer of the group read (a consumer whose positions a
        transaction commits): commits of those partitions rank above them."""
        with self._lock:
            for key, version in versions.items():
                if version > self._seen.get(key, 0):
                    self._seen[key] = version

    def versions(self) -> dict[Key, int]:
        """The highest version seen per partition (read or committed)."""
        with self._lock:
            return dict(self._seen)

    def commit(
        self,
        offsets: Mapping[Key, Position],
        timeout: float | None = None,
        metadata: str = "",
        *,
        txn: TxnRef | None = None,
        tenures: Mapping[Key, int] | None = None,
    ) -> None:
        """:meth:`commit_async` and wait until the stores hold it."""
        timeout = self._settings.commit_timeout if timeout is None else timeout
        future = self.commit_async(offsets, metadata, txn=txn, tenures=tenures)
        try:
            future.result(timeout)
        except TimeoutError:
            raise CommitError(
                f"commit of group {self.group!r} not stored within {timeout}s (is a store up?)"
            ) from None

    def _writer(self) -> Producer:
        """The commit producer (the lock is held)."""
        if self._producer is None:
            starting = self._starting
            if starting is None:
                self._producer = self._new_writer()
            else:
                try:
                    self._producer = starting.result(self._settings.ready_timeout + 5)
                except Exception as exc:
                    self._starting = None
                    raise CommitError(f"group {self.group!r}: commit producer: {exc}") from exc
        return self._producer

    def _new_writer(self) -> Producer:
        s = self._settings
        return Producer(
            OFFSETS_TOPIC,
            settings=ProducerSettings(
                **common_fields(s),
                name=self.partition[:-2],
                partitions=1,
                batching=False,
                resume=False,
                linger_ms=0.0,
                delivery_timeout=s.commit_timeout,
            ),
            context=self._context,
        )

    # -- reading ----------------------------------------------------------------------------

    def committed(
        self, partitions: Iterable[Key] | None = None, timeout: float | None = None
    ) -> dict[Key, CommittedOffset]:
        """The group's committed offsets (of ``partitions``; None: all), as the stores hold
        them now; a partition without a commit is absent."""
        timeout = self._settings.commit_timeout if timeout is None else timeout
        with self._lock:
            if self._reader is None:
                self._reader = CommitReader(self._settings, context=self._context)
            reader = self._reader
        found = reader.read([self.group], timeout).get(self.group, {})
        with self._lock:
            for key, offset in found.items():
                if offset.version > self._seen.get(key, 0):
                    self._seen[key] = offset.version
                if offset.tenure > self._tenures.get(key, 0):
                    self._tenures[key] = offset.tenure
        if partitions is None:
            return found
        return {key: found[key] for key in partitions if key in found}

    def committed_for_take(
        self,
        partitions: Iterable[Key],
        timeout: float | None = None,
        *,
        spare: Callable[[str], bool] = lambda _: False,
    ) -> dict[Key, CommittedOffset]:
        """:meth:`committed` of ``partitions`` for a member that starts them from the
        group's commits (a take nobody handed over): first it fences the transaction log
        of every transaction of theirs whose INTENT is not in its log yet - the previous
        owner may be paused between its last ownership check and that INTENT - and
        decides those transactions for good, then reads again (docs/groups.md, "Fencing
        the previous owner's log"). ``spare``: logs of this member's own producer."""
        keys = list(partitions)
        timeout = self._settings.commit_timeout if timeout is None else timeout
        found = self.committed(keys, timeout)
        reader = self._reader
        assert reader is not None
        todo = reader.undecided(self.group, keys, spare)
        if not todo:
            return found
        for log_name, refs in todo.items():
            if log_name in self._unfenceable:
                continue  # refused before: the take goes on unfenced without waiting again
            try:
                head = fence_log(log_name, self._settings, context=self._context)
            except CommitError as exc:
                with self._lock:
                    self.fences_failed += 1
                    self._unfenceable.add(log_name)
                log.error(
                    "group %s: taking %s unfenced: %s; a member paused in that transaction "
                    "could still commit it (its output then twice in the read-committed "
                    "output)",
                    self.group,
                    sorted(keys),
                    exc,
                )
                continue
            with self._lock:
                self.logs_fenced.append(log_name)
            log.info(
                "group %s: fenced %s at %d (undecided transactions %s of %s)",
                self.group,
                log_name,
                head,
                [r.txn for r in refs],
                sorted(keys),
            )
            reader.fenced(log_name, refs, head, timeout)
        return self.committed(keys, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Wait for the commits in flight (up to ``timeout``), then leave."""
        with self._lock:
            self._closed = True
            producer, reader, starting = self._producer, self._reader, self._starting
        if producer is None and starting is not None:
            with contextlib.suppress(Exception):
                producer = starting.result(timeout)
        if producer is not None:
            with contextlib.suppress(DeliveryError, DafkaError):
                producer.flush(timeout)
            producer.close(timeout)
        if reader is not None:
            reader.close()


def fence_log(log_name: str, settings: ConsumerSettings, *, context: ZmqContext | None) -> int:
    """Fence the transaction log ``log_name`` (``f"{tid}~.0"``) as a new instance of its
    transactional id claims it - a fencing resume of its producer (docs/exactly-once.md,
    "Recovery" step 1): every store that answers refuses, from then on, what the log's
    older runs send past what it holds (their INTENT: ``ProducerFencedError`` for them).
    Writes nothing. Returns the highest head answered: no INTENT of an older run is ever
    stored above it. The stores it reaches within ``resume_timeout`` answer; none (none
    reachable, or each refused the claim: with an ACL only the log's own key may send it,
    docs/security.md): a :class:`CommitError` saying so."""
    try:
        fencer = Producer(
            TXN_TOPIC,
            settings=ProducerSettings(
                **common_fields(settings),
                name=log_name[:-2],
                partitions=1,
                resume=True,
                batching=False,
            ),
            context=context,
        )
    except DafkaError as exc:
        raise CommitError(f"could not fence the transaction log {log_name}: {exc}") from exc
    try:
        head = fencer.start_offsets[log_name] - 1
    finally:
        with contextlib.suppress(DafkaError):
            fencer.close(0)
    if head < 0:
        # The log holds records (a transaction named it), so a store that holds it and took
        # the claim answered its head. None did: the claim was refused (with an ACL only
        # the log's own key may send it) and the resume ended on its settle window.
        raise CommitError(
            f"no store answered the fencing claim of the transaction log {log_name} with "
            "its head (refused: on a secured cluster only the log's own key may fence it)"
        )
    return head


__all__ = [
    "CommitError",
    "CommitFailedError",
    "CommitReader",
    "GroupOffsets",
    "Position",
    "as_committed",
    "check_group",
    "claim_log",
    "claimed_here",
    "fence_log",
    "release_log",
]
