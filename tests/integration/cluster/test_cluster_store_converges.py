"""A store that joins after the producer left still gets its partitions: stores converge.

The producer publishes to one store and exits once that store ACKed everything (the default
``min_stores=1``): no HEAD of its partition will ever be sent again. A second store started
afterwards holds nothing of the topic; it learns the topic from the first store's GET-HEADS
refresh, asks for its heads, and fetches the partition from the first store. Both logs end
identical.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.cluster.cluster_probe import HeadsProbe, check_partition, read_log
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
    probe = HeadsProbe([tower.sub_endpoint])
    try:
        expected = {pid: RECORDS - 1}
        assert probe.heads(store_b.reader_port, TOPIC, expected) == expected, procs.describe()
    finally:
        probe.close()
    for store in (store_a, store_b):
        assert store.proc.stop(signal.SIGTERM) == 0, store.proc.tail()

    logs = [read_log(store.data_dir) for store in (store_a, store_b)]
    assert logs[0] == logs[1], "the two stores' logs differ"
    check_partition(logs[0][(TOPIC, pid)], RECORDS)
