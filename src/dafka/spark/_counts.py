"""``maxOffsetsPerTrigger`` / ``minOffsetsPerTrigger`` for the source: micro-batches sized in
messages, not RECORDs.

Spark's offsets for dafka are RECORD sequences, and a batched RECORD carries many messages,
so the heads alone cannot say how many messages a range holds: ``maxRecordsPerTrigger``
counts RECORDs, which batching makes loose. Kafka's ``maxOffsetsPerTrigger`` counts offsets,
one per message. To plan by messages the driver must know how many each RECORD holds, which
only the data says, so the driver process runs a :class:`MessageCounter` in a thread of its
own (as ``read_committed``'s cut tracker): a ``Consumer`` of the subscribed topics from the
query's start that records, per partition, the number of messages up to each RECORD end. The
driver thus reads the data a second time; ``latestOffset`` only reads the counts (a copy
under a lock): :meth:`MessageCounter.plan` caps a batch (``maxOffsetsPerTrigger``),
:meth:`MessageCounter.counted` says whether one holds enough to run (``minOffsetsPerTrigger``).

Control records (a transaction's ACKs) count as offsets, as Kafka's do (they are never rows).
A batch ends at RECORD boundaries and holds at most the cap, except that a RECORD holding more
messages than the cap is taken whole (:func:`plan_messages`). RECORDs the counter has not
read yet are not planned: a partition waits for its count (milliseconds behind the heads
when the driver keeps up).
"""

from __future__ import annotations

import bisect
import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from dafka.client import Consumer, ConsumerSettings
from dafka.errors import DafkaError
from dafka.spark._options import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

Key = tuple[str, str]
_Columns = Mapping[Key, tuple[list[int], list[int]]]
_T = TypeVar("_T")


class _Counts:
    """One partition's message counts: ``cums[i]`` messages before RECORD offset ``ends[i]``
    (both increasing; the first entry is where counting started, with 0)."""

    __slots__ = ("cums", "ends")

    def __init__(self, start: int) -> None:
        self.ends = [start]
        self.cums = [0]

    def add(self, offset: int, messages: int) -> None:
        if offset < self.ends[-1]:
            return  # read already (a consumer never goes back; defensive)
        self.ends.append(offset + 1)
        self.cums.append(self.cums[-1] + messages)

    def at(self, position: int) -> int | None:
        """Messages counted before ``position``, if it is a known RECORD boundary."""
        i = bisect.bisect_left(self.ends, position)
        if i < len(self.ends) and self.ends[i] == position:
            return self.cums[i]
        return None

    def forget_before(self, position: int) -> None:
        i = bisect.bisect_left(self.ends, position)
        if i >= len(self.ends) or self.ends[i] != position:
            i = max(0, i - 1)  # keep the boundary at or before it
        if i:
            del self.ends[:i], self.cums[:i]


def plan_messages(
    begin: Mapping[Key, int],
    heads: Mapping[Key, int],
    counts: Mapping[Key, tuple[list[int], list[int]]],
    cap: int,
    share: Callable[[Mapping[Key, int], int], dict[Key, int]],
) -> dict[Key, int]:
    """The end of the next batch from ``begin`` holding at most ``cap`` messages in all,
    never past a partition's head or its last counted RECORD. ``counts``: per partition
    (RECORD ends, messages before each), as :class:`MessageCounter` keeps them (read, not
    copied).

    A RECORD is never split. The cap is shared fairly (``share``) among the partitions with
    counted messages, each taking the whole RECORDs within its share; what is left goes in
    whole RECORDs to the partitions that got nothing first, then to the others (so that a
    partition whose RECORDs are larger than its share still moves); a partition whose next
    RECORD alone holds more than the cap takes it whole (the batch is then larger than the
    cap, as a transaction larger than ``maxRecordsPerTrigger`` under read_committed)."""
    backlog: dict[Key, int] = {}
    usable: dict[Key, tuple[int, int]] = {}
    for key, head in heads.items():
        found = counts.get(key)
        if found is None:
            continue
        ends, cums = found
        start = begin.get(key, 0)
        i = bisect.bisect_left(ends, start)
        if i >= len(ends) or ends[i] != start:
            continue  # counting has not reached this partition's start yet
        j = bisect.bisect_right(ends, head + 1) - 1  # the last counted RECORD end <= head + 1
        if j <= i:
            continue
        usable[key] = (i, j)
        backlog[key] = cums[j] - cums[i]
    grants = share(backlog, cap)
    at: dict[Key, int] = {}
    left = cap
    for key, (i, j) in usable.items():
        cums = counts[key][1]
        k = bisect.bisect_right(cums, cums[i] + grants.get(key, 0), i, j + 1) - 1
        at[key] = k
        left -= cums[k] - cums[i]
    for key in sorted(usable, key=lambda key: (at[key] != usable[key][0], key)):
        if left <= 0:
            break
        cums = counts[key][1]
        k, j = at[key], usable[key][1]
        more = bisect.bisect_right(cums, cums[k] + left, k, j + 1) - 1
        left -= cums[more] - cums[k]
        at[key] = more
    end = dict(begin)
    for key, (i, _) in usable.items():
        ends, cums = counts[key]
        if at[key] == i and cums[i + 1] - cums[i] > cap:
            at[key] = i + 1  # a RECORD larger than the cap: whole, never split
        if at[key] > i:
            end[key] = ends[at[key]]
    return end


def count_messages(
    begin: Mapping[Key, int],
    end: Mapping[Key, int],
    counts: Mapping[Key, tuple[list[int], list[int]]],
) -> int:
    """Messages counted in ``[begin, end)`` over the partitions of ``end``, up to the last
    counted RECORD end at or below each end (RECORDs not counted yet count as nothing);
    ``counts`` as :func:`plan_messages` takes them."""
    total = 0
    for key, stop in end.items():
        found = counts.get(key)
        if found is None:
            continue
        ends, cums = found
        i = bisect.bisect_left(ends, begin.get(key, 0))
        if i >= len(ends) or ends[i] != begin.get(key, 0):
            continue  # counting has not reached this partition's start yet
        j = bisect.bisect_right(ends, stop) - 1
        if j > i:
            total += cums[j] - cums[i]
    return total


class MessageCounter:
    """Messages per RECORD of the subscribed partitions, read in a thread from ``start``."""

    def __init__(
        self,
        towers: str,
        start: Mapping[Key, int],
        topics: Iterable[str],
        topic_source: Callable[[], Iterable[str]] | None = None,
        fail_on_data_loss: bool = True,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._lock = threading.Lock()
        self._counts: dict[Key, _Counts] = {k: _Counts(o) for k, o in start.items()}
        self._error: BaseException | None = None
        self._closed = threading.Event()
        self._topic_source = topic_source
        self._subscribed = set(topics)
        settings = ConsumerSettings(
            towers=towers,
            **security.fields(),
            offset_reset="earliest",  # a partition not in ``start`` is new: from 0
            heads_refresh=1.0,
            fail_on_data_loss=fail_on_data_loss,  # failOnDataLoss, as the tasks
            control_messages=True,  # ACKs are offsets too (Kafka's control records are)
        )
        self._consumer = Consumer(
            sorted(self._subscribed), settings=settings, start_positions=dict(start)
        )
        self._thread = threading.Thread(target=self._run, name="dafka-spark-counts", daemon=True)
        self._thread.start()

    def plan(
        self,
        begin: Mapping[Key, int],
        heads: Mapping[Key, int],
        cap: int,
        share: Callable[[Mapping[Key, int], int], dict[Key, int]],
    ) -> dict[Key, int]:
        """:func:`plan_messages` over the counts so far, after dropping what lies before
        ``begin`` (Spark's start: planned already); raises if the reader died."""
        return self._over_counts(
            begin, lambda counts: plan_messages(begin, heads, counts, cap, share)
        )

    def counted(self, begin: Mapping[Key, int], end: Mapping[Key, int]) -> int:
        """Messages counted so far in ``[begin, end)`` over every partition of ``end``
        (``minOffsetsPerTrigger``): up to the last counted RECORD end at or below each end,
        so RECORDs the counter has not read yet count as nothing (the batch waits for them,
        or for ``maxTriggerDelay``). Forgets what lies before ``begin`` (planned already);
        raises if the reader died."""
        return self._over_counts(begin, lambda counts: count_messages(begin, end, counts))

    def _over_counts(self, begin: Mapping[Key, int], use: Callable[[_Columns], _T]) -> _T:
        """``use`` of the counts so far, each partition's from its ``begin`` on (what lies
        before was planned already: forgotten), under the lock (the reader appends to the
        lists ``use`` reads); raises if the reader died."""
        with self._lock:
            if self._error is not None:
                raise DafkaError(f"the source's message counter failed: {self._error}")
            for key, position in begin.items():
                found = self._counts.get(key)
                if found is not None:
                    found.forget_before(position)
            return use({k: (c.ends, c.cums) for k, c in self._counts.items()})

    def wait_counted(self, targets: Mapping[Key, int], timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every partition is counted up to its target
        (RECORD offsets): ``availableNow`` ends at the first batch that makes no progress,
        which a counter still behind its heads must not fake."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._error is not None:
                    raise DafkaError(f"the source's message counter failed: {self._error}")
                counted = {k: c.ends[-1] for k, c in self._counts.items()}
            if all(counted.get(k, 0) >= o for k, o in targets.items() if o > 0):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self._consumer.close()

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                self._subscribe_new()
                columns = self._consumer.poll_columns(0.1, max_records=1 << 30)
                if not columns:
                    continue
                # A whole RECORD arrives at once and an unbounded poll takes every message
                # queued: a RECORD's messages are all in one poll.
                seen = collections.Counter(
                    zip(columns.topics, columns.partitions, columns.offsets, strict=True)
                )
                with self._lock:
                    for (topic, partition, offset), n in seen.items():
                        key = (topic, partition)
                        found = self._counts.get(key)
                        if found is None:
                            found = self._counts[key] = _Counts(0)
                        found.add(offset, n)
        except BaseException as exc:  # surfaced by counts(): the query fails loudly
            if not self._closed.is_set():
                log.exception("the source's message counter failed")
                with self._lock:
                    self._error = exc

    def _subscribe_new(self) -> None:
        if self._topic_source is None:
            return
        for topic in self._topic_source():
            if topic not in self._subscribed:
                self._subscribed.add(topic)
                self._consumer.subscribe(topic)


__all__ = ["MessageCounter", "count_messages", "plan_messages"]
