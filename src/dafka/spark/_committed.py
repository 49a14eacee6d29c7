"""``isolation=read_committed`` for the source: clean cuts on the driver, filters in the tasks.

The rule (Gazette's, ``dafka.message.Sequencer``, run by ``dafka.client``'s read-committed
consumer): a CONTINUE message is delivered when its producer's ACK with a larger clock is
read, rolled back by an ACK that repeats the last one, dropped when its clock is at or below
the last ACK. Whether a message is delivered therefore depends on what comes *after* it
(its ACK) and on the producers' state *before* it (their last ACK clocks).

A micro-batch reads ``[start, end)`` of each partition in an executor that knows nothing of
the previous batch. So the driver ends every batch at a **clean cut**: a RECORD boundary
where no span of any producer of the partition is open - everything before it is decided,
by messages before it (a clean cut is a last stable position, ``last_stable_position()``,
at which nothing is pending). A span therefore never straddles two batches: a transaction
whose ACK has not been read yet keeps the batch end before its first message, and the next
batch that ends after its ACK carries it whole. The state of the producers at a cut (their
last ACK clocks: a retried CONTINUE must still be recognised as a duplicate) travels in
Spark's offsets, so that the task that reads ``[start, end)`` starts its filter exactly as
a reader of the whole partition would be at ``start``:

    {"offsets": {topic: {partition: cut}},
     "producers": {topic: {partition: [[producer_hex, last_ack], ...]}}}

**Driver** (:class:`CutTracker`): a read-committed reader of the subscribed topics, in its
own thread, from the query's start (with the producer states of the start offsets), built
from the public pieces of the read-committed consumer: a ``Consumer`` of the topics and a
``CommittedFilter`` this module owns (resumed from :meth:`CommittedOffsets.checkpoint`,
``decisions_only``: it returns no rows and decides a span that left its ring without
reading it again from the stores). After each poll it feeds
each partition's records in steps that end where a RECORD ends with a message that can
close spans (an ACK, a message without a UUID, an OUTSIDE message) - the last such RECORD
of the poll, or about every ``maxRecordsPerTrigger / 8`` RECORDs when a cap is set - and at
the end of the poll, and records a :class:`Cut` whenever nothing is pending after a step.
``latestOffset`` only reads the recorded cuts (a copy under a lock).

**Executors** (``dafka.spark._read``): a ``CommittedFilter`` restored at ``start`` with the
producer states of the start offsets, over the RECORDs of ``[start, end)`` read by the
same bounded consumer as read_uncommitted; the task yields what the filter delivers.
Because ``end`` is a clean cut, every
message of the range is decided by messages of the range, and the task emits exactly the
committed ones: the union over the batches is the committed log, each message once.

**Batch reads** (``spark.read``) need no producer state at their end (there is no next
batch): the driver plans each partition from its start to its head, as read_uncommitted,
and the task ends its rows at the last clean cut of its range, stepping its filter with
:func:`feed_steps` as this tracker does, and RECORD by RECORD before a span still open at
the end (``dafka.spark._read.committed_to_cut``); the driver reads no RECORD.

Costs (streaming): the driver reads every RECORD once more (the decision needs the UUIDs),
in a thread of its own, as columns (``poll_columns``, ``feed_columns``: a batched RECORD's run of
CONTINUEs is one entry of the filter's ring and no Record is built per message);
``maxRecordsPerTrigger`` is honoured at cuts (a transaction larger than the cap makes a
batch larger than the cap rather than splitting it); ``minPartitions`` does not split a
partition's range (a piece would start at no cut).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from dafka.client import Consumer, ConsumerSettings
from dafka.errors import ConfigError, DafkaError
from dafka.records import (
    NO_UUID,
    UUID_SIZE,
    BatchSlice,
    CommittedFilter,
    Part,
    PlainRun,
    Record,
    RecordColumns,
    RecordRun,
)
from dafka.spark._options import PLAINTEXT, ClientSecurity, Offsets

log = logging.getLogger(__name__)

Key = tuple[str, str]
ProducerStates = tuple[tuple[str, int], ...]
"""``((producer_hex, last_ack), ...)`` of one partition at a cut."""

_INDEX_BITS = 32
_MAX_CUTS = 4096
"""Cuts remembered per partition (the oldest are forgotten: only the cap's precision
suffers, every remembered cut stays exact)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A clean cut of one partition: RECORDs below ``position`` are decided, none is open."""

    position: int
    producers: ProducerStates


# -- Spark offsets in read_committed mode -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedOffsets:
    """Per partition: the cut a batch starts or ends at, and the producer states there."""

    positions: dict[Key, int]
    producers: dict[Key, ProducerStates]

    def to_json(self) -> dict[str, Any]:
        offsets: Offsets = {}
        for (topic, partition), position in sorted(self.positions.items()):
            offsets.setdefault(topic, {})[partition] = position
        producers: dict[str, dict[str, list[list[Any]]]] = {}
        for (topic, partition), states in sorted(self.producers.items()):
            if states:
                producers.setdefault(topic, {})[partition] = [[h, a] for h, a in states]
        return {"offsets": offsets, "producers": producers}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> CommittedOffsets:
        try:
            positions = {
                (str(t), str(p)): int(o)
                for t, parts in doc["offsets"].items()
                for p, o in parts.items()
            }
            producers = {
                (str(t), str(p)): tuple((str(h), int(a)) for h, a in states)
                for t, parts in doc["producers"].items()
                for p, states in parts.items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(
                f"not a read_committed offset of the dafka source ({exc}): a checkpoint "
                "written with isolation=read_uncommitted cannot resume as read_committed"
            ) from None
        return cls(positions, producers)

    @classmethod
    def plain(cls, offsets: Offsets) -> CommittedOffsets:
        """Positions without producer states (the start of a partition, or a user's JSON)."""
        return cls({(t, p): o for t, parts in offsets.items() for p, o in parts.items()}, {})

    def checkpoint(self) -> dict[str, Any]:
        """The read-committed consumer's checkpoint (its documented JSON form,
        docs/exactly-once.md) at these cuts: what a :class:`CommittedFilter` resumes from
        to read on from them exactly as a reader of the whole partitions would."""
        return {
            "version": 1,
            "offsets": [[t, p, o << _INDEX_BITS] for (t, p), o in sorted(self.positions.items())],
            "producers": [
                [t, p, h, a, -1] for (t, p), states in self.producers.items() for h, a in states
            ],
        }


# -- the driver's tracker -----------------------------------------------------------------------


class _CutReader:
    """A consumer of the subscribed topics and the read-committed filter over what it reads,
    fed in steps, reporting clean cuts (not committed records): the read-committed consumer
    taken apart into its public pieces."""

    def __init__(
        self,
        towers: str,
        start: CommittedOffsets,
        topics: Sequence[str],
        fail_on_data_loss: bool,
        security: ClientSecurity,
    ) -> None:
        settings = ConsumerSettings(
            towers=towers,
            **security.fields(),
            offset_reset="earliest",
            heads_refresh=1.0,
            fail_on_data_loss=fail_on_data_loss,  # failOnDataLoss, as the tasks
            control_messages=True,  # the filter decides by the ACKs
        )
        # Decisions only: the cuts need no rows, so a span that left the ring is decided
        # without reading it again from the stores (a sink's transaction often is larger).
        self.filter = CommittedFilter(start.checkpoint(), decisions_only=True)
        self.consumer = Consumer(
            list(topics), settings=settings, start_positions=self.filter.start_positions()
        )

    def read_cuts(
        self, timeout: float, every: int | None
    ) -> tuple[dict[Key, list[Cut]], dict[Key, int]]:
        """Poll once; the clean cuts found in every partition polled, and how far each got
        (RECORD offsets: the next one to read). ``every``: look for cuts about every so many
        RECORDs (``maxRecordsPerTrigger`` needs them); None: only at the end of the poll."""
        columns = self.consumer.poll_columns(timeout, max_records=1 << 30)
        if not columns:
            return {}, {}
        cuts: dict[Key, list[Cut]] = {}
        reached: dict[Key, int] = {}
        feed = self.filter.feed_columns  # a batched RECORD's run: one ring entry, no Record
        for key, steps in feed_steps(columns, every).items():
            reached[key] = steps[-1].position
            for step, position, whole, _closes in steps:
                feed(step)
                if whole and self.filter.last_stable_position(*key) == position:
                    cuts.setdefault(key, []).append(
                        Cut(position, producer_states(self.filter, key))
                    )
        return cuts, reached

    def close(self) -> None:
        self.consumer.close()


def _closes_uuid(raw: bytes | None) -> bool:
    """Whether a message with this UUID may close spans: an ACK, an OUTSIDE message or one
    without UUID (None, or the batch format's 16 zero bytes)."""
    if raw is None or raw == NO_UUID:
        return True
    flags = (raw[8] << 8 | raw[9]) & 0x3FF  # the UUID's 10 flag bits (bytes 8-9)
    return flags != 0x001  # not CONTINUE_TXN


def _closes(record: Record) -> bool:
    """Whether a message may close spans (:func:`_closes_uuid` of its UUID)."""
    return _closes_uuid(record[8])


def producer_states(committed: CommittedFilter, key: Key) -> ProducerStates:
    """The producer states of one partition in ``committed`` (what a :class:`Cut` carries)."""
    return tuple(
        (producer, last_ack)
        for topic, partition, producer, last_ack, _begin in committed.checkpoint()["producers"]
        if (topic, partition) == key
    )


class Step(NamedTuple):
    """One feed of a partition's messages, after which its filter is asked for a clean cut."""

    columns: RecordColumns
    position: int
    """The RECORD offset after the feed's last RECORD."""
    whole: bool
    """Whether the feed ends where a RECORD ends (a poll may stop inside one): only then can
    ``position`` be a cut."""
    closes: bool
    """Whether the feed ends where a RECORD ends with a message that may close spans (else
    only because the poll ends)."""


def feed_steps(columns: RecordColumns, every: int | None) -> dict[Key, list[Step]]:
    """A poll's columns as the feeds after which a filter is asked for a clean cut: per
    partition, in order. A feed ends where a RECORD ends with a message that may close
    spans - the last such RECORD of the poll (``every`` None: the driver's tracker without
    a cap), about every ``every`` RECORDs (with a cap), or each one (0: a batch read's task;
    a run of plain RECORDs once, at its end: nothing opens or closes a span inside it) -
    and where the poll ends."""
    by_key: dict[Key, list[tuple[Part, _Piece]]] = collections.defaultdict(list)
    for part in columns.parts:
        for key, piece in _pieces(part, every):
            by_key[key].append(piece)
    out: dict[Key, list[Step]] = {}
    for key, found in by_key.items():
        pieces = [piece for _, piece in found]
        steps = out[key] = []
        at = 0
        for stop in [*_cut_points(pieces, every), len(pieces)]:
            if stop <= at:
                continue
            last = pieces[stop - 1]
            parts = RecordColumns([part for part, _ in found[at:stop]])
            steps.append(Step(parts, last.last + 1, last.ends, last.ends and last.closes))
            at = stop
    return out


class _Piece(NamedTuple):
    """Consecutive messages of one partition the driver feeds together: the RECORD offsets
    of its first and last message, and whether its last message may close spans."""

    first: int
    last: int
    closes: bool
    ends: bool = True
    """Whether its last message is its RECORD's last (a poll may stop inside a RECORD)."""


def _pieces(part: Part, every: int | None) -> list[tuple[Key, tuple[Part, _Piece]]]:
    """A poll's part as the driver's pieces: a batched RECORD's slice is one (its last
    message's UUID read from the RECORD's bytes: nothing decoded), a run of plain RECORDs
    one (each may close spans: with ``every`` > 0, one per RECORD, a cut may fall after any),
    Records one each."""
    if isinstance(part, BatchSlice):
        batch = part.batch
        raw: bytes | None = None
        if batch.layout.uuids_at >= 0:
            at = batch.layout.uuids_at + UUID_SIZE * (part.stop - 1)
            raw = batch.content[at : at + UUID_SIZE]
        ends = part.stop == batch.count
        piece = _Piece(batch.offset, batch.offset, _closes_uuid(raw), ends)
        return [((batch.topic, batch.partition), (part, piece))]
    if isinstance(part, PlainRun):
        step = part.size if not every else 1
        out: list[tuple[Key, tuple[Part, _Piece]]] = []
        for a in range(0, part.size, step):
            chunk = PlainRun(
                part.topic, part.partition, part.first + a, part.contents[a : a + step]
            )
            last = chunk.first + chunk.size - 1
            out.append(((part.topic, part.partition), (chunk, _Piece(chunk.first, last, True))))
        return out
    return [
        ((r[0], r[1]), (RecordRun([r]), _Piece(r[2], r[2], _closes(r)))) for r in part.records()
    ]


def _cut_points(pieces: Sequence[_Piece], every: int | None) -> list[int]:
    """Candidate cut points of one partition's pieces (in order): indexes just after a
    piece that ends a RECORD (it holds the RECORD's last message, and the next piece
    starts another or the poll ends) with a message that may close spans, about ``every``
    RECORDs apart (0: all; None: only the last one)."""
    n = len(pieces)
    ends = [
        i + 1
        for i in range(n)
        if pieces[i].closes
        and pieces[i].ends
        and (i + 1 == n or pieces[i + 1].first != pieces[i].last)
    ]
    if every is None:
        return ends[-1:]
    out: list[int] = []
    kept = -every
    for end in ends:
        offset = pieces[end - 1].last
        if offset - kept >= every:
            out.append(end)
            kept = offset
    return out


def _closing_ends(recs: Sequence[Record], every: int | None) -> list[int]:
    """:func:`_cut_points` of Records (one partition, in order), one piece each."""
    return _cut_points([_Piece(r[2], r[2], _closes(r)) for r in recs], every)


def _last_closing_record_end(recs: Sequence[Record]) -> int:
    """Index after the last RECORD of ``recs`` (one partition, in order) whose last message
    may close spans; 0 if none."""
    found = _closing_ends(recs, None)
    return found[0] if found else 0


class CutTracker:
    """The driver's clean cuts of the subscribed partitions, kept up to date in a thread."""

    def __init__(
        self,
        towers: str,
        start: CommittedOffsets,
        topics: Sequence[str],
        topic_source: Any = None,
        every: int | None = None,
        fail_on_data_loss: bool = True,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._every = every
        self._lock = threading.Lock()
        self._cuts: dict[Key, collections.deque[Cut]] = {}
        self._reached: dict[Key, int] = dict(start.positions)
        self._error: BaseException | None = None
        self._closed = threading.Event()
        self._topic_source = topic_source
        self._reader = _CutReader(towers, start, topics, fail_on_data_loss, security)
        self._subscribed = set(topics)
        self._thread = threading.Thread(target=self._run, name="dafka-spark-cuts", daemon=True)
        self._thread.start()

    def cuts(self) -> dict[Key, list[Cut]]:
        """Every remembered cut of every partition, oldest first (raises if the reader died)."""
        with self._lock:
            if self._error is not None:
                raise DafkaError(f"read_committed planner failed: {self._error}")
            return {k: list(d) for k, d in self._cuts.items()}

    def reached(self) -> dict[Key, int]:
        """How far each partition has been read (RECORD offsets)."""
        with self._lock:
            return dict(self._reached)

    def wait_reached(self, targets: Mapping[Key, int], timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every partition is read up to its target."""
        deadline = time.monotonic() + timeout
        while True:
            reached = self.reached()
            if all(reached.get(k, 0) >= o for k, o in targets.items()):
                return True
            if time.monotonic() >= deadline:
                return False
            self.cuts()  # raises if the reader died
            time.sleep(0.02)

    def forget_before(self, positions: Mapping[Key, int]) -> None:
        """Drop the cuts at or below the given positions (Spark's start: already planned)."""
        with self._lock:
            for key, position in positions.items():
                found = self._cuts.get(key)
                while found and found[0].position <= position:
                    found.popleft()

    def close(self) -> None:
        """Stop the thread and the consumer: closing the consumer first wakes the thread's
        poll (a batch read's plan waited up to its 0.1 s timeout for it)."""
        self._closed.set()
        try:
            self._reader.close()
        finally:
            self._thread.join(5)

    def _run(self) -> None:
        reader = self._reader
        try:
            while not self._closed.is_set():
                self._subscribe_new()
                cuts, reached = reader.read_cuts(0.1, self._every)
                if not cuts and not reached:
                    continue
                with self._lock:
                    self._reached.update(reached)
                    for key, found_now in cuts.items():
                        found = self._cuts.get(key)
                        if found is None:
                            found = self._cuts[key] = collections.deque(maxlen=_MAX_CUTS)
                        for cut in found_now:
                            if not found or found[-1].position < cut.position:
                                found.append(cut)
        except BaseException as exc:  # surfaced by cuts(): the query fails loudly
            if not self._closed.is_set():
                log.exception("read_committed planner failed")
                with self._lock:
                    self._error = exc

    def _subscribe_new(self) -> None:
        if self._topic_source is None:
            return
        for topic in self._topic_source():
            if topic not in self._subscribed:
                self._subscribed.add(topic)
                self._reader.consumer.subscribe(topic)


def plan_end(
    start: CommittedOffsets,
    cuts: Mapping[Key, Sequence[Cut]],
    ceiling: Mapping[Key, int] | None,
    max_records: int | None,
    share: Any,
) -> CommittedOffsets:
    """The end of the next batch: per partition the latest cut (below ``ceiling``, within
    the fair share of ``max_records`` when given; a partition whose share ends before its
    first cut gets that first cut: a span is never split)."""
    usable: dict[Key, list[Cut]] = {}
    for key, found in cuts.items():
        begin = start.positions.get(key, 0)
        top = None if ceiling is None else ceiling.get(key)
        if ceiling is not None and top is None:
            continue
        kept = [c for c in found if c.position > begin and (top is None or c.position <= top)]
        if kept:
            usable[key] = kept
    positions = dict(start.positions)
    producers = dict(start.producers)
    grants: Mapping[Key, int] | None = None
    if max_records is not None:
        backlog = {k: c[-1].position - start.positions.get(k, 0) for k, c in usable.items()}
        grants = share(backlog, max_records)
    for key, kept in usable.items():
        chosen = kept[-1]
        if grants is not None:
            limit = start.positions.get(key, 0) + grants.get(key, 0)
            if grants.get(key, 0) <= 0:
                continue
            within = [c for c in kept if c.position <= limit]
            chosen = within[-1] if within else kept[0]
        positions[key] = chosen.position
        producers[key] = chosen.producers
    return CommittedOffsets(positions, producers)


__all__ = [
    "CommittedOffsets",
    "Cut",
    "CutTracker",
    "Step",
    "feed_steps",
    "plan_end",
    "producer_states",
]
