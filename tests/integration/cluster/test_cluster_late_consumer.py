"""The main job across real processes: producers exit, a late consumer reads it all back.

One tower and two stores run as ``dafka`` daemons; two producer processes publish 110,000
records of 100 B between them and exit once ``flush()`` says stores ACKed everything. Only
then does a consumer start (reset ``earliest``): whatever it reads can only come from the
stores. At the end both stores hold identical logs, read from their data directories after a
clean SIGTERM.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_probe import check_partition, stopped_logs, wait_heads
from tests.integration.cluster.cluster_procs import DEADLINE, Processes

TOPIC = "late"
PER_PRODUCER = 55_000


@pytest.mark.timeout(180)
def test_late_consumer_reads_every_record_once_in_order(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    stores = [procs.store(tmp_path / f"store-{i}", [tower]) for i in range(2)]
    producers = [
        procs.client("producer", "produce", [tower], TOPIC, "--records", str(PER_PRODUCER))
        for _ in range(2)
    ]
    ids = [p.wait_event("ready")["id"] for p in producers]
    for producer in producers:
        assert producer.wait_exit(DEADLINE) == 0, procs.describe()
        done = producer.require("done")
        assert done["flushed"], procs.describe()
        assert done["acked"] == done["published"] == PER_PRODUCER

    # Only now the consumer: the producers are gone, the stores are the only source.
    received: dict[str, list[int]] = {pid: [] for pid in ids}
    total = 2 * PER_PRODUCER
    count = 0
    with Consumer(
        TOPIC,
        transport=transport([tower.spec], 0.2),
        config=ConsumerConfig(offset_reset="earliest"),
    ) as consumer:
        deadline = time.monotonic() + DEADLINE
        while count < total and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                assert record.value == payload(record.offset), record[:3]
                received[record.partition].append(record.offset)
                count += 1
        # A short grace read: anything beyond the total would be a duplicate.
        extra = consumer.poll(timeout=0.3)
    assert count == total, f"{count}/{total} records\n{procs.describe()}"
    assert extra == []
    for pid in ids:
        assert received[pid] == list(range(PER_PRODUCER)), f"partition {pid} not exactly once"

    # Both stores reach every head (the second may still be replicating), then stop cleanly.
    wait_heads(tower, stores, TOPIC, dict.fromkeys(ids, PER_PRODUCER - 1))
    log = stopped_logs(stores)
    assert tower.proc.stop(signal.SIGTERM) == 0

    assert set(log) == {(TOPIC, pid) for pid in ids}
    for pid in ids:
        check_partition(log[(TOPIC, pid)], PER_PRODUCER)
