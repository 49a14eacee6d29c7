"""Client-side metrics: what ``Producer.metrics()`` and ``Consumer.metrics()`` return.

The hot paths pay a few counter increments, never a lock or an object per message: the
producer adds the bytes of the messages a turn delivered and hands this module the send time
of each RECORD the stores acknowledged (one float per RECORD, a batch of many messages being
one RECORD); the consumer adds the bytes of each run of records it receives. Everything else
(RECORDs published, FETCHes, drops by reason, lag) is already counted by the node machines
and is read when a snapshot is taken, in the runner thread, so a snapshot is consistent.

ACK latency is from the moment a RECORD left (its batch closed and was published) to the
turn in which the stores' ACK released it (``min_stores`` of them). It is kept in a
log-spaced histogram (buckets doubling from 50 µs): percentiles are the upper bound of the
bucket they fall in, capped at the largest latency seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dafka.node import LatencyHistogram, LatencySnapshot

if TYPE_CHECKING:
    from dafka.node import ConsumerStatistics, PartitionPosition, ProducerStatistics
    from dafka.transport.runner import RunnerStats


@dataclass(frozen=True, slots=True)
class ProducerMetrics:
    """``Producer.metrics()``: one consistent snapshot (see docs/client.md)."""

    messages_sent: int
    """Messages given to ``send``/``produce`` (delivered + failed + in flight)."""
    messages_delivered: int
    messages_failed: int
    bytes_delivered: int
    """Value + key + header bytes of the delivered messages."""
    in_flight: int
    in_flight_bytes: int
    records_published: int
    """RECORDs sent (a batch is one RECORD; re-sends not counted)."""
    record_bytes_published: int
    records_acked: int
    """RECORDs the stores acknowledged."""
    ack_latency: LatencySnapshot
    acks_received: int
    heads_sent: int
    fetches_served: int
    """FETCHes this producer answered (a store catching up on its records)."""
    records_resent: int
    stores_known: int
    """Stores that introduced themselves to this producer (to each partition): with
    ``acks_from="stores"`` only their ACKs count."""
    dropped: dict[str, int]
    """Messages from peers dropped, by reason (``acks_from_unknown``: ACKs from a sender
    that is not such a store; ``acks_beyond_sent``: ACKs past the last sequence sent)."""


@dataclass(frozen=True, slots=True)
class ConsumerMetrics:
    """``Consumer.metrics()``: one consistent snapshot (see docs/client.md)."""

    records_received: int
    """RECORDs delivered by the node (in order, each once)."""
    bytes_received: int
    """Content bytes of those RECORDs."""
    records_polled: int
    messages_polled: int
    """Messages handed to the application (a batched RECORD holds many)."""
    queued_records: int
    """Received and not yet polled."""
    partitions: int
    lag: int
    """RECORDs known to exist and not yet received, over every partition."""
    lag_by_partition: dict[tuple[str, str], int]
    fetches_sent: int
    fetch_retries: int
    fetches_in_flight: int
    stores_known: int
    dropped: dict[str, int]
    """Messages and records dropped or skipped, by reason (duplicates, foreign, corrupt...)."""
    group_lag: int = 0
    """With a ``group_id``: RECORDs between this consumer's last commit and the head, over
    the partitions it committed (docs/groups.md)."""
    group_lag_by_partition: dict[tuple[str, str], int] = field(default_factory=dict)


def _transport_drops(stats: RunnerStats) -> dict[str, int]:
    return {
        "undecodable": stats.undecodable,
        "injected_drops": stats.injected_drops,
        "unencodable": stats.unencodable,
        "rejected_endpoints": stats.rejected_endpoints,
        "connect_errors": stats.connect_errors,
    }


def producer_metrics(
    partitions: Sequence[ProducerStatistics],
    ack_latency: LatencyHistogram,
    *,
    delivered: int,
    failed: int,
    delivered_bytes: int,
    in_flight: int,
    in_flight_bytes: int,
    dropped_transport: RunnerStats,
) -> ProducerMetrics:
    """A :class:`ProducerMetrics` from the partitions' machine counters and the client's."""
    latency = ack_latency.snapshot()
    return ProducerMetrics(
        messages_sent=delivered + failed + in_flight,
        messages_delivered=delivered,
        messages_failed=failed,
        bytes_delivered=delivered_bytes,
        in_flight=in_flight,
        in_flight_bytes=in_flight_bytes,
        records_published=sum(p.published for p in partitions),
        record_bytes_published=sum(p.published_bytes for p in partitions),
        records_acked=latency.count,
        ack_latency=latency,
        acks_received=sum(p.acks_received for p in partitions),
        heads_sent=sum(p.heads_sent for p in partitions),
        fetches_served=sum(p.fetches_answered for p in partitions),
        records_resent=sum(p.records_resent for p in partitions),
        stores_known=min((p.stores_known for p in partitions), default=0),
        dropped={
            "peer_messages": sum(p.dropped_messages for p in partitions),
            "acks_from_unknown": sum(p.acks_from_unknown for p in partitions),
            "acks_beyond_sent": sum(p.acks_beyond_sent for p in partitions),
            **_transport_drops(dropped_transport),
        },
    )


def consumer_metrics(
    machine: ConsumerStatistics,
    positions: Mapping[tuple[str, str], PartitionPosition],
    transport: RunnerStats,
    *,
    bytes_received: int,
    records_polled: int,
    messages_polled: int,
    queued_records: int,
    corrupt_batches: int,
    oversized_records: int = 0,
    committed: Mapping[tuple[str, str], int] | None = None,
) -> ConsumerMetrics:
    """A :class:`ConsumerMetrics` from the machine's counters and positions; ``committed``:
    the offsets the consumer's group committer committed (the group lag's base)."""
    lag = {k: max(0, p.known_head - p.last_delivered) for k, p in positions.items()}
    group_lag = {
        k: max(0, positions[k].known_head + 1 - offset)
        for k, offset in (committed or {}).items()
        if k in positions
    }
    return ConsumerMetrics(
        records_received=machine.delivered,
        bytes_received=bytes_received,
        records_polled=records_polled,
        messages_polled=messages_polled,
        queued_records=queued_records,
        partitions=machine.partitions,
        lag=sum(lag.values()),
        lag_by_partition=lag,
        fetches_sent=machine.fetches_sent,
        fetch_retries=machine.fetch_retries,
        fetches_in_flight=machine.fetches_in_flight,
        stores_known=machine.stores_known,
        dropped={
            "duplicates": machine.dropped_duplicates,
            "foreign": machine.dropped_foreign,
            "unexpected": machine.dropped_unexpected,
            "beyond_end": machine.dropped_beyond_end,
            "skipped_records": machine.skipped_records,
            "corrupt_batches": corrupt_batches,
            "oversized_records": oversized_records,
            **_transport_drops(transport),
        },
        group_lag=sum(group_lag.values()),
        group_lag_by_partition=group_lag,
    )


__all__ = [
    "ConsumerMetrics",
    "LatencyHistogram",
    "LatencySnapshot",
    "ProducerMetrics",
    "consumer_metrics",
    "producer_metrics",
]
