"""The read-committed filter over Records (pure: an in-memory log stands in for the stores)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Iterable

import pytest

from dafka.errors import ConfigError
from dafka.message import Flags, ProducerID, build_uuid
from dafka.records import CommittedFilter, Record, RecordColumns
from dafka.records._batch import check_batch, encode_batch
from dafka.records._columns import BatchSlice, CheckedBatch
from tests.unit.records.test_records_committed_runs import as_columns

pytestmark = pytest.mark.unit

T = "orders"
P = ProducerID.fromhex("01000000000a")
Q = ProducerID.fromhex("01000000000b")
CONT, ACK, OUT = Flags.CONTINUE_TXN, Flags.ACK_TXN, Flags.OUTSIDE_TXN


class Log:
    """Partitions of RECORDs, each a list of (value, uuid) messages."""

    def __init__(self) -> None:
        self.parts: dict[str, list[list[tuple[bytes, bytes | None]]]] = {}

    def append(self, partition: str, *messages: tuple[bytes, bytes | None]) -> None:
        self.parts.setdefault(partition, []).append(list(messages))

    def records(self, partition: str, first: int = 0, last: int | None = None) -> list[Record]:
        out = []
        recs = self.parts.get(partition, [])
        stop = len(recs) - 1 if last is None else last
        for offset in range(first, stop + 1):
            for index, (value, uuid) in enumerate(recs[offset]):
                out.append(Record(T, partition, offset, index, None, value, (), None, uuid))
        return out

    def replay(self, topic: str, partition: str, first: int, last: int) -> list[Record]:
        assert topic == T
        self.replayed.append((partition, first, last))
        return self.records(partition, first, last)

    replayed: list[tuple[str, int, int]]


def m(value: bytes, producer: bytes, clock: int, flags: int) -> tuple[bytes, bytes]:
    return value, build_uuid(producer, clock, flags).bytes


def values(records: Iterable[Record]) -> list[bytes]:
    return [r.value for r in records]


def make_log() -> Log:
    log = Log()
    log.replayed = []
    return log


def test_a_transaction_across_partitions_appears_at_its_acks_without_them() -> None:
    log = make_log()
    log.append("a", m(b"a1", P, 10, CONT), m(b"a2", P, 11, CONT))
    log.append("b", m(b"b1", P, 12, CONT))
    f = CommittedFilter()
    assert f.feed(log.records("a") + log.records("b")) == []
    log.append("a", m(b"", P, 13, ACK))
    log.append("b", m(b"", P, 14, ACK))
    assert values(f.feed(log.records("a", 1))) == [b"a1", b"a2"]
    assert values(f.feed(log.records("b", 1))) == [b"b1"]


def test_plain_records_are_delivered_at_once_and_outside_messages_once() -> None:
    log = make_log()
    log.append("a", (b"plain", None), m(b"o1", Q, 5, OUT))
    log.append("a", m(b"o1", Q, 5, OUT), (b"plain", None))  # a retry: same UUID again
    f = CommittedFilter()
    assert values(f.feed(log.records("a"))) == [b"plain", b"o1", b"plain"]


def test_duplicates_and_rolled_back_spans_are_never_delivered() -> None:
    log = make_log()
    log.append("a", m(b"x", P, 20, CONT), m(b"x", P, 20, CONT))  # duplicated by a retry
    log.append("a", m(b"", P, 21, ACK))
    log.append("a", m(b"dead", P, 22, CONT))
    log.append("a", m(b"", P, 21, ACK))  # re-sent last ACK: rolls "dead" back
    log.append("a", m(b"", P, 21, ACK))
    f = CommittedFilter()
    assert values(f.feed(log.records("a"))) == [b"x"]


def test_an_evicted_span_is_replayed_from_the_log() -> None:
    log = make_log()
    log.append("a", *[m(b"t%d" % i, P, 100 + i, CONT) for i in range(5)])
    log.append("a", m(b"noise", Q, 1, CONT), m(b"noise", Q, 2, CONT))
    log.append("a", m(b"", P, 200, ACK))
    f = CommittedFilter(replay=log.replay, buffer=3)
    assert values(f.feed(log.records("a"))) == [b"t0", b"t1", b"t2", b"t3", b"t4"]
    assert log.replayed == [("a", 0, 1)]
    assert f.replays == 1


def test_a_failing_replay_raises_and_the_next_feed_loses_nothing() -> None:
    log = make_log()
    for i in range(4):  # a RECORD each: four ring entries (a RECORD's run would be one)
        log.append("a", m(b"t%d" % i, P, 100 + i, CONT))
    log.append("a", m(b"", P, 200, ACK), m(b"after", Q, 7, OUT))
    calls = []

    def flaky(topic: str, partition: str, first: int, last: int) -> list[Record]:
        calls.append(first)
        if len(calls) == 1:
            raise TimeoutError("stores unreachable")
        return log.records(partition, first, last)

    f = CommittedFilter(replay=flaky, buffer=2)
    with pytest.raises(TimeoutError):
        f.feed(log.records("a"))
    assert values(f.feed([])) == [b"t0", b"t1", b"t2", b"t3", b"after"]


def test_checkpoint_restore_delivers_each_committed_message_exactly_once() -> None:
    log = make_log()
    log.append("a", m(b"c1", P, 10, CONT), (b"plain1", None))
    log.append("a", m(b"c2", P, 11, CONT), m(b"o1", Q, 3, OUT))
    log.append("a", m(b"", P, 12, ACK), (b"plain2", None))
    log.append("a", m(b"c3", P, 13, CONT))
    log.append("a", m(b"", P, 14, ACK))
    everything = log.records("a")
    expected = values(CommittedFilter(replay=log.replay).feed(everything))
    assert expected == [b"plain1", b"o1", b"c1", b"c2", b"plain2", b"c3"]
    # Crash after every prefix: restore from a checkpoint taken there, read on.
    for cut in range(len(everything) + 1):
        first = CommittedFilter(replay=log.replay)
        got = values(first.feed(everything[:cut]))
        cp = json.loads(json.dumps(first.checkpoint()))
        second = CommittedFilter(cp, replay=log.replay)
        start = second.start_positions().get((T, "a"), 0)
        got += values(second.feed(log.records("a", start)))
        assert got == expected, cut


def test_last_stable_position_stops_at_an_open_span() -> None:
    log = make_log()
    log.append("a", (b"p", None))
    log.append("a", m(b"c", P, 10, CONT))
    log.append("a", (b"q", None))
    f = CommittedFilter()
    f.feed(log.records("a"))
    assert f.last_stable_position(T, "a") == 1
    log.append("a", m(b"", P, 11, ACK))
    f.feed(log.records("a", 3))
    assert f.last_stable_position(T, "a") == 4
    assert f.last_stable_positions() == {(T, "a"): 4}


def test_a_bad_checkpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        CommittedFilter({"version": 99, "offsets": [], "producers": []})
    with pytest.raises(ConfigError):
        CommittedFilter({"offsets": "x"})


def _interleaved(log: Log) -> list[Record]:
    """Every record of partitions a and b, their RECORDs interleaved (as a consumer reads
    them)."""
    return [
        r
        for offset in range(len(log.parts["a"]))
        for p in "ab"
        if offset < len(log.parts[p])
        for r in log.records(p, offset, offset)
    ]


def _mixed_log() -> Log:
    """Committed, aborted and crashed transactions, OUTSIDE messages and duplicates in two
    partitions, RECORDs of several messages."""
    log = make_log()
    for round_ in range(4):
        base = 100 * (round_ + 1)
        log.append("a", *[m(b"a%d.%d" % (round_, i), P, base + i, CONT) for i in range(3)])
        log.append("b", *[m(b"b%d.%d" % (round_, i), P, base + 10 + i, CONT) for i in range(2)])
        log.append("a", m(b"o%d" % round_, Q, base, OUT), m(b"o%d" % round_, Q, base, OUT))
        log.append("b", (b"plain%d" % round_, None), m(b"b%d.9" % round_, P, base + 19, CONT))
        log.append(  # two producers in one RECORD: P's commit takes messages 0 and 2 of it
            "a",
            m(b"p%d.0" % round_, P, base + 5, CONT),
            m(b"q%d" % round_, Q, base + 1, CONT),
            m(b"p%d.1" % round_, P, base + 6, CONT),
        )
        log.append("a", m(b"", Q, base + 2, ACK))
        if round_ == 1:  # aborted: the re-sent last ACK rolls it back
            log.append("a", m(b"", P, 99 + 100 * round_, ACK))
            log.append("b", m(b"", P, 99 + 100 * round_, ACK))
            continue
        if round_ == 2:  # crashed mid-commit with a's ACK only: a successor re-sends both
            log.append("a", m(b"", P, base + 50, ACK))
            log.append("a", m(b"", P, base + 50, ACK))
            log.append("b", m(b"", P, base + 50, ACK))
            continue
        log.append("a", m(b"", P, base + 50, ACK))
        log.append("b", m(b"", P, base + 51, ACK))
    return log


@pytest.mark.parametrize("buffer", [2, 8192])
def test_feed_columns_releases_the_rows_feed_releases_in_order(buffer: int) -> None:
    # poll_columns of a ReadCommittedConsumer is feed_columns of the poll's columns: the
    # same rows as poll, in the same order, replays and a checkpoint restore included.
    log = _mixed_log()
    stream = _interleaved(log)
    expected = CommittedFilter(replay=log.replay, buffer=buffer).feed(stream)
    assert b"a0.0" in values(expected)
    assert b"a1.0" not in values(expected)  # aborted
    assert b"b2.1" in values(expected)  # its commit finished by the successor
    assert b"b3.1" in values(expected)
    assert {b"q0", b"p0.0", b"p0.1"} <= set(values(expected))

    f = CommittedFilter(replay=log.replay, buffer=buffer)
    half = len(stream) // 2
    got = list(f.feed_columns(as_columns(log, stream[:half])))
    resumed = CommittedFilter(json.loads(json.dumps(f.checkpoint())), replay=log.replay)
    starts = resumed.start_positions()
    rest = [r for r in stream if r.offset >= starts.get((T, r.partition), 0)]
    out = resumed.feed_columns(as_columns(log, rest))
    got += list(out)
    assert got == expected
    assert out.values == [r.value for r in got[len(got) - len(out) :]]


def test_feed_pauses_the_collector_only_while_filtering_and_never_during_a_replay() -> None:
    log = make_log()
    for i in range(5):  # a RECORD each: five ring entries (a RECORD's run would be one)
        log.append("a", m(b"t%d" % i, P, 100 + i, CONT))
    log.append("a", m(b"", P, 200, ACK))
    during_replay = []

    def replay(topic: str, partition: str, first: int, last: int) -> list[Record]:
        during_replay.append(gc.isenabled())
        return log.records(partition, first, last)

    assert gc.isenabled()
    f = CommittedFilter(replay=replay, buffer=2, recent_bytes=0)
    assert len(f.feed_columns(as_columns(log, log.records("a")))) == 5
    assert during_replay == [True]
    assert gc.isenabled()
    gc.disable()  # the application's own pause is left alone
    try:
        g = CommittedFilter(replay=replay, buffer=2)
        assert values(g.feed(log.records("a"))) == [b"t%d" % i for i in range(5)]
        assert during_replay == [True, False]
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("buffer", [3, 8192])
def test_columns_and_records_mixed_at_any_cut_release_what_feed_releases(buffer: int) -> None:
    # Spans queued as RECORD slices and committed by Records (and the reverse), cut at
    # every point, even inside a RECORD: the rows and their order are feed's.
    log = _mixed_log()
    stream = _interleaved(log)
    expected = CommittedFilter(replay=log.replay, buffer=buffer).feed(stream)
    for cut in range(0, len(stream) + 1, 3):
        for columns_first in (True, False):
            f = CommittedFilter(replay=log.replay, buffer=buffer)
            head, tail = stream[:cut], stream[cut:]
            if columns_first:
                got = list(f.feed_columns(as_columns(log, head))) + f.feed(tail)
            else:
                got = f.feed(head) + list(f.feed_columns(as_columns(log, tail)))
            assert got == expected, (cut, columns_first)


def test_a_failing_replay_in_feed_columns_loses_nothing() -> None:
    log = make_log()
    for i in range(4):  # a RECORD each: four ring entries (a RECORD's run would be one)
        log.append("a", m(b"t%d" % i, P, 100 + i, CONT))
    log.append("a", m(b"", P, 200, ACK), m(b"after", Q, 7, OUT))
    log.append("a", m(b"o2", Q, 8, OUT))
    calls = []

    def flaky(topic: str, partition: str, first: int, last: int) -> list[Record]:
        calls.append(first)
        if len(calls) == 1:
            raise TimeoutError("stores unreachable")
        return log.records(partition, first, last)

    f = CommittedFilter(replay=flaky, buffer=2, recent_bytes=0)
    with pytest.raises(TimeoutError):
        f.feed_columns(as_columns(log, log.records("a")))
    assert values(f.feed_columns(RecordColumns())) == [b"t0", b"t1", b"t2", b"t3", b"after", b"o2"]


def test_a_span_that_left_the_ring_is_replayed_from_the_recent_records_when_all_are_held() -> None:
    # A group commit's span is larger than the ring: feed_columns keeps the batched RECORDs
    # it saw (up to recent_bytes) and replays from them, the stores only for what is gone.
    log = make_log()
    for r in range(4):
        log.append("a", *[m(b"t%d.%d" % (r, i), P, 100 + 10 * r + i, CONT) for i in range(3)])
    log.append("a", m(b"", P, 200, ACK))
    expected = [b"t%d.%d" % (r, i) for r in range(4) for i in range(3)]
    columns = as_columns(log, log.records("a"))
    f = CommittedFilter(replay=log.replay, buffer=2)  # a RECORD's run is one entry
    assert values(f.feed_columns(columns)) == expected
    assert (f.replays_recent, f.replays, log.replayed) == (1, 0, [])
    first = columns.parts[0]
    assert isinstance(first, BatchSlice)
    size = len(first.batch.content)
    g = CommittedFilter(replay=log.replay, buffer=2, recent_bytes=3 * size)  # RECORD 0 gone
    assert values(g.feed_columns(as_columns(log, log.records("a")))) == expected
    assert (g.replays_recent, g.replays, log.replayed) == (0, 1, [("a", 0, 2)])


def _slice(offset: int, content: bytes) -> BatchSlice:
    layout, _ = check_batch(content)
    return BatchSlice(CheckedBatch(T, "a", offset, content, layout, None), 0, layout.messages)


def test_a_reader_keeps_no_decided_record_alive() -> None:
    # Once a transaction is released (or rolled back) its RECORDs are the application's: a
    # filter that kept them - drained ring slots, the recent RECORDs kept for replays, with
    # their decoded columns - held a ring's and recent_bytes' worth of memory for nothing,
    # and read committed paid for it in page faults against a plain read (issue 25).
    f = CommittedFilter()
    value = bytes(1000)
    clock = 100
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for txn in range(100):  # 5 MB of committed and aborted transactions
            data = encode_batch(
                [value] * 50, uuids=[build_uuid(P, clock + i, CONT).bytes for i in range(50)]
            )
            ack_clock = clock + 49 if txn % 4 else clock - 1  # every 4th: rolled back
            ack = encode_batch([b""], uuids=[build_uuid(P, ack_clock, ACK).bytes])
            clock += 50
            out = f.feed_columns(RecordColumns([_slice(2 * txn, data), _slice(2 * txn + 1, ack)]))
            assert len(out.values) == (50 if txn % 4 else 0)
            del data, ack, out
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 256 << 10, f"{held:,} bytes held after 5 MB of decided transactions"


def test_a_span_open_across_polls_is_replayed_from_the_recent_records_after_others_commit() -> None:
    # The recent RECORDs are forgotten once decided, but only below the partition's oldest
    # open span: P's span opens in RECORD 0, Q commits in RECORDs 1-8 (poll by poll, its
    # entries pushing P's out of a ring of 2), and P's ACK still replays from memory.
    log = make_log()
    log.append("a", m(b"p0", P, 100, CONT), m(b"p1", P, 101, CONT))
    for r in range(4):
        log.append("a", *[m(b"q%d.%d" % (r, i), Q, 10 * r + 1 + i, CONT) for i in range(2)])
        log.append("a", m(b"", Q, 10 * r + 2, ACK))
    log.append("a", m(b"p2", P, 102, CONT), m(b"p3", P, 103, CONT))
    log.append("a", m(b"", P, 103, ACK))
    f = CommittedFilter(replay=log.replay, buffer=2)
    got: list[bytes] = []
    for offset in range(len(log.parts["a"])):
        got += f.feed_columns(as_columns(log, log.records("a", offset, offset))).values
    assert got == [b"q%d.%d" % (r, i) for r in range(4) for i in range(2)] + [
        b"p0",
        b"p1",
        b"p2",
        b"p3",
    ]
    assert (f.replays_recent, f.replays, log.replayed) == (1, 0, [])
