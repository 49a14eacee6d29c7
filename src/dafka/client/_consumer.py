"""The public consumer: live subscriptions and assigned (bounded) reads, as :class:`Record`
or as columns (:class:`RecordColumns`).

The runner thread feeds the ``ConsumerMachine``; its ``Deliver`` runs (RECORD contents of one
partition, in order) are queued here and the application takes them with
:meth:`Consumer.poll` (a list of Records), :meth:`Consumer.poll_columns` (the same messages
as columns) or by iterating. The queue is bounded (``max_queued`` RECORDs): when the
application falls behind, the runner stops reading the data sockets, ZeroMQ's high-water
marks drop what does not fit, and the machine FETCHes it again once the application has
caught up - memory stays bounded on every node.

Both calls take from the queue with one function, ``_take_parts``, in the application's
thread: a run of plain RECORDs (a C producer's, or ``batching=False``: one message each,
``index`` 0, no key, no headers, no timestamp) is one part; a RECORD whose content starts with
the batch magic (``_batch.is_batch``) is checked (``check_batch``: CRC and structure) and is a
part of ``index`` 0, 1, ... messages, decoded only when read. ``poll`` turns the parts into
Records in bulk (``map`` over ``zip`` of ``repeat``s: no Python frame per record);
``poll_columns`` wraps them as they are (dafka.records.RecordColumns).

A batch that fails its checks (:class:`CorruptBatchError`) is **skipped**: counted
(``poll_statistics().corrupt_batches``), logged as an error with its partition and offset,
and never delivered; the position moves past it. We chose this over raising (Kafka's
default on CRC errors) because a raise would leave the application stuck before a RECORD
that can never be read differently; an application that must stop can check the counter.

A RECORD larger than ``max_message_bytes``, and a store's *drop notice* standing for one
(``dafka.records.drop_notice``: a store keeps it in place of such a RECORD from a foreign
producer), are skipped the same way: counted (``poll_statistics().oversized_records``),
logged as a warning, never delivered. So a consumer that got the RECORD live and one that
reads the partition later from a store agree (with the same limit on every node).

Positions count RECORDs (docs/client.md): ``position()`` is the next offset not fully handed
to the application - the offset of a batch partly returned by a ``poll`` (or
``poll_columns``) cut at ``max_records`` stays the position until its last message is
returned.

**Bounded reads and data loss.** A consumer whose partitions are all assigned with an end
offset (``assign=``, ``end_offsets=``, no subscription) is *bounded*: :meth:`Consumer.at_end`
is then answered from the positions alone (every end handed out), and
:meth:`Consumer.read_to_end` polls columns until then. Records can be gone for good: the
machine skips records that every store answers only from beyond
(``skip_unavailable_after``: damage that no store could repair, or retention; this is how
a consumer knows that no store can fill a hole), and a bounded read can wait for records no
store holds (a producer died before any store had its tail). ``_take_parts`` sees the first
as a run that starts after the partition's position (an assigned start, a seek, or what was
handed out before), ``read_to_end`` the second as ``idle_timeout`` seconds without a
RECORD; with ``fail_on_data_loss`` (the default) both raise :class:`DataLossError` naming
the records (the records before a gap are handed out first; the poll raises again until
the application seeks past the gap), without it both are counted
(``poll_statistics().records_lost``) and logged as a warning.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

from dafka.client._errors import FencedMemberError
from dafka.client._membership import Callback, Handed, Membership, listener_of
from dafka.client._metrics import ConsumerMetrics, consumer_metrics
from dafka.client._offsets import (
    CommitError,
    CommitFailedError,
    GroupOffsets,
    Position,
    as_committed,
    claimed_here,
)
from dafka.client._settings import ConsumerSettings, resolve_settings
from dafka.client._timestamps import TimestampSearch, checked_times, checked_timestamp
from dafka.errors import ConfigError, DataLossError, NodeFailedError
from dafka.lifecycle import Closing
from dafka.node import (
    ConsumerConfig,
    ConsumerMachine,
    ConsumerStatistics,
    Deliver,
    GroupConfig,
    GroupConsumerMachine,
    GroupMember,
    GroupStatistics,
    NodeMachine,
    check_name,
)
from dafka.protocol import new_node_id
from dafka.records import (
    MAGIC,
    BatchSlice,
    CheckedBatch,
    CommittedOffset,
    CorruptBatchError,
    DroppedRecordError,
    Part,
    PlainRun,
    Record,
    RecordColumns,
    check_batch,
    control_indexes,
)
from dafka.transport.config import TransportConfig
from dafka.transport.runner import DataWait, DropInbound, Identity, NodeRunner, RunnerStats
from dafka.transport.sockets import ZmqContext

log = logging.getLogger(__name__)

# How soon a waiting ``poll`` asks the runner again for its data wait when the runner was
# in mid-turn (``_wait_once``): once had, the wait is kept for the consumer's life.
_DATA_WAIT_RETRY = 0.005

_startswith = bytes.startswith

Key = tuple[str, str]

READ_COMMITTED_IS_A_CLASS = (
    "a consumer with isolation_level='read_committed' is a ReadCommittedConsumer: "
    "ReadCommittedConsumer(topics, ...) (from dafka import ReadCommittedConsumer), whose "
    "checkpoint() a plain Consumer does not have"
)
"""A :class:`Consumer` reads every message: read committed is its own class (with its own
calls), not a setting that would change what the constructor returns."""


@dataclass(frozen=True, slots=True)
class PollStatistics:
    """What :meth:`Consumer.poll` did: RECORDs and messages handed out, batches refused,
    RECORDs lost (gone, skipped or given up on without ``fail_on_data_loss``)."""

    records_polled: int
    messages_polled: int
    corrupt_batches: int
    last_corrupt_batch: str | None
    queued_records: int
    records_lost: int = 0
    oversized_records: int = 0
    """RECORDs skipped for being over ``max_message_bytes``: received so, or as the drop
    notice a store keeps in place of one."""
    last_oversized_record: str | None = None
    """``"topic/partition@offset: N bytes"`` of the last one."""


def checked_reads(
    topics: object, assign: Mapping[Key, int] | None, end_offsets: Mapping[Key, int] | None
) -> tuple[list[str], dict[Key, int], dict[Key, int]]:
    """A consumer's topics, assigned partitions and end offsets checked by the machine's own
    name rule, before any thread or socket starts (``Consumer`` and ``AsyncConsumer`` both
    call it): a topic that is not a ``str`` is a :class:`TypeError`, an empty or too long one
    a :class:`NodeArgumentError`, not an error from inside the node's thread."""
    if isinstance(topics, str):
        topic_list = [topics]
    elif topics is None:
        topic_list = []
    elif isinstance(topics, bytes | bytearray) or not isinstance(topics, Iterable):
        raise TypeError(
            f"topics must be a str or an iterable of str, got {type(topics).__name__}: {topics!r}"
        )
    else:
        topic_list = list(topics)
    for topic in topic_list:
        check_name("topic", topic)
    assigned = dict(assign or {})
    ends = dict(end_offsets or {})
    for key in [*assigned, *ends]:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError(f"assign and end_offsets take (topic, partition) keys, got {key!r}")
        check_name("topic", key[0])
        check_name("partition", key[1])
    extra = sorted(set(ends) - set(assigned))
    if extra:
        raise ConfigError(f"end_offsets for partitions not in assign: {extra}")
    return topic_list, assigned, ends


class Consumer(Closing):
    """``with Consumer(["orders"], towers="127.0.0.1:5556", offset_reset="earliest") as c:``

    ``topics``: live subscriptions. ``assign``: ``{(topic, partition): start offset}`` read
    by FETCH only; ``end_offsets``: ``{(topic, partition): end}`` (exclusive) for assigned
    partitions, after which :meth:`at_end` turns True (:meth:`read_to_end` reads a bounded
    consumer's ranges as columns). Settings: ``settings=`` and/or any
    :class:`ConsumerSettings` field as a keyword. ``transport``/``config`` (the runner's and
    the machine's own config objects), ``context`` and ``drop_inbound`` (the runner's fault
    injector: True drops a received message, by its raw frames, as if lost in transit) are
    for the CLI and tests, as is ``commit_fault`` (called with the partitions of each
    commit of a group member after its ownership check and before the write, e.g.
    :func:`dafka.testing.stop_mid_commit`: a process paused in between).
    """

    quiet_errors = (NodeFailedError,)  # after an error in the block: it says more

    def __init__(
        self,
        topics: Iterable[str] | str | None = None,
        *,
        settings: ConsumerSettings | None = None,
        assign: Mapping[Key, int] | None = None,
        end_offsets: Mapping[Key, int] | None = None,
        start_positions: Mapping[Key, int] | None = None,
        consumer_id: str | None = None,
        transport: TransportConfig | None = None,
        config: ConsumerConfig | None = None,
        context: ZmqContext | None = None,
        drop_inbound: DropInbound | None = None,
        commit_fault: Callable[[Sequence[Key]], object] | None = None,
        listener: object = None,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
        **fields: Any,
    ) -> None:
        self.settings = resolve_settings(ConsumerSettings, settings, fields)
        if self.settings.isolation_level == "read_committed":
            raise ConfigError(READ_COMMITTED_IS_A_CLASS)
        topic_list, assigned, ends = checked_reads(topics, assign, end_offsets)
        group_member = self.settings.group_id is not None and bool(topic_list)
        """Subscriptions with a group_id: the group shares their partitions (docs/groups.md)."""
        if group_member and start_positions:  # the group decides who reads where
            raise ConfigError(
                "start_positions with a group's subscription: a member starts each partition "
                "the group gives it at the group's commit (offset_reset where none); seek in "
                "on_assign, or read chosen partitions with assign={(topic, partition): offset}"
            )
        rebalance_listener = listener_of(listener, on_assign, on_revoke, on_lost)
        if not group_member and (
            listener is not None or any(c is not None for c in (on_assign, on_revoke, on_lost))
        ):
            raise ConfigError(
                "listener/on_assign/on_revoke/on_lost need a consumer group: "
                "Consumer(topics, group_id='name', ...)"
            )
        self.consumer_id = consumer_id or new_node_id()
        self._skip: dict[Key, tuple[int, int]] = {}
        """(offset, index): a committed position inside a batch - its first ``index``
        messages were handed out before the commit, so they are skipped once."""
        self._group: GroupOffsets | None = None
        self._auto_commit_due: float | None = None
        if self.settings.group_id is not None:
            self._group = GroupOffsets(
                self.settings.group_id, self.settings, writer=self.consumer_id, context=context
            )
            self._group.start_writer()
            try:  # a group member reads its commits when the group gives it a partition
                if not group_member or assigned:
                    start_positions = self._group_starts(
                        [] if group_member else topic_list, assigned, dict(start_positions or {})
                    )
            except BaseException:
                self._group.close(0)
                raise
            if self.settings.enable_auto_commit:
                self._auto_commit_due = time.monotonic() + self._auto_commit_interval()
        self._machine = ConsumerMachine(
            self.consumer_id,
            config or self.settings.consumer_config(),
            start_positions=start_positions,
        )
        self._mutex = threading.RLock()
        """The lock of :attr:`_lock`, taken directly where nothing waits on the condition
        (``poll``'s take, a delivery): ``with`` on a Condition is a Python call each way."""
        self._lock = threading.Condition(self._mutex)
        self._sleepers = 0
        """Threads in :meth:`_sleep` (waiting on the condition): :meth:`_notify` only
        notifies when there are any (``Condition.notify`` is a Python call per delivery)."""
        self._batches: collections.deque[Deliver] = collections.deque()
        self._queued = 0
        self._max_queued = self.settings.max_queued
        self._current: Deliver | None = None
        self._offset = 0
        self._marks: list[int] = []
        """The non-plain RECORDs of ``_current`` (:meth:`_marks_of`)."""
        self._leftover: tuple[CheckedBatch, int] | None = None
        """A batched RECORD partly handed out, and the index of its next message."""
        self._next: dict[Key, int] = {}
        self._expect: dict[Key, int] = {}
        self._ends = ends
        self._bounded = bool(assigned) and set(ends) == set(assigned) and not topic_list
        """Every partition assigned with an end and no subscription: see :meth:`at_end`."""
        self._fail_on_data_loss = self.settings.fail_on_data_loss
        self._control_messages = self.settings.control_messages
        self._records_lost = 0
        self._records_polled = 0
        self._messages_polled = 0
        self._corrupt = 0
        self._max_bytes = self.settings.max_message_bytes
        self._oversized = 0
        self._last_oversized: str | None = None
        self._bytes_in = 0
        self._last_corrupt: str | None = None
        self._parked: dict[Key, list[Deliver]] = {}
        """Paused partitions (:meth:`pause`) and what of them was received and not polled,
        kept aside in order until :meth:`resume`."""
        self._parked_leftovers: dict[Key, tuple[CheckedBatch, int]] = {}
        self._resumed_leftovers: list[tuple[CheckedBatch, int]] = []
        """Partly handed batches of resumed partitions, taken when the leftover slot frees."""
        self._closed = False
        self._wakeup: Callable[[], None] | None = None
        """Called (in the runner thread) when records arrive in an empty queue or the node
        fails: how :class:`AsyncConsumer` wakes its event loop."""
        self._handover_cut: dict[Key, tuple[int, int]] = {}
        """A revoked partition's batch that a poll had cut: its (offset, messages handed)."""
        self._membership: Membership | None = None
        self._commit_fault = commit_fault
        self._txn_logs: set[str] = set()
        """The transaction logs of the producers that sent this consumer's offsets
        (:meth:`_spares_log`)."""
        machine: NodeMachine = self._machine
        if group_member:
            session, heartbeat = self.settings.group_timing()
            member = GroupMember(
                self.consumer_id,
                topic_list,
                GroupConfig(
                    self.settings.group_id or "",
                    self.settings.group_instance_id or "",
                    heartbeat,
                    session,
                    2 * heartbeat,  # join window: every live member's beat heard once, late or not
                ),
                time.monotonic(),
                started=time.time_ns() // 1_000_000,
            )
            composite = GroupConsumerMachine(self._machine, member)
            self._membership = Membership(composite, rebalance_listener, self)
            self._membership.wake = self._wake_for_rebalance
            machine = composite
        transport = transport or self.settings.transport()
        security = transport.security
        self._direct = self._membership is None and (security is None or security.acl is None)
        """``poll`` reads what arrived itself while it waits (``_wait_once``); not for a group
        member (its turns do the group's work) nor with an ACL (per-peer SUBs)."""
        self._data_wait: DataWait | None = None
        self._direct_waiter: int | None = None
        """The thread waiting in ``_wait_once`` on the data sockets (one at a time)."""
        self._runner = NodeRunner(
            machine,
            # the machine hears stores subscribe to its CONSUMER-HELLOs (a group
            # consumer's composite machine gives its notices to the member only)
            [Identity(self.consumer_id, xpub=self._membership is None)],
            transport,
            context=context,
            direct=self._direct,
            on_deliver=self._on_deliver,
            after_turn=None if self._membership is None else self._membership.after_turn,
            receive_paused=self._paused,
            drop_inbound=drop_inbound,
            name="consumer",
        )
        self._runner.failure.add_listener(self._on_failure)
        if self._membership is not None:
            self._membership.post = self._runner.post
        try:
            self._runner.start(self.settings.ready_timeout)  # stops its thread if it raises
        except BaseException:
            if self._group is not None:
                self._group.close(0)
            raise
        try:
            if assigned:
                self._runner.call(lambda now: self._assign(assigned, ends, now))
            if self._membership is not None:
                self._runner.call(lambda now: self._join(topic_list, now))
                self._warm_up_commits()
            else:
                for topic in topic_list:
                    self.subscribe(topic)
        except BaseException:
            self._runner.stop()
            if self._group is not None:
                self._group.close(0)
            raise

    # -- subscriptions and positions ---------------------------------------------------------

    def subscribe(self, topic: str) -> None:
        if self._membership is not None:
            raise ConfigError("a group member's topics are the ones it was built with")
        self._bounded = False
        self._runner.call(lambda now: self._machine.subscribe(topic, now))

    def unsubscribe(self, topic: str) -> None:
        self._runner.call(lambda now: self._machine.unsubscribe(topic, now))

    def seek(self, topic: str, partition: str, offset: int) -> None:
        """Read ``partition`` of ``topic`` from ``offset`` on; records of it already received
        and not yet polled are dropped."""
        self._runner.call(lambda now: self._seek(topic, partition, offset, now))

    def pause(self, partitions: Iterable[Key]) -> None:
        """Stop handing out and reading ``partitions`` ((topic, partition) pairs) until
        :meth:`resume` (Kafka's ``pause``): ``poll`` returns nothing of them, the consumer
        stops fetching them, and records of them that arrive are dropped (fetched again
        from the stores after ``resume``). What was received and not yet polled is kept
        aside, in order, and handed out after ``resume``; positions stay. A partition not
        known yet is paused when it shows up. Paused partitions do not hold
        :meth:`at_end`."""
        keys = _partition_keys(partitions, "pause")
        self._runner.call(lambda now: self._pause(keys, now))

    def resume(self, partitions: Iterable[Key]) -> None:
        """Read paused ``partitions`` again from their positions (what was kept aside
        first); partitions not paused are ignored."""
        keys = _partition_keys(partitions, "resume")
        self._runner.call(lambda now: self._resume(keys, now))

    def paused(self) -> set[Key]:
        """The paused partitions."""
        with self._lock:
            return set(self._parked)

    def offsets_for_times(
        self, times: Mapping[Key, int], timeout: float = 10.0
    ) -> dict[Key, int | None]:
        """``{(topic, partition): ms}`` -> the offset of the first RECORD at or after that
        time (its latest message's timestamp), None where no RECORD is (yet): a binary
        search reading ``~log2(head)`` single records per partition, never the whole
        partition (dafka/client/_timestamps.py). Joins the cluster with a short-lived node
        of its own; :class:`NoStoreError` if no store answers within ``timeout``."""
        wanted = checked_times(times)
        with self._searcher() as search:
            return search.offsets_for_times(wanted, heads=self.heads(), timeout=timeout)

    def seek_to_timestamp(
        self, timestamp: int, partitions: Iterable[Key] | None = None, timeout: float = 10.0
    ) -> dict[Key, int]:
        """:meth:`seek` each partition to the first RECORD at or after ``timestamp`` (ms),
        or to its end (head + 1) where none is yet: ``partitions``, by default every
        partition of the subscribed topics that the stores know and every partition this
        consumer knows. Returns where each was sought. Partitions that appear later follow
        ``offset_reset``."""
        stamp = checked_timestamp(timestamp)
        keys = _partition_keys(partitions, "seek_to_timestamp") if partitions is not None else None
        heads = self.heads()
        with self._searcher() as search:
            if keys is None:
                topics = dict.fromkeys(self._runner.call(lambda _n: self._machine.topics), stamp)
                found = search.offsets_for_times(
                    dict.fromkeys(heads, stamp), topics=topics, heads=heads, timeout=timeout
                )
            else:
                found = search.offsets_for_times(
                    dict.fromkeys(keys, stamp), heads=heads, timeout=timeout
                )
            known = {**search.heads(), **{k: h for k, h in heads.items() if h >= 0}}
        sought: dict[Key, int] = {}
        for key, first in found.items():
            if first is None and key not in known:
                continue  # nothing of it anywhere: offset_reset decides when it shows up
            target = known[key] + 1 if first is None else first
            self.seek(key[0], key[1], target)
            sought[key] = target
        return sought

    def _searcher(self) -> TimestampSearch:
        return TimestampSearch(self.settings.transport(), ready_timeout=self.settings.ready_timeout)

    def position(self, topic: str, partition: str) -> int:
        """The next offset of ``partition`` not fully handed to the application.

        Raises ``KeyError`` for a partition the consumer does not know (yet)."""
        key = (topic, partition)
        with self._lock:
            found = self._next.get(key)
        if found is not None:
            return found
        return self.positions()[key]

    def positions(self) -> dict[Key, int]:
        """:meth:`position` of every known partition."""
        machine = self._runner.call(
            lambda _now: {k: p.next_sequence for k, p in self._machine.positions().items()}
        )
        with self._lock:
            machine.update(self._next)
        return machine

    def heads(self) -> dict[Key, int]:
        """The highest offset known to exist in every known partition (-1: none yet)."""
        return self._runner.call(lambda _now: self._machine.heads())

    def at_end(self) -> bool:
        """True when every known partition is read up to its known head (and every end
        offset reached) and the application has polled everything received (a group
        member: once it holds its share of the group's partitions).

        A bounded consumer (every partition assigned with an end, no subscription) is at
        its end once every end offset is handed out: nothing else can come, so this is
        answered here, without asking the runner thread (and without ``latest_settle``)."""
        if self._bounded:
            with self._lock:
                nxt = self._next
                return all(nxt[key] >= end for key, end in self._ends.items())
        if not self._runner.call(self._machine.at_end):
            return False
        membership = self._membership
        if membership is not None and (
            membership.pending
            or not self._runner.call(lambda _: membership.machine.member.settled())
        ):
            return False  # the group has not given this member its share yet
        with self._lock:
            return not (
                self._batches
                or self._current is not None
                or self._leftover is not None
                or self._resumed_leftovers
            )

    def statistics(self) -> ConsumerStatistics:
        """The consumer machine's counters (FETCHes, drops, stores...)."""
        return self._runner.call(lambda _now: self._machine.statistics())

    def group_statistics(self) -> GroupStatistics | None:
        """A group member's counters (its generation, view, partitions read and handed over,
        beats, expiries, losses, pending members...); None for a consumer that is not a
        member."""
        membership = self._membership
        if membership is None:
            return None
        member = membership.machine.member
        stats = self._runner.call(lambda _now: member.statistics())
        group = self._group
        if group is None:
            return stats
        return dataclasses.replace(
            stats, logs_fenced=len(group.logs_fenced), fences_failed=group.fences_failed
        )

    def poll_statistics(self) -> PollStatistics:
        with self._lock:
            return PollStatistics(
                self._records_polled,
                self._messages_polled,
                self._corrupt,
                self._last_corrupt,
                self._queued,
                self._records_lost,
                self._oversized,
                self._last_oversized,
            )

    def transport_statistics(self) -> RunnerStats:
        """The runner's counters: messages received and sent, peers connected..."""
        return self._runner.statistics()

    def metrics(self) -> ConsumerMetrics:
        """Records and bytes in, messages polled, lag, FETCHes, drops by reason (a snapshot;
        see dafka.client._metrics)."""
        machine, positions = self._runner.call(
            lambda _now: (self._machine.statistics(), self._machine.positions())
        )
        transport = self._runner.statistics()
        group = self._group
        committed = {} if group is None else group.own()
        with self._lock:
            return consumer_metrics(
                machine,
                positions,
                transport,
                bytes_received=self._bytes_in,
                records_polled=self._records_polled,
                messages_polled=self._messages_polled,
                queued_records=self._queued,
                corrupt_batches=self._corrupt,
                oversized_records=self._oversized,
                committed=committed,
            )

    # -- receiving -----------------------------------------------------------------------------

    def poll(self, timeout: float | None = 1.0, max_records: int = 10_000) -> list[Record]:
        """Messages received so far (at most ``max_records``); waits up to ``timeout``
        seconds (None: forever) for the first. An empty list on timeout or once closed.

        Raises :class:`NodeFailedError` (at once, also while waiting) if the node died.
        """
        if max_records < 1:
            _check_max(max_records)
        deadline = None if timeout is None else time.monotonic() + timeout
        membership = self._membership
        while True:
            if membership is not None and membership.pending:
                self._rebalance()
            if self._auto_commit_due is not None:
                self._maybe_auto_commit()
            with self._mutex:
                if not self._wait(deadline):
                    return []
                if membership is not None and membership.pending and _left(deadline) != 0.0:
                    continue
                parts = self._take_parts(max_records)
            return _built(parts)

    def poll_columns(self, timeout: float | None = 1.0, max_records: int = 10_000) -> RecordColumns:
        """What :meth:`poll` would return - the same messages, in the same order, with the
        same effect on positions - as a :class:`RecordColumns` (columns built when read,
        no tuple per message; ``to_arrow()``). Empty (``len() == 0``) on timeout."""
        _check_max(max_records)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._membership is not None and self._membership.pending:
                self._rebalance()
            if self._auto_commit_due is not None:
                self._maybe_auto_commit()
            with self._mutex:
                if not self._wait(deadline):
                    return RecordColumns()
                if not self._rebalance_due() or _left(deadline) == 0.0:
                    parts = self._take_parts(max_records)
                    return RecordColumns(parts)

    def read_to_end(
        self, idle_timeout: float = 30.0, max_records: int = 10_000
    ) -> Iterator[RecordColumns]:
        """:meth:`poll_columns` until :meth:`at_end`: a bounded consumer's ranges, in order,
        as columns of at most ``max_records`` messages (what ``assign=`` with
        ``end_offsets=`` is for; a subscribed consumer reads up to the heads it knows).

        Records that never arrive - no RECORD for ``idle_timeout`` seconds - end the read:
        with ``fail_on_data_loss`` a :class:`DataLossError` names them, else they are
        counted as lost (``poll_statistics().records_lost``), logged, and the read ends
        where it got to. The clock starts once a store has greeted the consumer (or a
        record came): on a busy machine that alone can take seconds, and records cannot be
        missing before anyone could send them. No store within ``idle_timeout`` ends the
        read the same way, saying so. A consumer closed meanwhile ends it too."""
        _check_max(max_records)
        wait = min(0.2, idle_timeout)
        polled = self._records_polled
        last_progress = time.monotonic()
        heard = False
        while not self.at_end():
            columns = self.poll_columns(wait, max_records)
            if columns:
                yield columns
            now = time.monotonic()
            if self._records_polled != polled:  # corrupt batches taken are progress too
                polled = self._records_polled
                last_progress = now
                heard = True
            elif self._closed:
                return
            elif not heard and self.statistics().stores_known:
                heard = True  # a store is there: from now on, silence means missing records
                last_progress = now
            elif now - last_progress > idle_timeout:
                self._missing(idle_timeout, heard)
                return

    def _missing(self, idle_timeout: float, heard: bool) -> None:
        """``read_to_end`` waited ``idle_timeout`` s for records that did not come (``heard``:
        after a store greeted it; else no store did)."""
        if self._bounded:
            with self._lock:
                gaps = {k: (self._next[k], end) for k, end in self._ends.items()}
        else:
            heads = self.heads()
            gaps = {k: (p, heads.get(k, -1) + 1) for k, p in self.positions().items()}
        missing = {k: (a, b) for k, (a, b) in sorted(gaps.items()) if a < b}
        what = ", ".join(f"{t}/{p}: records {a}..{b - 1}" for (t, p), (a, b) in missing.items())
        if not heard:
            what = f"{what or 'nothing'} (no store answered)"
        if self._fail_on_data_loss:
            only = next(iter(missing.items()), None) if len(missing) == 1 else None
            raise DataLossError(
                f"{what or 'nothing'} did not arrive within {idle_timeout} s",
                remedy="fail_on_data_loss=False ends the read without them",
                topic=only[0][0] if only else None,
                partition=only[0][1] if only else None,
                first=only[1][0] if only else None,
                end=only[1][1] if only else None,
            )
        with self._lock:
            self._records_lost += sum(b - a for a, b in missing.values())
        log.warning("consumer: gave up waiting %s s for %s", idle_timeout, what)

    def _wait(self, deadline: float | None) -> bool:
        """Wait (the lock is held) until something is queued, up to ``deadline``
        (``time.monotonic()``; None: no limit): False on timeout or closed."""
        failure = self._runner.failure
        failure.check()
        membership = self._membership
        while (
            self._current is None
            and not self._batches
            and self._leftover is None
            and not self._resumed_leftovers
            and (membership is None or not membership.pending)
        ):
            if self._closed:
                return False
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._wait_once(remaining)
            failure.check()
        return True

    def _wait_once(self, remaining: float | None) -> None:
        """Wait (the lock is held) up to ``remaining`` seconds for something to change.

        A direct consumer's thread waits on the data sockets' descriptors and a pipe
        (``DataWait``) that :meth:`_notify` writes to when another thread queued records,
        closed or failed the consumer, and reads what arrived itself
        (``NodeRunner.wait_here``: the deliveries reach the queue in this thread, one thread
        wake-up less from the socket to ``poll`` returning; one read per record, after the
        wait). One thread at a time; others wait on the condition."""
        if not self._direct or self._direct_waiter is not None:
            self._sleep(remaining)
            return
        wait = self._data_wait
        if wait is None:
            wait = self._data_wait = self._runner.data_wait()
            if wait is None:  # the runner in mid-turn, or not running any more: ask again
                # soon (a whole ``remaining`` on the condition kept this poll off the sockets)
                retry = _DATA_WAIT_RETRY
                self._sleep(retry if remaining is None else min(remaining, retry))
                return
        self._direct_waiter = threading.get_ident()
        self._lock.release()
        try:
            self._runner.wait_here(wait, remaining)
        finally:
            self._lock.acquire()
            self._direct_waiter = None
            if self._closed:
                self._close_data_wait()

    def _sleep(self, timeout: float | None) -> None:
        """Wait on the condition (the lock is held) up to ``timeout`` seconds, counted in
        :attr:`_sleepers` for :meth:`_notify`."""
        self._sleepers += 1
        try:
            self._lock.wait(timeout)
        finally:
            self._sleepers -= 1

    def _notify(self, everyone: bool = False) -> None:
        """Wake ``poll`` (the lock is held): the condition's waiters and a direct waiter in
        another thread."""
        if self._sleepers:
            if everyone:
                self._lock.notify_all()
            else:
                self._lock.notify()
        waiter = self._direct_waiter
        if waiter is not None and waiter != threading.get_ident() and self._data_wait is not None:
            self._data_wait.wake()

    def _close_data_wait(self) -> None:
        """Closing (the lock is held): the pipe goes once no thread waits on it."""
        if self._direct_waiter is None and self._data_wait is not None:
            self._data_wait.close()
            self._data_wait = None

    def _poll_now(self, max_records: int) -> list[Record]:
        """What :meth:`poll` returns without waiting (the asyncio flavour's building block;
        it runs :meth:`_rebalance` in a worker thread first when :meth:`_rebalance_due`)."""
        _check_max(max_records)
        if self._auto_commit_due is not None:
            self._maybe_auto_commit()
        with self._lock:
            self._runner.failure.check()
            parts = self._take_parts(max_records)
        return _built(parts)

    def _poll_columns_now(self, max_records: int) -> RecordColumns:
        """What :meth:`poll_columns` returns without waiting (for the asyncio flavour)."""
        _check_max(max_records)
        if self._auto_commit_due is not None:
            self._maybe_auto_commit()
        with self._lock:
            self._runner.failure.check()
            parts = self._take_parts(max_records)
        return RecordColumns(parts)

    def _take_parts(self, max_records: int) -> list[Part]:
        """Take up to ``max_records`` messages from the queue (the lock is held), as parts:
        runs of plain RECORDs and (slices of) batched RECORDs, checked but not decoded.

        Positions move here, for both ``poll`` and ``poll_columns``: a RECORD counts as
        taken when its last message is; a corrupt batch is skipped and counted."""
        parts: list[Part] = []
        n = 0
        taken = 0  # RECORDs fully consumed from the queue
        nxt = self._next
        while n < max_records:
            room = max_records - n
            leftover = self._leftover
            if leftover is None and self._resumed_leftovers:
                leftover = self._leftover = self._resumed_leftovers.pop()
            if leftover is not None:
                checked, at = leftover
                stop = min(checked.count, at + room)
                self._hand_out(parts, checked, at, stop)
                n += stop - at
                if stop == checked.count:
                    self._leftover = None
                    nxt[(checked.topic, checked.partition)] = checked.offset + 1
                else:
                    self._leftover = (checked, stop)
                continue
            batch = self._current
            if batch is None:
                if not self._batches:
                    break
                batch = self._batches[0]
                expected = nxt.get((batch.topic, batch.producer))
                if (
                    expected is not None
                    and batch.first_sequence > expected
                    and self._lost(batch, expected, bool(parts))
                ):
                    break  # what came before the gap first; the next poll raises
                batch = self._current = self._batches.popleft()
                self._offset = 0
                self._marks = self._marks_of(batch.contents)
            contents = batch.contents
            start = self._offset
            stop = min(len(contents), start + room)
            topic, partition = batch.topic, batch.producer
            offset0 = batch.first_sequence + start
            key = (topic, partition)
            marks = self._marks
            at_mark = bisect_left(marks, start)
            plain = (marks[at_mark] if at_mark < len(marks) else len(contents)) - start
            plain = min(plain, stop - start)
            if plain:
                parts.append(PlainRun(topic, partition, offset0, contents[start : start + plain]))
                n += plain
            used = plain
            if start + plain < stop:  # a batch: check it (decoded when read)
                offset = offset0 + plain
                content = contents[start + plain]
                limit = self._max_bytes
                used += 1
                try:
                    if len(content) > limit:
                        raise DroppedRecordError(len(content))
                    layout, columns = check_batch(content)
                except DroppedRecordError as exc:
                    self._oversized += 1
                    self._last_oversized = f"{topic}/{partition}@{offset}: {exc.size} bytes"
                    log.warning(
                        "consumer: skipped a RECORD over max_message_bytes=%d at %s",
                        limit,
                        self._last_oversized,
                    )
                except CorruptBatchError as exc:
                    self._corrupt += 1
                    self._last_corrupt = f"{topic}/{partition}@{offset}: {exc}"
                    log.error("consumer: skipped a corrupt batch at %s", self._last_corrupt)
                else:
                    checked = CheckedBatch(topic, partition, offset, content, layout, columns)
                    first = self._skipped(key, offset) if self._skip else 0
                    cut = room - plain  # >= 1: the batch is inside the take
                    if checked.count - first > cut:
                        self._hand_out(parts, checked, first, first + cut)
                        n += cut
                        self._leftover = (checked, first + cut)
                        nxt[key] = offset  # partly handed: its offset stays the position
                        taken += used
                        self._advance(batch, start + used)
                        break
                    if first < checked.count:
                        self._hand_out(parts, checked, first, checked.count)
                        n += checked.count - first
            taken += used
            nxt[key] = offset0 + used
            if start + used >= len(contents):  # self._advance, inline: once per take
                self._current = None
            else:
                self._offset = start + used
        self._queued -= taken
        self._records_polled += taken
        self._messages_polled += n
        return parts

    def _marks_of(self, contents: tuple[bytes, ...]) -> list[int]:
        """The indexes of ``contents`` that are not plain RECORDs - batches (the magic) and
        RECORDs over ``max_message_bytes`` (skipped) - found once per delivery: the take
        handles one of them per turn and finds the next one by bisection. It scanned the
        rest of the delivery again for each (quadratic in the batched RECORDs of a delivery,
        ~4 % of a read of RECORDs of ~250 messages: docs/exactly-once.md)."""
        flags = list(map(_startswith, contents, repeat(MAGIC)))
        limit = self._max_bytes
        if contents and max(map(len, contents)) > limit:  # rare: too large, dropped
            flags = [f or len(c) > limit for f, c in zip(flags, contents, strict=True)]
        return list(compress(range(len(flags)), flags))

    def _skipped(self, key: Key, offset: int) -> int:
        """Messages of the batch at ``offset`` handed out before a commit (the lock is held):
        skipped once, when the committed batch comes."""
        at = self._skip.get(key)
        if at is None or at[0] > offset:
            return 0
        del self._skip[key]
        return at[1] if at[0] == offset else 0

    def _hand_out(self, parts: list[Part], checked: CheckedBatch, start: int, stop: int) -> None:
        """Messages ``[start, stop)`` of a checked batch, as slices around its transaction
        control messages (ACKs: never handed out unless ``settings.control_messages``, as
        Kafka's consumers never see control records). They still count as taken."""
        at = start
        if not self._control_messages:
            for i in control_indexes(checked.content, checked.layout):
                if start <= i < stop:
                    if i > at:
                        parts.append(BatchSlice(checked, at, i))
                    at = i + 1
        if at < stop:
            parts.append(BatchSlice(checked, at, stop))

    def _lost(self, batch: Deliver, expected: int, handing_out: bool) -> bool:
        """Records ``expected..`` up to ``batch`` are gone (the machine skipped them): True
        to stop this take before them (``fail_on_data_loss`` with messages to hand out
        first); raises :class:`DataLossError` (the lock is held) at the gap itself, at
        every poll until the application seeks past it."""
        end = batch.first_sequence
        where = f"{batch.topic}/{batch.producer}: records {expected}..{end - 1}"
        if self._fail_on_data_loss:
            if handing_out:
                return True
            raise DataLossError(
                f"{where} are gone from every store ({end - expected} "
                f"record{'s' if end - expected != 1 else ''})",
                remedy=f"fail_on_data_loss=False skips them, seek to {end} goes on after them",
                topic=batch.topic,
                partition=batch.producer,
                first=expected,
                end=end,
            )
        self._records_lost += end - expected
        log.warning("consumer: skipped %s: gone from every store", where)
        return False

    def _advance(self, batch: Deliver, offset: int) -> None:
        if offset >= len(batch.contents):
            self._current = None
        else:
            self._offset = offset

    def __iter__(self) -> Iterator[Record]:
        while not self._closed:
            yield from self.poll(timeout=0.5)

    def close(self) -> None:
        """Leave the cluster; raises :class:`NodeFailedError` if the node had died."""
        failure = self._runner.failure
        if self._closed:
            failure.check()
            return
        group = self._group
        if self._membership is not None and failure.error is None:
            self._leave_group()
        if group is not None and self._auto_commit_due is not None and failure.error is None:
            try:  # as Kafka: auto-commit commits what was handed out when closing
                self.commit()
            except (CommitError, NodeFailedError) as exc:
                log.warning("consumer: the closing commit of group %s failed: %s", group.group, exc)
        self._closed = True
        with self._lock:
            self._notify(everyone=True)
        if self._wakeup is not None:
            self._wakeup()
        if self._membership is not None:
            self._membership.close()
        self._runner.stop()
        with self._lock:
            self._close_data_wait()
        if group is not None:
            group.close()
        failure.check()

    # -- group membership (group_id with topics; docs/groups.md) ---------------------------

    def assignment(self) -> set[Key]:
        """The partitions this consumer reads: a group member's share of its topics (what
        ``on_assign`` gave it and no ``on_revoke``/``on_lost`` took back), else every
        partition it knows."""
        if self._membership is not None:
            return self._membership.assignment()
        return set(self.positions())

    def _rebalance_due(self) -> bool:
        membership = self._membership
        return membership is not None and membership.pending

    def _rebalance(self) -> None:
        """Handle the group's decisions in this (the application's) thread: callbacks,
        the handover commits, the committed offsets of new partitions."""
        membership = self._membership
        if membership is not None:
            membership.rebalance(self._runner.call)

    def _wake_for_rebalance(self) -> None:
        with self._lock:
            self._notify(everyone=True)
        if self._wakeup is not None:
            self._wakeup()

    def _leave_group(self) -> None:
        """close(): hand every partition over (``on_revoke``, commit), then a goodbye beat
        so that the others take them at once (a static member says none)."""
        membership = self._membership
        assert membership is not None
        member = membership.machine.member
        deadline = time.monotonic() + max(5.0, float(self.settings.commit_timeout))
        try:
            self._runner.call(member.leave)
            while not self._runner.call(lambda _now: member.left or member.fenced):
                if membership.pending:
                    self._rebalance()
                elif time.monotonic() > deadline:
                    log.warning(
                        "consumer: left group %s without handing over", member.config.group_id
                    )
                    return
                else:
                    with self._lock:
                        self._sleep(0.01)
        except FencedMemberError:
            return

    def _warm_up_commits(self) -> None:
        """Read the group's commits once while the member joins: the first read waits for
        the stores' answers, later ones only for news, so a partition assigned later starts
        sooner. Opportunistic: bounded by three beacon intervals (at least 2 s), not
        ``commit_timeout`` - without a store the constructor would wait 30 s for nothing
        (the read when a partition is assigned waits the full timeout)."""
        group = self._group
        if group is None:
            return
        try:
            group.committed([], max(2.0, 3 * float(self.settings.beacon_interval)))
        except CommitError as exc:
            log.info("consumer: group %s: no commits read yet (%s)", group.group, exc)

    def _join(self, topics: list[str], now: float) -> None:
        membership = self._membership
        assert membership is not None
        for topic in topics:
            self._machine.subscribe_group(topic, now)
        membership.machine.member.restart_join(now)

    def _forget_partition(self, key: Key) -> None:
        """Runner thread: a revoked or lost partition - drop what of it is queued, parked or
        partly handed out (a cut batch's position is kept for the handover commit)."""
        with self._lock:
            leftover = self._drop_queued(key)
            self._parked.pop(key, None)  # no longer paused either
            if leftover is not None:
                self._handover_cut[key] = (leftover[0].offset, leftover[1])
            self._resumed_leftovers = [
                lo for lo in self._resumed_leftovers if (lo[0].topic, lo[0].partition) != key
            ]
            self._expect.pop(key, None)

    def _drop_queued(self, key: Key) -> tuple[CheckedBatch, int] | None:
        """Under the lock: drop what of ``key`` is parked, queued or partly handed out (a
        paused partition stays paused); returns the dropped leftover of a cut batch, if any."""
        parked = self._parked.get(key)
        if parked:
            self._queued -= sum(len(b.contents) for b in parked)
            parked.clear()
        self._parked_leftovers.pop(key, None)
        kept = collections.deque(b for b in self._batches if (b.topic, b.producer) != key)
        dropped = sum(len(b.contents) for b in self._batches) - sum(len(b.contents) for b in kept)
        self._batches = kept
        current = self._current
        if current is not None and (current.topic, current.producer) == key:
            dropped += len(current.contents) - self._offset
            self._current = None
        self._queued -= dropped
        leftover = self._leftover
        if leftover is not None and (leftover[0].topic, leftover[0].partition) == key:
            self._leftover = None
            return leftover
        return None

    def _handed_out(self, keys: Iterable[Key]) -> dict[Key, Position]:
        """The positions of what was handed out of ``keys`` (a revoke's commit)."""
        with self._lock:
            out: dict[Key, Position] = {}
            for key in keys:
                cut = self._handover_cut.pop(key, None)
                if cut is not None:
                    out[key] = cut
                elif key in self._next:
                    out[key] = self._next[key]
            return out

    def _forget_positions(self, keys: Iterable[Key]) -> None:
        """A revoke's ``on_revoke`` returned: its partitions' positions are no longer this
        consumer's to commit (the handover commits them); or the partitions were lost: what
        was handed out of them is never committed by this member (their new owner reads it
        again)."""
        with self._lock:
            for key in keys:
                self._next.pop(key, None)
                self._skip.pop(key, None)
                self._handover_cut.pop(key, None)

    def _commit_handover(self, positions: dict[Key, Position]) -> dict[Key, Handed]:
        """Commit a revoked partition's position (auto-commit; in the membership's handover
        thread): the next owner starts there. Returns what was committed, (offset, index,
        version), for the member's beats (the next owner starts there without reading the
        commits). A commit that fails is logged: the next owner then starts at the group's
        previous commit (the records since are read twice)."""
        group = self._group
        committed: dict[Key, Handed] = {}
        if group is not None and self.settings.enable_auto_commit and positions:
            try:
                tenures = self._refuse_lost(positions)  # lost meanwhile: no handover commit
                group.commit(positions, None, "", tenures=tenures)
            except (CommitError, NodeFailedError) as exc:
                log.warning(
                    "consumer: the handover commit of %s failed: %s", sorted(positions), exc
                )
            else:
                versions = group.versions()
                for key, position in positions.items():
                    done = as_committed(key, position)
                    version = versions.get(key)
                    if version is not None:
                        committed[key] = (done.offset, done.index, version)
        return committed

    def _refuse_lost(
        self, keys: Iterable[Key], *, held: Mapping[Key, int] | None = None
    ) -> dict[Key, int] | None:
        """A group member's commit: :class:`CommitFailedError` for partitions it lost
        (``Membership.refuse_lost``; ``held``: or that it no longer holds under these
        tenures), else the tenures its commit carries; nothing to check (None) for a
        consumer that is not a member."""
        membership = self._membership
        if membership is None:
            return None
        keys = list(keys)
        tenures = membership.refuse_lost(keys, self._runner.call, held)
        fault = self._commit_fault
        if fault is not None:
            fault(keys)
        return tenures

    def _checked_positions(
        self, offsets: Mapping[Key, Position] | None
    ) -> tuple[Mapping[Key, Position], dict[Key, int] | None]:
        """:meth:`_to_commit` and, for a group member, :meth:`_refuse_lost` of them in one
        look (``Membership.check_commit``: both in one runner turn): positions read
        before the check could be those of a tenure lost meanwhile (docs/groups.md,
        "Tenures"). Returns the positions and the tenures their commit carries."""
        membership = self._membership
        if membership is None:
            return self._to_commit(offsets), None
        positions, tenures = membership.check_commit(
            functools.partial(self._to_commit, offsets),
            self._runner.call,
            every_started=offsets is None,
        )
        fault = self._commit_fault
        if fault is not None:
            fault(list(positions))
        return positions, tenures

    def _start_assigned(self, keys: list[Key], starts: dict[Key, Handed]) -> dict[Key, int]:
        """Start newly assigned partitions where their previous owner handed them over
        (``starts``, from its beats: its handover commit), the others at the group's
        committed offsets (read now, after any handover commit); ``offset_reset`` where
        nothing was committed. Returns the tenures they start under (read in the turn
        that sets their positions; those revoked meanwhile are absent)."""
        group = self._group
        unknown = [key for key in keys if key not in starts]
        found: dict[Key, CommittedOffset] = {}
        if group is not None:
            if unknown:  # fencing a paused previous owner's transaction log first
                found.update(group.committed_for_take(unknown, spare=self._spares_log))
            group.seen({key: version for key, (_, _, version) in starts.items()})
        for key, (offset, index, version) in starts.items():
            found[key] = CommittedOffset(offset, index, version)
        membership = self._membership
        assert membership is not None
        member = membership.machine.member

        def start(now: float) -> dict[Key, int]:
            owned = member.assignment()
            for key in keys:  # its commits rank above every commit read (a clock behind)
                read = found.get(key)
                if read is not None and read.tenure:
                    member.tenure_read(key, read.tenure)
            with self._lock:
                for key in keys:
                    if key not in owned:
                        continue  # revoked meanwhile: the revoke's event follows
                    self._expect.pop(key, None)
                    self._next.pop(key, None)
                    self._skip.pop(key, None)
                    offset = found.get(key)
                    if offset is not None:
                        self._next[key] = offset.offset
                        if offset.index:
                            self._skip[key] = (offset.offset, offset.index)
            for topic, partition in keys:
                if (topic, partition) in owned:
                    offset = found.get((topic, partition))
                    self._machine.own(
                        topic, partition, None if offset is None else offset.offset, now
                    )
            return member.tenures(key for key in keys if key in owned)

        return self._runner.call(start)

    def _spares_log(self, log_name: str) -> bool:
        """A transaction log a take never fences: its own loop's producer's (named by
        :meth:`TransactionalProducer.send_offsets_to_transaction` with this consumer; until
        then every log a producer of this process claimed). That producer's claim fenced
        the log's earlier instances already; fencing it again would fence the producer."""
        linked = self._txn_logs
        return log_name in linked if linked else claimed_here(log_name)

    def _link_transactional(self, log_name: str) -> None:
        """The transactional producer of ``log_name`` sends this consumer's offsets."""
        self._txn_logs.add(log_name)

    # -- committed offsets (group_id; docs/groups.md) ---------------------------------------

    @property
    def group_id(self) -> str | None:
        return self.settings.group_id

    def commit(
        self,
        offsets: Mapping[Key, Position] | None = None,
        *,
        timeout: float | None = None,
        metadata: str = "",
    ) -> None:
        """Commit ``offsets`` (None: the positions of everything handed out so far) for the
        group; returns once the stores hold the commit (:class:`CommitError` after
        ``timeout``, default ``commit_timeout``). A position is the next RECORD offset, or
        ``(offset, index)``: the first ``index`` messages of that RECORD were handed out.

        A group member's commit of partitions it no longer owns (it lost them: another
        member may read them) raises :class:`CommitFailedError` and commits nothing."""
        group = self._needs_group("commit")
        positions, tenures = self._checked_positions(offsets)
        group.commit(positions, timeout, metadata, tenures=tenures)

    def commit_async(
        self, offsets: Mapping[Key, Position] | None = None, *, metadata: str = ""
    ) -> Future[None]:
        """:meth:`commit` without waiting: the future resolves once the stores hold it (a
        member's commit of partitions it lost raises :class:`CommitFailedError` at once)."""
        group = self._needs_group("commit_async")
        positions, tenures = self._checked_positions(offsets)
        return group.commit_async(positions, metadata, tenures=tenures)

    def committed(
        self, partitions: Iterable[Key] | None = None, *, timeout: float | None = None
    ) -> dict[Key, CommittedOffset | None]:
        """The group's committed offset of each of ``partitions`` (None: every partition the
        group committed), read from the stores now; None where nothing was committed."""
        group = self._needs_group("committed")
        if partitions is None:
            return dict(group.committed(None, timeout))
        keys = _partition_keys(partitions, "committed")
        found = group.committed(keys, timeout)
        return {key: found.get(key) for key in keys}

    def seek_to_committed(
        self, partitions: Iterable[Key], *, timeout: float | None = None
    ) -> list[Key]:
        """Move each of ``partitions`` to the group's committed offset; returns those with
        no commit (left where they are: the caller applies its reset rule)."""
        keys = _partition_keys(partitions, "seek_to_committed")
        found = self._needs_group("seek_to_committed").committed(keys, timeout)
        missing = [key for key in keys if key not in found]
        for (topic, partition), offset in found.items():
            self.seek(topic, partition, offset.offset)
            if offset.index:
                with self._lock:
                    self._skip[(topic, partition)] = (offset.offset, offset.index)
        return missing

    def positions_to_commit(self) -> dict[Key, Position]:
        """What :meth:`commit` without offsets commits: per partition the next RECORD, or
        ``(offset, index)`` inside a batch a poll cut (what
        ``TransactionalProducer.send_offsets_to_transaction`` takes)."""
        return dict(self._to_commit(None))

    def committed_versions(self) -> dict[Key, int]:
        """The highest commit version this consumer's group committer saw per partition
        (a transaction committing for the group ranks its commits above them)."""
        return self._needs_group("committed_versions").versions()

    def _needs_group(self, call: str) -> GroupOffsets:
        if self._group is None:
            raise ConfigError(f"{call}() needs a consumer group: Consumer(..., group_id='name')")
        return self._group

    def _to_commit(self, offsets: Mapping[Key, Position] | None) -> Mapping[Key, Position]:
        """``offsets``, or the positions of what was handed out: the next RECORD, or (a batch
        a poll cut, a committed batch not reached yet) its offset and the messages taken."""
        if offsets is not None:
            return offsets
        with self._lock:
            out: dict[Key, Position] = dict(self._next)
            for key, (offset, index) in self._skip.items():
                if out.get(key) == offset:
                    out[key] = (offset, index)
            cut = [*self._parked_leftovers.values(), *self._resumed_leftovers]
            if self._leftover is not None:
                cut.append(self._leftover)
            for checked, at in cut:
                out[(checked.topic, checked.partition)] = (checked.offset, at)
        return out

    def _auto_commit_interval(self) -> float:
        return float(self.settings.auto_commit_interval_ms) / 1000.0

    def _maybe_auto_commit(self) -> None:
        """Auto-commit, at most every ``auto_commit_interval_ms``: what earlier polls handed
        out (the application processed it before polling again: at least once)."""
        due = self._auto_commit_due
        now = time.monotonic()
        if due is None or now < due:
            return
        self._auto_commit_due = now + self._auto_commit_interval()
        group = self._group
        assert group is not None
        try:
            positions, tenures = self._checked_positions(None)
        except CommitFailedError as exc:  # the next poll's rebalance drops them (on_lost)
            log.warning("consumer: auto-commit: %s", exc)
            return
        future = group.commit_async(positions, tenures=tenures)
        future.add_done_callback(_log_failed_commit)

    def _group_starts(
        self, topics: list[str], assigned: dict[Key, int], starts: dict[Key, int]
    ) -> dict[Key, int]:
        """Where a group consumer starts: at the committed offsets (read before the node
        starts), the assigned partitions' starts and ``offset_reset`` only where nothing was
        committed. Returns the subscriptions' start positions."""
        group = self._group
        assert group is not None
        committed = group.committed(None)
        wanted = set(topics)
        for key, offset in committed.items():
            if key in assigned:
                assigned[key] = offset.offset
            elif key[0] in wanted and key not in starts:
                starts[key] = offset.offset
            else:
                continue
            if offset.index:
                self._skip[key] = (offset.offset, offset.index)
        return starts

    # -- runner thread ---------------------------------------------------------------------

    def _on_failure(self, _error: NodeFailedError) -> None:
        """The runner died: wake every ``poll`` waiting for records."""
        with self._lock:
            self._notify(everyone=True)
        if self._wakeup is not None:
            self._wakeup()

    def _assign(self, assigned: dict[Key, int], ends: dict[Key, int], now: float) -> None:
        for (topic, partition), start in assigned.items():
            self._machine.assign(topic, partition, start, ends.get((topic, partition)), now)
        with self._lock:  # the start is a known position: a run after it is a gap
            for key, start in assigned.items():
                self._next.setdefault(key, start)

    def _pause(self, keys: list[Key], now: float) -> None:
        for topic, partition in keys:
            self._machine.pause(topic, partition, now)
        with self._lock:
            for key in keys:
                if key in self._parked:
                    continue
                parked = self._parked[key] = []
                kept: collections.deque[Deliver] = collections.deque()
                current = self._current
                if current is not None and (current.topic, current.producer) == key:
                    offset = self._offset
                    parked.append(
                        Deliver(
                            current.topic,
                            current.producer,
                            current.first_sequence + offset,
                            current.contents[offset:],
                        )
                    )
                    self._current = None
                for batch in self._batches:
                    (parked if (batch.topic, batch.producer) == key else kept).append(batch)
                self._batches = kept
                leftover = self._leftover
                if leftover is not None and (leftover[0].topic, leftover[0].partition) == key:
                    self._parked_leftovers[key] = leftover
                    self._leftover = None

    def _resume(self, keys: list[Key], now: float) -> None:
        with self._lock:  # what was kept aside goes first (the machine reads on after it)
            woke = False
            for key in keys:
                parked = self._parked.pop(key, None)
                if parked is None:
                    continue
                leftover = self._parked_leftovers.pop(key, None)
                if leftover is not None:
                    self._resumed_leftovers.append(leftover)
                    woke = True
                self._batches.extendleft(reversed(parked))
                woke = woke or bool(parked)
            if woke:
                self._notify(everyone=True)
        for topic, partition in keys:
            self._machine.resume(topic, partition, now)
        if woke and self._wakeup is not None:
            self._wakeup()

    def _seek(self, topic: str, partition: str, offset: int, now: float) -> None:
        key = (topic, partition)
        self._machine.seek(topic, partition, offset, now)
        with self._lock:
            self._skip.pop(key, None)
            self._drop_queued(key)
            self._next[key] = offset
            # runs the machine took before the seek may still be in its outbox: drop
            # everything of this partition until the run that starts at ``offset``
            self._expect[key] = offset

    def _on_deliver(self, batch: Deliver) -> None:
        with self._mutex:
            key = (batch.topic, batch.producer)
            if self._expect:
                expected = self._expect.get(key)
                if expected is not None:
                    if batch.first_sequence != expected:
                        return
                    del self._expect[key]
            self._next.setdefault(key, batch.first_sequence)
            parked = self._parked.get(key) if self._parked else None
            if parked is not None:  # taken before the pause reached the machine
                parked.append(batch)
                self._queued += len(batch.contents)
                self._bytes_in += sum(map(len, batch.contents))
                return
            was_empty = not self._batches and self._current is None and self._leftover is None
            self._batches.append(batch)
            self._queued += len(batch.contents)
            self._bytes_in += sum(map(len, batch.contents))
            self._notify()
        if was_empty and self._wakeup is not None:
            self._wakeup()

    def _paused(self) -> bool:
        return self._queued >= self._max_queued


def _log_failed_commit(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:
        log.warning("consumer: an auto-commit failed (the next one retries): %s", error)


def _built(parts: list[Part]) -> list[Record]:
    """The Records of ``parts`` (taken from the queue under the lock; built outside it, so
    that the runner thread can queue deliveries meanwhile).

    Built with the cyclic garbage collector paused: every Record is a new tuple, and a
    generation-0 collection every 700 of them (each visiting the young Records, which
    hold no cycles) costs a large share of building them. Re-measured with the columnar
    API in place (``bench/poll.py``, docs/client.md § Performance): 1.1-1.2 us of CPU per
    message with the collector, 0.8-1.0 us paused, so ``poll`` keeps the pause. It
    is a process-wide switch: it is skipped when the application paused the collector
    itself, and it lasts only while this poll's Records are built (the next allocation
    after it collects what is due). :meth:`Consumer.poll_columns` builds no tuple per
    message and never touches the collector: the choice for applications that manage ``gc``
    from other threads, and the faster one."""
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        if len(parts) == 1:  # a lone record's poll: no list to join
            return parts[0].records()
        out: list[Record] = []
        for part in parts:
            out += part.records()
        return out
    finally:
        if enabled:
            gc.enable()


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _check_max(max_records: int) -> None:
    if max_records < 1:
        raise ConfigError(f"max_records must be >= 1, got {max_records!r}")


def _partition_keys(partitions: Iterable[Key] | str | bytes, call: str) -> list[Key]:
    """``partitions`` checked as a list of ``(topic, partition)`` pairs of names: one pair
    unwrapped, a string (a topic where pairs are meant) or anything else is a TypeError
    naming ``call`` (pause, resume, seek_to_timestamp, committed, seek_to_committed)."""
    if isinstance(partitions, (str, bytes)):
        raise TypeError(f"{call}() takes (topic, partition) pairs, not the string {partitions!r}")
    if isinstance(partitions, tuple) and len(partitions) == 2 and isinstance(partitions[0], str):
        raise TypeError(
            f"{call}() takes an iterable of (topic, partition) pairs, got one pair "
            f"{partitions!r}: wrap it in a list"
        )
    keys = list(partitions)
    for key in keys:
        if not (
            isinstance(key, tuple)
            and len(key) == 2
            and isinstance(key[0], str)
            and isinstance(key[1], str)
        ):
            raise TypeError(f"{call}() takes (topic, partition) pairs of str, got {key!r}")
        check_name("topic", key[0])
        check_name("partition", key[1])
    return keys


__all__ = ["Consumer", "PollStatistics"]
