"""What a read-committed reader of a topic sees: the oracle of the exactly-once sink tests.

The real client, ``ReadCommittedConsumer`` (Gazette's rules,
``dafka.records.CommittedFilter``), reads the topic from the beginning until every partition
it knows is handed out up to its head.
"""

from __future__ import annotations

import time

from dafka import ReadCommittedConsumer
from tests.spark.conftest import Cluster


def committed_values(cluster: Cluster, topic: str, timeout: float = 60.0) -> list[bytes]:
    """Every committed message value of ``topic``, each as often as a reader delivers it."""
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    with ReadCommittedConsumer([topic], offset_reset="earliest", towers=cluster.towers) as consumer:
        while True:
            out += [r.value for r in consumer.poll(0.2)]
            heads = {k: h for k, h in consumer.heads().items() if h >= 0}
            positions = consumer.positions()
            if heads and all(positions.get(k, 0) > h for k, h in heads.items()):
                out += [r.value for r in consumer.poll(0)]
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: not read to its heads {heads} in {timeout} s")
