"""Bounded reads for the executors: the RECORDs ``[start, end)`` of one partition.

Spark's executors each read the ranges the driver planned. A range is read by a short-lived
consumer that starts the partition at ``start`` (an explicit position: FETCHed from the stores
and the producer) and stops once ``end - 1`` is in. Records of other partitions of the topic
that the consumer happens to receive are ignored.

What if the range never completes: a store lost records that the planner was told existed
(a HEAD from a producer that died before any store held its tail, or retention). After
``timeout`` seconds without progress, the read fails with :class:`DataLossError` when
``fail_on_data_loss`` (the default, as Spark's Kafka source), or ends where it got to.
A consumer that skips unavailable records delivers a run past a hole: that is data loss too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from dafka.client import Consumer
from dafka.errors import DafkaError
from dafka.node import ConsumerConfig
from dafka.transport.config import TransportConfig


class DataLossError(DafkaError):
    """Records the driver planned to read are not available (``failOnDataLoss``)."""


def read_range(
    transport: TransportConfig,
    topic: str,
    partition: str,
    start: int,
    end: int,
    *,
    timeout: float,
    fail_on_data_loss: bool,
) -> Iterator[tuple[int, Sequence[bytes]]]:
    """Yields ``(first_sequence, contents)`` runs covering ``[start, end)`` in order."""
    if end <= start:
        return
    key = (topic, partition)
    consumer = Consumer(
        topic,
        transport,
        ConsumerConfig(offset_reset="latest"),
        start_positions={key: start},
        max_queued=50_000,
    )
    try:
        expected = start
        last_progress = time.monotonic()
        while expected < end:
            records = consumer.poll(timeout=0.2, max_records=10_000)
            run: list[bytes] = []
            first = expected
            for record in records:
                if record.topic != topic or record.partition != partition:
                    continue
                sequence = record.sequence
                if sequence < expected or sequence >= end:
                    continue
                if sequence > expected:
                    if fail_on_data_loss:
                        raise DataLossError(
                            f"{topic}/{partition}: records {expected}..{sequence - 1} are gone"
                        )
                    if run:
                        yield first, run
                    run, first = [], sequence
                run.append(record.content)
                expected = sequence + 1
            if run:
                last_progress = time.monotonic()
                yield first, run
            elif time.monotonic() - last_progress > timeout:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{topic}/{partition}: records {expected}..{end - 1} did not arrive "
                        f"within {timeout} s (failOnDataLoss=false skips them)"
                    )
                return
    finally:
        consumer.close()


__all__ = ["DataLossError", "read_range"]
