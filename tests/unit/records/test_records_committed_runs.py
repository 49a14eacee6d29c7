"""A batched RECORD's run of CONTINUEs is one ring entry of the read-committed filter.

``feed_columns`` queues the messages ``[start, stop)`` of a batched RECORD as one sequencer
entry when they are CONTINUE messages of one producer with increasing clocks; ``feed`` (the
Records path) queues every message on its own. The differential property: over logs with
runs, clocks going backwards inside a RECORD, several producers in one RECORD, duplicates,
unexpected flags, rollbacks, ACKs inside a run's clocks (a commit that takes part of a
run), OUTSIDE and plain messages, small rings, small ring weights, replays from the stores
or from the recent RECORDs (as Records, or as columns: runs replayed as one item), polls
cut anywhere (inside a RECORD too) and a checkpoint
restore, both release the same rows in the same order and end in the same checkpoint.
"""

from __future__ import annotations

import json
from itertools import groupby, pairwise
from typing import Any, Protocol

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dafka.message import Flags, ProducerID, build_uuid
from dafka.records import CommittedFilter, Record, RecordColumns
from dafka.records._batch import NO_UUID, check_batch, encode_batch
from dafka.records._columns import BatchSlice, CheckedBatch

pytestmark = pytest.mark.unit

T = "orders"
PRODUCERS = (ProducerID.fromhex("01000000000a"), ProducerID.fromhex("01000000000b"))
CONT, ACK, OUT = int(Flags.CONTINUE_TXN), int(Flags.ACK_TXN), int(Flags.OUTSIDE_TXN)
Message = tuple[bytes, bytes | None]


class Log:
    """Partitions of RECORDs, each a list of (value, uuid) messages."""

    def __init__(self) -> None:
        self.parts: dict[str, list[list[Message]]] = {}
        self.replayed: list[tuple[str, int, int]] = []

    def append(self, partition: str, messages: list[Message]) -> None:
        self.parts.setdefault(partition, []).append(messages)

    def records(self, partition: str, first: int = 0, last: int | None = None) -> list[Record]:
        recs = self.parts.get(partition, [])
        stop = len(recs) - 1 if last is None else last
        return [
            Record(T, partition, offset, index, None, value, (), None, uuid)
            for offset in range(first, stop + 1)
            for index, (value, uuid) in enumerate(recs[offset])
        ]

    def replay(self, topic: str, partition: str, first: int, last: int) -> list[Record]:
        assert topic == T
        self.replayed.append((partition, first, last))
        return self.records(partition, first, last)

    def replay_columns(self, topic: str, partition: str, first: int, last: int) -> RecordColumns:
        """:meth:`replay` as ``replay_from_stores`` answers: the RECORDs as columns."""
        return as_columns(self, self.replay(topic, partition, first, last))

    def stream(self) -> list[Record]:
        """Every record, the partitions' RECORDs interleaved (as a consumer reads them)."""
        longest = max((len(r) for r in self.parts.values()), default=0)
        return [
            r
            for offset in range(longest)
            for p in sorted(self.parts)
            if offset < len(self.parts[p])
            for r in self.records(p, offset, offset)
        ]


class HasParts(Protocol):
    """A test's log: partitions of RECORDs, each a list of (value, uuid) messages (this
    file's :class:`Log` and test_records_committed_filter.py's)."""

    parts: dict[str, list[list[Message]]]


def as_columns(log: HasParts, records: list[Record]) -> RecordColumns:
    """``records`` as ``poll_columns`` hands them out: a slice of a fresh checked batched
    RECORD per run of one RECORD's messages."""
    parts = []
    for (partition, offset), group in groupby(records, key=lambda r: (r.partition, r.offset)):
        run = list(group)
        messages = log.parts[partition][offset]
        content = encode_batch([v for v, _ in messages], uuids=[u or NO_UUID for _, u in messages])
        layout, _ = check_batch(content)
        batch = CheckedBatch(T, partition, offset, content, layout, None)
        parts.append(BatchSlice(batch, run[0].index, run[-1].index + 1))
    return RecordColumns(parts)


group = st.tuples(
    st.sampled_from(
        ["run"] * 4
        + ["back"] * 2
        + ["ack"] * 2
        + ["early", "dup", "abort", "outside", "odd", "plain"]
    ),
    st.integers(0, 1),  # producer
    st.integers(1, 5),  # messages of a run
    st.sampled_from([1, 2, 3, 17]),  # clock step in a run (17: counter +1, byte 3 +1)
    st.integers(0, 10**6),  # which earlier message a dup copies
)
records = st.lists(
    st.tuples(st.integers(0, 1), st.lists(group, min_size=1, max_size=2)), max_size=25
)


def build(
    spec: list[tuple[int, list[tuple[str, int, int, int, int]]]],
    starts: tuple[int, int] = (1000, 5000),
) -> Log:
    log = Log()
    clocks = list(starts)
    last_ack: dict[tuple[str, int], int] = {}
    minted: dict[str, list[Message]] = {}
    serial = 0
    for p, groups in spec:
        partition = "ab"[p]
        messages: list[Message] = []
        for kind, who, count, step, pick in groups:
            producer = PRODUCERS[who]

            def msg(
                clock: int, flags: int, value: bytes | None = None, producer: bytes = producer
            ) -> Message:
                nonlocal serial
                serial += 1
                return value or b"v%d" % serial, build_uuid(producer, clock, flags).bytes

            if kind == "run":
                for _ in range(count):
                    clocks[who] += step
                    messages.append(msg(clocks[who], CONT))
            elif kind == "back":  # a CONTINUE below the producer's last clock
                messages.append(msg(max(1, clocks[who] - step - 1), CONT))
            elif kind == "dup" and minted.get(partition):
                messages.append(minted[partition][pick % len(minted[partition])])
            elif kind == "ack":
                clocks[who] += 1
                last_ack[(partition, who)] = clocks[who]
                messages.append(msg(clocks[who], ACK, b""))
            elif kind == "early":  # an ACK below clocks already sent: commits part of a run
                last_ack[(partition, who)] = clocks[who] - step
                messages.append(msg(clocks[who] - step, ACK, b""))
            elif kind == "abort":  # the last ACK re-sent: rolls the open span back
                messages.append(msg(last_ack.get((partition, who), 1), ACK, b""))
            elif kind == "odd":  # unexpected flags (0x101): handled as OUTSIDE
                clocks[who] += 1
                messages.append(msg(clocks[who], CONT | 0x100))
            elif kind == "outside":
                clocks[who] += 1
                messages.append(msg(clocks[who], OUT))
            else:
                serial += 1
                messages.append((b"plain%d" % serial, None))
        log.append(partition, messages)
        minted.setdefault(partition, []).extend(messages)
    return log


CASE = {
    "buffer": 8192,
    "ring_bytes": 32 << 20,
    "recent": True,
    "restore_at": 0,
    "as_records": False,
    "clocks_from": (1000, 5000),
    "replay_columns": False,
}
"""The common case of the examples below: a ring that holds everything, recent RECORDs
kept, no cut, no restore, columns, clocks from 1000, Records replayed."""


def case(spec: list[tuple[int, list[tuple[str, int, int, int, int]]]], **given: Any) -> example:
    """An ``@example`` of the property: :data:`CASE` but for ``given``."""
    return example(spec=spec, cuts=[], **{**CASE, **given})


@settings(max_examples=300, deadline=None)
@case(  # a CONTINUE between a run's first and last clocks, after it: a duplicate
    [
        (0, [("run", 0, 1, 1, 0)]),
        (0, [("run", 1, 2, 3, 0)]),
        (1, [("run", 0, 1, 1, 0)]),
        (0, [("back", 1, 1, 1, 0), ("early", 1, 1, 1, 0)]),
    ],
    buffer=2,
    ring_bytes=1,
    recent=False,
)
@case(  # consecutive clocks across a multiple of 4096 (4091..4100): two pieces
    [(0, [("run", 0, 5, 1, 0), ("run", 0, 5, 1, 0)]), (0, [("ack", 0, 1, 1, 0)])],
    clocks_from=(4090, 5000),
)
@case(  # a clock going back inside a RECORD: not a run
    [(0, [("run", 0, 4, 1, 0), ("back", 0, 1, 1, 0)]), (0, [("ack", 0, 1, 1, 0)])],
)
@case(  # flags 0x101 (in byte 8) inside a RECORD of CONTINUEs: not a run
    [(0, [("run", 0, 3, 1, 0), ("odd", 0, 1, 1, 0)]), (0, [("ack", 0, 1, 1, 0)])],
)
@case(  # an ACK inside a run's clocks: the commit takes the run's first messages
    [(0, [("run", 0, 4, 1, 0)]), (0, [("early", 0, 1, 2, 0)]), (0, [("ack", 0, 1, 1, 0)])],
)
@case(  # the same, the run stepped through after a replay of what left the ring
    [
        (0, [("run", 0, 2, 1, 0)]),
        (0, [("run", 0, 3, 1, 0)]),
        (0, [("run", 0, 4, 1, 0)]),
        (0, [("early", 0, 1, 2, 0)]),
    ],
    buffer=2,
    recent=False,
    as_records=True,
)
@case(  # the same, replayed as columns: the replayed run is split by the ACK
    [
        (0, [("run", 0, 2, 1, 0)]),
        (0, [("run", 0, 3, 1, 0)]),
        (0, [("run", 0, 4, 1, 0)]),
        (0, [("early", 0, 1, 2, 0)]),
    ],
    buffer=2,
    ring_bytes=1,
    recent=False,
    replay_columns=True,
)
@given(
    spec=records,
    buffer=st.sampled_from([1, 2, 3, 5, 8192]),
    ring_bytes=st.sampled_from([1, 150, 400, 32 << 20]),
    recent=st.booleans(),
    cuts=st.lists(st.integers(0, 200), max_size=4),
    restore_at=st.integers(0, 200),
    as_records=st.booleans(),
    # Where the producers' clocks start: runs of consecutive clocks are checked in the
    # RECORD's bytes in pieces within an aligned 4096 (the clock's low 12 bits), chained
    # across one (4090), time_low's wrap (2**36) and time_mid's (2**48).
    clocks_from=st.tuples(
        st.sampled_from([1000, 4090, 2**36 - 6, 2**48 - 6]), st.sampled_from([5000, 8187])
    ),
    # The replay answers with columns (replay_from_stores): a RECORD's run is one replay item.
    replay_columns=st.booleans(),
)
def test_runs_release_exactly_what_message_by_message_releases(
    spec: list[tuple[int, list[tuple[str, int, int, int, int]]]],
    buffer: int,
    ring_bytes: int,
    recent: bool,
    cuts: list[int],
    restore_at: int,
    as_records: bool,
    clocks_from: tuple[int, int],
    replay_columns: bool,
) -> None:
    # as_records: feed_columns_records (ReadCommittedConsumer.poll), the same rows as Records.
    log = build(spec, clocks_from)
    stream = log.stream()
    reference = CommittedFilter(replay=log.replay, buffer=buffer)
    expected = reference.feed(stream)
    recent_bytes = 32 << 20 if recent else 0

    def fresh(checkpoint: dict[str, object] | None = None) -> CommittedFilter:
        return CommittedFilter(
            checkpoint,
            replay=log.replay_columns if replay_columns else log.replay,
            buffer=buffer,
            ring_bytes=ring_bytes,
            recent_bytes=recent_bytes,
        )

    restore_at = min(restore_at, len(stream))
    f = fresh()
    # The Spark planner's filter: the same decisions, no rows, never a replay (none given).
    decisions = CommittedFilter(buffer=buffer, ring_bytes=ring_bytes, decisions_only=True)
    got: list[Record] = []
    edges = sorted({0, restore_at, *(min(c, restore_at) for c in cuts)})
    for a, b in zip(edges, [*edges[1:], restore_at], strict=True):
        if as_records:
            got += f.feed_columns_records(as_columns(log, stream[a:b]))
        else:
            got += list(f.feed_columns(as_columns(log, stream[a:b])))
        assert not decisions.feed_columns(as_columns(log, stream[a:b]))
        assert decisions.last_stable_positions() == f.last_stable_positions()
        assert decisions.checkpoint() == f.checkpoint()
    g = fresh(json.loads(json.dumps(f.checkpoint())))
    starts = g.start_positions()
    rest = [r for r in stream if r.offset >= starts.get((T, r.partition), 0)]  # read again
    edges = sorted({0, len(rest), *(min(c, len(rest)) for c in cuts)})
    for a, b in pairwise(edges):
        got += list(g.feed_columns(as_columns(log, rest[a:b])))
    assert got == expected
    assert g.checkpoint() == reference.checkpoint()


def _spans(log: Log, sizes: list[int]) -> None:
    """Partition a: a RECORD of CONTINUEs per size (one transaction), then its ACK."""
    clock = 100
    for r, n in enumerate(sizes):
        messages: list[Message] = []
        for i in range(n):
            clock += 1
            messages.append((b"t%d.%d" % (r, i), build_uuid(PRODUCERS[0], clock, CONT).bytes))
        log.append("a", messages)
    log.append("a", [(b"", build_uuid(PRODUCERS[0], clock + 1, ACK).bytes)])


def test_a_clock_at_or_below_a_runs_last_is_dropped_as_a_duplicate() -> None:
    # Inside an open span a CONTINUE at or below the largest clock accepted is a re-sent
    # message, dropped. A run queued as one entry did not raise the span's largest clock to
    # its last: a message after it with a clock between its first and last was delivered
    # (found by the property test: 5003, 5006 | 5004, ACK 5005 released 5003 and 5004).
    p = PRODUCERS[0]
    log = Log()
    log.append("a", [(b"first", uuid(p, 5003, CONT)), (b"last", uuid(p, 5006, CONT))])
    log.append("a", [(b"again", uuid(p, 5004, CONT)), (b"", uuid(p, 5005, ACK))])
    reference = CommittedFilter()
    assert [r.value for r in reference.feed(log.stream())] == [b"first"]
    f = CommittedFilter(recent_bytes=0)
    assert f.feed_columns(as_columns(log, log.stream())).values == [b"first"]
    assert f.checkpoint() == reference.checkpoint()


def uuid(producer: bytes, clock: int, flags: int) -> bytes:
    return build_uuid(producer, clock, flags).bytes


def test_a_records_run_is_one_ring_entry() -> None:
    # 500 messages in one RECORD fit a ring of 2 entries: no replay. (Message by message
    # they took 500 entries, and the span was replayed from the stores.)
    log = Log()
    _spans(log, [500])
    f = CommittedFilter(replay=log.replay, buffer=2, recent_bytes=0)
    got = f.feed_columns(as_columns(log, log.records("a")))
    assert got.values == [b"t0.%d" % i for i in range(500)]
    assert [type(p).__name__ for p in got.parts] == ["BatchSlice"]
    assert (f.replays, f.replays_recent, log.replayed) == (0, 0, [])


def test_ring_bytes_bound_the_runs_the_ring_holds() -> None:
    # Runs weigh their RECORD's bytes: with room for one RECORD's, the oldest RECORDs of a
    # span leave the ring (and are replayed); with the default 32 MiB all stay.
    expected = [b"t%d.%d" % (r, i) for r in range(3) for i in range(100)]
    log = Log()
    _spans(log, [100, 100, 100])
    size = len(as_columns(log, log.records("a", 0, 0)).parts[0].batch.content)  # type: ignore[attr-defined]
    roomy = CommittedFilter(replay=log.replay, recent_bytes=0)
    assert roomy.feed_columns(as_columns(log, log.records("a"))).values == expected
    assert log.replayed == []
    tight = CommittedFilter(replay=log.replay, recent_bytes=0, ring_bytes=size)
    assert tight.feed_columns(as_columns(log, log.records("a"))).values == expected
    assert log.replayed == [("a", 0, 1)]  # RECORDs 0 and 1 had left the ring


def test_a_replayed_span_comes_back_as_slices_of_its_records() -> None:
    # A span larger than the ring (a Spark sink's transaction) is replayed; a replay that
    # answers with columns (replay_from_stores), or the recent RECORDs, is released as
    # slices of the RECORDs - columns straight to Arrow - not as a Record per message (it
    # was: RecordRuns of Records, the Spark task's read_committed path at 0.12-0.36x).
    expected = [b"t%d.%d" % (r, i) for r in range(3) for i in range(100)]
    for replay_from in ("stores", "recent"):
        log = Log()
        _spans(log, [100, 100, 100])
        size = len(as_columns(log, log.records("a", 0, 0)).parts[0].batch.content)  # type: ignore[attr-defined]
        f = CommittedFilter(
            replay=log.replay_columns,
            ring_bytes=size,
            recent_bytes=0 if replay_from == "stores" else 32 << 20,
        )
        got = f.feed_columns(as_columns(log, log.records("a")))
        assert got.values == expected
        assert [(type(p).__name__, p.size) for p in got.parts] == [("BatchSlice", 100)] * 3
        assert (f.replays, f.replays_recent) == ((1, 0) if replay_from == "stores" else (0, 1))
