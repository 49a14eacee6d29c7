"""Corrections found by checking the message layer against Gazette (issue 10).

* the read-through offset after a commit is the end of the committing message, even when
  that message is skipped and even when messages were read past the last one delivered;
* a replay whose iterator raises is never treated as finished: the commit stays pending
  and the range is asked for again;
* a :class:`ReplayError` says which failure it is as data;
* a clock converts back to a wall time (Gazette's ``Clock.AsTime``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from dafka.message import (
    NIL_UUID,
    Clock,
    Envelope,
    FramingError,
    JsonMessage,
    MustStartReplay,
    ReadCommittedIter,
    ReplayError,
    ReplayFailure,
    Sequencer,
    build_uuid,
    clock_as_time,
    clock_to_unix_ns,
    unix_ns_to_clock,
)
from tests.unit.message.seqtools import ACK, CONT, OUT, PARTITION, A, B, Generator, clocks

pytestmark = pytest.mark.unit


def _read(log: list[Envelope[JsonMessage]], offset: int) -> list[Envelope[JsonMessage]]:
    """The envelopes of a log from ``offset`` on (what a reader restarted there gets)."""
    return [e for e in log if e.begin >= offset]


# -- read-through offsets ---------------------------------------------------------------


def test_read_through_passes_a_skipped_ack_as_gazette() -> None:
    # The example: Gazette checkpoints 304 here.
    seq: Sequencer[JsonMessage] = Sequencer()
    gen = Generator()
    a5, a6, ack5 = gen(A, 5, CONT), gen(A, 6, CONT), gen(A, 5, ACK)
    assert (a5.begin, a6.begin, ack5.begin, ack5.end) == (0, 102, 204, 304)
    seq.queue_uncommitted(a5)
    seq.queue_uncommitted(a6)
    assert seq.offsets == {PARTITION: 202}
    seq.queue_uncommitted(ack5)
    assert seq.drain() == [a5]  # The ACK is a duplicate of a5's clock: skipped.
    assert seq.checkpoint().offsets == {PARTITION: 304}


def test_read_through_never_goes_back_over_messages_read_before_the_ack() -> None:
    seq: Sequencer[JsonMessage] = Sequencer()
    gen = Generator()
    log = [gen(A, 5, CONT), gen(A, 6, CONT), gen(B, 1, CONT), gen(A, 5, ACK)]
    seen = []
    for env in log:
        seq.queue_uncommitted(env)
        seen.append(seq.offsets[PARTITION])
        seq.drain()
        seen.append(seq.offsets[PARTITION])
    assert seen == sorted(seen)
    assert seen[-1] == log[-1].end


def test_restore_after_a_skipped_ack_does_not_deliver_plain_messages_again() -> None:
    gen = Generator()
    a5, a6 = gen(A, 5, CONT), gen(A, 6, CONT)
    plain = Envelope(PARTITION, gen.offset, gen.offset + 100, JsonMessage({"n": 1}, NIL_UUID))
    gen.offset += 102
    log = [a5, a6, plain, gen(A, 5, ACK), gen(B, 1, OUT)]

    seq: Sequencer[JsonMessage] = Sequencer()
    delivered = list(ReadCommittedIter(log[:4], seq))
    assert delivered == [plain, a5]
    offsets, states = seq.checkpoint()

    restored: Sequencer[JsonMessage] = Sequencer(offsets, states)
    rest = list(ReadCommittedIter(_read(log, offsets[PARTITION]), restored))
    assert rest == [log[4]]  # Only the message after the checkpoint: `plain` not again.


def test_checkpoint_in_the_middle_of_a_commit_still_rereads_the_ack() -> None:
    gen = Generator()
    log = [gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)]
    seq: Sequencer[JsonMessage] = Sequencer()
    for env in log:
        seq.queue_uncommitted(env)
    assert seq.step() == log[0]
    assert seq.step() == log[1]  # log[0] is done now.
    offsets, states = seq.checkpoint()
    assert offsets == {PARTITION: log[1].end}  # Not past the ACK until the commit is done.
    restored: Sequencer[JsonMessage] = Sequencer(offsets, states)
    rest = list(ReadCommittedIter(_read(log, offsets[PARTITION]), restored, _replayer(log)))
    assert rest == [log[1], log[2]]


def _replayer(
    log: list[Envelope[JsonMessage]],
) -> Callable[[str, int, int], list[Envelope[JsonMessage]]]:
    def replay(partition: str, begin: int, end: int) -> list[Envelope[JsonMessage]]:
        return [e for e in log if e.partition == partition and begin <= e.begin and e.end <= end]

    return replay


# -- failing replays ------------------------------------------------------------------


def _one_then_raise(env: Envelope[JsonMessage]) -> Iterator[Envelope[JsonMessage]]:
    yield env
    raise FramingError("store went away")


def _evicted_span() -> tuple[Sequencer[JsonMessage], list[Envelope[JsonMessage]]]:
    """A transaction of A whose three CONTINUEs left a ring of 2 (B1 and the ACK fill it)."""
    seq: Sequencer[JsonMessage] = Sequencer(buffer=2)
    gen = Generator()
    log = [gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, CONT), gen(B, 1, CONT), gen(A, 4, ACK)]
    for env in log:
        seq.queue_uncommitted(env)
    return seq, log


def test_a_replay_that_raises_stops_delivery_and_can_be_restarted() -> None:
    seq, log = _evicted_span()
    with pytest.raises(MustStartReplay) as needed:
        seq.step()
    assert (needed.value.begin, needed.value.end) == (log[0].begin, log[4].begin)
    seq.start_replay(_one_then_raise(log[0]))
    assert seq.step() == log[0]
    with pytest.raises(ReplayError) as failed:
        seq.step()
    assert failed.value.kind is ReplayFailure.READER_FAILED
    assert isinstance(failed.value.__cause__, FramingError)
    # Not silently finished: the next step asks again, from the message last delivered.
    with pytest.raises(MustStartReplay) as again:
        seq.step()
    assert (again.value.begin, again.value.end) == (log[0].begin, log[4].begin)
    assert seq.checkpoint().offsets == {PARTITION: log[3].end}  # Still before the ACK.
    seq.start_replay(_replayer(log)(PARTITION, again.value.begin, again.value.end))
    assert clocks(seq.drain()) == [2, 3, 4]  # log[0] is not delivered twice.
    assert seq.offsets == {PARTITION: log[4].end}


def test_a_non_dafka_exception_in_the_replay_is_a_replay_error_too() -> None:
    seq, _ = _evicted_span()

    class Broken(Iterator[Envelope[JsonMessage]]):
        def __next__(self) -> Envelope[JsonMessage]:
            raise OSError("connection reset")

    seq.start_replay(Broken())
    with pytest.raises(ReplayError) as failed:
        seq.step()
    assert failed.value.kind is ReplayFailure.READER_FAILED
    assert failed.value.partition == PARTITION
    with pytest.raises(MustStartReplay):
        seq.step()


def test_read_committed_iter_retries_a_failed_replay_on_the_next_call() -> None:
    _, log = _evicted_span()
    seq: Sequencer[JsonMessage] = Sequencer(buffer=2)
    calls: list[tuple[int, int]] = []

    def flaky(partition: str, begin: int, end: int) -> Iterator[Envelope[JsonMessage]]:
        calls.append((begin, end))
        found = _replayer(log)(partition, begin, end)
        if len(calls) == 1:
            return _one_then_raise(found[0])
        return iter(found)

    it = ReadCommittedIter(log, seq, flaky)
    assert next(it) == log[0]
    with pytest.raises(ReplayError):
        next(it)
    assert list(it) == [log[1], log[2], log[4]]
    assert calls == [(log[0].begin, log[4].begin)] * 2


@pytest.mark.parametrize(
    ("mutate", "kind", "expected", "actual"),
    [
        (
            lambda e: e._replace(partition="other"),
            ReplayFailure.WRONG_PARTITION,
            PARTITION,
            "other",
        ),
        (lambda e: e._replace(begin=e.begin - 1), ReplayFailure.WRONG_BEGIN, 0, -1),
        (lambda e: e._replace(end=500), ReplayFailure.WRONG_END, 408, 500),
    ],
)
def test_replay_error_kind_and_bounds_are_data(
    mutate: Callable[[Envelope[JsonMessage]], Envelope[JsonMessage]],
    kind: ReplayFailure,
    expected: object,
    actual: object,
) -> None:
    seq, log = _evicted_span()
    seq.start_replay([mutate(log[0])])
    with pytest.raises(ReplayError) as failed:
        seq.step()
    assert (failed.value.kind, failed.value.partition) == (kind, PARTITION)
    assert (failed.value.expected, failed.value.actual) == (expected, actual)
    # The bad replay is dropped: a good one still delivers the whole transaction.
    with pytest.raises(MustStartReplay):
        seq.step()
    seq.start_replay(_replayer(log)(*seq.replay_range()))
    assert clocks(seq.drain()) == [1, 2, 3, 4]


# -- clock -> time ----------------------------------------------------------------------


def test_clock_as_time_inverts_unix_ns_to_clock() -> None:
    when = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    ns = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000 + 234
    clock = unix_ns_to_clock(ns)
    assert clock_to_unix_ns(clock) == ns // 100 * 100
    assert clock_to_unix_ns(clock + 15) == ns // 100 * 100  # The counter is not time.
    assert clock_as_time(clock) == when
    assert Clock(clock).as_time() == when


def test_clock_as_time_agrees_with_the_v1_uuid_timestamp() -> None:
    # A Gazette vector: the standard library reads the same instant out of the v1 UUID.
    clock = 0x1EEA838B4CC800A0
    u = build_uuid(bytes.fromhex("0123456789ab"), clock, 2)
    assert u == uuid.UUID("b4cc800a-a838-11ee-8002-0123456789ab")
    gregorian = datetime(1582, 10, 15, tzinfo=UTC) + timedelta(microseconds=u.time // 10)
    assert clock_as_time(clock) == gregorian
    assert clock_as_time(clock).year == 2024


def test_clock_as_time_follows_the_wall_clock() -> None:
    before = datetime.now(UTC)
    clock = Clock()
    clock.update()
    after = datetime.now(UTC)
    assert before - timedelta(microseconds=1) <= clock.as_time() <= after
