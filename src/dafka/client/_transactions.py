"""The transactional producer: atomic writes across partitions, fenced, recoverable.

The design, and why a commit is atomic even when the producer dies in the middle of it, is
in docs/exactly-once.md. In short:

* data goes to the partitions ``f"{tid}.{i}"`` of the topic (a named :class:`Producer`,
  resumed after the stored heads), in batches whose messages carry v1 UUIDs:
  ``CONTINUE_TXN`` inside a transaction (ProducerID ``p_txn``), ``OUTSIDE_TXN`` outside
  (ProducerID ``p_out``);
* the instances of an id share one log partition in :data:`TXN_TOPIC` (``f"{tid}~.0"``),
  each a new run of one named producer: an ``EPOCH`` record first, an ``INTENT`` per commit
  (the commit point, written before any ACK), ``RECOVERED`` once its predecessors'
  leftovers are resolved;
* at start an instance claims the id: the log's fencing resume makes every store that
  answers refuse the earlier instances' writes past what it holds, so the log through the
  highest answer is final (no lease to wait); it reads it, appends its EPOCH, resumes the
  data partitions (fencing them the same way), then appends to every partition the
  predecessor's last ACK (finishing its last commit or rolling back an open transaction:
  the same bytes either way), then its own opening ACK;
* an instance is fenced (:class:`ProducerFencedError`) once the stores refuse its writes
  for a later instance's run, or it reads a later EPOCH in the log; it checks before every
  INTENT and at least every ``txn_lease / 4``.

Fault injection: ``commit_fault=`` (a :class:`CommitFault`, e.g.
``dafka.testing.crash_mid_commit(k)``) is called between the ACKs of a commit's fan-out, so
that a test can kill the process with exactly ``k`` ACKs stored; the producer reads no
environment and has no test branch of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from itertools import accumulate, repeat
from operator import add, itemgetter
from typing import Any, Protocol, cast

from dafka.client._consumer import Consumer
from dafka.client._errors import DeliveryError, RunFencedError
from dafka.client._metrics import ProducerMetrics
from dafka.client._offsets import (
    CommitFailedError,
    GroupOffsets,
    Position,
    check_group,
    claim_log,
    release_log,
)
from dafka.client._producer import (
    ROUTE_CACHE,
    OnDelivery,
    Producer,
    check_headers,
    check_timestamp,
    many_arguments,
)
from dafka.client._settings import (
    ConsumerSettings,
    ProducerSettings,
    common_fields,
    resolve_settings,
)
from dafka.client._txn_state import TransactionState, TransactionStatus
from dafka.errors import ConfigError, MessageTooLargeError
from dafka.lifecycle import Closing
from dafka.message import Clock, Flags, build_uuid, build_uuids, fnv1a32, new_producer_id
from dafka.node import BackpressureError
from dafka.records import (
    HEADER_OVERHEAD,
    HEADER_SIZE,
    MESSAGE_OVERHEAD,
    TXN_TOPIC,
    CorruptLogError,
    EpochRecord,
    InstanceState,
    IntentRecord,
    LogRecord,
    Pin,
    ProducerFencedError,
    Record,
    RecordMetadata,
    RecoveredRecord,
    TransactionError,
    TxnRef,
    ack_uuid,
    decode_at,
    encode_batch,
    encode_record,
    instance_state,
    is_shared_log,
    log_owner,
    log_segments,
    obligations,
    segment_offset,
    shared_log_partition,
)
from dafka.transport.sockets import ZmqContext


class CommitFault(Protocol):
    """A fault injected into a commit's ACK fan-out (``TransactionalProducer(commit_fault=)``).

    Called before each ACK is sent with how many ACKs of this commit are stored; with one
    installed the fan-out stores the ACKs one at a time, so that the count is exact. What it
    does is the fault: ``dafka.testing.crash_mid_commit`` SIGKILLs the process."""

    def __call__(self, stored: int) -> None: ...


log = logging.getLogger(__name__)

LOG_WINDOW = 128
"""Records of the shared log a starting instance reads first, back from its head; it reads
further back only until it holds its predecessor's whole segment and the segments that one
left unresolved (``_read_shared_log``, ``_epoch_before``)."""


class _OpenBatch:
    """The messages of one partition not yet sent: the columns of its next RECORD.

    ``waiters``: (position, future) of the messages sent with :meth:`send` (a bulk call adds
    none: completing its RECORD costs nothing per message unless ``on_delivery`` is set)."""

    __slots__ = (
        "cut",
        "cut_weight",
        "headed",
        "headers",
        "keys",
        "timestamps",
        "uuids",
        "values",
        "waiters",
        "weight",
    )

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.keys: list[bytes | None] = []
        self.headers: list[tuple[tuple[str, bytes], ...] | None] = []
        self.headed = False
        """A message has headers (else the column is left out)."""
        self.timestamps: list[int] = []
        self.uuids: list[bytes] = []
        self.waiters: list[tuple[int, Future[RecordMetadata]]] = []
        self.weight = 0
        """The most its batch can weigh beyond the batch header (``max_message_bytes``);
        the batch is sent once it reaches ``batch_size``."""
        self.cut = 0
        """The first ``cut`` messages belong to transactions whose pipelined commit was
        requested and not yet taken by the committer (``commit_transaction_nowait``): the
        batch stays open across them, and is cut there when it is sent (their group's ACK
        goes between them and the rest)."""
        self.cut_weight = 0
        """The weight of those ``cut`` messages."""

    def take_head(self) -> _OpenBatch:
        """Split off the first ``cut`` messages as a batch of their own (returned); this one
        keeps the rest, with ``cut`` 0."""
        cut = self.cut
        head = _OpenBatch()
        head.values, self.values = self.values[:cut], self.values[cut:]
        head.keys, self.keys = self.keys[:cut], self.keys[cut:]
        head.headers, self.headers = self.headers[:cut], self.headers[cut:]
        if self.headed:
            head.headed = any(head.headers)
            self.headed = any(self.headers)
        head.timestamps, self.timestamps = self.timestamps[:cut], self.timestamps[cut:]
        head.uuids, self.uuids = self.uuids[:cut], self.uuids[cut:]
        if self.waiters:
            head.waiters = [(i, f) for i, f in self.waiters if i < cut]
            self.waiters = [(i - cut, f) for i, f in self.waiters if i >= cut]
        head.weight = self.cut_weight
        self.weight -= self.cut_weight
        self.cut = self.cut_weight = 0
        return head

    def encode(self) -> bytes:
        """The batch as a RECORD's content (the batch format)."""
        return encode_batch(
            self.values,
            self.keys,
            self.headers if self.headed else None,
            self.timestamps,
            self.uuids,
        )


@dataclasses.dataclass(slots=True)
class _Pending:
    """A commit requested with :meth:`TransactionalProducer.commit_transaction_nowait`."""

    txn: int
    acks: dict[str, bytes]
    """Partition -> its ACK, minted when the commit was requested (before any clock of a
    later transaction: the ACK commits this transaction's messages and none after)."""
    future: Future[None]


MAX_PENDING_COMMITS = 256
"""Pipelined commits requested and not yet taken by the committer before a request waits: a
cap on the futures waiting and on how long a request waits for its decision. What their
transactions hold is bounded in bytes (``max_pending_commit_bytes``, ``_wait_for_room``), so
that large transactions do not hold a count's worth of RECORDs. A deeper cap (4,096) gained
0.62x -> 0.66x of the batched producer with 2 stores (within the rounds' spread) and raised a
request's decision p50 41 -> 46-183 ms, p99 77 -> 400 ms (docs/exactly-once.md): the
committer's pace bounds the rate, so a deeper queue only adds wait."""


class TransactionalProducer(Closing):
    """``Producer(topic, transactional_id="w", towers=...)``: see the module docstring.

    Settings are :class:`ProducerSettings` (``partitions``, ``towers``, ``batch_size``...);
    ``name`` is the transactional id. ``txn_lease``: an idle instance checks for a successor
    every ``txn_lease / 4`` s (the stores refuse a fenced instance's writes whenever it
    checks); a new instance waits it only for a predecessor of the earlier log layout,
    which no store can fence. ``commit_fault``: a fault injector for tests
    (:class:`CommitFault`); ``intent_fault``: one called with the partitions of the
    transaction's group offsets after :meth:`commit_transaction`'s last ownership check
    and before its INTENT (``dafka.testing.stop_mid_commit``: a member paused there).
    """

    def __init__(
        self,
        topic: str,
        transactional_id: str,
        *,
        settings: ProducerSettings | None = None,
        txn_lease: float = 5.0,
        log_topic: str = TXN_TOPIC,
        context: ZmqContext | None = None,
        commit_fault: CommitFault | None = None,
        intent_fault: Callable[[Sequence[tuple[str, str]]], object] | None = None,
        on_delivery: OnDelivery | None = None,
        **fields: Any,
    ) -> None:
        if not isinstance(transactional_id, str) or not transactional_id or "~" in transactional_id:
            raise ConfigError(
                f"transactional_id must be a non-empty str without '~': {transactional_id!r}"
            )
        if not txn_lease > 0:
            raise ConfigError(f"txn_lease must be > 0, got {txn_lease!r}")
        s = resolve_settings(ProducerSettings, settings, fields)
        self.settings = dataclasses.replace(s, name=transactional_id, batching=False, resume=True)
        self.topic = topic
        self.transactional_id = transactional_id
        self.txn_lease = float(txn_lease)
        self._log_topic = log_topic
        self._context = context
        self._lock = threading.RLock()
        self._clock = Clock()
        self._clock.update()
        self.p_txn = new_producer_id()
        self.p_out = new_producer_id()
        self.nonce = f"{time.time_ns():016x}{os.urandom(4).hex()}"
        self.partitions: tuple[str, ...] = tuple(
            f"{transactional_id}.{i}" for i in range(s.partitions)
        )
        self._open: dict[int, _OpenBatch] = {}
        self._route_cache: dict[bytes | None, int] = {}
        """Key -> partition index, across calls (``_by_partition``; at most ``ROUTE_CACHE``)."""
        self._touched: dict[int, None] = {}  # partitions written by the open transaction
        self._status = TransactionStatus()
        self._deciding: tuple[tuple[str, bytes], ...] = ()
        """COMMITTING: the INTENT's ACKs; ABORTING: the rolling-back ones (re-sent as they
        are when the call is repeated)."""
        self._txn = 0
        self._mine: int | None = None  # the offset of our EPOCH in the shared log, once written
        self._scanned = 0
        """How far the shared log was looked through for a later EPOCH."""
        self._stop = threading.Event()
        self._logs: dict[str, list[bytes]] = {}
        """Logs of the earlier layout (one per instance), from 0: read only when the shared
        log holds no instance yet."""
        self._shared: dict[int, bytes] = {}
        """Records of the shared log read so far, by offset (from its end back, then live)."""
        self.log_records_read = 0
        """Records of the shared log the start read to find its predecessor's (bounded by
        the predecessor's segment and what it left unresolved, not by the log's length)."""
        self._commit_fault = commit_fault
        self._intent_fault = intent_fault
        self._claimed = False
        """This instance registered its log as claimed in this process (``claim_log``)."""
        self._on_delivery = on_delivery
        self._room_bytes = s.max_message_bytes - HEADER_SIZE
        self._max_held = s.max_pending_commit_bytes
        """The most a RECORD's messages may weigh beyond the batch header."""
        self._log: Producer | None = None
        self._watch: Consumer | None = None
        self._data: Producer | None = None
        self._log_next = 0
        """The offset of this instance's next log record (it is the log's only writer)."""
        self._offsets: dict[str, GroupOffsets] = {}
        """Per group: the committer of the offsets sent in transactions."""
        self._offset_owners: list[tuple[Consumer, dict[tuple[str, str], int]]] = []
        """The open transaction's offsets sent for a group member, with the tenure under
        which it owned each: checked again just before the INTENT (the member may have lost
        them since - a paused process - and maybe taken them again)."""
        self.resolved: list[str] = []
        """Log partitions of predecessors this instance resolved at start."""
        # Pipelined commits (commit_transaction_nowait): see _run_commits.
        self._wake = threading.Condition(self._lock)
        self._groups: list[_Pending] = []
        """Commits requested and not yet taken by the committer thread."""
        self._busy = False
        """The committer thread is deciding a group of commits."""
        self._hold = False
        """RECORDs wait in ``_held`` (a requested commit's ACKs are not queued yet)."""
        self._held: list[tuple[int, int, bytes, list[tuple[int, Future[RecordMetadata]]], int]] = []
        """(txn, partition index, content, waiters, count) of each RECORD held, in order
        (``txn``: the transaction of its last message)."""
        self._held_bytes = 0
        """The contents' bytes of ``_held``: at most ``max_pending_commit_bytes`` before a
        call waits (``_wait_for_room``)."""
        self._requested = -1
        """The transaction of the latest pipelined commit requested."""
        self._committer: threading.Thread | None = None
        self._commit_error: BaseException | None = None
        """Why a pipelined commit failed: every later call raises it."""
        try:
            self._start()
        except BaseException:
            if self._status.state is TransactionState.STARTING:
                self._status.move(TransactionState.CLOSED)
            self._shutdown()
            raise
        self._status.move(TransactionState.READY)

    # -- start: claim, wait, resolve --------------------------------------------------------

    def _start(self) -> None:
        s = self.settings
        log = self.log_partition = shared_log_partition(self.transactional_id)
        self._watch = Consumer(
            [self._log_topic],
            settings=ConsumerSettings(
                **common_fields(s),  # the same reach: a secured cluster's keys too
                offset_reset="latest",  # the shared log is read by seek (_read_shared_log)
                heads_refresh=max(0.25, self.txn_lease / 4),
            ),
            context=self._context,
        )
        # The claim: a new run of the shared log's producer. Its fencing resume makes every
        # store that answers refuse the earlier instances' log records past what it holds,
        # and the answers say what that is: the log through ``head`` is all there will ever
        # be of them (docs/exactly-once.md, "Fencing"); no lease to wait.
        self._log = Producer(
            self._log_topic,
            settings=dataclasses.replace(
                s, name=log[:-2], partitions=1, resume=True, batching=False, backpressure="block"
            ),
            context=self._context,
        )
        head = self._log.start_offsets[log] - 1
        claim_log(log)  # a group member of this process never fences it (before a take)
        self._claimed = True
        deadline = time.monotonic() + s.resume_timeout
        self._read_all_logs(deadline)
        segments = dict(self._read_shared_log(head, deadline))
        self.log_records_read = len(self._shared)
        logs: dict[str, Sequence[bytes]] = {**self._logs, **segments}
        predecessor: InstanceState | None = None
        if segments:
            name, contents = list(segments.items())[-1]
            predecessor = instance_state(name, contents)
        else:  # the earlier layout: one log per instance, fenced by a lease
            self._read_earlier_layout(deadline)
            older = {n: st for n, st in self._instances().items() if not is_shared_log(n)}
            predecessor = max(older.values(), key=InstanceState.key, default=None)
        epoch = 1 if predecessor is None else predecessor.epoch.epoch + 1
        pins = () if predecessor is None else (Pin(predecessor.log, -1),)
        self._c0 = self._clock.tick()
        self.epoch = EpochRecord(
            epoch,
            self.nonce,
            self.topic,
            self.partitions,
            self.p_txn,
            self.p_out,
            self._c0,
            pins,
        )
        self._append_log(self.epoch)
        self._mine = self._log_next - 1
        self._scanned = self._mine + 1
        if predecessor is not None and not predecessor.log.startswith(f"{log}@"):
            # an instance of the earlier layout takes no fence: wait one lease, so that it
            # reads our EPOCH and stops writing, then read its whole log
            lease_end = time.monotonic() + self.txn_lease
            while time.monotonic() < lease_end:
                self._ingest(timeout=min(0.1, max(0.0, lease_end - time.monotonic())))
                self._check_fenced()
            logs = {**self._logs, **segments}
            predecessor = instance_state(predecessor.log, logs[predecessor.log])
        todo: list[InstanceState] = []
        if predecessor is not None:
            if segments and any(
                segment_offset(log, pin.log) is None
                for state in (predecessor, *(instance_state(n, c) for n, c in segments.items()))
                if state is not None
                for pin in state.unresolved_pins
            ):  # a pin of the earlier layout: its log is read whole
                self._read_earlier_layout(deadline)
                logs = {**self._logs, **segments}
            todo = obligations(predecessor, logs)
        # The data partitions' resume fences the predecessor's data runs the same way.
        # It blocks at its in-flight bound, whatever ``backpressure`` says: a RECORD handed
        # to it holds messages this producer already accepted (earlier calls' too), and one
        # it refused would be gone from a transaction that then commits without it.
        # ``backpressure="error"`` is this producer's, before a call queues anything
        # (``_refuse_at_bounds``).
        self._data = Producer(
            self.topic, settings=dataclasses.replace(s, backpressure="block"), context=self._context
        )
        self._route = _routing_keys(self._data, len(self.partitions))
        for state in todo:
            for partition, ack in state.resolving_acks():
                if partition not in self.partitions:
                    raise ConfigError(
                        f"transactional_id {self.transactional_id!r} was used with partition "
                        f"{partition}; start it with the same partitions ({state.epoch.partitions})"
                    )
                self._send_ack(partition, ack)
        opening = ack_uuid(self.p_txn, self._c0)
        for partition in self.partitions:
            self._send_ack(partition, opening)
        self._flush_data(s.delivery_timeout)
        self._last_ack = dict.fromkeys(self.partitions, opening)
        self.resolved = [st.log for st in todo]
        self._append_log(RecoveredRecord(tuple(self.resolved)))
        self._checked = time.monotonic()
        self._watchdog = threading.Thread(
            target=self._watch_for_successor,
            name=f"txn-watchdog-{self.transactional_id}",
            daemon=True,
        )
        self._watchdog.start()

    def _watch_for_successor(self) -> None:
        """Notice a successor even while idle, and then leave the cluster at once.

        A fenced instance must release its partition identities quickly: its successor
        resumes them after one lease, and Dafka allows one live writer per identity.
        """
        period = self.txn_lease / 4
        while not self._stop.wait(period):
            with self._lock:
                if self._status.state in (TransactionState.CLOSED, TransactionState.FENCED):
                    return
                try:
                    self._fence_check(force=True)
                except ProducerFencedError:  # released by the check
                    return
                except Exception:  # the next call reports the node failure
                    return

    def _read_shared_log(self, head: int, deadline: float) -> list[tuple[str, list[bytes]]]:
        """The segments of the shared log through ``head`` (the claim's answer) that the
        start needs: the predecessor's (the last) and those it left unresolved, read back
        from the head - ``LOG_WINDOW`` records, then back to the EPOCH of the instance whose
        record begins them (``_epoch_before``) and to every segment its obligations pin
        (earlier segments are never read:
        a start no longer reads every commit ever made, issue 23). Then the log is read
        live after it (the fencing check)."""
        log = self.log_partition
        watch = self._watch
        assert watch is not None
        start = max(0, head + 1 - LOG_WINDOW)
        while True:
            watch.seek(self._log_topic, log, start)
            if head < 0:
                return []
            at = start
            while at <= head:
                if at in self._shared:
                    at += 1
                    continue
                if time.monotonic() > deadline:
                    raise DeliveryError(
                        f"transactional producer {self.transactional_id!r}: could not read "
                        f"its log {log} through {head} within {self.settings.resume_timeout}s"
                    )
                self._ingest(timeout=0.05)
            shared = self._shared
            segments = log_segments(log, [shared[o] for o in range(start, head + 1)], start)
            if not segments:  # no EPOCH in what was read: read back to it
                start = _epoch_before(log, start, shared[start], head)
                continue
            pinned = _pinned_before(log, segments, start)
            if pinned is None:
                return segments
            start = pinned

    def _read_earlier_layout(self, deadline: float) -> None:
        """Read every log of the earlier layout of this id from 0 (the shared log holds no
        instance yet: the predecessor, if any, wrote one of those)."""
        watch = self._watch
        assert watch is not None
        tid = self.transactional_id
        heads = {
            partition: head
            for (topic, partition), head in watch.heads().items()
            if topic == self._log_topic
            and head >= 0
            and log_owner(partition) == tid
            and not is_shared_log(partition)
        }
        for partition in heads:
            self._logs.pop(partition, None)
            watch.seek(self._log_topic, partition, 0)
        while any(len(self._logs.get(p, ())) <= head for p, head in heads.items()):
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"transactional producer {tid!r}: could not read the logs of its "
                    f"earlier instances ({sorted(heads)}) within {self.settings.resume_timeout}s"
                )
            self._ingest(timeout=0.05)

    def _read_all_logs(self, deadline: float) -> None:
        """Wait until a store greeted us and every store answered the log topic's heads:
        once every store said "that is all" of the log topic (HEADS-END), or else a settle
        window after the first greeting (a store that does not say it)."""
        watch = self._watch
        assert watch is not None
        greeted: float | None = None
        settle = max(0.5, 1.5 * self.settings.beacon_interval)
        while True:
            self._ingest(timeout=0.05)
            now = time.monotonic()
            stats = watch.statistics()
            if greeted is None and stats.stores_known > 0:
                greeted = now
            answered = self._log_topic in stats.heads_answered
            if greeted is not None and (answered or now - greeted >= settle) and watch.at_end():
                return
            if now > deadline:
                raise DeliveryError(
                    f"transactional producer {self.transactional_id!r}: could not read the "
                    f"transaction logs ({self._log_topic}) from a store within "
                    f"{self.settings.resume_timeout}s"
                )

    def _ingest(self, timeout: float) -> None:
        """Take what the watch consumer read of the log topic (records of every log)."""
        watch = self._watch
        assert watch is not None
        records: list[Record] = watch.poll(timeout)
        tid = self.transactional_id
        shared = self.log_partition
        for record in records:
            if record.partition == shared:
                self._shared[record.offset] = record.value
                continue
            if log_owner(record.partition) != tid:
                continue
            contents = self._logs.setdefault(record.partition, [])
            if record.offset == len(contents):
                contents.append(record.value)
            # A log is read from 0 in order; anything else is a repeat, already held.

    def _instances(self) -> dict[str, InstanceState]:
        out: dict[str, InstanceState] = {}
        for name, contents in self._logs.items():
            try:
                state = instance_state(name, contents[:1])
            except CorruptLogError:
                continue  # not ours to judge: a log we cannot read never fences us
            if state is not None:
                out[name] = state
        return out

    def _check_fenced(self) -> None:
        """Fenced once the shared log holds an EPOCH after ours (a later instance's claim;
        or, of the earlier layout, a newer instance's log): release, then raise. A record
        after ours that does not decode stops this instance too (``decode_at``'s rule: it
        may be a later instance's EPOCH), logged at ERROR and named by every later call."""
        mine = self._mine
        if mine is not None and not self._status.fenced:
            log_name = self.log_partition
            shared = self._shared
            while self._scanned in shared:
                at = self._scanned
                self._scanned += 1
                try:
                    record = decode_at(log_name, at, shared[at])
                except CorruptLogError as exc:
                    log.error("transactional_id %r stops: %s", self.transactional_id, exc)
                    if self._status.fence(
                        f"transactional_id {self.transactional_id!r}: stopped, it cannot tell "
                        f"whether a later instance claimed the id: {exc}"
                    ):
                        self._release()
                    break
                if isinstance(record, EpochRecord):
                    self._fence(f"{log_name}@{at}")
                    break
        self._status.raise_if_fenced()

    def _fence(self, by: str) -> None:
        reason = (
            f"transactional_id {self.transactional_id!r}: instance {by} took over from this "
            f"one ({self.log_partition})"
        )
        if self._status.fence(reason):
            self._release()

    def _fence_check(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._checked > self.txn_lease / 4:
            self._ingest(timeout=0)
            self._check_fenced()
            self._checked = now

    # -- writing ----------------------------------------------------------------------------

    def _append_log(self, record: LogRecord) -> None:
        assert self._log is not None
        with self._run_fenced():
            future = self._log.send(encode_record(record))
            self._log_next = future.result(self.settings.delivery_timeout).offset + 1

    @contextlib.contextmanager
    def _run_fenced(self) -> Iterator[None]:
        """A store refused our log's or data's run for a later instance's (it claimed the
        id: its fencing resume, docs/exactly-once.md "Fencing"): this instance is fenced,
        and says so as :class:`ProducerFencedError`."""
        try:
            yield
        except RunFencedError as exc:
            self._fence(f"a later instance claimed it: {exc}")
            raise ProducerFencedError(
                f"transactional_id {self.transactional_id!r}: fenced by a later instance of "
                f"the id (the stores refuse this instance's writes: {exc})"
            ) from exc

    def _send_ack(self, partition: str, ack: bytes) -> Future[RecordMetadata]:
        assert self._data is not None
        index = self.partitions.index(partition)
        with self._run_fenced():
            return self._data.send(encode_batch([b""], uuids=[ack]), key=self._route[index])

    def _flush_data(self, timeout: float | None) -> None:
        assert self._data is not None
        with self._run_fenced():
            left = self._data.flush(timeout)
        if left:
            raise DeliveryError(f"{left} records of {self.topic} not stored within {timeout}s")

    def _close_batch(self, index: int) -> None:
        """Send the open batch of partition ``index`` (lock held): one RECORD, or two when
        it holds messages of a requested pipelined commit and later ones (cut between them:
        that commit's group ACK goes there)."""
        batch = self._open.pop(index, None)
        if batch is None:
            return
        if 0 < batch.cut < len(batch.values):
            self._emit(index, batch.take_head(), self._requested)
        self._emit(index, batch, self._requested if batch.cut else self._txn)

    def _emit(self, index: int, batch: _OpenBatch, txn: int) -> None:
        """Encode ``batch`` and send it, or hold it while a pipelined commit is in flight
        (``txn``: the transaction of its last message; released after the ACKs of the group
        that decides it, ``_release_held``). Lock held."""
        content = batch.encode()
        if self._hold:  # a pipelined commit is in flight: after its ACKs (_run_commits)
            self._held.append((txn, index, content, batch.waiters, len(batch.values)))
            self._held_bytes += len(content)
            return
        self._send_record(index, content, batch.waiters, len(batch.values))

    def _cut_open(self) -> None:
        """Send the requested commits' messages still in the open batches (the part before
        each batch's ``cut``), right behind the held RECORDs of the group just taken; the
        rest stays open for the transactions after the group (lock held)."""
        for index, batch in list(self._open.items()):
            if not batch.cut:
                continue
            if batch.cut == len(batch.values):
                del self._open[index]
                head = batch
            else:
                head = batch.take_head()
            self._send_record(index, head.encode(), head.waiters, len(head.values))

    def _send_record(
        self,
        index: int,
        content: bytes,
        waiters: list[tuple[int, Future[RecordMetadata]]],
        count: int,
    ) -> None:
        """Hand one RECORD of partition ``index`` to the data producer (lock held)."""
        assert self._data is not None
        on_delivery = self._on_delivery
        try:
            with self._run_fenced():
                if not waiters and on_delivery is None:  # nothing to tell per message
                    self._data.produce(content, key=self._route[index])
                    return
                stored = self._data.send(content, key=self._route[index])
        except BaseException as exc:  # refused (fenced, closed, failed): never sent
            self._fail_held([(-1, index, content, waiters, count)], exc)
            raise
        topic, partition = self.topic, self.partitions[index]

        def done(f: Future[RecordMetadata]) -> None:
            error = f.exception()
            offset = -1 if error is not None else f.result().offset
            for i, future in waiters:
                with contextlib.suppress(InvalidStateError):  # cancelled by the application
                    if error is not None:
                        future.set_exception(error)
                    else:
                        future.set_result(RecordMetadata(topic, partition, offset, i))
            if on_delivery is not None:
                for i in range(count):
                    meta = (
                        None if error is not None else RecordMetadata(topic, partition, offset, i)
                    )
                    try:
                        on_delivery(meta, error)
                    except Exception:  # the application's bug must not kill the node's thread
                        log.exception("on_delivery callback raised")

        stored.add_done_callback(done)

    def send(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
    ) -> Future[RecordMetadata]:
        """Send one message: in the open transaction, or committed on its own outside one.
        The future resolves once the message is stored (inside a transaction: stored, not
        yet committed)."""
        future: Future[RecordMetadata] = Future()
        self._add_one(value, key, headers, timestamp, future)
        return future

    def produce(
        self,
        value: bytes,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
    ) -> None:
        """:meth:`send` without a future (as :meth:`Producer.produce`): delivery is reported to
        ``on_delivery`` and by :meth:`flush`; a commit still waits until every message of the
        transaction is stored."""
        self._add_one(value, key, headers, timestamp, None)

    def _add_one(
        self,
        value: bytes,
        key: bytes | None,
        headers: Sequence[tuple[str, bytes]] | None,
        timestamp: int | None,
        future: Future[RecordMetadata] | None,
    ) -> None:
        if not isinstance(value, bytes):
            raise TypeError(f"value must be bytes, got {type(value).__name__}")
        if key is not None and not isinstance(key, bytes):
            raise TypeError(f"key must be bytes or None, got {type(key).__name__}")
        hdrs: tuple[tuple[str, bytes], ...] | None = None
        weight = len(value) + (len(key) if key else 0) + MESSAGE_OVERHEAD
        if headers:
            hdrs, header_bytes = check_headers(headers)
            weight += header_bytes + HEADER_OVERHEAD * len(hdrs)
        if timestamp is not None:
            check_timestamp(timestamp)
        room = self._room_bytes
        if weight > room:
            raise self._too_large(weight)
        with self._lock:
            self._check("send")
            self._fence_check()
            self._refuse_at_bounds(weight)
            in_txn = self._status.state is TransactionState.IN_TRANSACTION
            n = len(self.partitions)
            if key is None:
                index = self._txn % n
            else:
                found = self._route_cache.get(key)
                if found is None:
                    if len(self._route_cache) >= ROUTE_CACHE:
                        self._route_cache.clear()
                    found = self._route_cache[key] = fnv1a32(key) % n
                index = found
            ts = int(time.time() * 1000) if timestamp is None else timestamp
            batch = self._open.get(index)
            if batch is not None and batch.weight + weight > room:
                self._close_batch(index)  # the next RECORD: this one is full
                batch = None
            if batch is None:
                batch = self._open[index] = _OpenBatch()
            if in_txn:
                uuid = build_uuid(self.p_txn, self._clock.tick(), Flags.CONTINUE_TXN).bytes
                self._touched[index] = None
            else:
                uuid = build_uuid(self.p_out, self._clock.tick(), Flags.OUTSIDE_TXN).bytes
            if future is not None:
                batch.waiters.append((len(batch.values), future))
            batch.values.append(value)
            batch.keys.append(key)
            batch.headers.append(hdrs)
            if hdrs:
                batch.headed = True
            batch.timestamps.append(ts)
            batch.uuids.append(uuid)
            batch.weight += weight
            if batch.weight >= self.settings.batch_size or not in_txn:
                self._close_batch(index)

    def produce_many(
        self,
        values: Iterable[bytes],
        keys: Iterable[bytes | None] | None = None,
        *,
        timestamp: int | None = None,
    ) -> None:
        """Many messages at once, without futures (as :meth:`Producer.produce_many`): in the
        open transaction, or each committed on its own outside one.

        ``keys`` (as long as ``values``; None entries: no key) route each message as
        :meth:`send` does; keyless messages of a transaction go to its one partition. All get
        one ``timestamp`` (default: now) and no headers. Per message it costs a list append
        and a 16-byte UUID from a run of clocks (:func:`dafka.message.build_uuids`): the
        fast call inside a transaction. Delivery is reported to ``on_delivery`` and by
        :meth:`flush`."""
        vals, key_list = many_arguments(values, keys)
        count = len(vals)
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        else:
            check_timestamp(timestamp)
        if not count:
            return
        weights = list(map(MESSAGE_OVERHEAD.__add__, map(len, vals)))  # no Python step each
        if key_list is not None:
            if None in key_list:
                weights = [
                    w if k is None else w + len(k) for w, k in zip(weights, key_list, strict=True)
                ]
            else:
                weights = list(map(add, weights, map(len, cast("list[bytes]", key_list))))
        heaviest = max(weights)
        if heaviest > self._room_bytes:
            i = weights.index(heaviest)
            raise self._too_large(heaviest, f"message {i} of produce_many")
        with self._lock:
            self._check("send")
            self._fence_check()
            self._refuse_at_bounds(sum(weights))
            in_txn = self._status.state is TransactionState.IN_TRANSACTION
            n = len(self.partitions)
            groups: dict[int, tuple[list[bytes], list[bytes | None], list[int]]]
            if key_list is None:
                groups = {self._txn % n: (vals, [None] * count, weights)}
            else:
                groups = _by_partition(vals, key_list, weights, n, self._txn % n, self._route_cache)
            for index, (group_values, group_keys, group_weights) in groups.items():
                self._add_run(index, group_values, group_keys, group_weights, timestamp, in_txn)
                if in_txn:
                    self._touched[index] = None
                else:  # outside a transaction: each message committed on its own, sent now
                    self._close_batch(index)

    def _add_run(
        self,
        index: int,
        values: list[bytes],
        keys: list[bytes | None],
        weights: list[int],
        timestamp: int,
        in_txn: bool,
    ) -> None:
        """Append messages of one partition to its open batches, stamped with a run of
        clocks in append order, cut where a batch reaches ``batch_size`` or would exceed
        ``max_message_bytes`` (lock held)."""
        room = self._room_bytes
        target = self.settings.batch_size
        producer, flags = (
            (self.p_txn, Flags.CONTINUE_TXN) if in_txn else (self.p_out, Flags.OUTSIDE_TXN)
        )
        ends = list(accumulate(weights))  # ends[j]: the weight of messages 0..j
        n = len(values)
        i = 0
        while i < n:
            batch = self._open.get(index)
            if batch is None:
                batch = self._open[index] = _OpenBatch()
            base = ends[i - 1] if i else 0
            fits = bisect_right(ends, base + room - batch.weight, i)
            if fits == i:  # not even the next message fits: this RECORD is full
                self._close_batch(index)
                continue
            full = bisect_left(ends, base + target - batch.weight, i) + 1
            stop = min(fits, full, n)
            count = stop - i
            batch.values += values[i:stop]
            batch.keys += keys[i:stop]
            batch.headers += repeat(None, count)
            batch.timestamps += repeat(timestamp, count)
            batch.uuids += build_uuids(producer, self._clock.tick_many(count), count, flags)
            batch.weight += ends[stop - 1] - base
            i = stop
            if batch.weight >= target:
                self._close_batch(index)

    def _refuse_at_bounds(self, weight: int) -> None:
        """Before a call of ``weight`` bytes queues anything (lock held): wait for room
        behind the pipelined commits (``_wait_for_room``); with ``backpressure="error"``
        raise :class:`BackpressureError` there, or while the data producer is at its
        ``max_in_flight`` bound - the call's RECORDs would wait for room in it (it always
        blocks: see ``_start``)."""
        if self._held_bytes and self._held_bytes + weight > self._max_held:
            self._wait_for_room(weight)
        if self.settings.backpressure == "error":
            assert self._data is not None
            in_flight = len(self._data)
            if in_flight >= self.settings.max_in_flight:
                raise BackpressureError(
                    in_flight,
                    0,
                    f"transactional producer {self.transactional_id!r} has {in_flight} "
                    f"RECORDs in flight, its max_in_flight={self.settings.max_in_flight:,}; "
                    "nothing was queued (wait for them to be stored: flush, or raise the bound)",
                )

    def _wait_for_room(self, weight: int) -> None:
        """Wait (lock held: the wait releases it) until a call of ``weight`` bytes fits
        beside the RECORDs held behind pipelined commits (``max_pending_commit_bytes``), or
        nothing is held (a larger call is taken alone); with ``backpressure="error"`` raise
        :class:`BackpressureError` instead, having queued nothing. The committer releases
        held RECORDs as it takes and decides the commits (``_run_commits``); a failed
        commit, a fence or ``close`` ends the wait with their error."""
        bound = self._max_held
        if self.settings.backpressure == "error":
            raise BackpressureError(
                len(self._held),
                self._held_bytes,
                f"transactional producer {self.transactional_id!r} holds {len(self._held)} "
                f"RECORDs ({self._held_bytes:,} bytes) behind pipelined commits not yet "
                f"decided, and this call weighs {weight:,} bytes: over "
                f"max_pending_commit_bytes={bound:,}; nothing was queued (wait for the "
                "commits' futures, or raise the bound)",
            )
        while self._held_bytes and self._held_bytes + weight > bound:
            self._wake.wait(0.5)  # woken by the committer; the timeout re-checks the state
            self._check("send")

    def _too_large(self, weight: int, what: str = "message") -> MessageTooLargeError:
        return MessageTooLargeError(
            f"{what} of topic {self.topic!r} weighs {weight + HEADER_SIZE:,} bytes in its "
            f"RECORD (with the batch's framing), over max_message_bytes="
            f"{self.settings.max_message_bytes:,}: nothing was queued"
        )

    # -- transactions: each call checked against the state table (_txn_state.py) -----------

    def begin_transaction(self) -> None:
        with self._lock:
            self._check("begin_transaction")
            self._fence_check()
            self._status.move(TransactionState.IN_TRANSACTION)
            self._touched = {}

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Make every message of the transaction visible, atomically; raises
        :class:`ProducerFencedError` (nothing becomes visible) if another instance took over,
        and :class:`CommitFailedError` (the transaction aborted) if a group member whose
        offsets it sends lost those partitions (:meth:`send_offsets_to_transaction`).

        A failure before the commit point (data not stored in time) leaves the transaction
        open: commit again, or abort. Once the INTENT is written the transaction is decided
        (state ``COMMITTING``): a failure after it is finished by calling this again (the
        same INTENT and ACKs are re-sent), by :meth:`close`, or by the next instance."""
        with self._lock:
            self._check("commit_transaction")
            timeout = self.settings.delivery_timeout if timeout is None else timeout
            self._drain_commits(timeout)
            if self._status.state is TransactionState.IN_TRANSACTION:
                for index in list(self._open):
                    self._close_batch(index)
                self._flush_data(timeout)
                self._fence_check(force=True)
                self._check_offset_owners(timeout)
                if self._intent_fault is not None:  # a test's pause past the last check
                    self._intent_fault([k for _, held in self._offset_owners for k in held])
                acks = tuple(
                    (self.partitions[i], ack_uuid(self.p_txn, self._clock.tick()))
                    for i in self._touched
                )
                if not acks and not any(o.pending for o in self._offsets.values()):
                    # nothing written: nothing to decide
                    self._finish_transaction()
                    return
                self._deciding = acks
                self._status.move(TransactionState.COMMITTING)
            acks = self._deciding
            self._append_log(IntentRecord(self._txn, acks))  # the commit point
            for offsets in self._offsets.values():
                offsets.transaction_decided()
            # A successor that claimed meanwhile decides from our log after its lease:
            # write no ACK once fenced (it finishes the commit or rolls it back whole).
            self._fence_check()
            fault = self._commit_fault
            for stored, (partition, ack) in enumerate(acks):
                if fault is not None:
                    fault(stored)
                self._send_ack(partition, ack)
                if fault is not None:
                    self._flush_data(timeout)
            # Decided at the INTENT: the ACKs are queued in each partition's order ahead of
            # anything the next transaction sends, and stored in the background (the next
            # commit's flush, flush() and close() wait for them; after a crash the successor
            # appends the same bytes). Not waiting here saves one store round trip per commit.
            self._last_ack.update(acks)
            self._finish_transaction()

    def commit_transaction_nowait(self) -> Future[None]:
        """Request the commit of the open transaction and return at once: the future
        resolves once it is decided (its INTENT stored), or fails with why it could not be.

        The pipelined form of :meth:`commit_transaction`, for throughput: the next
        transaction can begin and send at once. Commits requested while one is in flight
        are decided together by one INTENT (a group commit: each stays atomic, they become
        visible together), and the RECORDs sent meanwhile wait in the producer until the
        ACKs before them are queued (a partition's ACK must precede the next transaction's
        messages). If a pipelined commit fails (data or INTENT not stored in time, fenced),
        its future and every later one fail, and every later call raises that error: close
        the producer; the next instance of the transactional id decides what was left (a
        commit whose INTENT is stored is finished, the others rolled back). Not with
        :meth:`send_offsets_to_transaction` in the same transaction (use
        :meth:`commit_transaction`)."""
        with self._lock:
            self._check("commit_transaction")
            if self._status.state is not TransactionState.IN_TRANSACTION:
                raise TransactionError(
                    "commit_transaction_nowait() in state COMMITTING: the transaction passed "
                    "its commit point; finish it with commit_transaction()"
                )
            if any(o.pending for o in self._offsets.values()):
                raise TransactionError(
                    "commit_transaction_nowait() of a transaction with offsets "
                    "(send_offsets_to_transaction): use commit_transaction()"
                )
            while len(self._groups) >= MAX_PENDING_COMMITS and self._commit_error is None:
                self._wake.wait()
            self._check("commit_transaction")
            future: Future[None] = Future()
            acks = {
                self.partitions[i]: ack_uuid(self.p_txn, self._clock.tick()) for i in self._touched
            }
            if acks:
                # The open batches stay open (the next transactions' messages join them: a
                # group's transactions share RECORDs); the committer cuts them here when it
                # takes this request (_cut_open), and a batch closed before that is cut
                # here too (_close_batch): a RECORD never holds messages on both sides of
                # an ACK.
                for batch in self._open.values():
                    batch.cut = len(batch.values)
                    batch.cut_weight = batch.weight
                self._requested = self._txn
                self._groups.append(_Pending(self._txn, acks, future))
                self._hold = True
                if self._committer is None:
                    self._committer = threading.Thread(
                        target=self._run_commits,
                        name=f"txn-committer-{self.transactional_id}",
                        daemon=True,
                    )
                    self._committer.start()
                self._wake.notify_all()
            else:
                future.set_result(None)  # nothing written: nothing to decide
            self._finish_transaction()
            return future

    def _run_commits(self) -> None:
        """The committer thread: decides the requested commits, a group at a time.

        Per group: send the held RECORDs of its transactions, wait until the data is stored,
        check fencing, write one INTENT whose ACKs are each partition's latest (the commit
        point of every transaction of the group), queue the ACKs, then release the RECORDs
        held since (or keep holding them for the next group)."""
        timeout = self.settings.delivery_timeout
        while True:
            with self._lock:
                while not self._groups and not self._stop.is_set():
                    self._wake.wait(0.5)
                if not self._groups:
                    return
                groups, self._groups = self._groups, []
                self._busy = True
                last = groups[-1].txn
                acks: dict[str, bytes] = {}
                for group in groups:
                    acks.update(group.acks)
                refused: BaseException | None = None
                try:  # a RECORD refused (fenced...) fails the futures below, not the thread
                    self._release_held(upto=last)
                    self._cut_open()
                except BaseException as exc:
                    refused = exc
                self._wake.notify_all()
            try:
                if refused is not None:
                    raise refused
                self._flush_data(timeout)
                with self._lock:
                    self._fence_check(force=True)
                self._append_log(IntentRecord(last, tuple(acks.items())))  # the commit point
                with self._lock:
                    self._fence_check()  # fenced now: the successor finishes it from the log
                    for partition, ack in acks.items():
                        self._send_ack(partition, ack)
                    self._last_ack.update(acks)
                    if not self._groups:
                        self._hold = False
                        self._release_held(upto=None)
                    self._busy = False
                    self._wake.notify_all()
                for group in groups:
                    group.future.set_result(None)
            except BaseException as exc:
                with self._lock:
                    self._commit_error = exc
                    failed = groups + self._groups
                    self._groups = []
                    held, self._held = self._held, []
                    self._held_bytes = 0
                    self._busy = False
                    # every later call raises: what is not sent never will be (the requested
                    # commits' messages may still be in the open batches, before their cut)
                    self._fail_open(exc)
                    self._wake.notify_all()
                for group in failed:
                    group.future.set_exception(exc)
                self._fail_held(held, exc)
                log.error(
                    "transactional producer %r: a pipelined commit failed (%s); the next "
                    "instance decides what was left",
                    self.transactional_id,
                    exc,
                )
                return

    def _release_held(self, upto: int | None) -> None:
        """Send the held RECORDs of transactions up to ``upto`` (None: all), in order.

        Not a prefix of ``_held``: a partition's RECORDs are held in the order of their
        transactions, but across partitions a RECORD cut at a requested commit (tagged with
        that commit's transaction) may follow another partition's RECORD of a later one."""
        held = self._held
        if upto is None:
            keep: list[tuple[int, int, bytes, list[tuple[int, Future[RecordMetadata]]], int]] = []
            send = held
        else:
            send = [h for h in held if h[0] <= upto]
            keep = [h for h in held if h[0] > upto]
        self._held = keep
        for n, (_, index, content, waiters, count) in enumerate(send):
            self._held_bytes -= len(content)
            try:
                self._send_record(index, content, waiters, count)
            except BaseException:  # the rest is held again, failed by the caller with it
                self._held = send[n + 1 :] + self._held  # (a fence's release emptied it)
                self._held_bytes = sum(len(h[2]) for h in self._held)
                raise

    def _drain_commits(self, timeout: float | None = None) -> None:
        """Wait until every pipelined commit is decided (lock held); raise if one failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (self._groups or self._busy) and self._commit_error is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise DeliveryError(
                    f"pipelined commits of {self.transactional_id!r} not decided within {timeout}s"
                )
            self._wake.wait(remaining)
        if self._commit_error is not None:
            raise self._commit_error

    def _check(self, call: str) -> None:
        """The state table's check of ``call``, then a failed pipelined commit's error."""
        self._status.check(call)
        if self._commit_error is not None:
            raise TransactionError(
                f"{call}(): a pipelined commit failed ({self._commit_error}); close this "
                "producer, the next instance of the transactional id decides what was left"
            ) from self._commit_error

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the open transaction: what was sent of it is rolled back for readers (each
        partition it wrote gets its last committed ACK again). If those ACKs are not stored
        in time the state is ``ABORTING``: call this again (it re-sends the same ACKs)."""
        with self._lock:
            self._check("abort_transaction")
            self._drain_commits(timeout)
            if self._status.state is TransactionState.IN_TRANSACTION:
                self._fail_open(TransactionError("transaction aborted"))
                self._deciding = tuple(
                    (self.partitions[i], self._last_ack[self.partitions[i]]) for i in self._touched
                )
                self._status.move(TransactionState.ABORTING)
            for offsets in self._offsets.values():
                offsets.transaction_aborted()
            for partition, ack in self._deciding:
                self._send_ack(partition, ack)  # re-sent: rolls back
            self._flush_data(self.settings.delivery_timeout if timeout is None else timeout)
            self._finish_transaction()

    def send_offsets_to_transaction(
        self,
        positions: Mapping[tuple[str, str], Position] | None,
        group: str | Consumer,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's ``positions`` with the open transaction: they count
        for the group (``committed()``, a restarted member) if and only if the transaction
        commits (docs/groups.md, "Exactly-once"). ``group``: the group id, or the group's
        :class:`Consumer` (then ``positions`` None means its :meth:`Consumer.positions_to_commit`,
        and its commits' versions are known). Returns once the stores hold the offsets
        (their commit point is the transaction's); a fenced producer raises
        :class:`ProducerFencedError` and commits nothing. With the :class:`Consumer` of a
        group member, partitions the member no longer owns (it lost them: another member
        may process them) raise :class:`CommitFailedError` - here, or at
        :meth:`commit_transaction`, which checks again just before the commit point and
        then aborts the transaction."""
        consumer = group if isinstance(group, Consumer) else None
        group_id = check_group(consumer.group_id if consumer is not None else group)
        if positions is None and consumer is None:
            raise ConfigError("send_offsets_to_transaction(None, ...) needs the Consumer")
        timeout = self.settings.delivery_timeout if timeout is None else timeout
        with self._lock:
            self._check("send_offsets_to_transaction")
            self._drain_commits(timeout)  # the INTENT's log offset is known
            self._fence_check()
            committer = self._offsets.get(group_id)
            if committer is None:
                s = self.settings
                committer = self._offsets[group_id] = GroupOffsets(
                    group_id,
                    ConsumerSettings(**common_fields(s), commit_timeout=s.delivery_timeout),
                    writer=self.transactional_id,
                    context=self._context,
                )
            tenures = None
            if consumer is not None:  # read with the check: lost them, refused at once
                consumer._link_transactional(self.log_partition)  # its takes spare our log
                positions, tenures = consumer._checked_positions(positions)
                committer.seen(consumer.committed_versions())
            assert positions is not None
            ref = TxnRef(self.log_partition, self._log_next, self._txn)
            committer.commit(positions, timeout, txn=ref, tenures=tenures)
            if consumer is not None:
                held = dict.fromkeys(positions, 0) | (tenures or {})
                self._offset_owners.append((consumer, held))

    def _check_offset_owners(self, timeout: float | None) -> None:
        """Before the INTENT: every group member whose offsets this transaction sends still
        owns those partitions. One that lost them (another member may process and commit
        them: docs/groups.md, "Paused members") must not commit this transaction - its
        output would duplicate the new owner's: abort it and raise
        :class:`CommitFailedError`."""
        try:
            for consumer, held in self._offset_owners:
                consumer._refuse_lost(held, held=held)
        except CommitFailedError:
            self.abort_transaction(timeout)
            raise

    def _finish_transaction(self) -> None:
        self._offset_owners = []
        self._txn += 1
        self._touched = {}
        self._deciding = ()
        self._status.move(TransactionState.READY)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[TransactionalProducer]:
        """``with p.transaction(): p.send(...)`` commits on exit, aborts on an exception."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            with contextlib.suppress(TransactionError, DeliveryError):
                self.abort_transaction()
            raise
        self.commit_transaction()

    @property
    def state(self) -> TransactionState:
        """Where the producer is: ``READY``, ``IN_TRANSACTION``, ``COMMITTING``... (the
        table of what each state allows is ``dafka.client._txn_state``)."""
        return self._status.state

    @property
    def pending_commit_bytes(self) -> int:
        """Bytes of the RECORDs held back behind pipelined commits not yet decided (sent
        once the ACKs before them are queued): a call waits, or raises with
        ``backpressure="error"``, while these and its messages would pass
        ``max_pending_commit_bytes``."""
        return self._held_bytes

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (or being committed or aborted)."""
        return self._status.state in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING,
            TransactionState.ABORTING,
        )

    def flush(self, timeout: float | None = None) -> int:
        """Wait until what was sent is stored; returns how many are not (0: all).

        Inside a transaction, as in Kafka: the messages sent so far are stored (their
        futures resolve) but not committed - readers with read-committed isolation see them
        only after :meth:`commit_transaction`, and never after an abort. Pipelined commits
        (:meth:`commit_transaction_nowait`) are decided first, and the ACKs of every
        decided commit are stored when it returns 0: all of it is visible to readers."""
        with self._lock:
            self._check("flush")
            self._drain_commits(timeout)  # the held RECORDs are sent
            for index in list(self._open):
                self._close_batch(index)
            assert self._data is not None
            return self._data.flush(timeout)

    def metrics(self) -> ProducerMetrics:
        """The data producer's :meth:`Producer.metrics` (its control records included)."""
        data = self._data
        if data is None:
            raise TransactionError("the transactional producer is not started")
        return data.metrics()

    def close(self, timeout: float | None = 10.0) -> None:
        """Leave the cluster: an open transaction is aborted, one past its commit point is
        finished (it is decided), what was sent is flushed. Best effort: an error on the way
        is logged, and the next instance resolves whatever is left."""
        with self._lock:
            state = self._status.state
            if state is TransactionState.CLOSED:
                return
            if state is not TransactionState.FENCED:
                try:
                    self._drain_commits(timeout)
                    if state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTING):
                        self.abort_transaction(timeout)
                    elif state is TransactionState.COMMITTING:
                        self.commit_transaction(timeout)
                except Exception as exc:  # best effort: the successor decides
                    log.warning(
                        "transactional producer %r: close left a transaction to its successor (%s)",
                        self.transactional_id,
                        exc,
                    )
            if self._status.state is TransactionState.IN_TRANSACTION:  # its abort did not run
                self._status.move(TransactionState.ABORTING)  # (the successor rolls it back)
            if self._status.state is not TransactionState.CLOSED:  # fenced on the way: closed
                self._status.move(TransactionState.CLOSED)
            self._shutdown(timeout)

    def _release(self) -> None:
        """Fenced: fail what is pending and leave the cluster without writing anything."""
        error = ProducerFencedError("fenced before it was sent")
        self._fail_open(error)
        held, self._held = self._held, []
        self._held_bytes = 0
        self._fail_held(held, error)
        self._shutdown(timeout=0)

    def _fail_held(
        self,
        held: list[tuple[int, int, bytes, list[tuple[int, Future[RecordMetadata]]], int]],
        error: BaseException,
    ) -> None:
        """The messages of held RECORDs (never sent) fail with ``error`` (futures and
        ``on_delivery``)."""
        for _, _, _, waiters, count in held:
            for _, future in waiters:
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(error)
            if self._on_delivery is not None:
                for _ in range(count):
                    try:
                        self._on_delivery(None, error)
                    except Exception:
                        log.exception("on_delivery callback raised")

    def _fail_open(self, error: BaseException) -> None:
        """The messages not sent yet fail with ``error`` (futures and ``on_delivery``)."""
        open_batches, self._open = self._open, {}
        for batch in open_batches.values():
            for _, future in batch.waiters:
                if not future.done():
                    with contextlib.suppress(InvalidStateError):
                        future.set_exception(error)
            if self._on_delivery is not None:
                for _ in batch.values:
                    try:
                        self._on_delivery(None, error)
                    except Exception:
                        log.exception("on_delivery callback raised")

    def _shutdown(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        if self._claimed:
            self._claimed = False
            release_log(self.log_partition)
        for offsets in self._offsets.values():
            with contextlib.suppress(Exception):
                offsets.close(timeout)
        for closer in (self._data, self._log):
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer.close(timeout)
        if self._watch is not None:
            with contextlib.suppress(Exception):
                self._watch.close()


def _epoch_before(log: str, start: int, first: bytes, head: int) -> int:
    """Where to read from next when ``[start, head]`` of the shared log holds no EPOCH: its
    first record is one instance's, whose EPOCH is before it. An instance writes its EPOCH,
    RECOVERED, then at most one INTENT per transaction it numbered (from 0), so an INTENT
    of transaction ``t`` at ``start`` has its EPOCH at or after ``start - t - 2``, and a
    RECOVERED its EPOCH right before it: one more read. Anything else: twice as far back."""
    record = decode_at(log, start, first)
    if isinstance(record, IntentRecord):
        back = start - record.txn - 2
    elif isinstance(record, RecoveredRecord):
        back = start - 1
    else:
        back = start - (head + 1 - start)
    return max(0, min(back, start - 1))  # always further back: a log that lies ends at 0


def _pinned_before(log: str, segments: list[tuple[str, list[bytes]]], start: int) -> int | None:
    """The lowest offset of a segment of ``log`` that the last of ``segments`` (read from
    ``start``) still needs and that was not read: a predecessor that never wrote RECOVERED
    left its own predecessors to resolve (``obligations``), pinned by name. None: all in."""
    held = dict(segments)
    lowest: int | None = None
    todo = [instance_state(*segments[-1])]
    seen: set[str] = set()
    while todo:
        state = todo.pop()
        if state is None or state.log in seen:
            continue
        seen.add(state.log)
        for pin in state.unresolved_pins:
            offset = segment_offset(log, pin.log)
            if offset is None:
                continue  # a log of the earlier layout: read whole (_read_earlier_layout)
            contents = held.get(pin.log)
            if contents is not None:
                todo.append(instance_state(pin.log, contents))
            elif offset < start and (lowest is None or offset < lowest):
                lowest = offset
            elif offset >= start:
                raise CorruptLogError(f"log {log}: a pin names {pin.log}, which is no EPOCH")
    return lowest


def _by_partition(
    values: list[bytes],
    keys: list[bytes | None],
    weights: list[int],
    n: int,
    keyless: int,
    cache: dict[bytes | None, int],
) -> dict[int, tuple[list[bytes], list[bytes | None], list[int]]]:
    """Messages per partition index, in order (a key by FNV-1a modulo ``n``; no key:
    ``keyless``; ``cache`` never holds None).

    ``cache`` (key -> index) outlives the call: an application's keys repeat from one
    transaction to the next, and FNV-1a in Python is ~2 us a key - it was most of
    ``produce_many``'s cost per message. The grouping is a stable sort of the positions by
    index and one ``itemgetter`` per partition (no Python step per message)."""
    index: list[int | None] = list(map(cache.get, keys))
    if None in index:  # keyless messages, keys not seen yet
        if len(cache) + len(keys) > ROUTE_CACHE:
            cache.clear()
        for i, found in enumerate(index):
            if found is None:
                key = keys[i]
                if key is None:
                    index[i] = keyless
                else:
                    index[i] = cache[key] = fnv1a32(key) % n
    routed: list[int] = index  # type: ignore[assignment]  # every entry is set above
    first = routed[0]
    if routed.count(first) == len(routed):
        return {first: (values, keys, weights)}
    order = sorted(range(len(routed)), key=routed.__getitem__)
    ranked = sorted(routed)
    groups: dict[int, tuple[list[bytes], list[bytes | None], list[int]]] = {}
    start, end = 0, len(ranked)
    while start < end:
        partition = ranked[start]
        stop = bisect_left(ranked, partition + 1, start)
        if stop - start == 1:
            j = order[start]
            groups[partition] = ([values[j]], [keys[j]], [weights[j]])
        else:
            pick = itemgetter(*order[start:stop])
            groups[partition] = (list(pick(values)), list(pick(keys)), list(pick(weights)))
        start = stop
    return groups


def _routing_keys(producer: Producer, n: int) -> list[bytes]:
    """A key per partition index that the producer routes there (its routing is by key)."""
    keys: list[bytes | None] = [None] * n
    index = {p: i for i, p in enumerate(producer.partitions)}
    found = 0
    j = 0
    while found < n:
        key = b"%d" % j
        i = index[producer.partition_for(key)]
        if keys[i] is None:
            keys[i] = key
            found += 1
        j += 1
    return [k for k in keys if k is not None]


__all__ = [
    "CommitFault",
    "ProducerFencedError",
    "TransactionError",
    "TransactionalProducer",
]
