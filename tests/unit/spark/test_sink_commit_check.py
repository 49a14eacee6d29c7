"""The sink's commit refuses a batch whose tasks opened their partitions from an outdated
control record (docs/spark.md, "Steps"): their opening ACK rolls back nothing of what an
earlier attempt left, so committing would publish those leftovers too."""

from __future__ import annotations

import pytest

from dafka.spark._sink import Control, TaskCommit, _check_rollbacks
from dafka.spark._txn import ControlState, SinkError, Touched

KEY = ("out", "sink.0.0")


def state(batch: int, clock: int | None) -> ControlState:
    acks = {} if clock is None else {KEY: clock}
    return ControlState(batch, (), acks, "q", 0)


def commit(read: ControlState, offset: int) -> TaskCommit:
    touched = [Touched(KEY[0], KEY[1], "01" * 6, 99)]
    return TaskCommit("q", 3, touched, 10, Control(read, offset), ((KEY, 41),))


def test_a_newer_record_that_moved_a_written_partition_refuses_the_commit() -> None:
    with pytest.raises(SinkError, match="outdated ACK clock"):
        _check_rollbacks("sink", 3, [commit(state(1, 5), 7)], state(2, 8))


def test_a_newer_record_that_left_the_partitions_alone_is_fine() -> None:
    other = ControlState(2, (), {KEY: 5, ("out", "sink.1.0"): 8}, "q", 0)
    _check_rollbacks("sink", 3, [commit(state(1, 5), 7)], other)
    _check_rollbacks("sink", 3, [commit(state(-1, None), -1)], state(-1, None))


def test_a_partition_new_to_the_tasks_but_known_to_the_record_refuses() -> None:
    with pytest.raises(SinkError, match="not committed"):
        _check_rollbacks("sink", 3, [commit(state(-1, None), -1)], state(0, 8))
