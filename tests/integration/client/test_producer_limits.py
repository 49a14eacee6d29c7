"""Issue 18, path 5: a message beyond ``max_message_bytes`` or a field out of its wire range
is an error at the call, nothing is queued, and the producer goes on; a RECORD beyond the
store's limit from a foreign producer is kept as a drop notice, and every consumer skips it.

On a real cluster (tower and a store on loopback sockets) whose store keeps records of at
most ``LIMIT`` bytes (its log's bound), so that a RECORD a producer let grow past the limit
would be visible: never stored, never acknowledged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from dafka import (
    AsyncProducer,
    Consumer,
    MessageTooLargeError,
    Producer,
    ReadCommittedConsumer,
    TransactionalProducer,
)
from dafka.client import PartitionProducer
from dafka.node import ProducerConfig
from dafka.protocol import MAX_MESSAGE_BYTES
from dafka.records import drop_notice
from dafka.storage import FsyncPolicy, StorageConfig
from tests.integration.client.test_producer import FAST, Cluster, read_back

LIMIT = 4096
BATCH_OF_ONE = 64
"""What a batch of one message adds to its bytes (header and the message's columns)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    storage = StorageConfig(fsync=FsyncPolicy.interval(5), max_record_bytes=LIMIT)
    c = Cluster(tmp_path_factory.mktemp("limits"), stores=1, storage_config=storage)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_a_timestamp_out_of_range_is_refused_at_the_call_and_the_producer_goes_on(
    cluster: Cluster,
) -> None:
    """``send(timestamp=2**70)`` killed the producer's thread and its future never
    resolved: now a ValueError at the call; the extremes of the range are stored (that they
    share a batch: tests/unit/records/test_records_batch.py - here the first one, sent after
    a gap, leaves on its own: the adaptive batching's lone message)."""
    with Producer("ts-range", towers=cluster.towers, linger_ms=50, **FAST) as p:
        for bad in (2**70, 2**63, -1):
            with pytest.raises(ValueError, match="timestamp"):
                p.send(b"bad", timestamp=bad)
            with pytest.raises(ValueError, match="timestamp"):
                p.produce_many([b"bad"], timestamp=bad)
        assert len(p) == 0  # nothing was queued
        low = p.send(b"low", timestamp=0)
        high = p.send(b"high", timestamp=2**63 - 1)
        assert p.flush(timeout=20) == 0
        assert low.result(timeout=0).offset <= high.result(timeout=0).offset
    records = read_back(cluster, "ts-range", 2)
    assert {r.value: r.timestamp for r in records} == {b"low": 0, b"high": 2**63 - 1}


def test_a_message_over_the_default_limit_is_refused_at_the_call(cluster: Cluster) -> None:
    """A key or a value over 64 MiB wedged its partition: the store refused the RECORD and
    fetched it again forever. Now nothing of it is queued and the producer goes on."""
    big = bytes(MAX_MESSAGE_BYTES - BATCH_OF_ONE + 1)
    with Producer("default-limit", towers=cluster.towers, **FAST) as p:
        with pytest.raises(MessageTooLargeError, match="max_message_bytes=67,108,864"):
            p.send(big)
        with pytest.raises(MessageTooLargeError):
            p.send(b"v", key=big)
        with pytest.raises(MessageTooLargeError):
            p.produce(big)
        with pytest.raises(MessageTooLargeError, match="message 1 of produce_many"):
            p.produce_many([b"small", big])
        assert len(p) == 0
        assert p.send(b"after").result(timeout=20).offset == 0
    assert [r.value for r in read_back(cluster, "default-limit", 1)] == [b"after"]


def test_every_send_path_checks_the_limit(cluster: Cluster) -> None:
    fits = bytes(LIMIT - BATCH_OF_ONE)
    with Producer("paths", towers=cluster.towers, max_message_bytes=LIMIT, **FAST) as p:
        p.send(fits)
        with pytest.raises(MessageTooLargeError):
            p.send(fits + b"x")
        with pytest.raises(MessageTooLargeError):
            p.send(fits[:-2], key=b"abc")
        # a header costs its name's UTF-8 bytes, its value and two lengths (8 bytes)
        p.send(fits[:-12], headers=[("é", b"ab")])  # 2 + 2 + 8
        with pytest.raises(MessageTooLargeError):
            p.send(fits[:-11], headers=[("é", b"ab")])
        with pytest.raises(ValueError, match="header name"):
            p.send(b"v", headers=[("\ud800", b"")])  # not UTF-8: refused here, not encoded
        with pytest.raises(MessageTooLargeError):
            p.produce(fits, key=b"k")
        with pytest.raises(MessageTooLargeError):
            p.produce_many([b"a", fits], keys=[b"kk", b"k"])
        p.produce_many([fits, b"b"], keys=[None, b"k"])
        assert p.flush(timeout=20) == 0
    with Producer(
        "paths-plain", towers=cluster.towers, max_message_bytes=LIMIT, batching=False, **FAST
    ) as p:
        p.send(bytes(LIMIT), key=b"the key is not in the content")
        with pytest.raises(MessageTooLargeError):
            p.send(bytes(LIMIT + 1))
        with pytest.raises(MessageTooLargeError):
            p.produce_many([bytes(LIMIT + 1)])
        assert p.flush(timeout=20) == 0

    async def send_async() -> None:
        async with AsyncProducer(
            "paths-async", towers=cluster.towers, max_message_bytes=LIMIT, **FAST
        ) as ap:
            with pytest.raises(MessageTooLargeError):
                ap.send_nowait(fits + b"x")
            with pytest.raises(MessageTooLargeError):
                await ap.send(fits + b"x")
            with pytest.raises(ValueError, match="timestamp"):
                await ap.send(b"v", timestamp=2**64)
            assert (await ap.send(fits)).offset == 0

    asyncio.run(send_async())
    config = ProducerConfig(max_message_bytes=LIMIT)
    with PartitionProducer("paths-records", cluster.transport, config) as pp:
        with pytest.raises(MessageTooLargeError):
            pp.publish(bytes(LIMIT + 1))
        assert pp.publish(bytes(LIMIT)) == 0
        assert pp.flush(timeout=20)
    assert len(read_back(cluster, "paths", 4)) == 4


def test_a_batch_a_big_message_would_take_past_the_limit_leaves_as_several_records(
    cluster: Cluster,
) -> None:
    """Small messages, then one that fits only alone, then more, all in one linger: the
    batch is cut into RECORDs that each fit (the store holds at most LIMIT bytes a RECORD)."""
    big = bytes(LIMIT - BATCH_OF_ONE)
    with Producer(
        "cut",
        towers=cluster.towers,
        max_message_bytes=LIMIT,
        batch_size=1 << 20,
        linger_ms=300,
        **FAST,
    ) as p:
        futures = [p.send(b"s%03d" % i + bytes(200)) for i in range(10)]
        futures.append(p.send(big, key=None))
        futures += [p.send(b"t%03d" % i + bytes(200), headers=[("h", b"v")]) for i in range(5)]
        p.produce_many([b"c%03d" % i + bytes(300) for i in range(20)] + [big])
        assert p.flush(timeout=20) == 0, "a RECORD over the store's limit was never stored"
        offsets = {f.result(timeout=0).offset for f in futures}
    assert len(offsets) >= 2  # the batch left as several RECORDs
    records = read_back(cluster, "cut", 37)
    assert sum(1 for r in records if r.value == big) == 2


def _poll(consumer: Consumer, count: int, timeout: float = 20) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [(r.offset, r.value) for r in consumer.poll(timeout=0.3)]
    return got


def test_a_foreign_record_over_the_store_limit_is_dropped_and_the_partition_goes_on(
    cluster: Cluster,
) -> None:
    """A foreign producer (a C one, or ours with a larger limit) publishes a RECORD the
    store cannot keep. It used to wedge the partition: the log refused the run, the store
    fetched it again forever, nothing was ACKed, a late consumer read nothing while a live
    one delivered the RECORD. Now the store keeps a drop notice in its place and ACKs, and
    the live and the late consumer (same limit) skip the same RECORD, counted."""
    topic = "foreign-big"
    wanted = [(0, b"small0"), (2, b"small2"), (3, b"small3")]
    with (
        Consumer(
            topic, towers=cluster.towers, offset_reset="earliest", max_message_bytes=LIMIT, **FAST
        ) as live,
        PartitionProducer(topic, cluster.transport) as foreign,  # its limit: the default
    ):
        foreign.publish(b"small0")
        assert foreign.flush(timeout=20)
        assert _poll(live, 1) == [(0, b"small0")]  # connected: what follows comes live
        for content in (bytes(LIMIT + 1000), b"small2", b"small3"):
            foreign.publish(content)
        assert foreign.flush(timeout=20), f"the store ACKed {foreign.acked} of 4"
        assert _poll(live, 2) == wanted[1:]
        assert live.poll_statistics().oversized_records == 1
        assert (
            live.poll_statistics().last_oversized_record
            == f"{topic}/{foreign.producer_id}@1: {LIMIT + 1000} bytes"
        )
        producer_id = foreign.producer_id
    store = cluster.stores[0]
    assert store.persistence is not None
    assert store.storage is not None
    assert store.persistence.statistics().oversized_dropped == 1
    _, kept = store.storage.read_contents(topic, producer_id, 1, 1)
    assert kept == [drop_notice(LIMIT + 1000)]
    with Consumer(
        topic, towers=cluster.towers, offset_reset="earliest", max_message_bytes=LIMIT, **FAST
    ) as late:
        assert _poll(late, 3) == wanted
        assert late.poll_statistics().oversized_records == 1


def test_a_transaction_checks_each_message_and_cuts_its_batches_to_the_limit(
    cluster: Cluster,
) -> None:
    """The transactional producer builds its own batches: a message over the limit or out
    of range is refused at ``send``, the transaction goes on, and messages that together
    outgrow the limit leave as several RECORDs (the store keeps at most LIMIT bytes)."""
    part = bytes(1500)
    with TransactionalProducer(
        "txn-limits", "tx1", max_message_bytes=LIMIT, txn_lease=0.5, **FAST, towers=cluster.towers
    ) as p:
        with p.transaction():
            futures = [p.send(part + b"%d" % i) for i in range(3)]
            with pytest.raises(MessageTooLargeError):
                p.send(bytes(LIMIT))
            with pytest.raises(ValueError, match="timestamp"):
                p.send(b"v", timestamp=2**70)
            futures.append(p.send(b"after", headers=[("h", b"v")]))
        offsets = {f.result(timeout=20).offset for f in futures}
    assert len(offsets) >= 2  # the open batch was cut before it outgrew the limit
    with ReadCommittedConsumer(
        "txn-limits", towers=cluster.towers, offset_reset="earliest", **FAST
    ) as consumer:
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout=0.3)]
    assert got == [part + b"0", part + b"1", part + b"2", b"after"]
