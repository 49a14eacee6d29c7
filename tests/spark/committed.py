"""What a read-committed reader of a topic sees: the oracle of the exactly-once sink tests.

The real client, ``ReadCommittedConsumer`` (Gazette's rules,
``dafka.records.CommittedFilter``), reads the topic from the beginning until every partition
it knows is handed out up to its head.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

from dafka import Consumer, ReadCommittedConsumer, Record
from dafka.spark._options import PLAINTEXT, ClientSecurity

Isolation = Literal["read_committed", "read_uncommitted"]


class Towers(Protocol):
    """What the oracle needs of a cluster (the tests' ``Cluster``, the Spark chaos run's)."""

    @property
    def towers(self) -> str: ...


def committed_values(
    cluster: Towers, topic: str, timeout: float = 60.0, security: ClientSecurity = PLAINTEXT
) -> list[bytes]:
    """Every committed message value of ``topic``, each as often as a reader delivers it."""
    return [r.value for r in read_to_heads(cluster, topic, "read_committed", timeout, security)]


def read_to_heads(
    cluster: Towers,
    topic: str,
    isolation: Isolation,
    timeout: float = 60.0,
    security: ClientSecurity = PLAINTEXT,
) -> list[Record]:
    """Every message of ``topic`` a reader with ``isolation`` delivers, from the beginning
    (``security``: the reader's keys, as the connector's options give them)."""
    out: list[Record] = []
    deadline = time.monotonic() + timeout
    kind = ReadCommittedConsumer if isolation == "read_committed" else Consumer
    with kind(
        [topic], offset_reset="earliest", towers=cluster.towers, **security.fields()
    ) as consumer:
        while True:
            out += consumer.poll(0.2)
            heads = {k: h for k, h in consumer.heads().items() if h >= 0}
            positions = consumer.positions()
            if heads and all(positions.get(k, 0) > h for k, h in heads.items()):
                out += consumer.poll(0)
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: not read to its heads {heads} in {timeout} s")
