"""What an executor task does: one planned range of one partition -> Arrow batches of the schema.

Each Spark input partition (:class:`RangePartition`) names a dafka partition and the RECORDs
``[start, end)`` the driver planned. The task reads them with a *bounded* consumer - the
public ``Consumer(assign={key: start}, end_offsets={key: end})`` - and
:meth:`Consumer.read_to_end <dafka.Consumer.read_to_end>`, which polls the range as
columns (:class:`~dafka.RecordColumns`); the columns become Arrow with
``RecordColumns.to_arrow()`` (a batched RECORD's key and value arrays laid over its own
bytes), about :data:`ROWS_PER_BATCH` rows per batch handed to Spark. Everything the task
needs travels in the partition (readers pickle; the consumer opens its sockets in the task).

``failOnDataLoss`` is the consumer's ``fail_on_data_loss``: records gone from every store
(retention), or that do not arrive within ``fetchTimeout`` seconds of the last progress,
fail the task with :class:`~dafka.DataLossError`, or are skipped (counted and logged by the
consumer, which then ends the range where it got to).

With ``isolation=read_committed`` the range starts and ends at clean cuts
(``dafka.spark._committed``), and the task puts the read-committed consumer's filter
(:class:`CommittedFilter`) between the consumer and the rows: restored at ``start`` from
the producer states the driver planned, fed the range's records, it yields the committed
ones, released as slices of their RECORDs (Arrow over their bytes, as read_uncommitted);
it holds up to :data:`TASK_HOLD_BYTES` of open spans, and a span larger than that is
replayed by a bounded read of the stores (:func:`~dafka.client.replay_from_stores`, as
the read-committed consumer does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from dafka.client import Consumer, ConsumerSettings, replay_from_stores
from dafka.records import BatchSlice, CommittedFilter, Part, PlainRun, RecordColumns, RecordRun
from dafka.spark._committed import (
    CommittedOffsets,
    Cut,
    ProducerStates,
    feed_steps,
    producer_states,
)
from dafka.spark._options import PLAINTEXT, ClientSecurity
from dafka.spark._schema import without_headers

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 65_536
"""Rows per Arrow batch handed to Spark (about: a batch ends where a poll ended)."""

TASK_HOLD_BYTES = 256 << 20
"""How much of its range's open spans a read_committed task's filter holds (its
``ring_bytes`` and ``recent_bytes``; the read-committed consumer's default is 32 MiB) before
a span that left it is read again from the stores. A span is released only at its ACK, and
a replay reads what left the ring back all at once, so a committed span is in the task's
memory whole either way: holding it saves the second read (0.1-0.15 s of a sink's
500,000-row transaction, a RECORD of ~2,000 messages each). Only a span rolled back costs
more: up to this much, until its rollback is read."""

ANCHOR_RECORDS = 64
"""A batch read's task takes the producer states at a clean cut at most every so many
RECORDs (``committed_to_cut``: they are needed only to read a range again after its hold
overflowed)."""

FETCH_RETRY_INITIAL = 0.05
"""A task's first FETCH leaves before its subscriptions have reached the tower and is often
lost (ZeroMQ's slow joiner): retrying after 50 ms (doubling, up to 2 s) rather than the
clients' 0.5 s takes ~0.5 s off every task."""


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
    committed: bool = False
    """read_committed: ``start`` is a clean cut (``dafka.spark._committed``), and so is
    ``end`` unless ``find_cut``."""
    find_cut: bool = False
    """read_committed, a batch read: ``end`` is where the read stops (the heads, or
    ``endingOffsets``), not a clean cut; the task's rows end at the last clean cut it finds
    at or below it (:func:`committed_to_cut`), so the driver reads no RECORD to plan."""
    producers: ProducerStates = ()
    """read_committed: the producer states at ``start``."""
    security: ClientSecurity = PLAINTEXT
    """The options ``key``, ``authorizedKeys``, ``towerKey`` (paths, loaded on the executor)."""
    include_headers: bool = True
    """``includeHeaders``: false drops the ``headers`` column."""

    def settings(self) -> ConsumerSettings:
        """The task consumer's settings: a bounded read, no settle window, quick retries."""
        return ConsumerSettings(
            towers=self.towers,
            **self.security.fields(),
            latest_settle=0.0,
            fetch_retry_initial=FETCH_RETRY_INITIAL,
            fetch_retry_max=2.0,
            fail_on_data_loss=self.fail_on_data_loss,
            control_messages=self.committed,  # the filter decides by the ACKs; else never rows
        )


def read_partition(partition: RangePartition) -> Iterator[pa.RecordBatch]:
    """Read the partition's range with a bounded consumer; Arrow batches of the schema."""
    key = (partition.topic, partition.partition)
    settings = partition.settings()
    with Consumer(
        assign={key: partition.start}, end_offsets={key: partition.end}, settings=settings
    ) as consumer:
        columns = consumer.read_to_end(partition.timeout, ROWS_PER_BATCH)
        if partition.find_cut:
            columns = committed_to_cut(columns, partition, settings, _read_again)
        elif partition.committed:
            columns = _committed(columns, partition, settings)
        if partition.include_headers:
            yield from arrow_batches(columns)
        else:
            yield from map(without_headers, arrow_batches(columns))


def _task_filter(partition: RangePartition, settings: ConsumerSettings) -> CommittedFilter:
    """The read-committed filter of a task, restored at its range's start."""
    key = (partition.topic, partition.partition)
    return CommittedFilter(
        CommittedOffsets({key: partition.start}, {key: partition.producers}).checkpoint(),
        replay=replay_from_stores(settings, partition.timeout),
        ring_bytes=TASK_HOLD_BYTES,
        recent_bytes=TASK_HOLD_BYTES,
    )


def _committed(
    columns: Iterable[RecordColumns], partition: RangePartition, settings: ConsumerSettings
) -> Iterator[RecordColumns]:
    """The committed messages of the range's columns (a range between clean cuts)."""
    committed = _task_filter(partition, settings)
    for read in columns:
        out = committed.feed_columns(read)
        if out:
            yield out


ReadAgain = Callable[[RangePartition, ConsumerSettings], Iterable[RecordColumns]]
"""Reads a range again: its committed rows, as :func:`committed_to_cut` with ``fine`` steps
when the range has ``find_cut``, else as a range between clean cuts."""


def committed_to_cut(
    columns: Iterable[RecordColumns],
    partition: RangePartition,
    settings: ConsumerSettings,
    read_again: ReadAgain,
    hold_bytes: int = TASK_HOLD_BYTES,
    anchor_every: int = ANCHOR_RECORDS,
    fine: bool = False,
) -> Iterator[RecordColumns]:
    """The committed messages of a batch read's range below the last clean cut in it.

    The range's last cut is the last RECORD boundary, after a RECORD whose last message may
    close spans (an ACK, an OUTSIDE message, one without a UUID), where no span is open,
    whatever the polls. The task feeds its filter a poll at a time, in the steps of the
    driver's tracker (``feed_steps(columns, None)``: a cut is looked for where the poll's
    last such RECORD ends, and where the poll ends), or RECORD by RECORD (``fine``,
    ``feed_steps(columns, 0)``: each such RECORD; a run of plain RECORDs at its end), and
    yields what the filter released once a cut is found after it; what it released after
    the last cut (a transaction committed behind another producer's span still open at
    ``end``) is never a row - the driver's plan ended the range before that span when it
    read the range first, and a batch read has no next batch. When a span is open at the
    end, the cuts a poll's steps did not look for may lie between the last cut found and
    that span's first RECORD: that stretch is read again with ``fine`` steps. What waits
    for a cut is held up to ``hold_bytes``; past that the task drops it, reads on for a
    later cut (the rows it releases are dropped too), and reads the range up to that later
    cut again (a range between cuts, nothing held).

    Every read again starts at a cut at most ``anchor_every`` RECORDs before the last one
    yielded up to, with the producer states there (taking them costs ~3 us: not at every
    cut), and keeps only the rows from that last cut on: those before it were yielded (a
    cut closes every span before it, so a row below it was released before it was
    reached)."""
    key = (partition.topic, partition.partition)
    committed = _task_filter(partition, settings)
    every = 0 if fine else None
    held: list[RecordColumns] = []
    held_bytes = 0
    cut = partition.start  # the last clean cut, yielded up to
    anchor = Cut(partition.start, partition.producers)  # a cut at or below it, with states
    overflowed = False
    later: Cut | None = None  # after the hold overflowed: the last clean cut found since
    for read in columns:
        for step, position, _whole, closes in feed_steps(read, every).get(key, ()):
            out = committed.feed_columns(step)
            clean = closes and committed.last_stable_position(*key) == position
            if overflowed:
                if clean:
                    later = Cut(position, producer_states(committed, key))
                continue
            if out:
                held.append(out)
                held_bytes += _weight(out)
            if clean:
                yield from held
                held, held_bytes = [], 0
                cut = position
                if position - anchor.position >= anchor_every:
                    anchor = Cut(position, producer_states(committed, key))
            elif held_bytes > hold_bytes:
                log.warning(
                    "read_committed batch read of %s/%s: more than %d bytes of committed "
                    "messages wait behind a transaction open since offset %d; reading on "
                    "for a clean cut, then %d.. again",
                    *key,
                    hold_bytes,
                    committed.last_stable_position(*key),
                    cut,
                )
                held, held_bytes = [], 0
                overflowed = True
    stable = committed.last_stable_position(*key)
    if later is not None and later.position > cut:  # the hold overflowed: read up to the
        # last cut found since again, a range between cuts
        again = replace(partition, end=later.position, find_cut=False)
        yield from _again(read_again, again, anchor, settings, cut)
        cut, anchor = later.position, later
    if not fine and stable > cut:  # a span is open at the end (or the last step ended
        # no RECORD that may close spans): cuts the polls' steps did not look for may lie
        # before its first RECORD - read that stretch again RECORD by RECORD
        again = replace(partition, end=stable)
        yield from _again(read_again, again, anchor, settings, cut)


def _again(
    read_again: ReadAgain,
    partition: RangePartition,
    anchor: Cut,
    settings: ConsumerSettings,
    cut: int,
) -> Iterator[RecordColumns]:
    """The rows at or after ``cut`` of ``partition`` read again from ``anchor`` (a cut at
    or below ``cut``, with its producer states)."""
    again = replace(partition, start=anchor.position, producers=anchor.producers)
    for found in read_again(again, settings):
        rest = _from(found, cut)  # below the cut: yielded already
        if rest:
            yield rest


def _read_again(partition: RangePartition, settings: ConsumerSettings) -> Iterator[RecordColumns]:
    """The committed rows of a range read again with a new bounded consumer
    (:data:`ReadAgain`)."""
    key = (partition.topic, partition.partition)
    with Consumer(
        assign={key: partition.start}, end_offsets={key: partition.end}, settings=settings
    ) as consumer:
        columns = consumer.read_to_end(partition.timeout, ROWS_PER_BATCH)
        if partition.find_cut:
            yield from committed_to_cut(columns, partition, settings, _read_again, fine=True)
        else:
            yield from _committed(columns, partition, settings)


def _from(columns: RecordColumns, position: int) -> RecordColumns:
    """The messages of ``columns`` (one partition) in RECORDs at or after ``position``."""
    parts: list[Part] = []
    for part in columns.parts:
        if isinstance(part, BatchSlice):
            if part.batch.offset >= position:
                parts.append(part)
        elif isinstance(part, PlainRun):
            skip = max(0, position - part.first)
            if skip < part.size:
                parts.append(
                    PlainRun(part.topic, part.partition, part.first + skip, part.contents[skip:])
                )
        else:
            records = [r for r in part.records() if r.offset >= position]
            if records:
                parts.append(RecordRun(records))
    return RecordColumns(parts)


def _weight(columns: RecordColumns) -> int:
    """About how many bytes of RECORDs ``columns`` keeps alive (a slice: its share)."""
    total = 0
    for part in columns.parts:
        if isinstance(part, BatchSlice):
            total += len(part.batch.content) * part.size // max(1, part.batch.count)
        elif isinstance(part, PlainRun):
            total += sum(map(len, part.contents))
        else:
            total += sum(len(r.value) for r in part.records())
    return total


def arrow_batches(
    columns: Iterable[RecordColumns], rows: int = ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """The messages of ``columns`` (one partition, in order) as Arrow batches of about
    ``rows`` rows: polls are gathered (``RecordColumns.concat``) and turned into Arrow once."""
    pending: list[RecordColumns] = []
    count = 0
    for read in columns:
        pending.append(read)
        count += len(read)
        if count >= rows:
            yield from RecordColumns.concat(pending).to_arrow().to_batches()
            pending, count = [], 0
    if count:
        yield from RecordColumns.concat(pending).to_arrow().to_batches()


__all__ = [
    "ROWS_PER_BATCH",
    "TASK_HOLD_BYTES",
    "RangePartition",
    "arrow_batches",
    "committed_to_cut",
    "read_partition",
]
