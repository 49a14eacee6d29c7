"""The consumer: reads every partition of its topics, in order, each record once.

Theory. Per (topic, partition) a :class:`~dafka.node._catchup.Cursor` remembers the last
sequence delivered, and the shared in-order reader (``dafka.node._reader``, the same rule
as the store's writer) takes each record: the next sequence is delivered; one ahead is kept
(up to one fetch window ahead, a small reorder buffer) and the gap is fetched (from the
producer and every store, which answer with DIRECT-RECORDs), after which the kept records
follow in order; one behind is a duplicate and dropped. HEAD and DIRECT-HEAD above the last
delivered sequence start a fetch too. Fetches run in windows and are retried with backoff
until the partition has caught up with the highest sequence known to exist (see
``_catchup``).

Where a partition starts: an explicit position (:meth:`ConsumerMachine.seek`), else
``offset_reset``: ``earliest`` from sequence 0; ``latest`` depends on whether the partition
existed when we subscribed. Subscribing sends GET-HEADS so that stores tell us the heads of
partitions (also those whose producers are gone); a STORE-HELLO (a store saw us subscribe) is
answered with CONSUMER-HELLO listing our topics, which the store answers with DIRECT-HEADs
too. A partition first heard of (HEAD, DIRECT-HEAD or record) within ``latest_settle``
seconds of subscribing, and before every store said "that is all" (HEADS-END, see
:meth:`ConsumerMachine.heads_answered`), counts as existing at start: it is read after that
head (or from that record on). One first heard of later is *new*: it is read from its
beginning, so that a live ``latest`` consumer does not lose the first records of a producer
that starts after it (as Spark's Kafka source does for new partitions). A partition that
existed but was not heard of within the window (stores unreachable that long) is therefore
read from the beginning: extra records, never lost ones.

Assigned partitions (:meth:`ConsumerMachine.assign`) are read by FETCH only, from a start
sequence and optionally up to an end (exclusive): no ``M`` subscription; HEADs and GET-HEADS
answers of the topic tell how far there is to read.

Group topics (:meth:`ConsumerMachine.subscribe_group`, consumer groups, docs/groups.md) are
subscribed like any topic, but a partition is read only once the group gave it to this
member (:meth:`ConsumerMachine.own`, until :meth:`ConsumerMachine.disown`): the others'
RECORDs and HEADs only tell that the partition exists (:meth:`take_discovered`).

FETCHes are addressed to one store at a time (``_stores``: one store serves a range, with
fallback on timeout) once stores have greeted us.

:meth:`ConsumerMachine.at_end`: every topic's settle window is over, every partition has
taken everything up to the highest sequence known to exist, and every end is reached.

ZeroMQ matches subscriptions by prefix, so ``M`` + ``hello`` also receives ``hello2`` and
``D`` + our id receives DIRECT-RECORDs for any id that starts with ours: every message is
checked for an exact topic / recipient after receipt (the C consumer leaks).

Delivered records accumulate per partition and leave as one :class:`Deliver` per partition per
drained batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dafka.node._catchup import NO_LIMIT, TARGET_MARK, Cursor, FetchScheduler
from dafka.node._config import ConsumerConfig
from dafka.node._errors import NodeArgumentError, check_name, check_sequence
from dafka.node._reader import PartitionReader, ReaderRuns
from dafka.node._runs import Runs
from dafka.node._stores import StoreRouter
from dafka.node.actions import (
    Action,
    Deliver,
    DirectRecordRuns,
    RunDirectRecords,
    RunRecords,
    Send,
    Subscribe,
    SubscriptionNotices,
    Unsubscribe,
)
from dafka.protocol import (
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
    constructor,
)

_new_deliver = constructor(Deliver)
"""``Deliver`` without the frozen dataclass ``__init__`` (a Python frame and an
``object.__setattr__`` per field, once per delivery: a lone record's way pays it per
record); its fields are the machine's own."""


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    """Where a consumer stands in one partition.

    ``last_delivered`` is -1 before the first record; ``next_sequence`` is the sequence it
    waits for; ``known_head`` the highest sequence it knows to exist; ``fetching`` whether a
    FETCH is outstanding.
    """

    last_delivered: int
    next_sequence: int
    known_head: int
    fetching: bool


@dataclass(frozen=True, slots=True)
class ConsumerStatistics:
    """Counters of a :class:`ConsumerMachine` (a snapshot)."""

    delivered: int
    partitions: int
    fetches_sent: int
    fetch_retries: int
    fetches_in_flight: int
    arrived_ahead: int
    dropped_duplicates: int
    dropped_foreign: int
    dropped_unexpected: int
    skipped_records: int
    dropped_beyond_end: int = 0
    stores_known: int = 0
    stores_suspected: int = 0
    dropped_paused: int = 0
    """Records of paused partitions dropped on arrival (fetched again after resume)."""
    dropped_not_owned: int = 0
    """RECORDs and HEADs of group partitions another member reads (docs/groups.md)."""
    log_starts: int = 0
    """LOG-START answers taken (a store holds a partition only from a later sequence)."""
    skipped_on_log_start: int = 0
    """Gaps skipped at once because every store said where its log starts."""
    heads_answered: tuple[str, ...] = ()
    """Topics every store said "that is all" of (HEADS-END): their heads are all known."""
    records_fenced: int = 0
    """Records of a producer run dropped at or after a newer run's start (an older run's,
    never acknowledged there: docs/guarantees.md, "A reused sequence: run epochs")."""
    records_replaced: int = 0
    """Records delivered that a newer producer run replaced: the partition was read again
    from that run's start, and the newer run's records delivered at those offsets."""


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class ConsumerMachine(
    ReaderRuns, DirectRecordRuns, RunRecords, RunDirectRecords, SubscriptionNotices
):
    """Pure state machine of a consumer; see the module docstring and docs/nodes.md."""

    def __init__(
        self,
        consumer_id: str,
        config: ConsumerConfig | None = None,
        *,
        start_positions: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        """``start_positions``: (topic, producer) -> the next sequence to read there (as
        :meth:`seek`), e.g. offsets an application committed; other partitions follow
        ``offset_reset``.
        """
        self.consumer_id = consumer_id
        self.config = config or ConsumerConfig()
        self._earliest = self.config.offset_reset == "earliest"
        self._out: list[Action] = []
        self._topics: dict[str, None] = {}
        self._cursors: dict[tuple[str, str], Cursor] = {}
        self._starts: dict[tuple[str, str], int] = {}
        for key, next_sequence in (start_positions or {}).items():
            self._starts[key] = check_sequence(f"start position of {key}", next_sequence)
        self._refresh_due: float | None = None
        self._fetcher = FetchScheduler(
            consumer_id, self.config.fetch, self.config.skip_unavailable_after
        )
        self._in_order = PartitionReader(self._fetcher)
        self._router = StoreRouter(consumer_id, self.config.store_suspect_time)
        if self.config.single_store_fetch:
            self._fetcher.router = self._router
        self._settle: dict[str, float] = {}
        """Topic -> end of its ``latest_settle`` window (subscribed and assigned topics)."""
        self._assigned: dict[tuple[str, str], Cursor] = {}
        self._assigned_topics: dict[str, None] = {}
        self._heads_seen: dict[tuple[str, str], int] = {}
        """Heads above an end offset (the cursor's ``known_head`` stops at the end)."""
        self._paused: dict[tuple[str, str], Cursor | None] = {}
        """Paused partitions (:meth:`pause`): their cursor, out of ``_cursors`` while paused
        (None: paused before it was heard of)."""
        self._gated: dict[str, None] = {}
        """Group topics: partitions are read only when owned (:meth:`own`)."""
        self._discovered: dict[tuple[str, str], int] = {}
        """Partitions of group topics heard of and not yet taken by :meth:`take_discovered`."""
        self._group_heads: dict[tuple[str, str], int] = {}
        """The highest sequence heard of in each partition of a group topic."""
        self._not_owned = 0
        self._marked = consumer_id + TARGET_MARK
        self._beyond_end = 0
        self._dropped_paused = 0
        self._delivered = 0
        self._foreign = 0
        self._unexpected = 0
        self._gap_starts: dict[Cursor, tuple[int, dict[str, int]]] = {}
        """Partitions fetching below a store's log: (the gap's first sequence, store reader
        id -> the first sequence it holds) from LOG-START answers."""
        self._stores_counted = 0
        """The most live stores a store's HEADS-END said it knows (0: none said)."""
        self._heads_ended: dict[str, set[str]] = {}
        """Topic -> the stores whose HEADS-END ("that is all") for it came."""
        self._log_starts = 0
        self._skipped_on_start = 0
        self._runs: dict[Cursor, Runs] = {}
        """The producer runs heard of per partition (``_runs.py``)."""
        self._fenced = 0
        self._replaced = 0
        cid = check_name("consumer id", consumer_id)
        self._out += [
            Subscribe(b"D" + cid),
            Subscribe(b"E" + cid),
            Subscribe(b"L" + cid),
            Subscribe(b"S" + cid),
            Subscribe(b"A" + cid),
        ]

    # -- application side ------------------------------------------------------------------

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._topics)

    def subscribe(self, topic: str, now: float) -> None:
        """Start reading ``topic``: subscribe to its RECORDs and HEADs, ask stores for heads."""
        if topic in self._topics:
            return
        raw = check_name("topic", topic)
        self._topics[topic] = None
        self._settle.setdefault(topic, now + self.config.latest_settle)
        if self._refresh_due is None and self.config.heads_refresh is not None:
            self._refresh_due = now + self.config.heads_refresh
        out = self._out
        out.append(Subscribe(b"M" + raw))
        if topic not in self._assigned_topics:
            out.append(Subscribe(b"H" + raw))
        out.append(Send(GetHeads(topic, self.consumer_id)))

    def subscribe_group(self, topic: str, now: float) -> None:
        """Subscribe to ``topic`` for a consumer group: its partitions are only noted
        (:meth:`take_discovered`) until :meth:`own` gives one to this consumer."""
        self._gated[topic] = None
        self.subscribe(topic, now)

    def take_discovered(self) -> dict[tuple[str, str], int]:
        """Partitions of group topics heard of since the last call, with their head."""
        found = self._discovered
        if found:
            self._discovered = {}
        return found

    def group_head(self, topic: str, producer: str) -> int:
        """The highest sequence heard of in a partition of a group topic (-1: none)."""
        return self._group_heads.get((topic, producer), -1)

    def own(self, topic: str, producer: str, next_sequence: int | None, now: float) -> None:
        """Start reading a partition of a group topic from ``next_sequence`` (None: by
        ``offset_reset``: 0, or after the highest sequence heard of for ``latest``)."""
        key = (topic, producer)
        if topic not in self._gated:
            raise NodeArgumentError(f"{topic!r} is not a group topic of this consumer")
        if key in self._cursors or key in self._paused:
            return
        head = self._group_heads.get(key, -1)
        if next_sequence is None:
            last = -1 if self._earliest else head
        else:
            last = check_sequence("next_sequence", next_sequence) - 1
        cursor = Cursor(topic, producer, last)
        self._cursors[key] = cursor
        if head > last:
            self._fetcher.gap(cursor, head, now, self._out)

    def disown(self, topic: str, producer: str) -> None:
        """Stop reading a partition of a group topic: what it received and has not handed
        out yet is dropped (the next owner reads it from the committed position)."""
        key = (topic, producer)
        cursor = self._cursors.pop(key, None)
        if cursor is None:
            cursor = self._paused.pop(key, None)
        if cursor is None:
            return
        self._fetcher.forget(cursor)
        cursor.pending = []
        dirty = self._in_order.dirty
        if cursor in dirty:
            dirty.remove(cursor)

    def _group_partition(self, topic: str, producer: str, sequence: int) -> None:
        """A RECORD or HEAD of a group topic's partition this member does not own."""
        self._not_owned += 1
        key = (topic, producer)
        heads = self._group_heads
        known = heads.get(key)
        if known is None or sequence > known:
            heads[key] = sequence
            if known is None:
                self._discovered[key] = sequence

    def _unread_run(self, topic: str, producer: str, first: int, contents: Sequence[bytes]) -> bool:
        """:meth:`ReaderRuns._unread_run`: a run of a group partition this member does not
        own is noted at once instead of record by record."""
        if self._gated and topic in self._gated and (topic, producer) not in self._paused:
            self._group_partition(topic, producer, first + len(contents) - 1)
            return True
        return False

    def assign(
        self, topic: str, producer: str, next_sequence: int, end: int | None, now: float
    ) -> None:
        """Read partition ``producer`` of ``topic`` by FETCH from ``next_sequence`` on, up to
        ``end`` (exclusive; None: on and on, as its head grows).

        No live subscription to the topic's RECORDs: only the FETCHes of this partition, the
        HEADs of the topic and the stores' DIRECT-HEADs (GET-HEADS is sent for the topic) say
        how far to read. A topic may mix assigned partitions with a live subscription.
        """
        check_name("topic", topic)
        check_name("partition", producer)
        check_sequence("next_sequence", next_sequence)
        if end is not None:
            check_sequence("end offset", end)
            if end < next_sequence:
                raise NodeArgumentError(
                    f"end offset {end} of {(topic, producer)} is before its start {next_sequence}"
                )
        key = (topic, producer)
        if key in self._cursors:
            raise NodeArgumentError(f"partition {key} is already being read")
        self._starts.pop(key, None)
        cursor = Cursor(topic, producer, next_sequence - 1)
        if end is not None:
            cursor.limit = end - 1
        self._cursors[key] = cursor
        self._assigned[key] = cursor
        if topic not in self._assigned_topics:
            self._assigned_topics[topic] = None
            self._settle.setdefault(topic, now + self.config.latest_settle)
            if self._refresh_due is None and self.config.heads_refresh is not None:
                self._refresh_due = now + self.config.heads_refresh
            if topic not in self._topics:
                self._out.append(Subscribe(b"H" + _wire(topic)))
            self._out.append(Send(GetHeads(topic, self.consumer_id)))
        if end is not None and end > next_sequence:
            self._fetcher.gap(cursor, end - 1, now, self._out)

    def heads(self) -> dict[tuple[str, str], int]:
        """The highest sequence known to exist in every known partition (-1: none yet)."""
        seen = self._heads_seen
        return {key: max(c.known_head, c.last, seen.get(key, -1)) for key, c in self._all_cursors()}

    def at_end(self, now: float) -> bool:
        """Caught up: settle windows over, every known head taken and handed out (no records
        waiting for :meth:`take_actions`), every end reached. Paused partitions do not count:
        nothing of them is read until they are resumed."""
        if self._in_order.dirty:
            return False
        for topic in self._settle:
            if not self._settled(topic, now):
                return False
        for cursor in self._cursors.values():
            if cursor.last < cursor.known_head or cursor.ahead:
                return False
            if cursor.limit != NO_LIMIT and cursor.last < cursor.limit:
                return False
        return True

    def _settled(self, topic: str, now: float) -> bool:
        """Every partition that existed when ``topic`` was subscribed is known: its settle
        window is over, or every store said "that is all". A partition first heard of after
        that is *new* (read from its beginning): one rule for :meth:`at_end` and for where
        ``latest`` starts (a partition first heard of between the two was read from the
        record heard, and a producer started just after ``at_end`` lost its first ones)."""
        return now >= self._settle.get(topic, now) or self.heads_answered(topic)

    def heads_answered(self, topic: str) -> bool:
        """Every store that greeted us - and at least as many as any store counts - said
        "that is all" of ``topic`` (HEADS-END): every head a store holds is known, so its
        settle window need not run out before :meth:`at_end`. Never with a C store."""
        stores = self._router.stores
        ended = self._heads_ended.get(topic)
        return (
            bool(stores)
            and ended is not None
            and len(ended) >= self._stores_counted
            and ended.issuperset(stores)
        )

    def unsubscribe(self, topic: str, now: float) -> None:
        """Stop reading ``topic`` and forget its positions.

        Records already taken are still delivered at the next drain.
        """
        del now
        if topic not in self._topics:
            return
        del self._topics[topic]
        self._gated.pop(topic, None)
        raw = _wire(topic)
        self._out.append(Unsubscribe(b"M" + raw))
        if topic not in self._assigned_topics:
            self._out.append(Unsubscribe(b"H" + raw))
            self._settle.pop(topic, None)
            self._heads_ended.pop(topic, None)
        for key in [k for k in self._cursors if k[0] == topic and k not in self._assigned]:
            self._fetcher.forget(self._cursors.pop(key))
        for key in [k for k in self._paused if k[0] == topic and k not in self._assigned]:
            del self._paused[key]

    def seek(self, topic: str, producer: str, next_sequence: int, now: float) -> None:
        """Read partition ``producer`` of ``topic`` from ``next_sequence`` on (explicit start).

        Works before the partition is known (the position is used when it first shows up)
        and on a known partition (re-reads or skips; records already taken are still
        delivered).
        """
        check_sequence("next_sequence", next_sequence)
        key = (topic, producer)
        cursor = self._cursors.get(key)
        if cursor is None:
            paused = self._paused.get(key)
            if paused is not None:  # read from there once resumed
                paused.last = next_sequence - 1
            else:
                self._starts[key] = next_sequence
            return
        self._fetcher.forget(cursor)
        self._flush(cursor, self._out)  # pending runs must not straddle the jump
        cursor.last = next_sequence - 1
        if cursor.known_head > cursor.last and (topic in self._topics or key in self._assigned):
            self._fetcher.gap(cursor, cursor.known_head, now, self._out)

    def positions(self) -> dict[tuple[str, str], PartitionPosition]:
        """The position of every known partition, keyed by (topic, producer)."""
        return {
            key: PartitionPosition(c.last, c.last + 1, max(c.known_head, c.last), c.fetching)
            for key, c in self._all_cursors()
        }

    def pause(self, topic: str, producer: str, now: float) -> None:
        """Stop reading partition ``producer`` of ``topic`` until :meth:`resume` (Kafka's
        ``pause``): its FETCHes stop, records of it that arrive are dropped (counted in
        ``dropped_paused``; they are fetched again after :meth:`resume`), HEADs still move
        its known head. Records taken before are still delivered at the next drain. Works
        before the partition is known (it is then paused when it shows up)."""
        del now
        check_name("topic", topic)
        check_name("partition", producer)
        key = (topic, producer)
        if key in self._paused:
            return
        cursor = self._cursors.pop(key, None)
        if cursor is not None:
            self._fetcher.forget(cursor)
            self._flush(cursor, self._out)
        self._paused[key] = cursor

    def resume(self, topic: str, producer: str, now: float) -> None:
        """Read a paused partition again, from the sequence after the last one taken (or
        where a :meth:`seek` during the pause put it); fetches what it missed meanwhile."""
        key = (topic, producer)
        if key not in self._paused:
            return
        cursor = self._paused.pop(key)
        if cursor is None:
            return
        self._cursors[key] = cursor
        target = min(cursor.known_head, cursor.limit)
        if target > cursor.last:
            self._fetcher.gap(cursor, target, now, self._out)

    def paused(self) -> tuple[tuple[str, str], ...]:
        """The paused partitions, (topic, producer) each."""
        return tuple(self._paused)

    # -- NodeMachine -----------------------------------------------------------------------

    def on_message(self, message: DataMessage, now: float) -> None:
        if type(message) is Record:
            topic = message.topic
            producer = message.producer
            sequence = message.sequence
            cursor = self._cursors.get((topic, producer))
            if message.epoch:
                self._on_run_record(cursor, message, now)
                return
            if (
                cursor is not None and sequence == cursor.last + 1 and sequence <= cursor.limit
            ):  # the hot path
                self._in_order.take(cursor, sequence, message.content, now, self._out)
                return
            self._on_record(cursor, message, now)
        elif type(message) is DirectRecord:
            recipient = message.recipient
            if recipient != self.consumer_id and not recipient.startswith(self._marked):
                self._foreign += 1  # a C store answers an addressed FETCH to id@store
                return
            cursor = self._cursors.get((message.topic, message.producer))
            if message.epoch:
                self._on_run_record(cursor, message, now)
                return
            self._on_record(cursor, message, now)
        elif type(message) is Head:
            if message.epoch and not self._run_head(message, now):
                return
            self._on_head(message.topic, message.producer, message.sequence, now)
        elif type(message) is DirectHead:
            if message.recipient != self.consumer_id:
                self._foreign += 1
                return
            if message.epoch and not self._run_head(message, now):
                return
            self._on_head(message.topic, message.producer, message.sequence, now)
        elif type(message) is StoreHello:
            if message.consumer != self.consumer_id:
                self._foreign += 1
                return
            self._router.greeted(message.store)
            topics = self._asked_topics()
            if topics:
                self._out.append(Send(ConsumerHello(message.store, self.consumer_id, topics)))
        elif type(message) is LogStart:
            if message.recipient != self.consumer_id:
                self._foreign += 1
                return
            self._on_log_start(message, now)
        elif type(message) is HeadsEnd:
            if message.recipient != self.consumer_id:
                self._foreign += 1
                return
            self._stores_counted = max(self._stores_counted, message.stores)
            topic = message.topic
            if topic in self._settle or topic in self._topics:
                self._heads_ended.setdefault(topic, set()).add(message.store)
        else:
            self._unexpected += 1

    def _on_log_start(self, message: LogStart, now: float) -> None:
        """A store holds the partition only from ``message.sequence`` on.

        Once every store said where its log starts, below the gap's first sequence - every
        store that greeted us, and at least as many as any store's HEADS-END counts - the
        records before the lowest start are gone from every store: the partition goes on
        from there at once (what the FETCH retries found after ``skip_unavailable_after``
        rounds, ~37 s, before). Until then the stores that have not said so are asked for
        the gap directly, once. A C store never says so: then the retries decide."""
        cursor = self._cursors.get((message.topic, message.producer))
        if cursor is None or not cursor.fetching:
            return
        self._log_starts += 1
        gap = cursor.last + 1
        if message.sequence <= gap:
            return  # this store holds the gap
        seen = self._gap_starts.get(cursor)
        if seen is None or seen[0] != gap:
            seen = self._gap_starts[cursor] = (gap, {})
        starts = seen[1]
        if message.store in starts:
            starts[message.store] = min(starts[message.store], message.sequence)
            return
        starts[message.store] = message.sequence
        stores = self._router.stores
        missing = [s for s in stores if s not in starts]
        if stores and not missing and len(starts) >= self._stores_counted:
            del self._gap_starts[cursor]
            self._skipped_on_start += 1
            self._flush(cursor, self._out)  # pending runs must not straddle the jump
            self._fetcher.skip(cursor, min(starts.values()), now, self._out)
            return
        count = min(self.config.fetch.window, min(starts.values()) - gap)
        for store in missing:
            requester = f"{self.consumer_id}{TARGET_MARK}{store}"
            self._out.append(Send(Fetch(cursor.producer, requester, cursor.topic, gap, count)))

    def on_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        now: float,
    ) -> None:
        """A run of DIRECT-RECORDs (a FETCH reply): ``contents[i]`` at ``first_sequence + i``.

        Exactly what feeding them one by one to :meth:`on_message` does, for the driver's
        bursts: a run that continues the partition in order (no records kept ahead, within
        its end) is taken at once and the fetch told of the progress once (a catch-up's
        whole cost per record is then a list extend); anything else goes record by record.
        """
        if recipient != self.consumer_id and not recipient.startswith(self._marked):
            self._foreign += len(contents)
            return
        cursor = self._cursors.get((topic, producer))
        if self._in_order.take_run(
            cursor, first_sequence, contents, now, self._out, while_fetching=True
        ):
            return
        on_message = self.on_message
        for offset, content in enumerate(contents):
            on_message(
                DirectRecord(recipient, topic, producer, first_sequence + offset, content), now
            )

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
        """A run of RECORDs of producer run ``epoch``: the newest run known goes the way of
        :meth:`on_records`; anything else record by record (its run checked)."""
        cursor = self._cursors.get((topic, producer))
        runs = self._runs.get(cursor) if cursor is not None else None
        if runs is not None and runs.newest() == (epoch, run_start):
            self.on_records(topic, producer, first_sequence, contents, now)
            return
        for offset, content in enumerate(contents):
            self.on_message(
                Record(topic, producer, first_sequence + offset, content, epoch, run_start), now
            )

    def on_run_direct_records(
        self,
        recipient: str,
        topic: str,
        producer: str,
        first_sequence: int,
        contents: Sequence[bytes],
        epoch: int,
        run_start: int,
        now: float,
    ) -> None:
        """As :meth:`on_run_records`, for a FETCH reply (:meth:`on_direct_records`)."""
        cursor = self._cursors.get((topic, producer))
        runs = self._runs.get(cursor) if cursor is not None else None
        if runs is not None and runs.newest() == (epoch, run_start):
            self.on_direct_records(recipient, topic, producer, first_sequence, contents, now)
            return
        for offset, content in enumerate(contents):
            self.on_message(
                DirectRecord(
                    recipient, topic, producer, first_sequence + offset, content, epoch, run_start
                ),
                now,
            )

    def _on_run_record(
        self, cursor: Cursor | None, record: Record | DirectRecord, now: float
    ) -> None:
        """A record that names its producer run: checked against the partition's runs
        (:meth:`_in_run`), then taken as any record."""
        if cursor is not None and not self._in_run(
            cursor, record.epoch, record.run_start, record.sequence, now
        ):
            return
        self._on_record(cursor, record, now)
        if cursor is None:  # a partition seen for the first time: its first run
            cursor = self._cursors.get((record.topic, record.producer))
            if cursor is not None and cursor not in self._runs:
                self._runs[cursor] = Runs([(record.epoch, record.run_start)])

    def _run_head(self, head: Head | DirectHead, now: float) -> bool:
        """Whether a head that names its producer run is taken (:meth:`_in_run`)."""
        cursor = self._cursors.get((head.topic, head.producer))
        if cursor is None:
            return True
        return self._in_run(
            cursor, head.epoch, head.run_start, max(head.sequence, head.run_start), now
        )

    def _in_run(
        self, cursor: Cursor, epoch: int, run_start: int, sequence: int, now: float
    ) -> bool:
        """The store's rule (``_runs.py``) for a reader: an older run's record at or after
        a newer run's start is dropped (``records_fenced``); a run newer than the one this
        consumer read, starting at or below what it delivered, means those records were an
        older run's, never acknowledged there: the partition is read again from the newer
        run's start (``records_replaced``), so that its acknowledged records are delivered
        at those offsets, never lost."""
        runs = self._runs.get(cursor)
        if runs is None:
            self._runs[cursor] = Runs([(epoch, run_start)])
            return True
        newest, start = runs.newest()
        if epoch == newest:
            if run_start == start:
                return True
            self._fenced += 1  # a known run with another start: malformed
            return False
        if epoch < newest:
            if runs.fences(epoch, sequence):
                self._fenced += 1
                return False
            return True
        if run_start <= cursor.last:
            pending = cursor.pending
            if pending and cursor.pending_first + len(pending) > run_start:
                del pending[max(0, run_start - cursor.pending_first) :]
            self._replaced += cursor.last - run_start + 1
            self._fetcher.forget(cursor)
            cursor.last = run_start - 1
            cursor.known_head = run_start - 1
        elif cursor.ahead:
            for sequence_ahead in [s for s in cursor.ahead if s >= run_start]:
                del cursor.ahead[sequence_ahead]  # an older run's, or unsaid: fetched again
        runs.begin(epoch, run_start)
        del now
        return True

    def on_subscription(self, prefix: bytes, subscribed: bool, now: float) -> None:
        """A subscription to this consumer's PUB. ``W`` + a store reader's id: that store
        now hears this consumer's CONSUMER-HELLOs. If it greeted already, the hello that
        answered its STORE-HELLO may have gone out before its SUB was connected here, and
        was lost (a secured store's CURVE handshake makes that likely: a secured consumer
        then waited ``heads_refresh``, 10 s, for its first record), so it is said again."""
        if not subscribed or prefix[:1] != b"W" or len(prefix) < 2:
            return
        store = prefix[1:].decode("utf-8", "surrogateescape")
        topics = self._asked_topics()
        if topics and store in self._router.stores:
            self._out.append(Send(ConsumerHello(store, self.consumer_id, topics)))

    def on_timer(self, now: float) -> None:
        for cursor, first in self._fetcher.on_timer(now, self._out):
            self._flush(cursor, self._out)  # pending runs must not straddle the jump
            self._fetcher.skip(cursor, first, now, self._out)
        due = self._refresh_due
        if due is not None and due <= now and self.config.heads_refresh is not None:
            self._refresh_due = now + self.config.heads_refresh
            for topic in self._asked_topics():
                self._out.append(Send(GetHeads(topic, self.consumer_id)))

    def next_deadline(self) -> float | None:
        fetch = self._fetcher.next_deadline()
        refresh = self._refresh_due if self._topics or self._assigned_topics else None
        if refresh is None or (fetch is not None and fetch < refresh):
            return fetch
        return refresh

    def take_actions(self) -> list[Action]:
        out = self._out
        if self._in_order.dirty:
            for cursor in self._in_order.take_dirty():
                self._flush(cursor, out)
        self._out = []
        return out

    def statistics(self) -> ConsumerStatistics:
        pending = sum(len(c.pending) for c in self._in_order.dirty)
        return ConsumerStatistics(
            delivered=self._delivered + pending,
            partitions=len(self._cursors),
            fetches_sent=self._fetcher.fetches_sent,
            fetch_retries=self._fetcher.fetch_retries,
            fetches_in_flight=self._fetcher.in_flight(),
            arrived_ahead=self._in_order.arrived_ahead,
            dropped_duplicates=self._in_order.duplicates,
            dropped_foreign=self._foreign,
            dropped_unexpected=self._unexpected,
            skipped_records=self._fetcher.skipped,
            dropped_beyond_end=self._beyond_end,
            dropped_paused=self._dropped_paused,
            stores_known=len(self._router.stores),
            stores_suspected=self._router.suspected,
            dropped_not_owned=self._not_owned,
            log_starts=self._log_starts,
            skipped_on_log_start=self._skipped_on_start,
            records_fenced=self._fenced,
            records_replaced=self._replaced,
            heads_answered=tuple(t for t in self._heads_ended if self.heads_answered(t)),
        )

    # -- internals -------------------------------------------------------------------------

    def _all_cursors(self) -> list[tuple[tuple[str, str], Cursor]]:
        """Every known partition's cursor, paused ones included."""
        known = list(self._cursors.items())
        if self._paused:
            known += [(k, c) for k, c in self._paused.items() if c is not None]
        return known

    def _paused_sighting(
        self, topic: str, producer: str, latest_last: int, sequence: int, now: float
    ) -> bool:
        """A record or head (``sequence``) of a paused partition: its known head moves (its
        cursor is made, as :meth:`_new_cursor` would, if it was paused before it was known).
        False if the partition is not paused."""
        key = (topic, producer)
        if key not in self._paused:
            return False
        cursor = self._paused[key]
        if cursor is None:
            if topic not in self._topics or topic in self._gated:
                return False  # not ours to make (an assigned topic's other partitions)
            cursor = self._new_cursor(topic, producer, latest_last, now)
            del self._cursors[key]
            self._paused[key] = cursor
        head = min(sequence, cursor.limit)
        cursor.known_head = max(cursor.known_head, head)
        return True

    def _asked_topics(self) -> tuple[str, ...]:
        """The topics whose heads the stores are asked for: subscribed and assigned ones (an
        assigned partition learns how far to read from them once its producer is gone)."""
        return tuple({**self._topics, **self._assigned_topics})

    def _flush(self, cursor: Cursor, out: list[Action]) -> None:
        contents = cursor.pending
        if contents:
            self._delivered += len(contents)
            out.append(
                _new_deliver(cursor.topic, cursor.producer, cursor.pending_first, tuple(contents))
            )
            cursor.pending = []

    def _new_cursor(self, topic: str, producer: str, latest_last: int, now: float) -> Cursor:
        """A partition seen for the first time; ``latest_last`` is where ``latest`` starts
        if the partition existed at subscription (first heard of within the settle window)."""
        key = (topic, producer)
        start = self._starts.pop(key, None)
        if start is not None:
            last = start - 1
        elif self._earliest or self._settled(topic, now):
            last = -1
        else:
            last = latest_last
        cursor = Cursor(topic, producer, last)
        self._cursors[key] = cursor
        return cursor

    def _on_record(self, cursor: Cursor | None, record: Record | DirectRecord, now: float) -> None:
        sequence = record.sequence
        if cursor is None:
            if self._paused and self._paused_sighting(
                record.topic, record.producer, sequence - 1, sequence, now
            ):
                self._dropped_paused += 1
                return
            if record.topic not in self._topics:
                self._foreign += 1  # prefix leak ('hello2' while reading 'hello') or stale
                return
            if record.topic in self._gated:
                self._group_partition(record.topic, record.producer, sequence)
                return
            cursor = self._new_cursor(record.topic, record.producer, sequence - 1, now)
        if sequence > cursor.limit:
            self._beyond_end += 1  # past an end offset (a C store answers count + 1)
            return
        direct = type(record) is DirectRecord
        self._in_order.offer(cursor, sequence, record.content, direct, now, self._out)

    def _on_head(self, topic: str, producer: str, sequence: int, now: float) -> None:
        key = (topic, producer)
        cursor = self._cursors.get(key)
        if cursor is None:
            if self._paused and self._paused_sighting(topic, producer, sequence, sequence, now):
                return
            if topic not in self._topics:
                self._foreign += 1  # also: a partition of an assigned topic not assigned to us
                return
            if topic in self._gated:
                self._group_partition(topic, producer, sequence)
                return
            cursor = self._new_cursor(topic, producer, sequence, now)
        if sequence > cursor.limit:
            if sequence > self._heads_seen.get(key, -1):
                self._heads_seen[key] = sequence
            sequence = cursor.limit
        if sequence > cursor.last:
            self._fetcher.gap(cursor, sequence, now, self._out)
        elif sequence > cursor.known_head:
            cursor.known_head = sequence


__all__ = ["ConsumerConfig", "ConsumerMachine", "ConsumerStatistics", "PartitionPosition"]
