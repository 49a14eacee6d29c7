"""The dafka source: ``spark.readStream.format("dafka")`` and ``spark.read.format("dafka")``.

Where things run (see ``docs/spark.md``): the driver plans offsets from partition heads alone
(a :class:`~dafka.client.HeadWatcher` kept for the life of the driver's Python process, never
pickled); each executor task reads one planned range with a bounded consumer and yields
Arrow batches (``dafka.spark._read``). Everything a task needs travels in its
:class:`~dafka.spark._read.RangePartition`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from dafka.client import HeadWatcher, TimestampSearch
from dafka.errors import ConfigError
from dafka.spark import _plan
from dafka.spark._committed import CommittedOffsets, CutTracker, plan_end
from dafka.spark._counts import MessageCounter
from dafka.spark._options import Offsets, SourceOptions, Times
from dafka.spark._read import RangePartition, read_partition

_QUIET = 0.1
"""Seconds without news, once a store has greeted the watcher and answered (its "that is
all", or ``STALLED_ROUND`` after the greeting: ``HeadWatcher.wait_quiet``), after which the
first answers are taken as complete: other stores answer the same GET-HEADS within
milliseconds; one slower than this only makes a batch read stop at the first store's heads
(or a streaming ``latest`` start read a partition from 0)."""
_FIRST_ANSWERS = 30.0
"""At most this long for a store's first answers (a cluster without stores): it ends as soon
as a store greeted and ``_QUIET`` passed; 5 s was too short on a loaded machine, where a
plan then held no partition at all."""
_HEAD_INTERVAL = 1.2
"""A producers' HEAD period and a margin: how long a pattern takes to see every live topic
(and at least the watcher's ``discovery_time``: the stores name the topics they hold)."""


def _first_heads(watcher: HeadWatcher, options: SourceOptions) -> dict[tuple[str, str], int]:
    """The heads once the first answers are in (a pattern waits for a round of HEADs).

    "In" means a store greeted the watcher and answered (its DIRECT-HEADs answer our
    CONSUMER-HELLO, after the greeting) and nothing new came for ``_QUIET`` seconds: quiet
    alone is not enough on a loaded machine, where the watcher may not even have reached the
    tower within it, nor heard the store's heads - the plan then held no partition at all
    (at most ``_FIRST_ANSWERS`` seconds: a cluster without stores)."""
    least = max(_HEAD_INTERVAL, watcher.discovery_time) if options.pattern is not None else 0.0
    heads = watcher.wait_quiet(_QUIET, least + _FIRST_ANSWERS, at_least=least, min_stores=1)
    return _assigned(options, heads)


def _assigned(
    options: SourceOptions, heads: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    """``heads`` of the partitions the source reads (``assign`` names some of a topic's)."""
    if options.assigned is None:
        return heads
    return {key: head for key, head in heads.items() if key in options.assigned}


def _times_offsets(
    options: SourceOptions, times: Times, heads: dict[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    """Per partition the offset of its first RECORD at or after its time (Kafka's
    ``offsetsForTimes``; ``dafka.client.TimestampSearch``, a binary search over single
    records), or its end (head + 1) where none is yet: the partitions of ``heads`` and, for
    one time over topics named by ``subscribe``, every partition the stores know; a JSON of
    times names its partitions itself."""
    if isinstance(times, int):
        wanted = dict.fromkeys(heads, times)
        topics = dict.fromkeys(options.topics, times) if options.pattern is None else None
    else:
        wanted = {key: ms for key, ms in _plan.flatten(times).items() if options.reads(key)}
        topics = None
    if not wanted and not topics:
        return {}
    with TimestampSearch(options.transport, ready_timeout=options.cluster_timeout) as search:
        found = search.offsets_for_times(
            wanted, topics=topics, heads=heads, timeout=options.cluster_timeout
        )
        known = {**search.heads(), **heads}
    return {
        key: known.get(key, -1) + 1 if first is None else first
        for key, first in found.items()
        if options.reads(key)
    }


_watchers: dict[tuple[object, ...], HeadWatcher] = {}
_watchers_lock = threading.Lock()


def _watcher(options: SourceOptions) -> HeadWatcher:
    """The driver process's watcher for these topics (made once, on first use)."""
    key = (options.towers, options.security, options.topics, options.pattern, options.heads_refresh)
    with _watchers_lock:
        watcher = _watchers.get(key)
        if watcher is None:
            watcher = _new_watcher(options)
            _watchers[key] = watcher
        return watcher


def _new_watcher(options: SourceOptions) -> HeadWatcher:
    """A watcher of the source's topics; it waits up to ``clusterTimeout`` for a tower (a
    query started before its cluster waits for it, as Kafka's source waits for brokers)."""
    return HeadWatcher(
        options.topics,
        options.transport,
        matching=options.matches if options.pattern is not None else None,
        refresh=options.heads_refresh,
        ready_timeout=options.cluster_timeout,
    )


_trackers: dict[tuple[object, ...], CutTracker] = {}


def _tracker(options: SourceOptions, start: CommittedOffsets) -> CutTracker:
    """The driver process's read_committed planner (made once, from the first start)."""
    key = (options.towers, options.security, options.topics, options.pattern)
    with _watchers_lock:
        tracker = _trackers.get(key)
        if tracker is None:
            tracker = _trackers[key] = _new_tracker(options, start)
        return tracker


def _new_tracker(options: SourceOptions, start: CommittedOffsets) -> CutTracker:
    cap = options.max_records_per_trigger
    every = None if cap is None else max(1, cap // 8)  # cuts fine enough for the cap
    if options.pattern is None:
        return CutTracker(
            options.towers,
            start,
            options.topics,
            every=every,
            fail_on_data_loss=options.fail_on_data_loss,
            security=options.security,
        )
    watcher = _watcher(options)

    def topics() -> set[str]:
        return {topic for topic, _ in watcher.heads()}

    return CutTracker(
        options.towers,
        start,
        (),
        topic_source=topics,
        every=every,
        fail_on_data_loss=options.fail_on_data_loss,
        security=options.security,
    )


_counters: dict[tuple[object, ...], MessageCounter] = {}


def _counter(options: SourceOptions, start: dict[tuple[str, str], int]) -> MessageCounter:
    """The driver process's message counter (``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``), made once, from the first start."""
    key = (options.towers, options.security, options.topics, options.pattern)
    with _watchers_lock:
        counter = _counters.get(key)
        if counter is None:
            topic_source = None
            if options.pattern is not None:
                watcher = _watcher(options)

                def topic_source() -> set[str]:
                    return {topic for topic, _ in watcher.heads()}

            counter = _counters[key] = MessageCounter(
                options.towers,
                start,
                options.topics,
                topic_source=topic_source,
                fail_on_data_loss=options.fail_on_data_loss,
                security=options.security,
            )
        return counter


def _committed_partitions(
    options: SourceOptions, start: CommittedOffsets, end: CommittedOffsets
) -> list[RangePartition]:
    """One range per partition (a range starts and ends at clean cuts: never split)."""
    return [
        RangePartition(
            options.towers,
            topic,
            partition,
            start.positions.get((topic, partition), 0),
            stop,
            options.fetch_timeout,
            options.fail_on_data_loss,
            committed=True,
            producers=start.producers.get((topic, partition), ()),
            security=options.security,
            include_headers=options.include_headers,
        )
        for (topic, partition), stop in sorted(end.positions.items())
        if stop > start.positions.get((topic, partition), 0)
    ]


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
            security=options.security,
            include_headers=options.include_headers,
        )
        for r in _plan.ranges(start, end, options.min_partitions)
    ]


class DafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch planning on the driver; ``read`` on the executors."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.committed = options.isolation == "read_committed"
        self._target: dict[tuple[str, str], int] | None = None
        self._last_trigger = float("-inf")
        """When the last micro-batch was planned (``minOffsetsPerTrigger``; monotonic, in
        the driver's planner process: a restarted driver may plan its first one at once,
        as Kafka's source does)."""

    def initialOffset(self) -> dict[str, Any]:
        starting = self.options.starting
        times = self.options.starting_times
        offsets: Offsets
        if times is not None:
            heads = _first_heads(_watcher(self.options), self.options)
            offsets = _plan.nest(_times_offsets(self.options, times, heads))
        elif starting == "earliest":
            offsets = {}  # every partition is new, hence read from 0
        elif starting == "latest":
            offsets = _plan.heads_offsets(_first_heads(_watcher(self.options), self.options))
        else:
            offsets = _plan.nest(_plan.flatten(starting))
        return CommittedOffsets.plain(offsets).to_json() if self.committed else offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_records_per_trigger or self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        target = self._target
        if self.committed:
            begin = CommittedOffsets.from_json(start)
            tracker = _tracker(self.options, begin)
            tracker.forget_before(begin.positions)
            ceiling = None if target is None else {k: h + 1 for k, h in target.items()}
            if ceiling is not None:  # availableNow ends at the first batch with no progress
                tracker.wait_reached(ceiling, self.options.fetch_timeout)
            cuts = {k: c for k, c in tracker.cuts().items() if self.options.reads(k)}
            end = plan_end(begin, cuts, ceiling, cap, _plan.share)
            if not self._due(begin.positions, end.positions):
                return start
            return end.to_json()
        heads = _assigned(self.options, _watcher(self.options).heads())
        if target is not None:  # availableNow: nothing past the heads known when it started
            heads = {k: min(h, target[k]) for k, h in heads.items() if k in target}
        if cap is not None and self.options.max_offsets_per_trigger is not None:
            at = _plan.flatten(start)
            counter = _counter(self.options, at)
            if target is not None:  # availableNow: count up to its heads first
                ends = {k: h + 1 for k, h in heads.items()}
                counter.wait_counted(ends, self.options.fetch_timeout)
            planned = _plan.nest(counter.plan(at, heads, cap, _plan.share))
        else:
            planned = _plan.latest(start, heads, cap)
        if not self._due(_plan.flatten(start), _plan.flatten(planned)):
            return start
        return planned

    def _due(
        self, start: Mapping[tuple[str, str], int], end: Mapping[tuple[str, str], int]
    ) -> bool:
        """Whether a micro-batch ``start`` -> ``end`` may run now: with
        ``minOffsetsPerTrigger``, once it holds that many messages (as the driver's message
        counter has counted them: a RECORD not counted yet counts as nothing) or
        ``maxTriggerDelay`` passed since the last one (Kafka's rule; ``availableNow`` ignores
        it); with ``minRecordsPerTrigger`` the same in RECORDs, from the offsets alone."""
        by_messages = self.options.min_offsets_per_trigger
        least = by_messages or self.options.min_records_per_trigger
        if least is None or self._target is not None:
            return True
        now = time.monotonic()
        records = sum(max(o - start.get(k, 0), 0) for k, o in end.items())
        if records == 0:
            return True  # nothing new: Spark runs no batch either way
        if now - self._last_trigger < self.options.max_trigger_delay:
            size = records
            if by_messages is not None:
                size = _counter(self.options, dict(start)).counted(start, end)
            if size < least:
                return False
        self._last_trigger = now
        return True

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = dict(_first_heads(_watcher(self.options), self.options))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[RangePartition]:
        if self.committed:
            return _committed_partitions(
                self.options, CommittedOffsets.from_json(start), CommittedOffsets.from_json(end)
            )
        return _partitions(self.options, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())  # Spark reads one empty partition when there are none
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint, not this (lagging) call, is the truth."""


class FailedStreamReader(DataSourceStreamReader):
    """A streaming read whose options are wrong: every call raises their
    :class:`~dafka.errors.ConfigError` (returned by ``streamReader`` instead of raising
    there, where PySpark's planner loses it; see ``DafkaDataSource.streamReader``)."""

    def __init__(self, error: ConfigError) -> None:
        self.error = error

    def initialOffset(self) -> dict[str, Any]:
        raise self.error

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise self.error

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self.error


class DafkaBatchReader(DataSourceReader):
    """``spark.read``: from ``startingOffsets`` to ``endingOffsets`` (heads at planning)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[RangePartition]:
        options = self.options
        starting = options.starting
        start: Offsets = {} if starting == "earliest" else starting  # type: ignore[assignment]
        ending = options.ending
        if ending == "latest" or options.starting_times is not None:
            with _new_watcher(options) as watcher:
                heads = _first_heads(watcher, options)
            if options.starting_times is not None:
                start = _plan.nest(_times_offsets(options, options.starting_times, heads))
            end = ending if ending != "latest" else _plan.latest(start, heads, None)
            if options.ending_times is not None:
                stops = _times_offsets(options, options.ending_times, heads)
                end = _plan.nest(
                    {k: min(o, stops.get(k, o)) for k, o in _plan.flatten(end).items()}
                )
        else:
            end = ending
        if options.isolation == "read_committed":
            return self._committed(CommittedOffsets.plain(start), _plan.flatten(end))
        return _partitions(options, start, end)

    def _committed(
        self, start: CommittedOffsets, end: dict[tuple[str, str], int]
    ) -> list[RangePartition]:
        """One range per partition from ``start`` to ``end``; each task ends its rows at
        the last clean cut it finds in its range (``RangePartition.find_cut``): a batch
        read has no next batch to hand producer states to, so the driver reads no RECORD
        (it read every one before, to find the cuts itself)."""
        options = self.options
        return [
            replace(task, find_cut=True)
            for task in _committed_partitions(
                options,
                start,
                CommittedOffsets({k: o for k, o in end.items() if options.reads(k)}, {}),
            )
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())  # Spark reads one empty partition when there are none
        return read_partition(partition)


__all__ = ["DafkaBatchReader", "DafkaStreamReader"]
