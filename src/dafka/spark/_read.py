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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from dafka.client import Consumer, ConsumerSettings, replay_from_stores
from dafka.records import CommittedFilter, RecordColumns
from dafka.spark._committed import CommittedOffsets, ProducerStates
from dafka.spark._options import PLAINTEXT, ClientSecurity
from dafka.spark._schema import without_headers

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
    """read_committed: ``start`` and ``end`` are clean cuts (``dafka.spark._committed``)."""
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
        if partition.committed:
            columns = _committed(columns, partition, settings)
        if partition.include_headers:
            yield from arrow_batches(columns)
        else:
            yield from map(without_headers, arrow_batches(columns))


def _committed(
    columns: Iterable[RecordColumns], partition: RangePartition, settings: ConsumerSettings
) -> Iterator[RecordColumns]:
    """The committed messages of the range's columns (a range between clean cuts)."""
    key = (partition.topic, partition.partition)
    committed = CommittedFilter(
        CommittedOffsets({key: partition.start}, {key: partition.producers}).checkpoint(),
        replay=replay_from_stores(settings, partition.timeout),
        ring_bytes=TASK_HOLD_BYTES,
        recent_bytes=TASK_HOLD_BYTES,
    )
    for read in columns:
        out = committed.feed_columns(read)
        if out:
            yield out


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
    "read_partition",
]
