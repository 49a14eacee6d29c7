"""Read committed: the message layer's sequencer over a consumer's records.

:class:`CommittedFilter` is pure: records in (every message of every partition, in each
partition's order), committed records out, each once, ACKs hidden. Messages without a UUID
(C producers, plain RECORDs) are delivered at once (clock 0). The sequencer's offsets are
message positions ``offset << 32 | index`` (``end = begin + 1``), keyed by
``topic + "\\0" + partition``. When a committed span has left the ring, the filter asks its
``replay`` function for the RECORDs ``[first, last]`` of that partition again (unless
the batched RECORDs :meth:`CommittedFilter.feed_columns` saw last, ``recent_bytes`` of
them, hold them all: then it replays from those); the
:class:`ReadCommittedConsumer` serves that with a bounded ``Consumer(assign=...,
end_offsets=...)`` read from the stores, so memory stays bounded by the ring and
``recent_bytes``. A replay that comes back as :class:`RecordColumns` (what
``replay_from_stores`` returns) is handed to the sequencer a batched RECORD's run at a time
(:class:`~dafka.message.ReplayedRun`, checked as the ring's runs are) and released as
slices of its RECORDs, as a commit drained from the ring is: no Record per message.

Checkpoints (:meth:`CommittedFilter.checkpoint`) are small JSON-able dicts: read-through
positions and producer states. A filter restored from one skips the messages below the
read-through and re-delivers exactly what was not yet handed out. See docs/exactly-once.md.
"""

from __future__ import annotations

import gc
import uuid as uuidlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import groupby, islice, repeat
from operator import itemgetter, lt
from typing import Any, TypeVar, cast

from dafka.errors import ConfigError
from dafka.message import (
    Envelope,
    MustStartReplay,
    ProducerID,
    ProducerState,
    ReplayedRun,
    Sequencer,
)
from dafka.records._columns import BatchSlice, CheckedBatch, Part, RecordColumns, RecordRun
from dafka.records._record import Record

Key = tuple[str, str]
_T = TypeVar("_T")
ReplayFunc = Callable[[str, str, int, int], Iterable[Record]]
"""``replay(topic, partition, first, last)``: the Records of RECORDs ``first..last`` - best
as a :class:`RecordColumns` (an iterable of Records too), whose batched RECORDs the filter
then replays and releases without a Record per message."""
ReplayItem = Envelope[Any] | ReplayedRun[Any]
"""What the filter hands the sequencer's :meth:`~dafka.message.Sequencer.start_replay`."""

CHECKPOINT_VERSION = 1
_SEP = "\0"
_ACK_BITS = 0x2 << 48
_FLAG_MASK = 0x3FF << 48
_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1


class _Id:
    """Stands in for a ``uuid.UUID``: the sequencer only reads ``.int``."""

    __slots__ = ("int",)

    def __init__(self, value: int) -> None:
        self.int = value


_NIL = _Id(0)
_new_tuple = tuple.__new__
_topic_partition = itemgetter(0, 1)
_UUID = itemgetter(8)
_RECORD = itemgetter(3)
_PLUS_1 = (1).__add__
_CONTINUE_FLAGS = 0x1
_SAME_IN_A_RUN = (4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15)
"""UUID bytes equal in every message of a run: time_mid, time_hi, the flags' low byte and
the ProducerID (bytes 0-3, time_low, and the counter bits of byte 8 move with the clock)."""
_BYTE_8_FIXED = bytes(b & 0xC3 for b in range(256))
"""``bytes.translate`` table keeping byte 8's variant and high flag bits (not the counter)."""


def _clock_of(i: int) -> int:
    """The Gazette clock of a UUID held as a 128-bit int (as the sequencer computes it)."""
    return (
        ((i >> 92) & 0xFFFFFFFF0)
        | ((i >> 44) & 0xFFFF000000000)
        | ((i >> 12) & 0xFFF0000000000000)
        | ((i >> 58) & 0xF)
    )


_LOW_BYTE = bytes(k >> 4 for k in range(4096))
"""Byte 3 of the UUID of clock ``c`` is ``_LOW_BYTE[c & 0xFFF]`` (time_low's low byte: the
clock's bits 4-11), so that of consecutive clocks from ``c`` is a slice of this table."""
_COUNTER_AT = bytes((k & 15) << 2 for k in range(4096))
"""Byte 8's counter bits (``& 0x3C``) of clock ``c`` are ``_COUNTER_AT[c & 0xFFF]``."""
_COUNTER_BITS = bytes(b & 0x3C for b in range(256))
"""``bytes.translate`` table keeping byte 8's counter bits (the clock's bits 0-3)."""


_CLOCK_BITS = (0xFFFFFFFF << 96) | (0xFFFF << 80) | (0xFFF << 64) | (0xF << 58)
"""The bits of a UUID (as a 128-bit int) that hold its clock (:func:`_clock_of`)."""
_FIXED_BITS = ((1 << 128) - 1) ^ _CLOCK_BITS
"""The others: the ProducerID, the flags, the version and variant."""


def _consecutive(content: bytes, lo: int, n: int, first: int) -> bool:
    """Whether the ``n`` UUIDs at ``content[lo:]`` are those of ``n`` consecutive clocks
    from that of ``first`` (the first of them, as an int), with its other bits: what a
    transactional producer writes in a RECORD (``produce_many`` stamps a run of clocks from
    ``Clock.tick_many``).

    No Python step per message either, and no decoded column: the run is cut where the
    clock's low 12 bits wrap (every 4096 clocks), and inside each piece a copy of the UUIDs
    with the bytes that move blanked (byte 3, byte 8's counter bits) equals the piece's first
    UUID repeated (one compare), and the moving bytes, two strided slices, equal slices of
    two tables of the 4096 values of the clock's low 12 bits; each piece's first UUID is the
    one of the clock after the last piece's (carries into byte 2 and above)."""
    fixed = first & _FIXED_BITS
    clock = _clock_of(first)
    at = 0
    while at < n:
        k0 = clock & 0xFFF
        m = min(n - at, 4096 - k0)
        base = lo + 16 * at
        if at:
            head = int.from_bytes(content[base : base + 16], "big")
            if head & _FIXED_BITS != fixed or _clock_of(head) != clock:
                return False
        if m > 1:
            block = bytearray(content[base : base + 16 * m])
            low = block[3::16]
            byte8 = block[8::16]
            block[3::16] = bytes(m)
            block[8::16] = byte8.translate(_BYTE_8_FIXED)
            k1 = k0 + m
            if (
                block != block[:16] * m
                or low != _LOW_BYTE[k0:k1]
                or byte8.translate(_COUNTER_BITS) != _COUNTER_AT[k0:k1]
            ):
                return False
        at += m
        clock += m
    return True


def _run_of(batch: CheckedBatch, start: int, stop: int) -> tuple[int, int, int] | None:
    """``(producer, first clock, last clock)`` when messages ``[start, stop)`` of ``batch``
    (two or more) are CONTINUE messages of one producer with strictly increasing clocks - a
    run the sequencer queues as one entry - else None.

    Why it is cheap (no Python step per message): the UUID column is contiguous in the
    RECORD (16 bytes a message). Most often the clocks are consecutive (a transactional
    producer's ``produce_many``): :func:`_consecutive` checks that in the RECORD's bytes,
    without decoding them (the application's read decodes the RECORD later, when it is
    released, as a plain read does: ~10 us of 250 messages less than the general check).
    Else each byte that must be equal in every message is one strided slice compared in C;
    with those equal, two UUIDs compare as bytes exactly as their clocks compare (time_low
    in bytes 0-3, then the counter in byte 8, the rest equal), so increasing clocks are
    increasing UUIDs, one ``map(lt, ...)`` over the decoded column.
    """
    at = batch.layout.uuids_at
    if at < 0:
        return None
    content = batch.content
    n = stop - start
    lo = at + 16 * start
    hi = lo + 16 * n
    first = int.from_bytes(content[lo : lo + 16], "big")
    if (first >> 48) & 0x3FF != _CONTINUE_FLAGS:
        return None
    first_clock = _clock_of(first)
    if first_clock == 0:
        return None
    if _consecutive(content, lo, n, first):
        return first & 0xFFFFFFFFFFFF, first_clock, first_clock + n - 1
    for k in _SAME_IN_A_RUN:
        if content[lo + k : hi : 16] != content[lo + k : lo + k + 1] * n:
            return None
    fixed = content[lo + 8] & 0xC3
    if content[lo + 8 : hi : 16].translate(_BYTE_8_FIXED) != bytes((fixed,)) * n:
        return None
    uuids = cast(list[bytes], batch.columns().uuids[start:stop])  # flags checked: no None
    if not all(map(lt, uuids, islice(uuids, 1, None))):
        return None
    last = int.from_bytes(content[hi - 16 : hi], "big")
    return first & 0xFFFFFFFFFFFF, first_clock, _clock_of(last)


def _split_run(env: Envelope[Any]) -> list[tuple[Envelope[Any], int]]:
    """The messages of a run queued as one entry, with their clocks (the sequencer's
    ``split_run``: a commit that covers only part of a run)."""
    key, begin, end, batch = env
    uuids = batch.columns().uuids
    return [
        (
            Envelope(key, at, at + 1, batch),
            _clock_of(int.from_bytes(uuids[at & _INDEX_MASK], "big")),
        )
        for at in range(begin, end)
    ]


def _slice_of(env: Envelope[Any]) -> BatchSlice:
    """The messages a queued envelope of a batched RECORD stands for (one, or a run)."""
    index = env[1] & _INDEX_MASK
    return BatchSlice(env[3], index, index + env[2] - env[1])


class _Msg:
    """A Record as a sequencer message."""

    __slots__ = ("record", "uuid")

    def __init__(self, record: Record, uid: _Id) -> None:
        self.record = record
        self.uuid = cast(uuidlib.UUID, uid)

    def new_acknowledgement(self, partition: str) -> _Msg:
        raise TypeError("a reader does not build acknowledgements")


def _record_of(env: Envelope[Any]) -> Record:
    """The Record of a queued envelope: its message is the Record itself (:meth:`feed`), a
    replayed :class:`_Msg`, or the :class:`CheckedBatch` holding it (:meth:`feed_columns`,
    the message's index in the low bits of its position)."""
    message = env[3]
    kind = type(message)
    if kind is CheckedBatch:
        index = env[1] & _INDEX_MASK
        keys, values, headers, timestamps, uuids = message.columns()
        return _new_tuple(
            Record,
            (
                message.topic,
                message.partition,
                message.offset,
                index,
                keys[index],
                values[index],
                headers[index],
                timestamps[index],
                uuids[index],
            ),
        )
    if kind is _Msg:
        return cast(Record, message.record)
    return cast(Record, message)


def _is_ack(env: Envelope[Any]) -> bool:
    """Whether a queued message is an ACK (flags 0x002 in bytes 8-9 of its UUID)."""
    message = env[3]
    if type(message) is CheckedBatch:  # read in the RECORD's bytes: nothing decoded for it
        at = message.layout.uuids_at
        if at < 0:
            return False
        at += 16 * (env[1] & _INDEX_MASK)
        content = message.content
        return content[at + 9] == 2 and not content[at + 8] & 3
    raw = _record_of(env)[8]
    return raw is not None and raw[9] == 2 and not raw[8] & 3


def _key(topic: str, partition: str) -> str:
    return topic + _SEP + partition


def _split(key: str) -> Key:
    topic, _, partition = key.partition(_SEP)
    return topic, partition


class CommittedFilter:
    """Committed records of a stream of records (see the module docstring). Not thread-safe.

    ``decisions_only=True``: a reader of the decisions alone (:meth:`last_stable_position`,
    :meth:`checkpoint`), to which every feed returns nothing: a commit is decided without
    its messages, so a span that left the ring is never replayed."""

    def __init__(
        self,
        checkpoint: Mapping[str, Any] | None = None,
        *,
        replay: ReplayFunc | None = None,
        buffer: int = 8192,
        recent_bytes: int = 32 << 20,
        ring_bytes: int = 32 << 20,
        decisions_only: bool = False,
    ) -> None:
        offsets: dict[str, int] = {}
        states: list[ProducerState] = []
        if checkpoint is not None:
            offsets, states = _decode_checkpoint(checkpoint)
        # A batched RECORD's run of CONTINUEs is one ring entry weighing its share of the
        # RECORD's bytes: the ring holds at most ``buffer`` entries and ``ring_bytes`` of runs.
        self._seq: Sequencer[_Msg] = Sequencer(
            offsets, states, buffer=buffer, max_weight=max(1, ring_bytes), split_run=_split_run
        )
        self._skip: dict[str, int] = dict(offsets)  # below it: already processed
        self._fed: dict[str, int] = {k: o >> _INDEX_BITS for k, o in offsets.items()}
        self._keys: dict[Key, str] = {}
        self._replay = replay
        self._backlog: list[Record] = []
        self._ready: list[Record] = []
        self._batches = False  # feed_columns queued RECORDs as messages (see _record_of)
        self._paused = False  # feed paused the cyclic collector (resumed around replays)
        # The batched RECORDs feed_columns saw last that an open span may still need, up to
        # recent_bytes of content: a span that left the ring is replayed from them when they
        # hold all its RECORDs (a group commit's span is often larger than the ring), else
        # from the stores. RECORDs below a partition's oldest open span are forgotten at the
        # end of each feed_columns (_prune_recent): no replay can ask for them.
        self._recent: dict[str, dict[int, CheckedBatch]] = {}
        self._recent_order: deque[tuple[str, int]] = deque()  # oldest first; may hold stale
        self._recent_size = 0
        self._recent_count = 0
        self._recent_limit = 0 if decisions_only else max(0, int(recent_bytes))
        # Decisions only (the Spark planner's cuts): every feed returns nothing and a commit
        # is decided without its messages (Sequencer.skip_commit): never a replay, though a
        # span larger than the ring (a Spark sink's transaction) read again from the stores
        # cost the planner ~4 us per message (docs/exactly-once.md).
        self._decisions_only = decisions_only
        self.replays = 0
        """Spans served by replaying RECORDs from the stores."""
        self.replays_recent = 0
        """Spans served from the recent RECORDs :meth:`feed_columns` saw."""

    def start_positions(self) -> dict[Key, int]:
        """Where a consumer resumed from this filter's checkpoint must start reading."""
        return {_split(k): o >> _INDEX_BITS for k, o in self._skip.items()}

    def feed(self, records: Iterable[Record]) -> list[Record]:
        """Queue ``records`` (each partition in order); the committed ones, in order.

        If a replay fails (the exception propagates), nothing is lost: the records not yet
        queued and the committed ones not yet returned are kept for the next call, which
        retries the replay first.

        Runs with the cyclic garbage collector paused (as ``Consumer.poll`` builds its
        Records): each message costs an envelope tuple held in the ring until its ACK, and
        a generation-0 collection every 700 of them, each visiting every young envelope and
        Record (none holds a cycle), cost about half of the filter's time (docs/exactly-
        once.md, "Where the time goes"). It is a process-wide switch: skipped when the
        application paused the collector itself, resumed while a replay reads the stores,
        and it lasts only this call (the next allocation after it collects what is due).
        """
        if not gc.isenabled():
            return self._feed(records)
        gc.disable()
        self._paused = True
        try:
            return self._feed(records)
        finally:
            self._paused = False
            gc.enable()

    def feed_columns(self, columns: RecordColumns) -> RecordColumns:
        """:meth:`feed` of the messages of ``columns`` (a ``poll_columns``), as columns: the
        same rows, in the same order, without a :class:`Record` per message where it can.

        A batched RECORD's messages are queued with the RECORD itself as their message (the
        sequencer's decisions need only each message's position and UUID), and a commit
        drained from the ring hands its runs of consecutive messages of one RECORD back as
        slices of that RECORD: columns straight from its decoded bytes. Anything else (plain
        RECORDs, replayed spans, a commit stepped through) is built as Records, as
        :meth:`feed` does. Runs under the same collector pause as :meth:`feed`.
        """
        return RecordColumns(self._paused_call(self._feed_parts, columns.parts))

    def feed_columns_records(self, columns: RecordColumns) -> list[Record]:
        """:meth:`feed_columns` as Records (``feed_columns(columns).records()``: what
        ``ReadCommittedConsumer.poll`` returns), built under the same collector pause as
        the filtering. Two pauses in a row cost a collection between them, over everything
        the first left young (the decoded columns, the released slices): ~5 % of the
        instructions of a read-committed ``poll`` (valgrind, docs/exactly-once.md)."""
        return self._paused_call(self._feed_records, columns.parts)

    def _feed_records(self, parts: list[Part]) -> list[Record]:
        out: list[Record] = []
        for part in self._feed_parts(parts):
            out += part.records()
        return out

    def _paused_call(self, call: Callable[[list[Part]], _T], parts: list[Part]) -> _T:
        """``call(parts)`` with the collector paused (see :meth:`feed`)."""
        if not gc.isenabled():
            return call(parts)
        gc.disable()
        self._paused = True
        try:
            return call(parts)
        finally:
            self._paused = False
            gc.enable()

    def _feed_parts(self, parts: list[Part]) -> list[Part]:
        out: list[Part] = []
        seq = self._seq
        if self._ready or self._backlog or seq._emit is not None:
            first = self._feed(())  # what an earlier call left: in order, before these
            if first:
                out.append(RecordRun(first))
        self._batches = True
        queue_many = seq.queue_many
        queue_run = seq.queue_run
        keys = self._keys
        skip = self._skip
        fed = self._fed
        new_env = _new_tuple
        from_bytes = int.from_bytes
        at = 0  # parts[at:] are not queued yet
        batch: CheckedBatch | None = None
        start = j = batch_stop = 0
        remembered: set[str] = set()
        try:
            for part in parts:
                at += 1
                batch = None
                if type(part) is not BatchSlice:
                    found = self._feed(part.records())
                    if found:
                        out.append(RecordRun(found))
                    continue
                batch = part.batch
                j = 0
                start, stop = part.start, part.stop
                batch_stop = stop
                topic, partition, offset = batch.topic, batch.partition, batch.offset
                key = keys.get((topic, partition))
                if key is None:
                    key = keys[(topic, partition)] = _key(topic, partition)
                base = offset << _INDEX_BITS
                if skip and key in skip:  # resumed from a checkpoint: below it is done
                    start = min(stop, max(start, skip[key] - base))
                    if start == stop:
                        continue
                if self._recent_limit:
                    self._remember(key, batch)
                    remembered.add(key)
                if stop - start > 1:
                    run = _run_of(batch, start, stop)
                    if run is not None:
                        env = new_env(Envelope, (key, base | start, base | stop, batch))
                        weight = len(batch.content) * (stop - start) // batch.count
                        if queue_run(env, run[0], run[1], run[2], weight) is not None:
                            fed[key] = offset + 1
                            continue
                # Message by message (an ACK RECORD, or not a run): the UUIDs as ints read
                # in the RECORD's bytes (all-zero: none, 0), so a RECORD the application
                # never sees - an ACK's - is never decoded.
                at_uuids = batch.layout.uuids_at
                content = batch.content
                if at_uuids < 0:
                    ints = [0] * (stop - start)
                else:
                    lo = at_uuids + 16 * start
                    ints = [
                        from_bytes(content[i : i + 16], "big")
                        for i in range(lo, lo + 16 * (stop - start), 16)
                    ]
                if stop - start == 1:  # most often an ACK: no lists to build
                    seq.queue_with_uuid(
                        new_env(Envelope, (key, base | start, (base | start) + 1, batch)), ints[0]
                    )
                    j = 1
                    fed[key] = offset + 1
                    if seq._emit is not None:
                        self._drain_parts(out)
                    continue
                envs = list(
                    map(
                        new_env,
                        repeat(Envelope),
                        zip(
                            repeat(key),
                            range(base | start, base | stop),
                            range((base | start) + 1, (base | stop) + 1),
                            repeat(batch),
                        ),
                    )
                )
                n = len(envs)
                while j < n:
                    j = queue_many(envs, ints, j)
                    fed[key] = offset + 1
                    if seq._emit is not None:
                        self._drain_parts(out)
        except BaseException:
            # Keep what is not yet handed out, as Records (feed's own leftovers): the rows
            # released and the messages not yet queued, in order.
            left: list[Record] = []
            if batch is not None:
                left += BatchSlice(batch, start + j, batch_stop).records()
            for rest in parts[at:]:
                left += rest.records()
            self._backlog += left
            self._ready = [r for found in out for r in found.records()] + self._ready
            raise
        if remembered:
            self._prune_recent(remembered)
        return out

    def _drain_parts(self, out: list[Part]) -> None:
        """:meth:`_drain` into parts: a commit drained from the ring as slices of its
        RECORDs (Records only for messages that came as Records)."""
        if self._decisions_only:
            self._seq.skip_commit()
            return
        ready = self._seq.drain_ring()
        if ready is None:  # a replay or a stepped commit
            self._step_parts(out)
            return
        if ready and _is_ack(ready[-1]):  # only the committing message (the last) can be
            ready.pop()
        run: CheckedBatch | None = None
        run_start = run_stop = 0
        records: list[Record] = []
        for env in ready:
            message: Any = env[3]
            if type(message) is CheckedBatch:
                index = env[1] & _INDEX_MASK
                if message is run and index == run_stop:
                    run_stop += env[2] - env[1]  # one message, or a run of them
                    continue
                if run is not None:
                    out.append(BatchSlice(run, run_start, run_stop))
                elif records:
                    out.append(RecordRun(records))
                    records = []
                run, run_start, run_stop = message, index, index + env[2] - env[1]
            else:
                if run is not None:
                    out.append(BatchSlice(run, run_start, run_stop))
                    run = None
                records.append(_record_of(env))
        if run is not None:
            out.append(BatchSlice(run, run_start, run_stop))
        elif records:
            out.append(RecordRun(records))

    def _step(self) -> Envelope[_Msg] | None:
        """The sequencer's next envelope (None: the commit is done), starting each replay it
        asks for from the recent RECORDs or the stores."""
        seq = self._seq
        while True:
            try:
                return seq.step()
            except MustStartReplay as needed:
                seq.start_replay(self._replayed(needed.partition, needed.begin, needed.end))

    def _step_parts(self, out: list[Part]) -> None:
        """Step through a commit that is not all in the ring (a replay, or a run split by
        an ACK inside its clocks) into ``out``: consecutive messages of one batched RECORD
        (replayed as runs from the recent RECORDs or the stores, or from the ring) as one
        slice of it, Records for messages that came as Records; the committing ACK dropped.
        What was stepped before a failing replay is in ``out`` when the error propagates."""
        step = self._step
        run: CheckedBatch | None = None
        run_start = run_stop = 0
        records: list[Record] = []
        try:
            while True:
                env = step()
                if env is None:
                    return
                message: Any = env[3]
                if type(message) is CheckedBatch:
                    index = env[1] & _INDEX_MASK
                    n = env[2] - env[1]
                    if n == 1 and _is_ack(env):
                        continue  # only the committing message: nothing follows it
                    if message is run and index == run_stop:
                        run_stop += n
                        continue
                    if run is not None:
                        out.append(BatchSlice(run, run_start, run_stop))
                    elif records:
                        out.append(RecordRun(records))
                        records = []
                    run, run_start, run_stop = message, index, index + n
                    continue
                found = _record_of(env)
                raw = found[8]
                if raw is not None and raw[9] == 2 and not raw[8] & 3:  # an ACK (flags 0x002)
                    continue
                if run is not None:
                    out.append(BatchSlice(run, run_start, run_stop))
                    run = None
                records.append(found)
        finally:
            if run is not None:
                out.append(BatchSlice(run, run_start, run_stop))
            elif records:
                out.append(RecordRun(records))

    def _feed(self, records: Iterable[Record]) -> list[Record]:
        out = self._ready
        self._ready = []
        pending = self._backlog
        todo = pending + list(records) if pending else list(records)
        self._backlog = []
        seq = self._seq
        queue_many = seq.queue_many
        keys = self._keys
        skip = self._skip
        fed = self._fed
        drain = self._drain
        new_env = _new_tuple
        from_bytes = int.from_bytes
        at = 0  # todo[at:] is not queued yet
        recs: list[Record] = []
        j = 0
        try:
            if seq._emit is not None:
                drain(out)
            # The hot path, one run of a partition's records at a time: envelopes built by
            # map (tuple.__new__, no wrapper object), UUIDs as ints, and the sequencer's
            # queue_many takes the whole run, stopping only where something commits.
            for (topic, partition), group in groupby(todo, _topic_partition):
                recs = list(group)
                at += len(recs)
                j = 0
                key = keys.get((topic, partition))
                if key is None:
                    key = keys[(topic, partition)] = _key(topic, partition)
                begins = [r[2] << _INDEX_BITS | r[3] for r in recs]
                if skip and key in skip:  # resumed from a checkpoint: below it is done
                    floor = skip[key]
                    recs = [r for r, b in zip(recs, begins, strict=True) if b >= floor]
                    begins = [b for b in begins if b >= floor]
                envs = list(
                    map(
                        new_env,
                        repeat(Envelope),
                        zip(repeat(key), begins, map(_PLUS_1, begins), recs),
                    )
                )
                ints = [from_bytes(u, "big") if u else 0 for u in map(_UUID, recs)]
                n = len(envs)
                while j < n:
                    j = queue_many(envs, ints, j)
                    fed[key] = recs[j - 1][2] + 1
                    if seq._emit is not None:
                        drain(out)
        except BaseException:
            self._backlog = recs[j:] + todo[at:]
            self._ready = out
            raise
        return out

    def _drain(self, out: list[Record]) -> None:
        seq = self._seq
        if self._decisions_only:
            seq.skip_commit()
            return
        ready = seq.drain_ring()
        if ready is not None:  # the common case: the whole commit in the ring, one loop
            # Only the committing message (the last) can be an ACK: the span is CONTINUEs.
            if self._batches:  # feed_columns queued messages (and runs) as their RECORDs
                for queued in ready:
                    if queued[2] - queued[1] > 1:
                        out += _slice_of(queued).records()
                    else:
                        out.append(_record_of(queued))
            else:
                out.extend(map(_RECORD, ready))
            raw = out[-1][8] if ready else None
            if raw is not None and raw[9] == 2 and not raw[8] & 3:  # an ACK (flags 0x002)
                out.pop()
            return
        append = out.append
        step = self._step
        while True:
            env = step()
            if env is None:
                return
            if env[2] - env[1] > 1:  # a run (CONTINUEs only: no ACK in it)
                out += _slice_of(env).records()
                continue
            found = _record_of(env)
            raw = found[8]
            if raw is None or raw[9] != 2 or raw[8] & 3:  # not an ACK (flags 0x002)
                append(found)

    def _remember(self, key: str, batch: CheckedBatch) -> None:
        """Keep ``batch`` among the recent RECORDs (the oldest go past ``recent_bytes``)."""
        held = self._recent.get(key)
        if held is None:
            held = self._recent[key] = {}
        if batch.offset in held:
            return
        held[batch.offset] = batch
        self._recent_order.append((key, batch.offset))
        self._recent_size += len(batch.content)
        self._recent_count += 1
        while self._recent_size > self._recent_limit:
            old_key, old_offset = self._recent_order.popleft()
            old_held = self._recent.get(old_key)
            old = None if old_held is None else old_held.pop(old_offset, None)
            if old is not None:  # else forgotten already (_prune_recent)
                self._recent_size -= len(old.content)
                self._recent_count -= 1

    def _prune_recent(self, keys: Iterable[str]) -> None:
        """Forget the recent RECORDs of ``keys`` below their partition's oldest open span:
        every message in them is decided, so no replay asks for them, and holding them (with
        their decoded columns) would keep ``recent_bytes`` of a reader's memory busy for
        nothing - what read committed then paid in page faults and collections against a
        plain read (docs/exactly-once.md, "Where the time goes")."""
        recent = self._recent
        pending_begin = self._seq.pending_begin
        for key in keys:
            held = recent.get(key)
            if held is None:
                continue
            begin = pending_begin(key)
            if begin == -1:
                gone = list(held.values())
                del recent[key]
            else:
                floor = begin >> _INDEX_BITS
                below = [offset for offset in held if offset < floor]
                gone = [held.pop(offset) for offset in below]
            if gone:
                self._recent_size -= sum(len(batch.content) for batch in gone)
                self._recent_count -= len(gone)
        order = self._recent_order
        if len(order) > 2 * self._recent_count + 64:  # mostly forgotten entries: compact
            self._recent_order = deque(
                (key, offset) for key, offset in order if offset in recent.get(key, ())
            )

    def _from_recent(self, key: str, first: int, last: int) -> list[Part] | None:
        """RECORDs ``first..last`` of ``key`` (whole slices) if every one is held."""
        held = self._recent.get(key)
        if held is None:
            return None
        batches = [held.get(offset) for offset in range(first, last + 1)]
        if None in batches:
            return None
        return [BatchSlice(batch, 0, batch.count) for batch in batches if batch is not None]

    def _replayed(self, key: str, begin: int, end: int) -> list[ReplayItem]:
        topic, partition = _split(key)
        first, last = begin >> _INDEX_BITS, (end - 1) >> _INDEX_BITS
        recent = self._from_recent(key, first, last)
        if recent is not None:
            self.replays_recent += 1
            return self._replay_items(key, begin, end, recent)
        if self._replay is None:
            raise MustStartReplay(key, begin, end)
        self.replays += 1
        paused = self._paused
        if paused:  # a replay runs a consumer for up to its timeout: not with gc paused
            gc.enable()
        try:
            replayed = self._replay(topic, partition, first, last)
            parts: list[Part]
            if isinstance(replayed, RecordColumns):
                parts = replayed.parts
            else:
                parts = [RecordRun(list(replayed))]
        finally:
            if paused:
                gc.disable()
        return self._replay_items(key, begin, end, parts)

    def _replay_items(self, key: str, begin: int, end: int, parts: list[Part]) -> list[ReplayItem]:
        """The replayed messages of ``key`` in ``[begin, end)`` as the sequencer's replay
        items: a batched RECORD's messages as one :class:`ReplayedRun` when they are a run
        (:func:`_run_of`, as :meth:`feed_columns` queues them), else one item per message
        with its UUID read in the RECORD's bytes (the RECORD is the message: released as
        its slices); Records as envelopes of :class:`_Msg`."""
        topic, partition = _split(key)
        items: list[ReplayItem] = []
        from_bytes = int.from_bytes
        for part in parts:
            if type(part) is not BatchSlice:
                items += self._envelopes(key, begin, end, part.records())
                continue
            batch = part.batch
            if batch.partition != partition or batch.topic != topic:
                continue
            base = batch.offset << _INDEX_BITS
            lo = max(part.start, begin - base)
            hi = min(part.stop, end - base)
            if lo >= hi:
                continue
            if hi - lo > 1:
                run = _run_of(batch, lo, hi)
                if run is not None:
                    env = _new_tuple(Envelope, (key, base | lo, base | hi, batch))
                    items.append(ReplayedRun(env, *run))
                    continue
            at_uuids = batch.layout.uuids_at
            content = batch.content
            for index in range(lo, hi):
                i = 0
                if at_uuids >= 0:
                    at = at_uuids + 16 * index
                    i = from_bytes(content[at : at + 16], "big")
                clock = _clock_of(i)
                env = _new_tuple(Envelope, (key, base | index, (base | index) + 1, batch))
                items.append(ReplayedRun(env, i & 0xFFFFFFFFFFFF, clock, clock))
        return items

    def _envelopes(
        self, key: str, begin: int, end: int, replayed: list[Record]
    ) -> list[Envelope[_Msg]]:
        """The replayed Records of ``key`` in ``[begin, end)`` as the sequencer's envelopes."""
        topic, partition = _split(key)
        envs: list[Envelope[_Msg]] = []
        for record in replayed:
            at = record.offset << _INDEX_BITS | record.index
            if begin <= at < end and record.partition == partition and record.topic == topic:
                raw = record.uuid
                msg = _Msg(record, _Id(int.from_bytes(raw, "big")) if raw else _NIL)
                envs.append(Envelope(key, at, at + 1, msg))
        return envs

    def checkpoint(self) -> dict[str, Any]:
        """A JSON-able checkpoint: read-through positions and producer states."""
        offsets, states = self._seq.checkpoint()
        return {
            "version": CHECKPOINT_VERSION,
            "offsets": [[*_split(k), o] for k, o in sorted(offsets.items())],
            "producers": [
                [*_split(s.partition), s.producer.hex(), s.last_ack, s.begin] for s in states
            ],
        }

    def last_stable_position(self, topic: str, partition: str) -> int:
        """The RECORD offset below which every message of the partition is decided."""
        key = _key(topic, partition)
        fed = self._fed.get(key, 0)
        pending = self._seq.pending_begin(key)
        if pending == -1:
            return fed
        return min(fed, pending >> _INDEX_BITS)

    def last_stable_positions(self) -> dict[Key, int]:
        """:meth:`last_stable_position` of every partition seen."""
        return {_split(k): self.last_stable_position(*_split(k)) for k in self._fed}


def _decode_checkpoint(doc: Mapping[str, Any]) -> tuple[dict[str, int], list[ProducerState]]:
    try:
        if int(doc["version"]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown checkpoint version {doc['version']!r}")
        offsets = {_key(str(t), str(p)): int(o) for t, p, o in doc["offsets"]}
        states = [
            ProducerState(_key(str(t), str(p)), ProducerID.fromhex(str(h)), int(a), int(b))
            for t, p, h, a, b in doc["producers"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"checkpoint: not a read-committed checkpoint ({exc})") from None
    return offsets, states


__all__ = ["CHECKPOINT_VERSION", "CommittedFilter", "Key", "ReplayFunc"]
