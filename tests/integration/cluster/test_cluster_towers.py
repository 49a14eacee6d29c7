"""Two towers: when one dies (SIGKILL) the cluster goes on through the other.

Every node is given both towers (``--tower`` twice). A producer publishes before the first
tower is killed; after the kill a new producer and a new consumer - who can only meet the
stores through the surviving tower - publish and read. The consumer gets both producers'
records, each once and in order.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_procs import DEADLINE, Processes

TOPIC = "towers"
RECORDS = 10_000


@pytest.mark.timeout(180)
def test_cluster_survives_a_tower_killed(procs: Processes, tmp_path: Path) -> None:
    towers = [procs.tower("tower-1"), procs.tower("tower-2")]
    for i in range(2):
        procs.store(tmp_path / f"store-{i}", towers)
    before = procs.client("producer", "produce", towers, TOPIC, "--records", str(RECORDS))
    assert before.wait_exit(DEADLINE) == 0, procs.describe()

    towers[0].proc.kill()  # SIGKILL; tower-1 stays first in every node's list
    after = procs.client("producer", "produce", towers, TOPIC, "--records", str(RECORDS))
    assert after.wait_exit(DEADLINE) == 0, procs.describe()
    assert after.require("done")["acked"] == RECORDS
    ids = [before.require("ready")["id"], after.require("ready")["id"]]

    received: dict[str, list[int]] = {pid: [] for pid in ids}
    count = 0
    specs = [t.spec for t in towers]
    config = ConsumerConfig(offset_reset="earliest")
    with Consumer(
        TOPIC, transport=transport(specs, 0.2), config=config, ready_timeout=DEADLINE
    ) as consumer:
        deadline = time.monotonic() + DEADLINE
        while count < 2 * RECORDS and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                assert record.value == payload(record.offset)
                received[record.partition].append(record.offset)
                count += 1
    for pid in ids:
        assert received[pid] == list(range(RECORDS)), f"partition {pid}: {len(received[pid])}"
