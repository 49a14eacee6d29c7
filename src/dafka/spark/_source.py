"""The dafka source: ``spark.readStream.format("dafka")`` and ``spark.read.format("dafka")``.

Where things run (see ``docs/spark.md``): the driver plans offsets from partition heads alone
(a :class:`~dafka.client.HeadWatcher` kept for the life of the driver's Python process, never
pickled); each executor task reads one planned range by FETCH and yields Arrow batches.
Everything a task needs travels in its :class:`RangePartition`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from dafka.client._heads import HeadWatcher
from dafka.errors import ConfigError
from dafka.spark import _plan
from dafka.spark._fetch import read_range
from dafka.spark._options import Offsets, SourceOptions, towers_transport
from dafka.spark._rows import RowBuilder

_QUIET = 0.3
"""Seconds without news after which a watcher's first answers are taken as complete."""
_FIRST_ANSWERS = 5.0
_HEAD_INTERVAL = 1.2
"""A producers' HEAD period and a margin: how long a pattern takes to see every live topic."""


def _first_heads(watcher: HeadWatcher, options: SourceOptions) -> dict[tuple[str, str], int]:
    """The heads once the first answers are in (a pattern waits for a round of HEADs)."""
    least = _HEAD_INTERVAL if options.pattern is not None else 0.0
    return watcher.wait_quiet(_QUIET, _FIRST_ANSWERS, at_least=least)


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One Spark input partition: RECORDs ``[start, end)`` of one dafka partition."""

    towers: str
    topic: str
    partition: str
    start: int
    end: int
    timeout: float
    fail_on_data_loss: bool


_watchers: dict[tuple[object, ...], HeadWatcher] = {}
_watchers_lock = threading.Lock()


def _watcher(options: SourceOptions) -> HeadWatcher:
    """The driver process's watcher for these topics (made once, on first use)."""
    key = (options.towers, options.topics, options.pattern, options.heads_refresh)
    with _watchers_lock:
        watcher = _watchers.get(key)
        if watcher is None:
            watcher = HeadWatcher(
                options.topics,
                towers_transport(options.towers),
                matching=options.matches if options.pattern is not None else None,
                refresh=options.heads_refresh,
            )
            _watchers[key] = watcher
        return watcher


def _check_isolation(options: SourceOptions) -> None:
    if options.isolation == "read_committed":
        raise ConfigError(
            "option 'isolation': read_committed is not available yet in this build "
            "(it needs the read-committed consumer of the exactly-once work); "
            "use read_uncommitted"
        )


def _partitions(options: SourceOptions, start: Offsets, end: Offsets) -> list[RangePartition]:
    return [
        RangePartition(
            options.towers,
            r.topic,
            r.partition,
            r.start,
            r.end,
            options.fetch_timeout,
            options.fail_on_data_loss,
        )
        for r in _plan.ranges(start, end, options.min_partitions)
    ]


def read_partition(partition: RangePartition) -> Iterator[pa.RecordBatch]:
    """What an executor task does: fetch the range, yield Arrow batches of the schema."""
    builder = RowBuilder(partition.topic, partition.partition)
    for first, contents in read_range(
        towers_transport(partition.towers),
        partition.topic,
        partition.partition,
        partition.start,
        partition.end,
        timeout=partition.timeout,
        fail_on_data_loss=partition.fail_on_data_loss,
    ):
        yield from builder.add_run(first, contents)
    yield from builder.finish()


class DafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch planning on the driver; ``read`` on the executors."""

    def __init__(self, options: SourceOptions) -> None:
        _check_isolation(options)
        self.options = options
        self._target: dict[tuple[str, str], int] | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        starting = self.options.starting
        if starting == "earliest":
            return {}  # every partition is new, hence read from 0
        if starting == "latest":
            heads = _first_heads(_watcher(self.options), self.options)
            return _plan.heads_offsets(heads)
        return _plan.nest(_plan.flatten(starting))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_records_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict[str, dict[str, int]], limit: ReadLimit) -> Offsets:
        heads = _watcher(self.options).heads()
        target = self._target
        if target is not None:  # availableNow: nothing past the heads known when it started
            heads = {k: min(h, target[k]) for k, h in heads.items() if k in target}
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return _plan.latest(start, heads, cap)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = dict(_first_heads(_watcher(self.options), self.options))

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> Sequence[RangePartition]:
        return _partitions(self.options, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())  # Spark reads one empty partition when there are none
        return read_partition(partition)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to do: the checkpoint, not this (lagging) call, is the truth."""


class DafkaBatchReader(DataSourceReader):
    """``spark.read``: from ``startingOffsets`` to ``endingOffsets`` (heads at planning)."""

    def __init__(self, options: SourceOptions) -> None:
        _check_isolation(options)
        self.options = options

    def partitions(self) -> Sequence[RangePartition]:
        options = self.options
        starting = options.starting
        start: Offsets = {} if starting == "earliest" else starting  # type: ignore[assignment]
        ending = options.ending
        if ending == "latest":
            with HeadWatcher(
                options.topics,
                towers_transport(options.towers),
                matching=options.matches if options.pattern is not None else None,
                refresh=options.heads_refresh,
            ) as watcher:
                end = _plan.latest(start, _first_heads(watcher, options), None)
        else:
            end = ending
        return _partitions(options, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())  # Spark reads one empty partition when there are none
        return read_partition(partition)


__all__ = ["DafkaBatchReader", "DafkaStreamReader", "RangePartition", "read_partition"]
