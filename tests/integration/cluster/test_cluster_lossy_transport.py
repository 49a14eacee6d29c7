"""Records lost in transit are recovered with FETCH: the consumer still gets each one once.

The loss is injected with the runner's ``drop_inbound`` (``dafka.testing.lossy_records``): a
seeded random 10% of the live RECORDs are dropped as raw frames, before decoding and run
grouping, as if the network had lost them - what arrives takes the production receive path
(RECORD runs into ``on_records``), and a run ends at each gap as with a real loss. Two lossy
nodes run in this process - a consumer and a store - next to a store process and a producer
process that lose nothing. The consumer must deliver every record exactly once and in
order, and the lossy store must end with the same complete log as the other store.

FETCH answers (DIRECT-RECORDs) are not dropped here: a consumer keeps only the records that
continue its partition, so losing a share of every answer makes a window cost one round trip
per loss, slow enough to be a benchmark rather than a test (see docs/testing.md).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from dafka.node import (
    STORE_WRITER_PREFIXES,
    STORE_WRITER_SENDS,
    ConsumerConfig,
    ConsumerMachine,
    Deliver,
    StoreMachine,
)
from dafka.server import StorePersistence
from dafka.storage import Storage
from dafka.testing import lossy_records
from dafka.transport.runner import Identity, NodeRunner
from tests.integration.cluster.cluster_client import payload, transport
from tests.integration.cluster.cluster_probe import HeadsProbe, check_partition, read_log
from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "lossy"
RECORDS = 40_000


def test_dropped_records_are_fetched_again(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    clean_store = procs.store(tmp_path / "clean", [tower], name="store-clean")
    config = transport([tower.spec], 0.2)

    # The lossy store: the same parts as StoreNode, with the fault injector on its runner.
    storage = Storage.open(tmp_path / "lossy" / "log")
    store = StoreMachine("LOSSYSTOREWRITER", "LOSSYSTOREREADER", storage)
    store_loss = lossy_records(0.10, seed=1)
    consumer_loss = lossy_records(0.10, seed=2)
    store_runner = NodeRunner(
        store,
        [Identity(store.writer_id), Identity(store.reader_id, xpub=True)],
        config,
        persistence=StorePersistence(storage, store),
        route_send=lambda m: 0 if isinstance(m, STORE_WRITER_SENDS) else 1,
        route_subscribe=lambda prefix: 0 if prefix[0] in STORE_WRITER_PREFIXES else 1,
        drop_inbound=store_loss,
        name="lossy-store",
    )
    # The lossy consumer, subscribed before the producer starts: it sees the live stream.
    consumer = ConsumerMachine("LOSSYCONSUMER", ConsumerConfig(offset_reset="earliest"))
    delivered: list[tuple[str, int, bytes]] = []
    lock = threading.Lock()

    def on_deliver(batch: Deliver) -> None:
        with lock:
            for i, content in enumerate(batch.contents):
                delivered.append((batch.producer, batch.first_sequence + i, content))

    consumer_runner = NodeRunner(
        consumer,
        [Identity(consumer.consumer_id)],
        config,
        drop_inbound=consumer_loss,
        on_deliver=on_deliver,
        name="lossy-consumer",
    )
    try:
        store_runner.start(DEADLINE)
        consumer_runner.start(DEADLINE)
        consumer_runner.call(lambda now: consumer.subscribe(TOPIC, now))
        producer = procs.client("producer", "produce", [tower], TOPIC, "--records", str(RECORDS))
        pid = producer.wait_event("ready")["id"]

        def count() -> int:
            with lock:
                return len(delivered)

        wait_until(lambda: count() >= RECORDS, f"{RECORDS} records at the lossy consumer")
        assert producer.wait_exit(DEADLINE) == 0, procs.describe()
        wait_until(
            lambda: store_runner.call(lambda _now: storage.head(TOPIC, pid)) == RECORDS - 1,
            "the lossy store to hold every record",
        )
        # The consumer's own counters say the losses happened and were fetched again.
        # How many live RECORDs a node sees depends on load (a peer expired under load is
        # caught up by FETCH, whose answers are not dropped); the share dropped does not.
        for loss, runner in ((consumer_loss, consumer_runner), (store_loss, store_runner)):
            assert runner.statistics().injected_drops == loss.dropped
            assert loss.seen > 1000, loss.seen
            assert 0.07 < loss.dropped / loss.seen < 0.13, (loss.dropped, loss.seen)
        assert consumer.statistics().fetches_sent > 0
        with lock:
            got = list(delivered)
    finally:
        consumer_runner.stop()
        store_runner.stop()
        storage.close()

    assert len(got) == RECORDS, f"{len(got)} deliveries for {RECORDS} records"
    assert [(p, s) for p, s, _ in got] == [(pid, s) for s in range(RECORDS)]
    assert all(content == payload(s) for _, s, content in got)

    probe = HeadsProbe([tower.sub_endpoint])
    try:
        expected = {pid: RECORDS - 1}
        assert probe.heads(clean_store.reader_port, TOPIC, expected) == expected
    finally:
        probe.close()
    assert clean_store.proc.stop(signal.SIGTERM) == 0
    clean, lossy_log = read_log(clean_store.data_dir), read_log(tmp_path / "lossy")
    assert clean == lossy_log, "the lossy store's log differs from the clean one"
    check_partition(lossy_log[(TOPIC, pid)], RECORDS)
