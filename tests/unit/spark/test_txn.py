"""The exactly-once sink's clocks, names and control records (pure)."""

from __future__ import annotations

import pytest

from dafka.spark._txn import (
    ControlState,
    SinkError,
    Touched,
    batch_base,
    commit_clock,
    continue_clock,
    decode_control,
    encode_control,
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
    state = ControlState().next(0, [Touched("t", "s.0.0", "01ab", commit_clock(0))])
    state = state.next(1, [Touched("t", "s.1.0", "03cd", commit_clock(1))])
    assert state.last_acks == {("t", "s.0.0"): commit_clock(0), ("t", "s.1.0"): commit_clock(1)}
    assert decode_control(encode_control(state)) == state
    with pytest.raises(SinkError, match="corrupt"):
        decode_control(b"{nope")
    with pytest.raises(SinkError, match="version"):
        decode_control(b'{"v": 2}')


def test_uuid_run_equals_uuid_bytes_clock_by_clock() -> None:
    from dafka.message import Flags
    from dafka.spark._txn import continue_clock, uuid_bytes, uuid_run

    pid = bytes.fromhex("0123456789ab")
    for first in (1, 15, 16, continue_clock(3, 2, 0), (1 << 64) - 40):
        run = uuid_run(pid, first, 33, Flags.CONTINUE_TXN)
        assert run == [uuid_bytes(pid, first + i, Flags.CONTINUE_TXN) for i in range(33)]
    assert uuid_run(pid, 5, 0, Flags.CONTINUE_TXN) == []
