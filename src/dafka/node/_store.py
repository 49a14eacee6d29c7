"""The store: a writer that persists every partition and a reader that serves it.

Theory. A C store is two nodes with two ids. The *writer* takes RECORDs (and the
DIRECT-RECORDs answering its own FETCHes) in order per partition, exactly like a consumer with
``earliest`` (same :class:`~dafka.node._catchup.Cursor`, same windowed FETCH with retry), and
instead of delivering it buffers them: at :meth:`StoreMachine.take_actions` each partition's
run becomes one :class:`Persist`. The driver appends, syncs as its policy says, and reports
with :meth:`StoreMachine.on_durable`; the next drain carries one ACK per partition with the
highest *durable* sequence, so a producer never drops a record that a crash could lose. A HEAD
at or below the durable head is answered with the ACK again: ACKs travel over PUB/SUB and can
be lost, and a producer whose last ACK was lost would otherwise hold its tail forever.

The writer's FETCHes reach producers *and the other stores' readers*: that is how stores
replicate each other, and how a store that starts late (or lost messages) catches up after
the producer is gone.

The *reader* answers from what is durable, read through the injected :class:`RecordReader`
(``dafka.storage.Storage`` in production): FETCH -> exactly the records held in
``[sequence, sequence + count)`` (at most ``max_fetch_reply``; the C store sent count + 1, and
nothing unless the first existed), GET-HEADS and CONSUMER-HELLO -> one DIRECT-HEAD per stored
partition of each topic, and a consumer's ``L`` + id subscription seen on the reader's XPUB
(:meth:`StoreMachine.on_subscription`) -> STORE-HELLO; a producer's ``K`` + id (it listens
for its ACKs) -> STORE-HELLO naming the writer, whose ACKs the producer then counts.

Dafka's own answers (docs/protocol.md, "Answers C stores never give"): each topic's
DIRECT-HEADs are followed by HEADS-END ("that is all": how many were sent, and how many
live stores this one knows - itself and every other store reader whose ``W`` + id
subscription its XPUB saw), once the store has run ``peers_settle`` (before, it could not
know every store yet, and the askers' settle window decides as with a C store); a FETCH
below the first record held (retention, a topic delete) gets LOG-START naming that record
before whatever the reply holds.

FETCH replies *stream*: a reply is a queued range served ``fetch_reply_slice`` records per
runner turn (the machine asks for a turn at once through :meth:`StoreMachine.next_deadline`),
so the first DIRECT-RECORD leaves in the turn the FETCH arrived, and a big reply does not
hold up the writer. A reply covers the range asked (from a first record the store holds)
*as the writer takes it*: records taken after the FETCH arrived, in the same turn or later,
are sent too, each in the turn it becomes durable (:meth:`StoreMachine.on_durable` brings
the reply forward). A C consumer needs this: it drops a live record that arrives out of
order, FETCHes from the gap (asking up to the next multiple of 100,000) and never retries
that FETCH, so a reply that stopped at what the store held when the FETCH came would leave it
short of every record published meanwhile once the producer is gone (issue 18). A reply
that has nothing new to send for ``fetch_reply_wait`` ends where the partition stopped. A
FETCH addressed to another store (``requester@reader-id``, see ``dafka.node._stores``) is not
answered (``fetches_declined``); one addressed to us is answered to the plain requester id.
Replies are served oldest first, each as far as what is durable before the next: a consumer
that asks for its next window while the current one streams (``FetchPolicy.pipeline``) gets
it right after, in order; a reply waiting for durability lets the others go. A FETCH that
arrives in the same runner turn (batch of inputs) as an earlier one from the same requester
whose range holds its own is not answered again (``fetches_coalesced``): both left the
requester before any of the reply could reach it, so the second is a retry of a FETCH the
store had not read yet - a store starved of CPU reads both at once - and answering it would
only queue a window of duplicates ahead of what the requester still needs (the FETCH retry
storm, docs/nodes.md). A FETCH in a later turn whose range ends within what a reply to the
same requester still streaming has yet to send is answered only up to where that reply is
(what it sent may have been lost; what it has yet to send is not queued twice), and that
reply waits for durability as long as the new one would have.

Storage faults heal without a restart. The driver reports what really happened on disk:

* :meth:`StoreMachine.on_append_failed` - a ``Persist`` failed (a full disk): the partition
  goes back to what the log really holds (the records taken after it are dropped, never
  ACKed), takes nothing for a backoff (``append_retry_initial``, doubling per failure in a
  row up to ``append_retry_max``), then fetches what it dropped - from the producer, which
  still holds every unACKed record, or from the other stores - and persists it: the next
  append is the retry. ACKs only ever carry the durable head, so nothing unpersisted is
  ACKed meanwhile.
* :meth:`StoreMachine.on_truncated` - the log was cut back (its last records were damaged,
  or an append did not continue it): the partition goes back to the new head at once
  (GET-HEADS answers tell the truth) and fetches the lost range from the other stores and
  the producer.
* :meth:`StoreMachine.on_holes` - the log has holes (records lost to damage found by a read
  or the scrub, with intact records after them; or records recorded as gone): each hole is
  fetched from the peers like a gap (its own cursor, retries backing off up to
  ``hole_retry_max``), and what arrives is written into it (``Persist(placement="fill")``).
  A FETCH reply steps over a hole: it never claims a record the store does not hold.

A gap that no peer can fill - every retry answered only from beyond it, by the producer and
the other stores (``skip_unavailable_after``) - is recorded as a hole: the writer goes on
from the first record still available (``Persist(placement="after_gap")``) instead of
holding nothing past the gap forever, and keeps trying to fill it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Protocol, runtime_checkable

from dafka.node._catchup import Cursor, FetchScheduler
from dafka.node._config import FetchPolicy, StoreConfig
from dafka.node._errors import check_name
from dafka.node._reader import PartitionReader, ReaderRuns
from dafka.node._runs import Runs
from dafka.node._stores import addressed_to
from dafka.node.actions import (
    Action,
    DurableNotices,
    HoleNotices,
    KeepRuns,
    PeerNotices,
    Persist,
    Placement,
    RunRecords,
    Send,
    SendDirectRecords,
    Subscribe,
    SubscriptionNotices,
)
from dafka.protocol import (
    Ack,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    Record,
    StoreHello,
    name_problem,
)


class RecordReader(Protocol):
    """The read-only view of the store's log that the machine needs (``dafka.storage.Storage``)."""

    def read_contents(
        self, topic: str, partition: str, first: int, count: int, /
    ) -> tuple[int, Sequence[bytes]]:
        """The records of a partition held in ``[first, first + count)``: the sequence of the
        first one held there and the contents from it on, contiguous (fewer at the ends:
        below the start after retention, above the head)."""
        ...

    def heads(self, topic: str, /) -> Mapping[str, int]:
        """The last stored sequence of every partition of ``topic``."""
        ...

    def topics(self) -> Iterable[str]:
        """Every topic with stored records."""
        ...

    def holes(self, topic: str, partition: str, /) -> Sequence[tuple[int, int]]:
        """The ``[first, end)`` ranges below the partition's head that are not held."""
        ...


@runtime_checkable
class DeletionMarks(Protocol):
    """A log that applies topic deletes (``dafka.storage.Storage``): the last sequence
    deleted of each partition, which the writer never fetches or takes again."""

    def deleted(self) -> Mapping[tuple[str, str], int]: ...


@runtime_checkable
class LogStarts(Protocol):
    """A log that says where each partition starts (``dafka.storage.Storage``): the reader
    answers a FETCH below it with LOG-START."""

    def start_offset(self, topic: str, partition: str, /) -> int | None:
        """The first sequence still held (retention and deletes move it up); None for a
        partition the log does not know."""
        ...


@runtime_checkable
class RunLog(Protocol):
    """A log that keeps the runs of each partition (``KeepRuns``): what a restarted store
    knows of them (``dafka.storage.Storage``, ``dafka.testing.MemoryLog``)."""

    def runs(self, topic: str, partition: str, /) -> Sequence[tuple[int, int]]:
        """The (epoch, first sequence) of each run of the partition, in order."""
        ...


MAX_LEARNED_TOPICS = 10_000
"""Topics a store learns from GET-HEADS without holding a partition of them (_learn_topic)."""

MAX_NAME_FENCES = 10_000
"""Fences kept for producer names with partitions the store does not hold yet (``_fence``):
past it, the oldest is forgotten."""


_MAX_LISTENING = 65_536
"""Ids remembered per kind of subscription (``K``, ``L``): beyond it the oldest are
forgotten (a peer subscribing under ever new ids must not grow the store without bound)."""


@dataclass(frozen=True, slots=True)
class StoreStatistics:
    """Counters of a :class:`StoreMachine` (a snapshot)."""

    stored: int
    partitions: int
    acks_sent: int
    fetches_sent: int
    fetch_retries: int
    fetches_in_flight: int
    fetches_answered: int
    records_served: int
    heads_answered: int
    heads_ends_sent: int
    """HEADS-END ("that is all") answers sent (dafka's own, docs/protocol.md)."""
    log_starts_sent: int
    """LOG-START answers sent (a FETCH below the first record held)."""
    store_hellos_sent: int
    fetches_declined: int
    fetch_replies_pending: int
    arrived_ahead: int
    dropped_duplicates: int
    dropped_foreign: int
    dropped_unexpected: int
    append_failures: int = 0
    truncations: int = 0
    dropped_unpersisted: int = 0
    """Records taken but given up after a failed append or a cut (fetched again)."""
    partitions_blocked: int = 0
    """Partitions waiting out an append backoff now."""
    topics_not_learned: int = 0
    """GET-HEADS for an unknown topic past ``MAX_LEARNED_TOPICS`` (not asked about)."""
    holes: int = 0
    """Holes in the logs now (each fetched from the peers until filled)."""
    hole_records: int = 0
    """Sequences missing in those holes."""
    records_filled: int = 0
    """Records written into holes (fetched from a peer)."""
    holes_recorded: int = 0
    """Gaps no peer could fill, recorded as holes (``skip_unavailable_after``)."""
    records_gone: int = 0
    """Sequences in those gaps."""
    partitions_refused: int = 0
    """RECORDs and HEADs of a new partition refused: ``max_partitions`` tracked already."""
    records_fenced: int = 0
    """RECORDs and heads of a producer run refused: a newer run of it started at or before
    their sequence (docs/guarantees.md, "A reused sequence: run epochs")."""
    records_superseded: int = 0
    """Records an older run left where a newer run resumed: set aside, the newer run's
    taken instead."""
    runs_refused: int = 0
    """RECORDs and heads naming a known run with another start (malformed: dropped)."""
    fetches_coalesced: int = 0
    """FETCHes not answered: an earlier FETCH of the same turn, from the same requester,
    asked for a range holding theirs (a retry the store read together with the FETCH), or a
    reply to the requester still streaming has yet to send all they ask."""
    fences_refused: int = 0
    """Fencing GET-HEADS whose epoch was more than ``max_fence_ahead`` past the store's
    wall clock: nothing fenced (answered as a plain GET-HEADS)."""


_TURN_FETCHES = 64
"""FETCHes a turn remembers to coalesce a retry read with them (``_asked_this_turn``), and
replies (the newest) a FETCH is checked against (``_unsent_below``): a flood costs no more."""


class _Reply:
    """A FETCH reply being streamed: ``[next, stop)`` of a partition still to send."""

    __slots__ = ("cursor", "next", "recipient", "since", "stop")

    def __init__(self, recipient: str, cursor: Cursor, first: int, stop: int, now: float) -> None:
        self.recipient = recipient
        self.cursor = cursor
        self.next = first
        self.stop = stop
        self.since = now
        """When the reply last made progress (a reply waiting for durability expires)."""


class StoreMachine(
    ReaderRuns, RunRecords, DurableNotices, HoleNotices, PeerNotices, SubscriptionNotices
):
    """Pure state machine of a store (writer + reader); see the module docstring."""

    def __init__(
        self,
        writer_id: str,
        reader_id: str,
        reader: RecordReader,
        config: StoreConfig | None = None,
        now: float | None = None,
        wall: float | None = None,
    ) -> None:
        """Recovers the heads of every partition from ``reader`` (a restarted store).

        ``now``: when the store started (``peers_settle`` counts from it); None: the time
        of its first input. ``wall``: the wall clock then (seconds since the Unix epoch),
        which bounds a fencing GET-HEADS' epoch (``StoreConfig.max_fence_ahead``); None: not
        bounded (the machine reads no clock: ``dafka.server.StoreNode`` gives it)."""
        wid = check_name("store writer id", writer_id)
        rid = check_name("store reader id", reader_id)
        self.writer_id = writer_id
        self.reader_id = reader_id
        self.config = config or StoreConfig()
        self._reader = reader
        self._out: list[Action] = []
        self._cursors: dict[tuple[str, str], Cursor] = {}
        self._by_topic: dict[str, dict[str, Cursor]] = {}
        self._ack_due: dict[Cursor, None] = {}
        config = self.config
        self._fetcher = FetchScheduler(writer_id, config.fetch, config.skip_unavailable_after)
        self._in_order = PartitionReader(self._fetcher)
        hole_policy = FetchPolicy(
            window=config.fetch.window,
            retry_initial=config.fetch.retry_initial,
            retry_max=config.hole_retry_max,
            pipeline=False,
        )
        self._hole_fetcher = FetchScheduler(writer_id, hole_policy)
        self._hole_reader = PartitionReader(self._hole_fetcher)
        self._holes: dict[Cursor, list[Cursor]] = {}
        """Partition -> a cursor per hole of its log (``last``: what was taken into it,
        ``limit``: its last sequence), in order."""
        self._after_gap: set[Cursor] = set()
        """Partitions whose next Persist continues after a gap recorded as gone."""
        self._filled = 0
        self._holes_recorded = 0
        self._gone = 0
        self._holes_unstarted = False
        self._stored = 0
        self._acks = 0
        self._fetches_answered = 0
        self._served = 0
        self._heads_answered = 0
        self._hellos = 0
        self._listening: dict[bytes, dict[str, None]] = {b"K": {}, b"L": {}}
        """Ids subscribed to their ACKs (K) and to STORE-HELLO (L), from the XPUB notices."""
        self._started = now
        self._wall = wall
        self._vouched = False
        """``peers_settle`` has passed since the start: HEADS-END goes with heads answers."""
        self.stores_changed = 0
        """Grows when a store not counted before subscribes (``StoreNode`` keeps the set)."""
        self._stores: dict[str, float | None] = {}
        """Other stores' reader ids, from their ``W`` + id subscriptions on our XPUB: None
        while subscribed, else when they left (still counted ``stores_remembered``)."""
        self._latest = 0.0
        self._heads_ends = 0
        self._log_starts = 0
        self._starts = reader if isinstance(reader, LogStarts) else None
        self._declined = 0
        self._replies: deque[_Reply] = deque()
        self._turn_fetches: list[tuple[str, Cursor, int, int]] = []
        """The FETCHes answered since the outbox was last drained - in this turn of the
        driver, which drains it once per batch of inputs: (recipient, partition, range)."""
        self._coalesced = 0
        self._learned = 0
        self._not_learned = 0
        self._refused_partitions = 0
        self._reply_due: float | None = None
        self._foreign = 0
        self._unexpected = 0
        self._blocked: dict[Cursor, float] = {}
        """Partitions whose last append failed -> when they take records again."""
        self._append_delay: dict[Cursor, float] = {}
        """Backoff of partitions whose appends failed, until one becomes durable."""
        self._append_failures = 0
        self._truncations = 0
        self._unpersisted = 0
        self._fence_due: dict[Cursor, tuple[int, int]] = {}
        """Partitions where a record of an older run came from its producer and was
        refused since the last turn: each gets an ACK naming the newer run (its epoch and
        start)."""
        self._name_fences: dict[tuple[str, str], tuple[int, int]] = {}
        """(topic, ``"name."``) -> (epoch, partition count) of the last fencing GET-HEADS of
        that name: a partition of it the store did not hold then is fenced when it is first
        made (``_cursor``), as it would have been had the store held it."""
        self._fences: dict[Cursor, int] = {}
        """Partition -> the epoch of a newer run that resumed (a fencing GET-HEADS) and has
        not begun here yet: the older runs' own records past what the store holds are
        refused (``_fence``)."""
        self._runs: dict[Cursor, Runs] = {}
        """The producer runs of each partition that named them (``_runs.py``)."""
        self._fenced = 0
        self._fences_refused = 0
        self.last_fence_refused = ""
        """What the last refused fence was (for the driver's log line)."""
        self._superseded = 0
        self._runs_refused = 0
        self.last_fenced = ""
        """What the last fenced record or head was (for the driver's log line)."""
        for topic in reader.topics():
            for producer, last in reader.heads(topic).items():
                cursor = self._cursor(topic, producer)
                cursor.last = cursor.known_head = cursor.durable = last
                holes = reader.holes(topic, producer)
                if holes:  # fetched at the first timer tick (``now`` is known then)
                    self._holes[cursor] = [_hole_cursor(cursor, *hole) for hole in holes]
                    self._holes_unstarted = True
        if isinstance(reader, RunLog):
            for (topic, producer), cursor in self._cursors.items():
                runs = reader.runs(topic, producer)
                if runs:
                    self._runs[cursor] = Runs(runs)
        if isinstance(reader, DeletionMarks):
            for (topic, producer), cut in reader.deleted().items():
                cursor = self._cursors.get((topic, producer)) or self._cursor(topic, producer)
                if cursor.last < cut:
                    cursor.last = cursor.known_head = cursor.durable = cut
        self._refresh_due: float | None = None
        self._out += [
            Subscribe(b"D" + wid),
            Subscribe(b"M"),
            Subscribe(b"H"),
            Subscribe(b"E" + wid),
            Subscribe(b"F"),
            Subscribe(b"G"),
            Subscribe(b"W" + rid),
        ]
        self._ask_heads()  # a restarted store asks the others what it missed while down

    # -- driver events ---------------------------------------------------------------------

    def on_durable(self, topic: str, producer: str, sequence: int, now: float) -> None:
        """The driver made everything up to ``sequence`` of a partition durable: ACK it, and
        let a FETCH reply that waits for it go on in this turn."""
        cursor = self._cursors.get((topic, producer))
        if cursor is None or sequence <= cursor.durable:
            return
        cursor.durable = min(sequence, cursor.last)
        self._ack_due[cursor] = None
        if self._append_delay:
            self._append_delay.pop(cursor, None)  # appends work again: the backoff restarts
        if self._replies and (self._reply_due is None or self._reply_due > now):
            # A reply may wait for these records: it goes on in this turn, not when its
            # fetch_reply_wait runs out (a C consumer never retries a FETCH: a reply that
            # stalled a second lost its tail to the live records that came meanwhile).
            self._reply_due = now

    def on_append_failed(self, topic: str, producer: str, stored: int, now: float) -> None:
        """A ``Persist`` of the partition failed; ``stored`` is the last sequence its log
        really holds (-1: none).

        The partition goes back to ``stored`` (everything taken after it is dropped: it was
        never ACKed, the producer or another store still has it), takes nothing until its
        backoff is over, then fetches from ``stored + 1`` (see the module docstring).
        """
        cursor = self._cursors.get((topic, producer))
        if cursor is None:
            return
        self._append_failures += 1
        self._rewind(cursor, stored)
        delay = self._append_delay.get(cursor)
        policy = self.config
        delay = (
            policy.append_retry_initial
            if delay is None
            else min(delay * 2.0, policy.append_retry_max)
        )
        self._append_delay[cursor] = delay
        self._blocked[cursor] = now + delay

    def on_truncated(self, topic: str, producer: str, head: int, now: float) -> None:
        """The partition's log was cut back to ``head`` (-1: empty): fetch the rest again."""
        cursor = self._cursors.get((topic, producer))
        if cursor is None:
            return
        self._truncations += 1
        self._rewind(cursor, head)
        if cursor not in self._blocked and cursor.known_head > cursor.last:
            self._fetcher.gap(cursor, cursor.known_head, now, self._out)

    def on_holes(
        self, topic: str, producer: str, holes: Sequence[tuple[int, int]], now: float
    ) -> None:
        """The partition's log does not hold ``holes`` (``[first, end)`` ranges below its
        head): fetch each from the peers and fill it (see the module docstring). The
        storage is the truth: a hole that is not in ``holes`` any more was filled, one that
        is new is fetched at once, one whose fill failed is fetched again."""
        cursor = self._cursors.get((topic, producer))
        if cursor is None:
            return
        old = {hole.limit: hole for hole in self._holes.get(cursor, ())}
        kept: list[Cursor] = []
        for first, end in holes:
            if end <= first:
                continue
            hole = old.pop(end - 1, None)
            if hole is None or hole.last != first - 1 or hole.pending:
                if hole is not None:
                    hole.pending = []
                    self._hole_fetcher.forget(hole)
                hole = _hole_cursor(cursor, first, end)
                self._hole_fetcher.gap(hole, hole.limit, now, self._out)
            kept.append(hole)
        for gone in old.values():
            gone.pending = []
            self._hole_fetcher.forget(gone)
        if kept:
            self._holes[cursor] = kept
        else:
            self._holes.pop(cursor, None)

    def on_deleted(self, topic: str, producer: str, cut: int, now: float) -> None:
        """The driver applied a topic delete to the log: everything up to ``cut`` is gone
        for good. The writer moves past it (no FETCH of it ever again, records of it taken
        and not yet persisted dropped, holes below it forgotten) and ACKs through ``cut``:
        a producer still holding records up to it is released (they were deleted), and it
        goes on after it."""
        cursor = self._cursors.get((topic, producer))
        if cursor is None:
            cursor = self._cursor(topic, producer)
        if cursor.last < cut:
            self._fetcher.forget(cursor)
            cursor.pending = []
            cursor.last = cut
            self._after_gap.discard(cursor)
        cursor.known_head = max(cursor.known_head, cut)
        cursor.durable = max(cursor.durable, cut)
        holes = self._holes.get(cursor)
        if holes:
            for hole in holes:
                if hole.limit <= cut:
                    self._hole_fetcher.forget(hole)
            kept = [h for h in holes if h.limit > cut]
            if kept:
                self._holes[cursor] = kept
            else:
                del self._holes[cursor]
        self._ack_due[cursor] = None
        if cursor.known_head > cursor.last:
            self._fetcher.gap(cursor, cursor.known_head, now, self._out)

    def _rewind(self, cursor: Cursor, stored: int) -> None:
        """Make ``cursor`` hold exactly what the log holds (``stored``), dropping the rest."""
        taken = cursor.last
        cursor.known_head = max(cursor.known_head, taken)
        if taken > stored:
            self._unpersisted += taken - stored
        cursor.pending = []
        cursor.last = stored
        cursor.durable = min(cursor.durable, stored)
        self._fetcher.forget(cursor)
        self._after_gap.discard(cursor)

    def on_peer(self, node_id: str, now: float) -> None:
        """The driver connected to a new peer: ask for heads now, and keep asking.

        The GET-HEADS queued by the constructor leaves before any peer is connected, and a PUB
        drops what no one subscribed to. Without this a store restarted after the producers
        left never learnt what it missed: only a RECORD or a HEAD armed the refresh timer, and
        no one sends those any more. Asking on each new peer reaches the other stores as they
        connect; the armed refresh covers a question sent before the peer connected back.
        """
        del node_id
        self._clock(now)
        self._ask_heads()
        self._arm_refresh(now)
        self._holes_unstarted = False
        self._restart_holes(now)  # a new peer may hold what the holes miss

    def _restart_holes(self, now: float) -> None:
        for holes in self._holes.values():
            for hole in holes:
                self._hole_fetcher.restart(hole, now, self._out)

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        """An XPUB notice on the reader's socket; ``prefix`` without the 0x01/0x00 byte.

        ``L`` + a consumer's id: STORE-HELLO naming our reader (it answers FETCH and
        GET-HEADS). A producer listening for its ACKs (``K`` + its id) *and* for
        STORE-HELLO (``L`` + its id): STORE-HELLO naming our *writer*, which sends the ACKs,
        since a producer counts ACKs only from stores that introduced themselves so
        (``ProducerMachine``; a C producer never subscribes to ``L``). It is sent on the
        notice of whichever of the two comes second: a peer's subscriptions are applied in
        the order they arrive (ZeroMQ sends a new connection's in byte order, ``K`` before
        ``L``), and a STORE-HELLO sent before its ``L`` was applied would be lost. The
        reader's XPUB passes every subscribe (``XPUB_VERBOSE``): a producer restarted under
        the same id is greeted again, even while its old connection lingers.

        ``W`` + id of another store's reader: a live store, counted in our HEADS-END."""
        self._clock(now)
        self._latest = now
        if len(prefix) < 2:
            return
        if prefix[0] == 0x57:  # W: a store reader asks for CONSUMER-HELLOs: a store
            self._note_store(prefix[1:], subscribed, now)
            return
        if prefix[0] not in b"LK":
            return
        if name_problem(prefix[1:]) is not None:
            return  # not a node id (too long, NUL): no STORE-HELLO can name it
        command, other = (b"L", b"K") if prefix[0] == 0x4C else (b"K", b"L")
        peer = prefix[1:].decode("utf-8", "surrogateescape")
        listening = self._listening[command]
        if not subscribed:
            listening.pop(peer, None)
            return
        listening.pop(peer, None)
        listening[peer] = None  # most recent last: the oldest go first at the bound
        if len(listening) > _MAX_LISTENING:
            del listening[next(iter(listening))]
        out = self._out
        if command == b"L":
            self._hellos += 1
            out.append(Send(StoreHello(peer, self.reader_id)))
        if peer in self._listening[other]:
            self._hellos += 1
            out.append(Send(StoreHello(peer, self.writer_id)))

    def _note_store(self, raw: bytes, subscribed: bool, now: float) -> None:
        """A store that left stays counted ``stores_remembered`` seconds: a store paused or
        cut off for a moment (or one whose own pause made us drop it) may hold more than we
        do, and an asker that trusted a count without it would settle on our lower heads."""
        if name_problem(raw) is not None:
            return
        store = raw.decode("utf-8", "surrogateescape")
        if store == self.reader_id:
            return
        stores = self._stores
        if not subscribed:
            if store in stores:
                stores[store] = now
        elif store in stores or len(stores) < _MAX_LISTENING:
            if store not in stores:
                self.stores_changed += 1
            stores[store] = None

    def remember_stores(self, stores: Iterable[str], now: float) -> None:
        """Stores this one knew before it restarted (``StoreNode`` keeps them in its data
        directory): each counts as if it had just left - ``stores_remembered`` seconds - until
        it subscribes again. A store restarted while its peer was paused knew no other store
        once its ``peers_settle`` passed, said so in its HEADS-END, and a named producer
        resuming then settled on its lower heads alone (the chaos soak: 962 acknowledged
        records lost)."""
        for store in stores:
            raw = store.encode("utf-8", "surrogateescape")
            if store == self.reader_id or name_problem(raw) is not None:
                continue
            if len(self._stores) < _MAX_LISTENING:
                self._stores.setdefault(store, now)

    @property
    def known_stores(self) -> list[str]:
        """The other stores counted in :attr:`stores_known` (reader ids)."""
        self.stores_known  # noqa: B018 - forgets those that left too long ago
        return list(self._stores)

    def _clock(self, now: float) -> None:
        """Note the time: the start is the first input's when none was given, and
        ``peers_settle`` after it HEADS-END joins the heads answers."""
        if self._vouched:
            return
        if self._started is None:
            self._started = now
        settle = self.config.peers_settle
        if now >= self._started + (2.0 if settle is None else settle):
            self._vouched = True

    @property
    def stores_known(self) -> int:
        """Live stores this one knows, itself included, and those that left less than
        ``stores_remembered`` seconds ago (the HEADS-END ``stores`` count)."""
        forget = self._latest - self.config.stores_remembered
        gone = [s for s, left in self._stores.items() if left is not None and left <= forget]
        for store in gone:
            del self._stores[store]
        return 1 + len(self._stores)

    def durable_heads(self) -> dict[tuple[str, str], int]:
        """The durable head of every partition, keyed by (topic, producer)."""
        return {key: c.durable for key, c in self._cursors.items() if c.durable >= 0}

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        if not self._vouched:
            self._clock(now)
        if type(message) is Record:
            topic = message.topic
            producer = message.producer
            sequence = message.sequence
            cursor = self._cursors.get((topic, producer))
            if message.epoch:
                cursor = self._run_cursor(cursor, topic, producer, now)
                if cursor is None or not self._in_run(
                    cursor, message.epoch, message.run_start, sequence, now, live=True
                ):
                    return
            if cursor is not None and sequence == cursor.last + 1:  # the hot path
                self._in_order.take(cursor, sequence, message.content, now, self._out)
                return
            self._on_record(cursor, message, now)
        elif type(message) is DirectRecord:
            if message.recipient != self.writer_id:
                self._foreign += 1
                return
            cursor = self._cursors.get((message.topic, message.producer))
            if message.epoch:
                cursor = self._run_cursor(cursor, message.topic, message.producer, now)
                if cursor is None or not self._in_run(
                    cursor, message.epoch, message.run_start, message.sequence, now
                ):
                    return
            if cursor is not None and self._holes and message.sequence <= cursor.last:
                hole = self._hole_at(cursor, message.sequence)
                if hole is not None:  # an answer to a hole's FETCH
                    self._hole_reader.offer(
                        hole, message.sequence, message.content, True, now, self._out
                    )
                    return
            self._on_record(cursor, message, now)
        elif type(message) is Head:
            self._on_head(message, now)
        elif type(message) is DirectHead:
            if message.recipient != self.writer_id:
                self._foreign += 1
                return
            self._on_head(message, now)
        elif type(message) is Fetch:
            self._on_fetch(message, now)
        elif type(message) is GetHeads:
            self._latest = now
            if message.epoch:
                self._fence(message, now)
            self._send_heads(message.requester, (message.topic,))
            if message.topic not in self._by_topic:
                self._learn_topic(message.topic, now)
        elif type(message) is ConsumerHello:
            if message.store != self.reader_id:
                self._foreign += 1
                return
            self._latest = now
            self._send_heads(message.consumer, message.topics)
        else:
            self._unexpected += 1

    def on_run_records(
        self,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        """A run of RECORDs of producer run ``epoch``: its run checked once (the newest run
        known, the steady state), then taken as :meth:`on_records` takes runs; a run of an
        older epoch goes record by record (a newer run may start inside it)."""
        cursor = self._run_cursor(self._cursors.get((topic, producer)), topic, producer, now)
        if cursor is None:
            return
        runs = self._runs.get(cursor)
        if runs is not None and epoch < runs.newest()[0]:
            for offset, content in enumerate(contents):
                self.on_message(
                    Record(topic, producer, first_sequence + offset, content, epoch, run_start),
                    now,
                )
            return
        if self._in_run(cursor, epoch, run_start, first_sequence, now):
            self.on_records(topic, producer, first_sequence, contents, now)

    def _run_cursor(
        self, cursor: Cursor | None, topic: str, producer: str, now: float
    ) -> Cursor | None:
        """The partition's cursor, made for a record or head that names its run (None: a
        new partition beyond ``max_partitions``, refused and counted)."""
        if cursor is not None:
            return cursor
        if self._full():
            return None
        cursor = self._cursor(topic, producer)
        self._arm_refresh(now)
        return cursor

    def _in_run(
        self,
        cursor: Cursor,
        epoch: int,
        run_start: int,
        sequence: int,
        now: float,
        live: bool = False,
    ) -> bool:
        """Whether a record (or head) at ``sequence`` of run ``epoch`` starting at
        ``run_start`` is taken (``_runs.py``): the newest run's are; a newer run's first
        sets aside what an older run left from its start on; an older run's are fenced from
        a newer run's start on."""
        runs = self._runs.get(cursor)
        newest, start = runs.newest() if runs is not None else (0, 0)
        fences = self._fences
        if fences and cursor in fences:
            fence = fences[cursor]
            if newest >= fence:  # the run that fenced (or a newer one) began: its rule now
                del fences[cursor]
            elif live and epoch < fence and sequence > cursor.last:
                # an older run's own record or HEAD past what we held when a newer run
                # resumed (see _fence): refused, and its producer told which run is newer
                self._fence_due[cursor] = (fence, cursor.last + 1)
                self._fenced += 1
                self.last_fenced = (
                    f"{cursor.topic}/{cursor.producer} at {sequence}: run {epoch}, past what "
                    f"this store held ({cursor.last}) when run {fence} resumed"
                )
                return False
        if epoch == newest:
            if run_start == start:
                return True
            self._runs_refused += 1
            return False
        if epoch > newest:
            self._begin_run(cursor, runs, epoch, run_start, now)
            return True
        if runs is not None and runs.fences(epoch, sequence):
            if live:  # from the producer itself: tell it which run owns the place
                self._fence_due[cursor] = (newest, start)
            self._fenced += 1
            self.last_fenced = (
                f"{cursor.topic}/{cursor.producer} at {sequence}: run {epoch}, where run "
                f"{newest} resumed at {start}"
            )
            return False
        return True

    def _fence(self, request: GetHeads, now: float) -> None:
        """A named producer's new run fences its older runs here before this store answers
        its resume (docs/guarantees.md, "Fencing resume"; Kafka's epoch bump): for each of
        its partitions ``f"{name}.{i}"`` this store holds whose runs are all older, the older
        runs' *own* records and HEADs past what the store holds now are refused from here on
        (a live predecessor's: its ACK names the new run, so it is fenced at once) until the
        new run begins here (its first record or HEAD, ``_begin_run``). Nothing held is set
        aside (all of it is in this answer, so the run resumes at or after it), and copies
        from other stores are still taken: a store catching up keeps catching up on what
        the others took before their own fence (the new run resumes after the highest
        answer), and its later answers say so. Kept in memory: a store restarted before the
        new run begins forgets it, and takes the older run's late records as it did before
        fences (the new run's first record sets them aside).

        A fence creates no partition, so a GET-HEADS naming 2**32 partitions costs a look
        at the topic's partitions, not new cursors (found by the chaos soak's hostile node: a
        store made thousands); the partitions of the name it holds nothing of yet are fenced
        when first made, from one entry per name (``_name_fences``, at most
        ``MAX_NAME_FENCES``: an empty store fences too). An
        epoch more than ``max_fence_ahead`` past the store's wall clock fences nothing
        (``fences_refused``): the epochs of runs are their start in wall ms, and a fence
        naming run 2**64-1 would refuse every later run of the producer until the store
        restarts (the heads are answered all the same)."""
        prefix = request.requester[:-1]  # "name."
        epoch = request.epoch
        if self._wall is not None and self._started is not None:
            limit = int((self._wall + now - self._started + self.config.max_fence_ahead) * 1000)
            if epoch > limit:
                # a run's epoch is its start in wall ms: one this far ahead of our clock
                # would fence the producer's every later run until this store restarts
                self._fences_refused += 1
                self.last_fence_refused = (
                    f"{request.topic}/{request.requester} run {epoch}: more than "
                    f"{self.config.max_fence_ahead:g} s past this store's clock ({limit})"
                )
                return
        count = request.partitions
        fences = self._fences
        for producer, cursor in self._by_topic.get(request.topic, {}).items():
            if not producer.startswith(prefix):
                continue
            index = _partition_index(producer[len(prefix) :])
            if index is None or index >= count:
                continue
            runs = self._runs.get(cursor)
            if (runs is None or epoch > runs.newest()[0]) and epoch > fences.get(cursor, 0):
                fences[cursor] = epoch
        # partitions the store holds nothing of yet: fenced when first made, by one entry per
        # name (a fence naming 2**32 partitions costs one), so that an older run's record
        # coming after the answer is refused there too - else it was taken and ACKed, then
        # set aside when the new run's first record came on the same sequence
        names = self._name_fences
        key = (request.topic, prefix)
        known = names.pop(key, None)
        names[key] = (epoch, count) if known is None or epoch > known[0] else known
        if len(names) > MAX_NAME_FENCES:
            del names[next(iter(names))]

    @property
    def records_fenced(self) -> int:
        """Records and heads refused so far because a newer producer run owns their place."""
        return self._fenced

    @property
    def fences_refused(self) -> int:
        """Fencing GET-HEADS refused so far: their epoch was too far ahead (``_fence``)."""
        return self._fences_refused

    def _begin_run(
        self, cursor: Cursor, runs: Runs | None, epoch: int, run_start: int, now: float
    ) -> None:
        """A run newer than every run known starts at ``run_start``: what the store took
        from there on is an older run's, never acknowledged where this run's belong. It is
        set aside (the driver keeps it in quarantine and logs it) and the partition goes
        back to ``run_start - 1``; this run's records are taken from there."""
        if runs is None:
            runs = self._runs[cursor] = Runs()
        supersede: int | None = None
        out = self._out
        if run_start <= cursor.last:
            supersede = run_start
            if cursor.pending:
                self._persist(cursor, out)  # what was taken before goes first; the cut follows
            self._superseded += cursor.last - run_start + 1
            cursor.known_head = max(cursor.known_head, cursor.last)
            cursor.last = run_start - 1
            cursor.durable = min(cursor.durable, run_start - 1)
            self._fetcher.forget(cursor)
            self._after_gap.discard(cursor)
            holes = self._holes.get(cursor)
            if holes:
                for hole in holes:
                    if hole.limit >= run_start:
                        hole.pending = []
                        self._hole_fetcher.forget(hole)
                kept = [hole for hole in holes if hole.limit < run_start]
                if kept:
                    self._holes[cursor] = kept
                else:
                    del self._holes[cursor]
        elif cursor.ahead:
            for sequence in [s for s in cursor.ahead if s >= run_start]:
                del cursor.ahead[sequence]  # of an older run, or unsaid: fetched again
        runs.begin(epoch, run_start)
        out.append(KeepRuns(cursor.topic, cursor.producer, tuple(runs.entries), supersede))
        if supersede is not None and cursor.known_head > cursor.last:
            self._fetcher.gap(cursor, cursor.known_head, now, out)

    def on_timer(self, now: float) -> None:
        if not self._vouched:
            self._clock(now)
        if self._holes_unstarted:
            self._holes_unstarted = False
            self._restart_holes(now)
        due = self._reply_due
        if due is not None and due <= now:
            self._serve(now)
        if self._blocked:
            self._unblock(now)
        for cursor, first in self._fetcher.on_timer(now, self._out):
            self._record_gone(cursor, first, now)
        if self._holes:
            self._hole_fetcher.on_timer(now, self._out)
        due = self._refresh_due
        if due is not None and due <= now:
            self._ask_heads()
            self._refresh_due = None
        self._arm_refresh(now)

    def next_deadline(self) -> float | None:
        if self._holes_unstarted:
            return 0.0  # due at once: start fetching the holes found at open
        fetch = self._fetcher.next_deadline()
        hole = self._hole_fetcher.next_deadline()
        if hole is not None and (fetch is None or hole < fetch):
            fetch = hole
        refresh = self._refresh_due
        if refresh is None or (fetch is not None and fetch < refresh):
            refresh = fetch
        if self._blocked:
            unblock = min(self._blocked.values())
            if refresh is None or unblock < refresh:
                refresh = unblock
        reply = self._reply_due
        if reply is None or (refresh is not None and refresh < reply):
            return refresh
        return reply

    def take_actions(self) -> list[Action]:
        out = self._out
        if self._turn_fetches:
            self._turn_fetches.clear()  # the turn ends: its FETCHes coalesce no more
        if self._ack_due:
            all_runs = self._runs
            for cursor in self._ack_due:
                self._acks += 1
                # the ACK names the run of the record it acknowledges: a producer counts
                # only its own run's (docs/guarantees.md, "A fenced producer")
                runs = all_runs.get(cursor)
                epoch, start = runs.at(cursor.durable) if runs is not None else (0, 0)
                ack = Ack(cursor.producer, cursor.topic, cursor.durable, epoch, start)
                out.append(Send(ack))
            self._ack_due = {}
        if self._fence_due:
            for cursor, (epoch, start) in self._fence_due.items():
                if cursor.durable >= 0:
                    # an older run's record refused: an ACK naming the newer run fences
                    # its producer at once (ProducerMachine.fenced_by) instead of letting
                    # it wait out its delivery timeout
                    out.append(
                        Send(Ack(cursor.producer, cursor.topic, cursor.durable, epoch, start))
                    )
            self._fence_due = {}
        if self._in_order.dirty:
            blocked = self._blocked
            for cursor in self._in_order.take_dirty():
                contents = cursor.pending
                if blocked and cursor in blocked:
                    # taken in order while the partition waits out an append backoff:
                    # given up like the failed append's records, fetched again after it
                    self._rewind(cursor, cursor.pending_first - 1 if contents else cursor.last)
                    continue
                if contents:
                    self._persist(cursor, out)
        if self._hole_reader.dirty:
            for hole in self._hole_reader.take_dirty():
                if hole.pending:
                    self._filled += len(hole.pending)
                    out.append(
                        Persist(
                            hole.topic,
                            hole.producer,
                            hole.pending_first,
                            tuple(hole.pending),
                            "fill",
                        )
                    )
                    hole.pending = []
        self._out = []
        return out

    def _persist(self, cursor: Cursor, out: list[Action]) -> None:
        """The partition's pending run becomes a Persist (after a gap recorded as gone, the
        first one says so)."""
        contents = cursor.pending
        self._stored += len(contents)
        placement: Placement = "append"
        if self._after_gap and cursor in self._after_gap:
            self._after_gap.discard(cursor)
            placement = "after_gap"
        out.append(
            Persist(cursor.topic, cursor.producer, cursor.pending_first, tuple(contents), placement)
        )
        cursor.pending = []

    def statistics(self) -> StoreStatistics:
        return StoreStatistics(
            stored=self._stored,
            partitions=len(self._cursors),
            acks_sent=self._acks,
            fetches_sent=self._fetcher.fetches_sent,
            fetch_retries=self._fetcher.fetch_retries,
            fetches_in_flight=self._fetcher.in_flight(),
            fetches_answered=self._fetches_answered,
            records_served=self._served,
            heads_answered=self._heads_answered,
            heads_ends_sent=self._heads_ends,
            log_starts_sent=self._log_starts,
            store_hellos_sent=self._hellos,
            fetches_declined=self._declined,
            fetches_coalesced=self._coalesced,
            fetch_replies_pending=len(self._replies),
            arrived_ahead=self._in_order.arrived_ahead,
            dropped_duplicates=self._in_order.duplicates,
            dropped_foreign=self._foreign,
            dropped_unexpected=self._unexpected,
            append_failures=self._append_failures,
            truncations=self._truncations,
            dropped_unpersisted=self._unpersisted,
            partitions_blocked=len(self._blocked),
            topics_not_learned=self._not_learned,
            holes=sum(map(len, self._holes.values())),
            hole_records=sum(h.limit - h.last for hs in self._holes.values() for h in hs),
            records_filled=self._filled,
            holes_recorded=self._holes_recorded,
            records_gone=self._gone,
            partitions_refused=self._refused_partitions,
            records_fenced=self._fenced,
            records_superseded=self._superseded,
            runs_refused=self._runs_refused,
            fences_refused=self._fences_refused,
        )

    # -- writer ----------------------------------------------------------------------------

    def _full(self) -> bool:
        """Whether a new partition is refused (``max_partitions`` tracked: counted; a peer
        sending record 0 of 100,000 partitions is bounded here and by the storage's open
        files, docs/nodes.md)."""
        if len(self._cursors) < self.config.max_partitions:
            return False
        self._refused_partitions += 1
        return True

    def _cursor(self, topic: str, producer: str) -> Cursor:
        cursor = Cursor(topic, producer, -1)
        self._cursors[topic, producer] = cursor
        self._by_topic.setdefault(topic, {})[producer] = cursor
        if self._name_fences:
            dot = producer.rfind(".") + 1
            fence = self._name_fences.get((topic, producer[:dot])) if dot else None
            if fence is not None:
                index = _partition_index(producer[dot:])
                if index is not None and index < fence[1]:
                    self._fences[cursor] = fence[0]
        return cursor

    def _on_record(self, cursor: Cursor | None, record: Record | DirectRecord, now: float) -> None:
        sequence = record.sequence
        if cursor is None:
            if self._full():
                return
            cursor = self._cursor(record.topic, record.producer)
            self._arm_refresh(now)
        if self._blocked and cursor in self._blocked:
            cursor.known_head = max(cursor.known_head, sequence)  # fetched after the backoff
            self._unpersisted += 1
            return
        direct = type(record) is DirectRecord
        self._in_order.offer(cursor, sequence, record.content, direct, now, self._out)

    def _hole_at(self, cursor: Cursor, sequence: int) -> Cursor | None:
        """The hole cursor of the partition that ``sequence`` belongs in, if any."""
        for hole in self._holes.get(cursor, ()):
            if hole.last < sequence <= hole.limit:
                return hole
        return None

    def _record_gone(self, cursor: Cursor, first: int, now: float) -> None:
        """Every retry was answered only from ``first`` on: the sequences before it are gone.
        Go on from ``first``; the next Persist records the gap as a hole of the log (the
        storage then reports it through :meth:`on_holes`, and it is fetched from then on)."""
        if cursor.pending:
            self._persist(cursor, self._out)  # what was taken before the gap goes first
        self._holes_recorded += 1
        self._gone += first - (cursor.last + 1)
        self._fetcher.skip(cursor, first, now, self._out)
        self._after_gap.add(cursor)

    def _unblock(self, now: float) -> None:
        """Partitions whose append backoff is over fetch what they dropped: the retry."""
        for cursor, until in list(self._blocked.items()):
            if until <= now:
                del self._blocked[cursor]
                if cursor.known_head > cursor.last:
                    self._fetcher.gap(cursor, cursor.known_head, now, self._out)

    def _arm_refresh(self, now: float) -> None:
        """Start the GET-HEADS refresh timer once there is a topic (off the hot path)."""
        interval = self.config.heads_refresh
        if self._refresh_due is None and interval is not None and self._by_topic:
            self._refresh_due = now + interval

    def _learn_topic(self, topic: str, now: float) -> None:
        """A GET-HEADS named a topic we hold nothing of: ask for its heads ourselves.

        A producer that left right after its first ACK (``min_stores=1``) leaves no HEAD
        behind, so a store that missed its records would never hear of them; but the stores
        that hold them ask GET-HEADS for the topic on every refresh (``heads_refresh``). The
        others learn the topic from that, ask in turn, and fetch what the DIRECT-HEADs show:
        that is how every store converges. At most ``MAX_LEARNED_TOPICS`` topics without a
        partition are remembered (a peer naming endless topics costs bounded memory and
        refresh traffic); more are counted (``topics_not_learned``)."""
        if self._learned >= MAX_LEARNED_TOPICS:
            self._not_learned += 1
            return
        self._learned += 1
        self._by_topic[topic] = {}
        self._out.append(Send(GetHeads(topic, self.writer_id)))
        self._arm_refresh(now)

    def _ask_heads(self) -> None:
        for topic in {**self._by_topic, **dict.fromkeys(self.config.ask_topics)}:
            self._out.append(Send(GetHeads(topic, self.writer_id)))

    def _on_head(self, head: Head | DirectHead, now: float) -> None:
        cursor = self._cursors.get((head.topic, head.producer))
        if cursor is None:
            if self._full():
                return
            cursor = self._cursor(head.topic, head.producer)
        self._arm_refresh(now)
        # a HEAD comes from its producer itself: an older run's, past a newer run's start,
        # is answered with the ACK naming the newer run, as its records are (it is fenced at
        # once). Its records may never reach us: two live runs of one name share its node
        # id, and our SUB follows the endpoint whose beacon came last
        if head.epoch and not self._in_run(
            cursor,
            head.epoch,
            head.run_start,
            max(head.sequence, head.run_start),
            now,
            live=type(head) is Head,
        ):
            return  # an older run's head, past a newer run's start (or malformed)
        if head.sequence > cursor.last:
            if self._blocked and cursor in self._blocked:
                cursor.known_head = max(cursor.known_head, head.sequence)  # after the backoff
            else:
                self._fetcher.gap(cursor, head.sequence, now, self._out)
        elif cursor.durable >= 0 and head.sequence <= cursor.durable:
            self._ack_due[cursor] = None  # the producer may have lost our last ACK

    # -- reader ----------------------------------------------------------------------------

    def _on_fetch(self, fetch: Fetch, now: float) -> None:
        if fetch.requester == self.writer_id:
            return  # our own writer's FETCH reached our reader: we hold nothing it lacks
        recipient = addressed_to(fetch.requester, self.reader_id)
        if recipient is None:
            self._declined += 1  # addressed to another store
            return
        cursor = self._cursors.get((fetch.topic, fetch.producer))
        first = fetch.sequence
        if cursor is None or fetch.count == 0:
            return
        if self._starts is not None:
            start = self._starts.start_offset(fetch.topic, fetch.producer)
            if start is None and cursor.durable >= 0:
                # it held the partition and holds none of it now (a delete emptied it, a
                # log that forgets empty partitions): held from its next sequence on - else
                # the asker retries its FETCH until its skip rule gives up (~37 s)
                start = cursor.durable + 1
            if start is not None and first < start:
                start = min(start, cursor.durable + 1)  # nothing held: the next sequence
                self._log_starts += 1
                self._out.append(
                    Send(LogStart(recipient, fetch.topic, fetch.producer, self.reader_id, start))
                )
        if first > cursor.last:
            return
        # not bounded by cursor.last: the reply follows what the writer takes (docstring)
        stop = min(first + fetch.count, first + self.config.max_fetch_reply)
        if self._asked_this_turn(recipient, cursor, first, stop):
            self._coalesced += 1
            return
        stop = self._unsent_below(recipient, cursor, first, stop, now)
        if stop <= first:
            self._coalesced += 1
            return
        self._fetches_answered += 1
        self._replies.append(_Reply(recipient, cursor, first, stop, now))
        if len(self._replies) == 1:
            self._serve(now)  # the first slice leaves in this turn
        elif self._reply_due is None:
            self._reply_due = now

    def _asked_this_turn(self, recipient: str, cursor: Cursor, first: int, stop: int) -> bool:
        """Whether a FETCH answered earlier in this turn (since :meth:`take_actions`) for
        ``recipient`` asked for a range of ``cursor`` holding ``[first, stop)`` (module
        docstring); if not, this one is noted (at most ``_TURN_FETCHES`` per turn: a flood
        of FETCHes costs no more)."""
        asked = self._turn_fetches
        for who, partition, low, high in asked:
            if partition is cursor and low <= first and stop <= high and who == recipient:
                return True
        if len(asked) < _TURN_FETCHES:
            asked.append((recipient, cursor, first, stop))
        return False

    def _unsent_below(
        self, recipient: str, cursor: Cursor, first: int, stop: int, now: float
    ) -> int:
        """Where a reply to a FETCH for ``[first, stop)`` must stop: ``stop``, or - when a
        reply to ``recipient`` still streaming (one of the last ``_TURN_FETCHES`` queued) has
        yet to send ``[its next, stop)`` - its next, and so on down the replies queued (a
        window and the next one, pipelined): what they sent already may have been lost and
        is sent again, what they have yet to send is not queued twice (module docstring).
        Such a reply then waits for durability as long as this one would have."""
        replies = list(islice(reversed(self._replies), _TURN_FETCHES))
        trimmed = True
        while trimmed and stop > first:
            trimmed = False
            for reply in replies:
                if (
                    reply.cursor is cursor
                    and reply.next < stop <= reply.stop
                    and reply.recipient == recipient
                ):
                    reply.since = max(reply.since, now)
                    stop = max(first, reply.next)
                    trimmed = True
        return stop

    def _serve(self, now: float) -> None:
        """Send up to ``fetch_reply_slice`` records of the queued replies, oldest first.

        Replies that reached what is durable wait for more (:meth:`on_durable`), at most
        ``fetch_reply_wait`` since they last sent something; finished ones leave the queue.
        Asks for another turn at once while some reply has durable records left to send.
        """
        budget = self.config.fetch_reply_slice
        wait = self.config.fetch_reply_wait
        replies = self._replies
        out = self._out
        read = self._reader.read_contents
        ready = False
        oldest_wait: float | None = None
        for _ in range(len(replies)):
            reply = replies.popleft()
            cursor = reply.cursor
            first = reply.next
            if self._holes and cursor in self._holes:
                first = reply.next = self._past_hole(cursor, first)
            upto = min(reply.stop, cursor.durable + 1)
            if budget > 0 and first < upto:
                count = min(upto - first, budget)
                topic, producer, recipient = cursor.topic, cursor.producer, reply.recipient
                stop = first + count
                held, contents = read(topic, producer, first, count)
                if held < first:  # more than asked for: keep the range only
                    contents = contents[first - held :]
                    held = first
                if held >= stop or not contents:
                    continue  # nothing held from there on (retention): the reply ends
                if held + len(contents) > stop:
                    contents = contents[: stop - held]
                served = len(contents)
                runs = self._runs.get(cursor)
                if runs is None:
                    out.append(SendDirectRecords(recipient, topic, producer, held, tuple(contents)))
                else:  # each record with the run it belongs to
                    for at, n, epoch, start in runs.split(held, served):
                        part = tuple(contents[at - held : at - held + n])
                        out.append(
                            SendDirectRecords(recipient, topic, producer, at, part, epoch, start)
                        )
                reply.next = held + served
                budget -= served
                self._served += served
                reply.since = now
            if reply.next >= reply.stop:
                continue  # done
            if reply.next <= reply.cursor.durable:
                ready = True  # more to send next turn
            elif now >= reply.since + wait:  # as ``due`` below: no float gap to spin in
                continue  # waited too long for durability: the reply ends here
            else:
                due = reply.since + wait
                oldest_wait = due if oldest_wait is None else min(oldest_wait, due)
            replies.append(reply)
        self._reply_due = now if ready else oldest_wait

    def _past_hole(self, cursor: Cursor, sequence: int) -> int:
        """``sequence``, or the end of the hole it falls in (a reply steps over holes)."""
        for hole in self._holes[cursor]:
            if hole.last < sequence <= hole.limit:
                return hole.limit + 1
        return sequence

    def _send_heads(self, recipient: str, topics: Sequence[str]) -> None:
        """One DIRECT-HEAD per partition held of each topic, then HEADS-END once vouched."""
        out = self._out
        vouched = self._vouched
        for topic in topics:
            sent = 0
            for producer, cursor in self._by_topic.get(topic, {}).items():
                if cursor.durable >= 0:
                    sent += 1
                    runs = self._runs.get(cursor)
                    epoch, start = runs.at(cursor.durable) if runs is not None else (0, 0)
                    out.append(
                        Send(DirectHead(recipient, topic, producer, cursor.durable, epoch, start))
                    )
            self._heads_answered += sent
            if vouched:
                self._heads_ends += 1
                end = HeadsEnd(
                    recipient, topic, self.reader_id, self.writer_id, sent, self.stores_known
                )
                out.append(Send(end))


def _partition_index(text: str) -> int | None:
    """The ``i`` of a producer's partition ``f"{name}.{i}"`` (below 2**32, a GET-HEADS'
    partition count): only the decimal form ``str(i)`` writes (at most 10 ASCII digits, no
    leading zero), else None. A partition name is a peer's: ``str.isdigit`` also takes "²"
    or "٣", and ``int`` refuses more than 4,300 digits (a producer named "w.²" and a fencing
    GET-HEADS from "w.0" raised ValueError in the store's thread: the store died)."""
    if (
        not 0 < len(text) <= 10
        or not text.isascii()
        or not text.isdigit()
        or (text[0] == "0" and text != "0")
    ):
        return None
    return int(text)


def _hole_cursor(partition: Cursor, first: int, end: int) -> Cursor:
    """A cursor that reads ``[first, end)`` of ``partition`` (a hole of its log)."""
    hole = Cursor(partition.topic, partition.producer, first - 1)
    hole.limit = hole.known_head = end - 1
    return hole


__all__ = ["RecordReader", "RunLog", "StoreMachine", "StoreStatistics"]
