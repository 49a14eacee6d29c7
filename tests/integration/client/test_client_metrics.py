"""Producer.metrics() and Consumer.metrics() against a real cluster: the numbers add up."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dafka import AsyncProducer, Consumer, LocalCluster, Producer


def test_producer_and_consumer_metrics_count_what_happened(tmp_path: Path) -> None:
    values = [b"v" * (i % 50 + 1) for i in range(300)]
    with LocalCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as cluster:
        common: dict[str, Any] = {"towers": cluster.towers, "beacon_interval": 0.2}
        with Producer("metered", batching=False, linger_ms=0, **common) as producer:
            for value in values:
                producer.send(value)
            assert producer.flush(30) == 0
            m = producer.metrics()
        assert (m.messages_sent, m.messages_delivered, m.messages_failed) == (300, 300, 0)
        assert m.bytes_delivered == sum(map(len, values))
        assert (m.in_flight, m.in_flight_bytes) == (0, 0)
        assert m.records_published == 300  # unbatched: one RECORD per message
        assert m.records_acked == m.ack_latency.count == 300
        assert 0 < m.ack_latency.p50 <= m.ack_latency.p99 <= m.ack_latency.max < 30
        assert m.acks_received >= 1
        assert set(m.dropped) >= {"peer_messages", "undecodable"}

        with Consumer(["metered"], offset_reset="earliest", **common) as consumer:
            got = 0
            while got < 300:
                records = consumer.poll(timeout=30)
                assert records, f"only {got} of 300"
                got += len(records)
            c = consumer.metrics()
        assert c.records_received == c.records_polled == c.messages_polled == 300
        assert c.bytes_received == sum(map(len, values))
        assert c.queued_records == 0
        assert c.lag == 0
        assert list(c.lag_by_partition.values()) == [0]
        assert c.fetches_sent >= 1  # it started after the data: caught up by FETCH
        assert c.stores_known == 1
        assert c.dropped["corrupt_batches"] == 0


def test_async_producer_metrics(tmp_path: Path) -> None:
    async def run(towers: str) -> int:
        async with AsyncProducer("ametered", towers=towers, beacon_interval=0.2) as producer:
            for i in range(50):
                await producer.send(b"%d" % i)
            return (await producer.metrics()).messages_delivered

    with LocalCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as cluster:
        assert asyncio.run(run(cluster.towers)) == 50
