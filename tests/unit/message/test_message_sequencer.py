"""The read-committed sequencer, rule by rule (shared/EXACTLY-ONCE.md)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from datetime import timedelta

import pytest

from dafka.message import (
    NIL_UUID,
    Anomaly,
    Envelope,
    FramingError,
    JsonMessage,
    MustStartReplay,
    ProducerState,
    QueueOutcome,
    ReplayedRun,
    ReplayError,
    Sequencer,
    SequencerError,
    build_uuid,
)
from tests.unit.message.seqtools import (
    ACK,
    CONT,
    OUT,
    PARTITION,
    A,
    B,
    C,
    Generator,
    clocks,
    deque,
    queue,
    replay,
)

Q = QueueOutcome


def make(buffer: int = 8192) -> tuple[Sequencer[JsonMessage], list[Anomaly]]:
    anomalies: list[Anomaly] = []
    return Sequencer(buffer=buffer, on_anomaly=anomalies.append), anomalies


def state(seq: Sequencer[JsonMessage], producer: bytes) -> ProducerState:
    (found,) = [s for s in seq.checkpoint().states if s.producer == producer]
    return found


# -- clock 0 ---------------------------------------------------------------------------


def test_clock_zero_is_delivered_at_once_and_never_deduplicated() -> None:
    seq, anomalies = make()
    gen = Generator()
    z1 = Envelope(PARTITION, 0, 10, JsonMessage({"n": 1}, NIL_UUID))
    z2 = Envelope(PARTITION, 10, 20, JsonMessage({"n": 1}, NIL_UUID))
    assert queue(seq, z1) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [z1]
    assert queue(seq, z2) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [z2]
    assert queue(seq, z1) == [Q.OUTSIDE_COMMIT]  # The very same message again.
    assert deque(seq) == [z1]
    # Not indexed as a producer, but the read-through offset moves.
    assert seq.checkpoint() == ({PARTITION: 10}, [])
    # A clock-0 UUID with CONTINUE flags is still delivered at once, without an anomaly.
    gen.offset = 1000
    z3 = Envelope(PARTITION, 1000, 1010, JsonMessage({}, build_uuid(A, 0, CONT)))
    assert queue(seq, z3) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [z3]
    assert anomalies == []


def test_clock_zero_between_span_messages_does_not_disturb_the_span() -> None:
    seq, _ = make(buffer=4)
    gen = Generator()
    a1, a2 = gen(A, 1, CONT), gen(A, 2, CONT)
    z = gen(bytes(6), 0, 0)
    a3 = gen(A, 3, ACK)
    queue(seq, a1)
    assert queue(seq, z) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [z]
    assert queue(seq, a2, a3) == [Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_RING]
    assert deque(seq) == [a1, a2, a3]


# -- first sight -----------------------------------------------------------------------


@pytest.mark.parametrize("flags", [OUT, CONT, ACK])
def test_first_sight_sets_last_ack_to_clock_minus_one(flags: int) -> None:
    seq, _ = make()
    gen = Generator()
    env = gen(A, 500, flags)
    outcome = seq.queue_uncommitted(env)
    assert outcome in (Q.OUTSIDE_COMMIT, Q.CONTINUE_BEGIN_SPAN, Q.ACK_EMPTY)
    if flags == CONT:
        assert state(seq, A) == ProducerState(PARTITION, A, 499, env.begin)
    else:
        assert deque(seq) == [env]
        assert state(seq, A) == ProducerState(PARTITION, A, 500, -1)


# -- OUTSIDE_TXN -----------------------------------------------------------------------


def test_outside_messages_are_delivered_and_duplicates_dropped() -> None:
    seq, anomalies = make(buffer=1)
    gen = Generator()
    a1, a2 = gen(A, 1, OUT), gen(A, 2, OUT)
    assert queue(seq, a1) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [a1]
    assert queue(seq, a2) == [Q.OUTSIDE_COMMIT]
    assert deque(seq) == [a2]
    assert seq.offsets == {PARTITION: a2.end}
    d1, d2 = gen(A, 1, OUT), gen(A, 2, OUT)
    assert queue(seq, d1, d2) == [Q.OUTSIDE_ALREADY_ACKED, Q.OUTSIDE_ALREADY_ACKED]
    assert not seq.committing
    assert seq.offsets == {PARTITION: d2.end}  # Dropped messages still advance.
    assert anomalies == []


def test_outside_discards_an_open_span_and_reports_it() -> None:
    seq, anomalies = make()
    gen = Generator()
    a3, a4, a5 = gen(A, 3, CONT), gen(A, 4, CONT), gen(A, 5, OUT)
    assert queue(seq, a3, a4, a5) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.OUTSIDE_COMMIT,
    ]
    assert deque(seq) == [a5]
    assert state(seq, A) == ProducerState(PARTITION, A, 5, -1)
    assert [a.kind for a in anomalies] == ["outside_with_open_span"]
    # The discarded span is gone for good: a later ACK commits nothing of it.
    a6 = gen(A, 6, ACK)
    assert queue(seq, a6) == [Q.ACK_EMPTY]
    assert deque(seq) == [a6]


def test_outside_below_an_open_span_lowers_max_clock() -> None:
    seq, _ = make()
    gen = Generator()
    a1, a5 = gen(A, 1, OUT), gen(A, 5, CONT)
    a3 = gen(A, 3, OUT)
    queue(seq, a1)
    deque(seq)
    queue(seq, a5, a3)
    assert deque(seq) == [a3]
    assert state(seq, A).last_ack == 3
    a4 = gen(A, 4, CONT)  # Above the new last ACK: accepted.
    assert queue(seq, a4) == [Q.CONTINUE_BEGIN_SPAN]


def test_unknown_flags_are_treated_as_outside_and_reported() -> None:
    seq, anomalies = make()
    gen = Generator()
    a6, a7 = gen(A, 6, CONT), gen(A, 7, 0x100)
    assert queue(seq, a6, a7) == [Q.CONTINUE_BEGIN_SPAN, Q.OUTSIDE_COMMIT]
    assert deque(seq) == [a7]
    assert queue(seq, gen(A, 7, 0x100)) == [Q.OUTSIDE_ALREADY_ACKED]
    assert [a.kind for a in anomalies] == [
        "unexpected_flags",
        "outside_with_open_span",
        "unexpected_flags",
    ]
    assert anomalies[0].flags == 0x100
    assert anomalies[0].producer == A


# -- CONTINUE_TXN and ACK_TXN ----------------------------------------------------------


def test_transaction_is_held_until_its_ack_which_is_delivered_last() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    a1, a2 = gen(A, 1, CONT), gen(A, 2, CONT)
    a1d, a2d = gen(A, 1, CONT), gen(A, 2, CONT)
    a3 = gen(A, 3, ACK)
    assert queue(seq, a1, a2, a1d, a2d, a3) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_TXN_CLOCK_LARGER,
        Q.CONTINUE_TXN_CLOCK_LARGER,
        Q.ACK_COMMIT_RING,
    ]
    assert seq.offsets == {PARTITION: a2d.end}  # Not past the ACK until delivered.
    assert deque(seq) == [a1, a2, a3]
    assert seq.offsets == {PARTITION: a3.end}
    assert state(seq, A) == ProducerState(PARTITION, A, 3, -1)
    assert not seq.has_pending()


def test_continue_at_or_below_last_ack_is_dropped() -> None:
    seq, _ = make()
    gen = Generator()
    queue(seq, gen(A, 1, CONT), gen(A, 2, ACK))
    deque(seq)
    assert queue(seq, gen(A, 1, CONT), gen(A, 2, CONT)) == [
        Q.CONTINUE_ALREADY_ACKED,
        Q.CONTINUE_ALREADY_ACKED,
    ]


def test_ack_without_a_span_is_delivered_alone() -> None:
    seq, _ = make()
    gen = Generator()
    queue(seq, gen(A, 3, ACK))
    deque(seq)
    a4 = gen(A, 4, ACK)
    assert queue(seq, a4) == [Q.ACK_EMPTY]
    assert deque(seq) == [a4]


def test_partial_commit_delivers_only_clocks_up_to_the_ack() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    queue(seq, gen(A, 4, ACK))
    deque(seq)
    a5, a7, a6 = gen(A, 5, CONT), gen(A, 7, CONT), gen(A, 6, ACK)
    assert queue(seq, a5, a7, a6) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_COMMIT_RING,
    ]
    assert deque(seq) == [a5, a6]
    # The span above the ACK is forgotten: a7 is not delivered by a later ACK.
    a8 = gen(A, 8, ACK)
    assert queue(seq, a8) == [Q.ACK_EMPTY]
    assert deque(seq) == [a8]


def test_ack_equal_to_last_ack_rolls_back() -> None:
    seq, anomalies = make()
    gen = Generator()
    queue(seq, gen(A, 6, ACK))
    deque(seq)
    a7, a8, rollback = gen(A, 7, CONT), gen(A, 8, CONT), gen(A, 6, ACK)
    assert queue(seq, a7, a8, rollback) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_ROLLBACK,
    ]
    assert not seq.committing
    assert state(seq, A) == ProducerState(PARTITION, A, 6, -1)
    assert seq.offsets == {PARTITION: rollback.end}
    assert anomalies == []
    # Clocks above the rollback point are usable again.
    a7b, a8b = gen(A, 7, CONT), gen(A, 8, ACK)
    assert queue(seq, a7b, a8b) == [Q.CONTINUE_BEGIN_SPAN, Q.ACK_COMMIT_RING]
    assert deque(seq) == [a7b, a8b]


def test_ack_regression_moves_last_ack_backwards_and_is_reported() -> None:
    seq, anomalies = make()
    gen = Generator()
    queue(seq, gen(A, 1, CONT), gen(A, 10, ACK))
    deque(seq)
    a11 = gen(A, 11, CONT)
    old = gen(A, 8, ACK)
    assert queue(seq, a11, old) == [Q.CONTINUE_BEGIN_SPAN, Q.ACK_ROLLBACK]
    assert not seq.committing
    assert state(seq, A) == ProducerState(PARTITION, A, 8, -1)
    assert [(a.kind, a.clock, a.last_ack) for a in anomalies] == [("ack_regression", 8, 10)]
    assert seq.anomalies == 1
    # Exactly-once weakened to at-least-once: clock 9 is accepted again.
    a9, a10 = gen(A, 9, CONT), gen(A, 10, ACK)
    assert queue(seq, a9, a10) == [Q.CONTINUE_BEGIN_SPAN, Q.ACK_COMMIT_RING]
    assert deque(seq) == [a9, a10]


def test_two_producers_interleaved() -> None:
    seq, _ = make(buffer=16)
    gen = Generator()
    a1, b1, a2, b2 = gen(A, 1, CONT), gen(B, 11, CONT), gen(A, 2, CONT), gen(B, 12, CONT)
    a3 = gen(A, 3, ACK)
    b3 = gen(B, 13, CONT)
    b4 = gen(B, 14, ACK)
    assert queue(seq, a1, b1, a2, b2, a3) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_COMMIT_RING,
    ]
    assert deque(seq) == [a1, a2, a3]
    assert seq.has_pending()  # B's span is still open.
    assert queue(seq, b3, b4) == [Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_RING]
    assert deque(seq) == [b1, b2, b3, b4]
    assert not seq.has_pending()


def test_same_producer_in_two_partitions_is_independent() -> None:
    seq, _ = make()
    g1, g2 = Generator("p1"), Generator("p2")
    x1, y1 = g1(A, 1, CONT), g2(A, 1, CONT)
    x2 = g1(A, 2, ACK)
    assert queue(seq, x1, y1, x2) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_BEGIN_SPAN,
        Q.ACK_COMMIT_RING,
    ]
    assert deque(seq) == [x1, x2]
    y2 = g2(A, 2, ACK)
    assert queue(seq, y2) == [Q.ACK_COMMIT_RING]
    assert deque(seq) == [y1, y2]
    assert seq.offsets == {"p1": x2.end, "p2": y2.end}


# -- crashes: re-sent ACK intents ------------------------------------------------------


def test_crash_after_ack_resent_ack_is_a_no_op() -> None:
    seq, anomalies = make()
    gen = Generator()
    a1, a2, a3 = gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    queue(seq, a1, a2, a3)
    assert deque(seq) == [a1, a2, a3]
    # The producer crashed after appending its ACK and, recovering, appends it again.
    again = gen(A, 3, ACK)
    assert queue(seq, again) == [Q.ACK_ROLLBACK]
    assert not seq.committing
    # Its next transaction goes through normally.
    a4, a5 = gen(A, 4, CONT), gen(A, 5, ACK)
    queue(seq, a4, a5)
    assert deque(seq) == [a4, a5]
    assert anomalies == []


def test_crash_before_ack_resent_previous_ack_rolls_back() -> None:
    seq, anomalies = make()
    gen = Generator()
    queue(seq, gen(A, 1, CONT), gen(A, 2, ACK))
    deque(seq)
    # Transaction 2 is appended but the producer crashes before persisting its intents.
    lost = [gen(A, 3, CONT), gen(A, 4, CONT)]
    queue(seq, *lost)
    # Recovering from its checkpoint it re-sends the intent it had persisted: ACK 2.
    assert queue(seq, gen(A, 2, ACK)) == [Q.ACK_ROLLBACK]
    # Then redoes transaction 2 with later clocks.
    redo = [gen(A, 5, CONT), gen(A, 6, CONT), gen(A, 7, ACK)]
    queue(seq, *redo)
    assert deque(seq) == redo
    assert anomalies == []


# -- ring buffer and replays -----------------------------------------------------------


def test_replay_when_the_span_was_evicted_filters_other_producers() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    queue(seq, gen(A, 6, ACK))
    deque(seq)
    b1 = gen(B, 1, CONT)  # Evicted.
    a7 = gen(A, 7, CONT)  # Evicted.
    a8 = gen(A, 8, CONT)
    b2 = gen(B, 2, CONT)
    a6 = gen(A, 6, ACK)  # Rolls A back.
    assert queue(seq, b1, a7, a8, b2, a6) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_ROLLBACK,
    ]
    b3 = gen(B, 3, ACK)
    assert queue(seq, b3) == [Q.ACK_COMMIT_REPLAY]
    with pytest.raises(MustStartReplay) as info:
        seq.step()
    assert (info.value.partition, info.value.begin, info.value.end) == (
        PARTITION,
        b1.begin,
        b2.begin,
    )
    replay(seq, b1.begin, b2.begin, [b1, a7, a8])  # A's messages are filtered out.
    assert deque(seq) == [b1, b2, b3]


def test_replay_with_duplicates_inside_and_before_the_span() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    queue(seq, gen(B, 1, CONT), gen(B, 3, ACK))
    deque(seq)
    b4, b1d, b4d, b5 = gen(B, 4, CONT), gen(B, 1, CONT), gen(B, 4, CONT), gen(B, 5, CONT)
    b6, b2d, b7, b8 = gen(B, 6, CONT), gen(B, 2, CONT), gen(B, 7, CONT), gen(B, 8, ACK)
    assert queue(seq, b4, b1d, b4d, b5, b6, b2d, b7, b8) == [
        Q.CONTINUE_BEGIN_SPAN,
        Q.CONTINUE_ALREADY_ACKED,
        Q.CONTINUE_TXN_CLOCK_LARGER,
        Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_EXTEND_SPAN,
        Q.CONTINUE_ALREADY_ACKED,
        Q.CONTINUE_EXTEND_SPAN,
        Q.ACK_COMMIT_REPLAY,
    ]
    replay(seq, b4.begin, b6.begin, [b4, b1d, b4d, b5])
    assert deque(seq) == [b4, b5, b6, b7, b8]


def test_partial_rollback_where_ring_entries_are_all_skipped() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    queue(seq, gen(B, 8, ACK))
    deque(seq)
    b9, b11, b12, b13 = gen(B, 9, CONT), gen(B, 11, CONT), gen(B, 12, CONT), gen(B, 13, CONT)
    b10 = gen(B, 10, ACK)
    assert queue(seq, b9, b11, b12, b13, b10)[-1] == Q.ACK_COMMIT_REPLAY
    replay(seq, b9.begin, b12.begin, [b9, b11])
    assert deque(seq) == [b9, b10]


def test_two_replays_for_interleaved_acks() -> None:
    seq, _ = make(buffer=3)
    gen = Generator()
    b11, a7, a8, b12 = gen(B, 11, CONT), gen(A, 7, CONT), gen(A, 8, CONT), gen(B, 12, CONT)
    a9, b13 = gen(A, 9, ACK), gen(B, 13, ACK)
    assert queue(seq, b11, a7, a8, b12, a9)[-1] == Q.ACK_COMMIT_REPLAY
    replay(seq, a7.begin, a8.begin, [a7])
    assert deque(seq) == [a7, a8, a9]
    assert seq.has_pending()
    assert queue(seq, b13) == [Q.ACK_COMMIT_REPLAY]
    replay(seq, b11.begin, b12.begin, [b11, a7, a8])
    assert deque(seq) == [b11, b12, b13]
    assert not seq.has_pending()


def test_ring_of_one_replays_everything_but_the_ack() -> None:
    seq, _ = make(buffer=0)  # Clamped to 1.
    gen = Generator()
    a1, a2, b1 = gen(A, 1, CONT), gen(A, 2, CONT), gen(B, 1, CONT)
    a1d, a2d, a3 = gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    assert queue(seq, a1, a2, b1, a1d, a2d, a3)[-1] == Q.ACK_COMMIT_REPLAY
    replay(seq, a1.begin, a3.begin, [a1, a2, b1, a1d, a2d])
    assert deque(seq) == [a1, a2, a3]
    b2, b3 = gen(B, 2, CONT), gen(B, 3, ACK)
    assert queue(seq, b2, b3) == [Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_REPLAY]
    replay(seq, b1.begin, b3.begin, [b1, a1d, a2d, a3, b2])
    assert deque(seq) == [b1, b2, b3]


def test_replay_that_yields_nothing_of_the_producer_continues_from_the_ring() -> None:
    seq, _ = make(buffer=2)
    gen = Generator()
    a1, b1, b2, a2 = gen(A, 1, CONT), gen(B, 1, CONT), gen(B, 2, CONT), gen(A, 2, ACK)
    assert queue(seq, a1, b1, b2, a2)[-1] == Q.ACK_COMMIT_REPLAY
    seq.start_replay([b1])  # Wrongly short, but inside the range: a1 is simply not found.
    assert deque(seq) == [a2]


class _Failing(Iterator[Envelope[JsonMessage]]):
    def __next__(self) -> Envelope[JsonMessage]:
        raise FramingError("disk on fire")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: e._replace(partition="wrong"), "replay of wrong partition"),
        (lambda e: e._replace(begin=e.begin - 1), "replay has wrong begin (101; expected >= 102)"),
        (lambda e: e._replace(end=e.end + 100), "replay has wrong end (302; expected <= 204)"),
    ],
)
def test_replay_errors(mutate: object, message: str) -> None:
    seq, _ = make(buffer=1)
    gen = Generator()
    b1, a2, a3 = gen(B, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    assert queue(seq, b1, a2, a3)[-1] == Q.ACK_COMMIT_REPLAY
    assert callable(mutate)
    seq.start_replay([mutate(a2)])
    with pytest.raises(ReplayError, match=message.replace("(", r"\(").replace(")", r"\)")):
        seq.step()


def test_replay_reader_error_is_wrapped() -> None:
    seq, _ = make(buffer=1)
    gen = Generator()
    queue(seq, gen(A, 2, CONT), gen(A, 3, ACK))
    seq.start_replay(_Failing())
    with pytest.raises(ReplayError, match="replay reader: disk on fire"):
        seq.step()


def test_misuse_is_a_typed_error() -> None:
    seq, _ = make()
    gen = Generator()
    with pytest.raises(SequencerError):
        seq.replay_range()
    with pytest.raises(SequencerError):
        seq.start_replay([])
    assert seq.step() is None
    queue(seq, gen(A, 1, OUT))
    with pytest.raises(SequencerError):
        seq.queue_uncommitted(gen(A, 2, OUT))


@pytest.mark.parametrize("ack_clock", [5, 3])
def test_a_replayed_run_is_delivered_whole_or_decided_message_by_message(ack_clock: int) -> None:
    # A replay may hand a run of one producer's messages (strictly rising clocks) as one
    # ReplayedRun item: delivered as its one envelope when the commit covers all of it,
    # split and decided message by message when the ACK falls inside its clocks; another
    # producer's message is skipped.
    gen = Generator()
    msgs = [gen(A, c, CONT) for c in range(1, 5)]
    other = gen(B, 1, CONT)
    ack = gen(A, ack_clock, ACK)
    run_env = Envelope(PARTITION, msgs[0].begin, msgs[-1].end, msgs[0].message)

    def split_run(env: Envelope[JsonMessage]) -> list[tuple[Envelope[JsonMessage], int]]:
        assert env is run_env
        return [(m, c) for c, m in enumerate(msgs, 1)]

    seq: Sequencer[JsonMessage] = Sequencer(buffer=1, split_run=split_run)
    assert queue(seq, *msgs, other, ack)[-1] == Q.ACK_COMMIT_REPLAY
    seq.start_replay([ReplayedRun(run_env, int(A), 1, 4), ReplayedRun(other, int(B), 1, 1)])
    if ack_clock == 5:
        assert seq.drain() == [run_env, ack]
    else:  # the ACK's clock 3 commits a1..a3 (a4 is above it; the ACK itself is then
        # at the last delivered clock, skipped as one by one)
        assert seq.drain() == [msgs[0], msgs[1], msgs[2]]
    assert state(seq, A).last_ack == ack_clock


def test_a_replayed_run_outside_the_range_is_a_replay_error() -> None:
    seq: Sequencer[JsonMessage] = Sequencer(buffer=1, split_run=lambda env: [])
    gen = Generator()
    b1, a2, a3 = gen(B, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    assert queue(seq, b1, a2, a3)[-1] == Q.ACK_COMMIT_REPLAY
    seq.start_replay([ReplayedRun(a2._replace(end=a2.end + 100), int(A), 2, 2)])
    with pytest.raises(ReplayError, match="replay has wrong end"):
        seq.step()


def test_long_transaction_larger_than_the_default_ring() -> None:
    seq: Sequencer[JsonMessage] = Sequencer()
    gen = Generator()
    span = [gen(A, c, CONT) for c in range(1, 9000)]
    for e in span:
        seq.queue_uncommitted(e)
    ack = gen(A, 9000, ACK)
    assert seq.queue_uncommitted(ack) == Q.ACK_COMMIT_REPLAY
    rng = seq.replay_range()
    assert rng.begin == span[0].begin
    seq.start_replay([e for e in span if rng.begin <= e.begin and e.end <= rng.end])
    assert deque(seq) == [*span, ack]


# -- checkpoints -----------------------------------------------------------------------


def test_checkpoint_round_trip_then_replays() -> None:
    seq1, _ = make(buffer=12)
    gen = Generator()
    a1, a2, b1, b2, c1 = (
        gen(A, 1, CONT),
        gen(A, 2, CONT),
        gen(B, 1, CONT),
        gen(B, 2, CONT),
        gen(C, 1, ACK),
    )
    assert queue(seq1, a1, a2, b1, b2, c1)[-1] == Q.ACK_EMPTY
    assert deque(seq1) == [c1]
    z1 = gen(bytes(6), 0, 0)
    queue(seq1, z1)
    deque(seq1)
    assert seq1.has_pending()
    offsets, states = seq1.checkpoint()
    assert not seq1.has_pending()  # Pending means "began since the last checkpoint".
    assert offsets == {PARTITION: z1.end}
    assert states == [
        ProducerState(PARTITION, A, 0, a1.begin),
        ProducerState(PARTITION, B, 0, b1.begin),
        ProducerState(PARTITION, C, 1, -1),
    ]
    seq2: Sequencer[JsonMessage] = Sequencer(offsets, states, buffer=12)
    assert seq2.checkpoint() == (offsets, states)

    b3 = gen(B, 3, ACK)
    assert queue(seq1, b3) == [Q.ACK_COMMIT_RING]
    assert queue(seq2, b3) == [Q.ACK_COMMIT_REPLAY]
    replay(seq2, b1.begin, b3.begin, [b1, b2, c1])
    assert deque(seq1) == deque(seq2) == [b1, b2, b3]

    c2, c1r = gen(C, 2, CONT), gen(C, 1, ACK)
    for seq in (seq1, seq2):
        assert queue(seq, c2, c1r) == [Q.CONTINUE_BEGIN_SPAN, Q.ACK_ROLLBACK]
    a3 = gen(A, 3, ACK)
    assert queue(seq1, a3) == [Q.ACK_COMMIT_RING]
    assert queue(seq2, a3) == [Q.ACK_COMMIT_REPLAY]
    replay(seq2, a1.begin, a3.begin, [a1, a2, b1, b2, c1])
    assert deque(seq1) == deque(seq2) == [a1, a2, a3]


def test_checkpoint_in_the_middle_of_a_commit() -> None:
    seq1, _ = make(buffer=12)
    gen = Generator()
    a1, a2, a3 = gen(A, 1, CONT), gen(A, 2, CONT), gen(A, 3, ACK)
    queue(seq1, a1, a2, a3)
    assert seq1.step() == a1  # Delivered but not yet done: crash here.
    offsets, states = seq1.checkpoint()
    assert offsets == {PARTITION: a2.end}
    assert states == [ProducerState(PARTITION, A, 0, a1.begin)]
    seq2: Sequencer[JsonMessage] = Sequencer(offsets, states, buffer=12)
    assert queue(seq2, a3) == [Q.ACK_COMMIT_REPLAY]  # Re-reads the ACK.
    replay(seq2, a1.begin, a3.begin, [a1, a2])
    assert deque(seq2) == [a1, a2, a3]
    assert seq1.step() == a2
    assert seq1.step() == a3
    assert seq1.step() is None

    a4, a5, a6 = gen(A, 4, CONT), gen(A, 5, CONT), gen(A, 6, ACK)
    queue(seq1, a4, a5, a6)
    assert seq1.step() == a4
    assert seq1.step() == a5  # a4 is now done; crash while a5 is being processed.
    offsets, states = seq1.checkpoint()
    assert offsets == {PARTITION: a5.end}
    assert states == [ProducerState(PARTITION, A, 4, a5.begin)]
    seq3: Sequencer[JsonMessage] = Sequencer(offsets, states, buffer=12)
    assert queue(seq3, a6) == [Q.ACK_COMMIT_REPLAY]
    replay(seq3, a5.begin, a6.begin, [a5])
    assert deque(seq3) == [a5, a6]  # Not a4 again.


def test_duplicates_straddling_a_checkpoint_are_dropped() -> None:
    seq1, _ = make()
    gen = Generator()
    a1, a2, a3 = gen(A, 1, OUT), gen(A, 2, CONT), gen(A, 3, ACK)
    queue(seq1, a1)
    deque(seq1)
    queue(seq1, a2, a3)
    deque(seq1)
    seq2: Sequencer[JsonMessage] = Sequencer(*seq1.checkpoint())
    # The at-least-once log delivers copies of everything after the checkpoint.
    copies = [gen(A, 1, OUT), gen(A, 2, CONT), gen(A, 3, ACK), gen(A, 3, ACK)]
    assert queue(seq2, *copies) == [
        Q.OUTSIDE_ALREADY_ACKED,
        Q.CONTINUE_ALREADY_ACKED,
        Q.ACK_ROLLBACK,
        Q.ACK_ROLLBACK,
    ]
    a4 = gen(A, 4, OUT)
    assert queue(seq2, a4) == [Q.OUTSIDE_COMMIT]
    assert clocks(deque(seq2)) == [4]


def test_pruning_is_relative_to_the_partitions_newest_producer() -> None:
    seq, _ = make(buffer=12)
    gen = Generator()
    a = gen(A, 10 << 4, CONT)
    b1, b2 = gen(B, 19 << 4, CONT), gen(B, 20 << 4, ACK)
    c = gen(C, 30 << 4, CONT)
    queue(seq, a, b1, b2)
    assert deque(seq) == [b1, b2]
    queue(seq, c)
    # Clock units are 100 ns << 4. Newest last ACK is C's (30 << 4) - 1.
    states = seq.checkpoint(prune_horizon=2e-6).states  # 2000 ns: keeps all.
    assert [s.producer for s in states] == [A, B, C]
    assert states[0] == ProducerState(PARTITION, A, (10 << 4) - 1, a.begin)
    assert states[1] == ProducerState(PARTITION, B, 20 << 4, -1)
    states = seq.checkpoint(prune_horizon=timedelta(microseconds=1)).states  # 1 us: A goes.
    assert [s.producer for s in states] == [B, C]
    states = seq.checkpoint(prune_horizon=1.9e-6).states
    assert [s.producer for s in states] == [B, C]
    states = seq.checkpoint(prune_horizon=1e-9).states  # Under 100 ns: only the newest.
    assert [s.producer for s in states] == [C]
    # Pruned producers are forgotten: A is "first seen" again.
    assert queue(seq, gen(A, 5, CONT)) == [Q.CONTINUE_BEGIN_SPAN]


def test_pruning_horizon_zero_keeps_everyone() -> None:
    seq, _ = make()
    gen = Generator()
    queue(seq, gen(A, 1, OUT))
    deque(seq)
    queue(seq, gen(B, 10**15, OUT))
    deque(seq)
    assert len(seq.checkpoint(0).states) == 2
    assert len(seq.checkpoint(1e-3).states) == 1


def test_pruning_is_per_partition() -> None:
    seq, _ = make()
    g1, g2 = Generator("p1"), Generator("p2")
    queue(seq, g1(A, 16, OUT))
    deque(seq)
    queue(seq, g2(B, 10**15, OUT))
    deque(seq)
    states = seq.checkpoint(1e-6).states
    assert [(s.partition, s.producer) for s in states] == [("p1", A), ("p2", B)]


def test_has_pending_since_given_offsets() -> None:
    seq, _ = make()
    gen = Generator()
    a1 = gen(A, 1, CONT)
    queue(seq, a1)
    assert seq.has_pending()
    assert seq.has_pending({PARTITION: a1.begin})
    assert not seq.has_pending({PARTITION: a1.begin + 1})
    assert seq.has_pending({"other": 10**9})


def test_producer_state_json_round_trip() -> None:
    state_ = ProducerState(PARTITION, A, 123, -1)
    assert ProducerState.from_json(state_.to_json()) == state_


def test_default_anomaly_reporter_logs(caplog: pytest.LogCaptureFixture) -> None:
    seq: Sequencer[JsonMessage] = Sequencer()
    gen = Generator()
    queue(seq, gen(A, 10, ACK))
    deque(seq)
    with caplog.at_level("WARNING", logger="dafka.message.sequencer"):
        queue(seq, gen(A, 5, ACK))
    assert "ack_regression" in caplog.text
    assert seq.anomalies == 1


def test_clocks_that_differ_only_in_the_counter_are_ordered() -> None:
    seq, _ = make()
    gen = Generator()
    base = 0x1E9CC5F83FC2F95 << 4
    span = [gen(A, base | counter, CONT) for counter in range(15)]
    dup = gen(A, base | 7, CONT)
    ack = gen(A, base | 15, ACK)
    outcomes = queue(seq, *span, dup, ack)
    assert outcomes[-2:] == [Q.CONTINUE_TXN_CLOCK_LARGER, Q.ACK_COMMIT_RING]
    assert deque(seq) == [*span, ack]
    assert state(seq, A).last_ack == base | 15


def test_restored_sequencer_skips_a_duplicate_inside_the_commit() -> None:
    """After a restore the span's max clock is unknown, so a duplicate reaches the ring."""
    seq1, _ = make()
    gen = Generator()
    a1 = gen(A, 1, CONT)
    queue(seq1, a1)
    seq2: Sequencer[JsonMessage] = Sequencer(*seq1.checkpoint())
    dup, a2 = gen(A, 1, CONT), gen(A, 2, ACK)
    assert queue(seq2, dup, a2) == [Q.CONTINUE_EXTEND_SPAN, Q.ACK_COMMIT_REPLAY]
    replay(seq2, a1.begin, dup.begin, [a1])
    assert deque(seq2) == [a1, a2]


def test_an_ack_appended_after_the_next_transaction_began_loses_that_message() -> None:
    """Why ACK intents must be appended before the producer's next transaction."""
    seq, _ = make()
    gen = Generator()
    a1, a2 = gen(A, 1, CONT), gen(A, 2, CONT)
    a4 = gen(A, 4, CONT)  # Transaction 2 began before ACK 3 of transaction 1 was appended.
    a3 = gen(A, 3, ACK)
    queue(seq, a1, a2, a4, a3)
    assert deque(seq) == [a1, a2, a3]  # The span above the ACK (a4) is forgotten...
    a5 = gen(A, 5, ACK)
    assert queue(seq, a5) == [Q.ACK_EMPTY]
    assert deque(seq) == [a5]  # ...so transaction 2's ACK commits nothing: a4 is lost.


# -- memory: what is done leaves the ring ----------------------------------------------


class _Watched(JsonMessage):
    """A message a test can hold weakly: the ring must not keep it once it is done."""

    __slots__ = ("__weakref__",)


def _watched(gen: Generator, producer: bytes, clock: int, flags: int) -> Envelope[JsonMessage]:
    env = gen(producer, clock, flags)
    return Envelope(env.partition, env.begin, env.end, _Watched(env.message.body, env.message.uuid))


@pytest.mark.parametrize("how", ["drain", "step", "rollback"])
def test_a_decided_span_leaves_nothing_alive_in_the_ring(how: str) -> None:
    # A reader's ring kept the envelopes of delivered (or rolled back) spans until the head
    # came round to their slots: 8192 entries, and with one entry per batched RECORD
    # (queue_run) that was the last 8192 RECORDs and their decoded columns (issue 25).
    seq, _ = make()
    gen = Generator()
    span = [_watched(gen, A, clock, CONT) for clock in (7, 8, 9)]
    refs = [weakref.ref(env.message) for env in span]
    queue(seq, *span)
    if how == "rollback":
        queue(seq, gen(A, 6, ACK))
    else:
        queue(seq, gen(A, 10, ACK))
        if how == "drain":
            assert clocks(seq.drain()) == [7, 8, 9, 10]
        else:
            while seq.step() is not None:
                pass
    del span
    assert [ref() for ref in refs] == [None, None, None]
