"""The job reports each micro-batch once, in order, from ``lastProgress`` - and from
``recentProgress`` (up to 100 progress objects as JSON through Py4J) only when more than
one batch ended since the last look."""

from __future__ import annotations

from typing import Any

from dafka.pipeline._job import _new_progress


class Progress:
    """What the job reads of a PySpark StreamingQuery: its last and its recent progress."""

    def __init__(self, batches: list[int]) -> None:
        self.batches = batches
        self.recent_asked = 0

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return {"batchId": self.batches[-1]} if self.batches else None

    @property
    def recentProgress(self) -> list[dict[str, Any]]:
        self.recent_asked += 1
        return [{"batchId": b} for b in self.batches]


def test_each_batch_is_reported_once_and_recent_progress_only_after_a_gap() -> None:
    query = Progress([])
    assert _new_progress(query, -1) == []
    query.batches = [0]
    assert _new_progress(query, -1) == [{"batchId": 0}]
    assert _new_progress(query, 0) == []
    query.batches = [0, 1]
    assert _new_progress(query, 0) == [{"batchId": 1}]
    assert query.recent_asked == 0  # one batch at a time: lastProgress alone
    query.batches = [0, 1, 2, 3, 4]
    assert _new_progress(query, 1) == [{"batchId": 2}, {"batchId": 3}, {"batchId": 4}]
    assert query.recent_asked == 1
