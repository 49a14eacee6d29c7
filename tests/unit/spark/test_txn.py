"""The exactly-once sink's clocks, names and control records (pure)."""

from __future__ import annotations

import pytest

from dafka.spark._txn import (
    ControlState,
    Planned,
    SinkError,
    Touched,
    batch_base,
    commit_clock,
    continue_clock,
    decode_control,
    encode_control,
    plan_batch,
    producer_id,
    task_partition,
)


def test_clocks_grow_across_attempts_and_batches() -> None:
    for b in (0, 1, 41):
        first = continue_clock(b, 0, 0)
        last = continue_clock(b, 255, (1 << 24) - 3)
        # the opening / rollback ACK of a new partition is below every CONTINUE of the batch,
        # the previous batch's commit ACK too, and the batch's commit ACK above them all
        assert commit_clock(b - 1) < batch_base(b) < first < last < commit_clock(b)
        assert continue_clock(b, 1, 0) > continue_clock(b, 0, 5)
        assert commit_clock(b) < continue_clock(b + 1, 0, 0)
    assert commit_clock(3) == batch_base(4) - 1
    with pytest.raises(SinkError, match="attempt"):
        continue_clock(0, 256, 0)
    with pytest.raises(SinkError, match="rows"):
        continue_clock(0, 0, 1 << 24)


def test_names_and_producer_ids_are_stable() -> None:
    assert task_partition("s", 3) == ("s.3", "s.3.0")
    pid = producer_id("s", "t", "s.3.0")
    assert pid == producer_id("s", "t", "s.3.0")
    assert pid != producer_id("s", "t", "s.4.0")
    assert len(pid) == 6
    assert pid[0] & 1


def test_control_records_round_trip_and_fail_loudly() -> None:
    state = ControlState().next("q", 0, 0, [Touched("t", "s.0.0", "01ab", commit_clock(0))])
    state = state.next("q", 0, 1, [Touched("t", "s.1.0", "03cd", commit_clock(1))])
    assert state.last_acks == {("t", "s.0.0"): commit_clock(0), ("t", "s.1.0"): commit_clock(1)}
    assert decode_control(encode_control(state)) == state
    with pytest.raises(SinkError, match="corrupt"):
        decode_control(b"{nope")
    with pytest.raises(SinkError, match="version"):
        decode_control(b'{"v": 3}')
    with pytest.raises(SinkError, match="corrupt"):
        decode_control(b'{"v": 2, "batch": 0, "touched": [], "acks": []}')  # no query
    # a record of the first version names no query: every query is new to it
    old = decode_control(b'{"v":1,"batch":4,"touched":[],"acks":[["t","s.0.0",7]]}')
    assert (old.batch, old.query, old.last_acks) == (4, None, {("t", "s.0.0"): 7})
    assert plan_batch(old, "q", 0) == Planned(5, committed=False, new_query=True)


def test_a_batch_is_committed_only_for_the_query_that_committed_it() -> None:
    """Issue 18: a fresh checkpoint (a new Spark query id) at the same sink name used to find
    its batches 0..N committed by the previous query, and wrote nothing."""
    assert plan_batch(ControlState(), "q1", 0) == Planned(0, False, True)
    state = ControlState()
    for n in range(3):  # q1 commits its micro-batches 0, 1, 2 as sink batches 0, 1, 2
        planned = plan_batch(state, "q1", n)
        assert planned == Planned(n, False, n == 0)
        state = state.next("q1", planned.batch - n, planned.batch, [])
    # q1 restarted from its checkpoint: its batches up to 2 are committed, 3 is next
    assert [plan_batch(state, "q1", n) for n in (0, 2, 3)] == [
        Planned(0, True, False),
        Planned(2, True, False),
        Planned(3, False, False),
    ]
    # a fresh checkpoint: q2's batches go after the last committed one, none committed
    assert [plan_batch(state, "q2", n) for n in (0, 1, 7)] == [
        Planned(3, False, True),
        Planned(4, False, True),
        Planned(10, False, True),
    ]
    state = state.next("q2", 3, 3, [])  # q2 commits its batch 0 (base 3)
    assert plan_batch(state, "q2", 0) == Planned(3, True, False)
    assert plan_batch(state, "q2", 1) == Planned(4, False, False)
    # the old query, started again from its old checkpoint, is not q2: new again, clocks grow
    assert plan_batch(state, "q1", 2) == Planned(6, False, True)
    with pytest.raises(SinkError):
        plan_batch(state, "q2", -1)


def test_uuid_run_equals_uuid_bytes_clock_by_clock() -> None:
    from dafka.message import Flags
    from dafka.spark._txn import continue_clock, uuid_bytes, uuid_run

    pid = bytes.fromhex("0123456789ab")
    for first in (1, 15, 16, continue_clock(3, 2, 0), (1 << 64) - 40):
        run = uuid_run(pid, first, 33, Flags.CONTINUE_TXN)
        assert run == [uuid_bytes(pid, first + i, Flags.CONTINUE_TXN) for i in range(33)]
    assert uuid_run(pid, 5, 0, Flags.CONTINUE_TXN) == []
