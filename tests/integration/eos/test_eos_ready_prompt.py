"""A transactional producer is ready without waiting settle windows for its heads.

Before "that is all" (HEADS-END), its start waited a settle window (1.5 beacon intervals)
after the first store greeted its transaction-log reader, and another for its data
producer's resume: with a 4 s beacon interval, 12 s plus the lease. Now the stores' answers
end both waits: a first and a second instance (which resolves the first) are each ready
well within a quarter of that, and what they commit is read back.
"""

from __future__ import annotations

import time

from dafka.client import TransactionalProducer
from dafka.server import LocalCluster
from tests.integration.eos.test_eos_cluster import read_all, values
from tests.integration.loopback import loopback_client

BEACON = 4.0
OLD_WAIT = 2 * 1.5 * BEACON
"""The two settle windows of the old start (the lease comes on top)."""


def test_a_transactional_producer_is_ready_without_the_settle_windows(
    cluster: LocalCluster,
) -> None:
    settings = loopback_client(
        cluster.towers,
        30.0,
        beacon_interval=BEACON,
        beacon_timeout=3 * BEACON,
        partitions=2,
        txn_lease=0.5,
    )
    for n in range(2):
        started = time.monotonic()
        with TransactionalProducer("ready-topic", "ready-id", **settings) as producer:
            ready = time.monotonic() - started
            with producer.transaction():
                producer.send(b"run-%d" % n, key=b"k")
        assert ready < OLD_WAIT / 4, f"instance {n} ready after {ready:.2f}s"
    got = values(read_all(cluster, "ready-topic", committed=True, expect=2))
    assert sorted(got) == [b"run-0", b"run-1"]
