"""Dropped RECORDs and a store kill change nothing for a read-committed reader.

A transactional producer commits and aborts transactions while a read-committed consumer
reads them live. The loss is injected below our components, on the raw frames before the
runner decodes them or groups runs (``drop_inbound=lossy_records(...)``, as in
tests/integration/cluster/test_cluster_lossy_transport.py), so that what arrives takes the
production receive path: a seeded 10% of the live RECORDs reaching the consumer are
dropped, and so are 10% of those reaching a third store run in this process; one of the
cluster's store processes is SIGKILLed in the middle (the cluster restarts it). The consumer
fetches what it lost, and must deliver every committed message exactly once and none of an
aborted transaction.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from dafka.client import ReadCommittedConsumer, TransactionalProducer
from dafka.node import STORE_WRITER_PREFIXES, STORE_WRITER_SENDS, StoreMachine
from dafka.server import LocalCluster, StorePersistence
from dafka.storage import Storage
from dafka.testing import lossy_records
from dafka.transport.runner import Identity, NodeRunner
from tests.integration.eos.test_eos_cluster import DEADLINE, common

pytestmark = pytest.mark.integration

TOPIC = "lossy-txn"
TRANSACTIONS = 48
PER_TXN = 25


def lossy_store(cluster: LocalCluster, path: Path) -> tuple[NodeRunner, Storage]:
    """A store (the same parts as StoreNode) whose runner drops 10% of its RECORDs."""
    storage = Storage.open(path)
    store = StoreMachine("EOSLOSSYWRITER", "EOSLOSSYREADER", storage)
    runner = NodeRunner(
        store,
        [Identity(store.writer_id), Identity(store.reader_id, xpub=True)],
        cluster.transport,
        persistence=StorePersistence(storage, store),
        route_send=lambda m: 0 if isinstance(m, STORE_WRITER_SENDS) else 1,
        route_subscribe=lambda prefix: 0 if prefix[0] in STORE_WRITER_PREFIXES else 1,
        drop_inbound=lossy_records(0.10, seed=3),
        name="lossy-store",
    )
    return runner, storage


def test_dropped_records_and_a_store_kill_change_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    store_runner, storage = lossy_store(cluster, tmp_path / "lossy" / "log")
    committed: list[bytes] = []
    aborted: list[bytes] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def produce() -> None:
        try:
            with TransactionalProducer(
                TOPIC, "lossy-w", partitions=3, txn_lease=1.0, batch_size=8, **common(cluster)
            ) as p:
                for t in range(TRANSACTIONS):
                    batch = [b"T%d-%d" % (t, i) for i in range(PER_TXN)]
                    p.begin_transaction()
                    for i, value in enumerate(batch):
                        p.send(value, key=b"%d" % i)
                    if t % 4 == 3:
                        p.abort_transaction()
                        aborted.extend(batch)
                    else:
                        p.commit_transaction()
                        committed.extend(batch)
                    if t == TRANSACTIONS // 2:  # a store dies mid-stream (the cluster restarts it)
                        store = cluster.member("store-0")
                        assert store.pid is not None
                        os.kill(store.pid, signal.SIGKILL)
        except BaseException as exc:  # handed to the test thread
            failure.append(exc)
        finally:
            done.set()

    try:
        store_runner.start(DEADLINE)
        with ReadCommittedConsumer(
            [TOPIC],
            offset_reset="earliest",
            drop_inbound=lossy_records(0.10, seed=2),
            **common(cluster),
        ) as consumer:
            writer = threading.Thread(target=produce, name="txn-writer")
            writer.start()
            got: list[bytes] = []
            quiet = time.monotonic()
            deadline = time.monotonic() + DEADLINE
            while True:
                records = consumer.poll(0.1)
                now = time.monotonic()
                if records:
                    got += [r.value for r in records if r.value]
                    quiet = now
                settled = done.is_set() and now - quiet > 1.5
                if settled and len(got) >= len(committed) and consumer.at_end():
                    break
                assert now < deadline, f"read {len(got)} of {len(committed)} committed"
            writer.join(DEADLINE)
            assert not failure, failure
            # The losses happened, and were fetched again from the stores.
            assert consumer.transport_statistics().injected_drops > 0
            assert consumer.statistics().fetches_sent > 0
            assert store_runner.statistics().injected_drops > 0
    finally:
        store_runner.stop()
        storage.close()

    assert len(committed) == (TRANSACTIONS - TRANSACTIONS // 4) * PER_TXN
    counts = Counter(got)
    assert {v for v, n in counts.items() if n > 1} == set(), "duplicates"
    assert set(counts) & set(aborted) == set(), "aborted messages delivered"
    assert set(counts) == set(committed)
    # Each partition's order: a transaction's messages of one key arrive in send order.
    assert [v for v in got if v.endswith(b"-0")] == [v for v in committed if v.endswith(b"-0")]
