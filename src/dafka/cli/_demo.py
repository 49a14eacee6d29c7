"""The project's main job: a real local cluster end to end, with figures.

A tower and two stores start in this process; a producer *process* publishes N records and
waits until stores ACKed them all; then a consumer that starts late (reset ``earliest``)
reads every record back from the stores and checks that it got each exactly once, in order.
Finally the two stores' logs are compared. It prints what it measured.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click

from dafka.client import Consumer, PartitionProducer
from dafka.node import ConsumerConfig
from dafka.server import InProcessCluster


def run_demo(records: int, size: int, data_dir: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="dafka-demo-") as tmp:
        root = data_dir or Path(tmp)
        with InProcessCluster(root, stores=2, beacon_interval=0.2) as cluster:
            transport = cluster.transport
            click.echo(f"cluster up: tower {cluster.tower.sub_endpoint}, 2 stores in {root}")
            payload = b"x" * max(0, size - 8)
            started = time.perf_counter()
            with PartitionProducer("demo", transport) as producer:
                for i in range(records):
                    producer.publish(i.to_bytes(8, "big") + payload)
                if not producer.flush(timeout=120):
                    raise click.ClickException(
                        f"only {producer.acked}/{records} records ACKed within 120 s"
                    )
                elapsed = time.perf_counter() - started
                partition = producer.producer_id
            click.echo(
                f"produced {records} records of {size} B, all ACKed by a store: "
                f"{records / elapsed:,.0f} records/s"
            )
            started = time.perf_counter()
            first_at = None
            expected = 0
            config = ConsumerConfig(offset_reset="earliest")
            with Consumer("demo", transport=transport, config=config) as consumer:
                deadline = time.monotonic() + 120
                while expected < records and time.monotonic() < deadline:
                    for record in consumer.poll(timeout=1.0):
                        if first_at is None:
                            first_at = time.perf_counter() - started
                        if record.partition != partition or record.offset != expected:
                            raise click.ClickException(f"out of order: {record[:3]}")
                        if int.from_bytes(record.value[:8], "big") != expected:
                            raise click.ClickException(f"wrong content at {expected}")
                        expected += 1
            elapsed = time.perf_counter() - started
            if expected != records:
                raise click.ClickException(f"late consumer got {expected}/{records} records")
            click.echo(
                f"late consumer read {records} records from the stores, each once and in "
                f"order: {records / elapsed:,.0f} records/s, first record after "
                f"{(first_at or 0) * 1000:.0f} ms"
            )
            deadline = time.monotonic() + 60
            heads: list[dict[str, int]] = []
            while time.monotonic() < deadline:
                heads = [store.heads("demo") for store in cluster.stores]
                if all(h.get(partition) == records - 1 for h in heads):
                    break
                time.sleep(0.05)
            click.echo(f"store heads: {[h.get(partition) for h in heads]} (expected {records - 1})")
            if not all(h.get(partition) == records - 1 for h in heads):
                raise click.ClickException("the stores did not both reach the producer's head")
