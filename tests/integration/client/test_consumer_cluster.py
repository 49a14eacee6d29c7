"""The public Consumer against a real cluster (tower + stores in their own processes).

Records are published by raw producer nodes (a ``ProducerMachine`` on a runner: what a C
producer puts on the wire), so the contents - plain, batched, corrupt - are exactly chosen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dafka.client import Consumer
from dafka.node import FetchPolicy, ProducerMachine
from dafka.protocol import new_node_id
from dafka.records import Record, encode_batch
from dafka.server import LocalCluster
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from tests.integration.loopback import loopback_client

pytestmark = pytest.mark.integration

DEADLINE = 30.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class RawProducer:
    """One partition published content by content, as a C producer would."""

    def __init__(self, transport: TransportConfig, topic: str, producer_id: str) -> None:
        self.id = producer_id
        self.machine = ProducerMachine(topic, producer_id)
        self.runner = NodeRunner(self.machine, [Identity(producer_id)], transport, name="raw")

    def publish(self, *contents: bytes) -> None:
        def _publish(now: float) -> None:
            for content in contents:
                self.machine.publish(content, now)

        self.runner.call(_publish)

    def wait_stored(self) -> None:
        wait_for(lambda: self.runner.call(lambda _n: self.machine.unacked) == 0, "ACKs")


@contextmanager
def raw_producer(cluster: LocalCluster, topic: str) -> Iterator[RawProducer]:
    producer = RawProducer(cluster.transport, topic, new_node_id())
    producer.runner.start(DEADLINE)
    try:
        yield producer
    finally:
        producer.runner.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(stores=2, beacon_interval=0.2) as running:
        yield running


def client(cluster: LocalCluster, **fields: Any) -> dict[str, Any]:
    return loopback_client(cluster.towers, DEADLINE, **fields)


def read(consumer: Consumer, count: int, max_records: int = 10_000) -> list[Record]:
    got: list[Record] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < count:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"got {len(got)} of {count} records: "
                f"{[(r.partition, r.offset, r.value) for r in got][:20]}; positions "
                f"{consumer.positions()}, heads {consumer.heads()}, {consumer.statistics()}"
            )
        got += consumer.poll(timeout=0.2, max_records=max_records)
    return got


def test_mixed_batched_and_plain_records_and_a_corrupt_batch(cluster: LocalCluster) -> None:
    topic = "mixed"
    batch = encode_batch(
        [b"v0", b"v1", b"v2"],
        keys=[b"k0", None, b"k2"],
        headers=[(("h", b"x"),), None, ()],
        timestamps=[1000, 1001, 1002],
    )
    corrupt = bytearray(encode_batch([b"lost"]))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    with raw_producer(cluster, topic) as batched, raw_producer(cluster, topic) as plain:
        batched.publish(batch, bytes(corrupt), encode_batch([b"after"]))
        plain.publish(b"c-layout plain record", b"\x89DFKB but not a batch")
        batched.wait_stored()
        plain.wait_stored()
        with Consumer(topic, **client(cluster, offset_reset="earliest")) as consumer:
            got = read(consumer, 6, max_records=2)  # cuts through the batch
            wait_for(consumer.at_end, "at_end")
            stats = consumer.poll_statistics()
            positions = consumer.positions()
    by_partition = {
        p: [
            (r.offset, r.index, r.key, r.value, r.headers, r.timestamp)
            for r in got
            if r.partition == p
        ]
        for p in (batched.id, plain.id)
    }
    assert by_partition[batched.id] == [
        (0, 0, b"k0", b"v0", (("h", b"x"),), 1000),
        (0, 1, None, b"v1", (), 1001),
        (0, 2, b"k2", b"v2", (), 1002),
        (2, 0, None, b"after", (), None),
    ]
    assert by_partition[plain.id] == [
        (0, 0, None, b"c-layout plain record", (), None),
        (1, 0, None, b"\x89DFKB but not a batch", (), None),  # not the full magic: plain
    ]
    assert all(r.topic == topic for r in got)
    assert stats.corrupt_batches == 1
    assert stats.last_corrupt_batch is not None
    assert f"{batched.id}@1" in stats.last_corrupt_batch
    assert positions == {(topic, batched.id): 3, (topic, plain.id): 2}


def test_latest_reads_new_partitions_from_their_beginning(cluster: LocalCluster) -> None:
    topic = "latest"
    with raw_producer(cluster, topic) as old:
        old.publish(*(b"old-%d" % i for i in range(10)))
        old.wait_stored()
        with Consumer(topic, **client(cluster, offset_reset="latest")) as consumer:
            wait_for(consumer.at_end, "the settle window and the heads")
            assert consumer.heads() == {(topic, old.id): 9}
            assert consumer.poll(timeout=0.1) == []
            with raw_producer(cluster, topic) as new:
                new.publish(*(b"new-%d" % i for i in range(5)))
                old.publish(b"old-10")
                got = read(consumer, 6)
            values = sorted(r.value for r in got)
            assert values == sorted([b"old-10", *(b"new-%d" % i for i in range(5))])
            assert consumer.position(topic, new.id) == 5
            assert consumer.position(topic, old.id) == 11


def test_assign_with_end_offsets_reads_a_bounded_range(cluster: LocalCluster) -> None:
    topic = "bounded"
    with raw_producer(cluster, topic) as producer:
        producer.publish(*(b"r%d" % i for i in range(50)))
        producer.wait_stored()
        key = (topic, producer.id)
        with Consumer(assign={key: 10}, end_offsets={key: 30}, **client(cluster)) as consumer:
            got = read(consumer, 20)
            wait_for(consumer.at_end, "at_end")
            assert [r.offset for r in got] == list(range(10, 30))
            assert consumer.poll(timeout=0.3) == []
            assert consumer.position(*key) == 30
            # a bounded consumer is at its end without waiting for news past it
            wait_for(lambda: consumer.heads()[key] == 49, "the head past the end offset")
        with Consumer(assign={key: 45}, **client(cluster)) as open_ended:
            assert [r.value for r in read(open_ended, 5)] == [b"r%d" % i for i in range(45, 50)]
            wait_for(open_ended.at_end, "at_end")
            producer.publish(b"r50")
            assert [r.offset for r in read(open_ended, 1)] == [50]
            open_ended.seek(topic, producer.id, 0)
            assert consumer_offsets(read(open_ended, 51)) == list(range(51))


def consumer_offsets(records: list[Record]) -> list[int]:
    return [r.offset for r in records]


def test_two_stores_serve_a_late_consumer_without_duplicates(cluster: LocalCluster) -> None:
    topic = "late"
    count = 20_000
    with raw_producer(cluster, topic) as producer:
        for start in range(0, count, 5000):
            producer.publish(*(b"%08d" % i for i in range(start, start + 5000)))
        producer.wait_stored()
    with Consumer(topic, **client(cluster, offset_reset="earliest")) as consumer:
        got = read(consumer, count)
        wait_for(consumer.at_end, "at_end")
        stats = consumer.statistics()
        received = consumer.transport_statistics().received
    assert [r.offset for r in got] == list(range(count))
    assert stats.stores_known == 2
    # Every record came once (plus a few HEAD / DIRECT-HEAD / STORE-HELLO messages), but for
    # retries: a FETCH whose store sent nothing for ``retry_initial`` (0.5 s: a store starved
    # of CPU on a loaded machine) is asked again of the other store, and the slow store's
    # reply may still come - at most one window (10,000) per retry. Both stores answering
    # every FETCH would give ``count`` duplicates with no retry at all.
    retried = stats.fetch_retries * FetchPolicy().window
    assert stats.dropped_duplicates <= count // 100 + retried
    assert received <= count * 1.1 + retried
