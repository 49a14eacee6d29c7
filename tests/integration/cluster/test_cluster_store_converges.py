"""A store that joins after the producer left still gets its partitions: stores converge.

The producer publishes to one store and exits once that store ACKed everything (the default
``min_stores=1``): no HEAD of its partition will ever be sent again. A second store started
afterwards holds nothing of the topic; it learns the topic from the first store's GET-HEADS
refresh, asks for its heads, and fetches the partition from the first store. Both logs end
identical.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.cluster_probe import check_partition, stopped_logs, wait_heads
from tests.integration.cluster.cluster_procs import DEADLINE, Processes

TOPIC = "converge"
RECORDS = 500


@pytest.mark.timeout(120)
def test_a_store_started_after_the_producer_left_fetches_its_partition(
    procs: Processes, tmp_path: Path
) -> None:
    tower = procs.tower()
    store_a = procs.store(tmp_path / "a", [tower], name="store-a")
    producer = procs.client("producer", "produce", [tower], TOPIC, "--records", str(RECORDS))
    assert producer.wait_exit(DEADLINE) == 0, procs.describe()
    assert producer.require("done")["acked"] == RECORDS
    pid = producer.require("ready")["id"]

    store_b = procs.store(tmp_path / "b", [tower], name="store-b")
    wait_heads(tower, [store_b], TOPIC, {pid: RECORDS - 1}, procs.describe)
    log = stopped_logs([store_a, store_b])
    check_partition(log[(TOPIC, pid)], RECORDS)
