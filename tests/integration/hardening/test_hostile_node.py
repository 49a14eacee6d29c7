"""Issue 8 item 2: no peer can crash a node.

A tower, two stores and a producer run as processes, a consumer in this process; a hostile
node (``hostile_node.py``, another process) sends malformed and random beacons,
subscriptions and data frames to every socket it can reach for a bounded time while the
producer publishes. Afterwards every node is alive and the consumer got every record of the
producer exactly once and in order.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_procs import DEADLINE, Processes

HOSTILE = Path(__file__).with_name("hostile_node.py")
TOPIC = "t0"  # one of the topics the hostile node also writes well-formed junk to
RECORDS = 20_000
RATE = 2_000  # records/s: the flow lasts ~10 s, all of it under attack
HOSTILE_SECONDS = 15


@pytest.mark.timeout(240)
def test_a_hostile_node_crashes_nothing_and_loses_nothing(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    stores = [procs.store(tmp_path / f"store-{i}", [tower]) for i in range(2)]
    specs = [tower.spec]
    hostile = procs.spawn(
        "hostile",
        [sys.executable, str(HOSTILE), "--tower", tower.spec, "--seconds", str(HOSTILE_SECONDS)],
    )
    config = ConsumerConfig(offset_reset="earliest")
    with Consumer(
        TOPIC, transport=transport(specs, 0.2), config=config, ready_timeout=DEADLINE
    ) as consumer:
        producer = procs.client(
            "producer", "produce", [tower], TOPIC, "--records", str(RECORDS), "--rate", str(RATE)
        )
        pid = producer.wait_event("ready")["id"]
        received: list[int] = []
        deadline = time.monotonic() + DEADLINE + HOSTILE_SECONDS
        while len(received) < RECORDS and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                if record.partition != pid:
                    continue  # a partition the hostile node made up: not ours to check
                assert record.value == payload(record.offset)
                received.append(record.offset)
        assert producer.wait_exit(DEADLINE) == 0, procs.describe()
        assert producer.require("done")["acked"] == RECORDS
        assert received == list(range(RECORDS)), (
            f"{len(received)} records, first gap at "
            f"{next((i for i, s in enumerate(received) if s != i), None)}"
        )
        assert hostile.wait_exit(DEADLINE) == 0, procs.describe()
        sent = hostile.require("done")
        assert sent["beacons"] > 100, sent
        assert sent["subscriptions"] > 50, sent
        assert sent["data"] > 100, sent
        assert sent["peers"] >= 4, sent  # it reached both stores' writers and readers
        consumer.positions()  # the consumer's node still answers (raises if it died)
        dropped = consumer.transport_statistics()
    for node in (tower.proc, *(s.proc for s in stores)):
        assert node.running(), procs.describe()
        assert "runner crashed" not in node.stderr(), node.tail(40)
    assert dropped.undecodable > 0, dropped  # the junk did reach it, and was dropped
